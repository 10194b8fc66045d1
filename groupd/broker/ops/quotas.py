"""Client quotas (KIP-13, KIP-55, KIP-219, KIP-546): the quota entities, their byte-rate sensors, throttle times.

Pure but for ``QuotaStore`` at the end: time comes in as ``now_ms``; sockets and the event loop stay
in the shell (``groupd/broker/handlers/quotas.py``, the Produce and Fetch handlers, ``Connection.mute_for``).

Kafka keeps a quota per entity: a user, a client id, the two together, or an IP, each name possibly
the default (``None``). A request is measured against the most specific entity that has a value for
that quota type, in Kafka's order of precedence, and every client that resolves to the same entity
shares one rate: a user's quota is shared by all its client ids. The rate is Kafka's sampled rate:
``quota.window.num`` windows of ``quota.window.size.seconds``, and a request that takes it above
the bound is answered at once with the time (ms) it would take the rate to fall back to the bound;
the connection is then muted for that long.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from groupd.storage.engine import MetadataStore
from groupd.storage.shared_document import SharedDocument

log = logging.getLogger("groupd.quotas")
T = TypeVar("T")

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE = "producer_byte_rate", "consumer_byte_rate"
REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE = "request_percentage", "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
# the keys Kafka accepts for user/client-id entities and for IP entities, with their types
_USER_CLIENT_KEYS = {
    PRODUCER_BYTE_RATE: "long",
    CONSUMER_BYTE_RATE: "long",
    REQUEST_PERCENTAGE: "double",
    CONTROLLER_MUTATION_RATE: "double",
}
_IP_KEYS = {CONNECTION_CREATION_RATE: "int"}
# the keys groupd enforces; the others Kafka knows are refused rather than stored to no effect
ENFORCED = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE)
_LIMITS = {"long": 2**63 - 1, "int": 2**31 - 1}
INACTIVE_SENSOR_MS = 3_600_000  # Kafka drops a client's quota sensors after an hour without requests

Entity = tuple[tuple[str, str | None], ...]  # ((type, name or None for the default), ...), sorted by type


class QuotaError(Exception):
    """INVALID_REQUEST (or UNSUPPORTED_VERSION when ``unsupported``), with Kafka's message."""

    def __init__(self, message: str, unsupported: bool = False) -> None:
        super().__init__(message)
        self.unsupported = unsupported


def entity_of(pairs: list[tuple[str, str | None]]) -> Entity:
    """Validate an entity as Kafka's controller does and return it in its canonical order."""
    if not pairs:
        raise QuotaError("Invalid empty client quota entity")
    seen: dict[str, str | None] = {}
    for kind, name in pairs:
        if kind in seen:
            raise QuotaError(f"Invalid client quota entity, duplicate entity entry {kind}")
        if kind not in (USER, CLIENT_ID, IP):
            raise QuotaError(f"Unhandled client quota entity type: {kind}")
        seen[kind] = name
        if name is not None and name == "":
            raise QuotaError(f"Empty {kind} not supported")
    return tuple(sorted(seen.items()))


def _keys_for(entity: Entity) -> dict[str, str]:
    kinds = dict(entity)
    if IP in kinds:
        if USER in kinds or CLIENT_ID in kinds:
            raise QuotaError("Invalid quota entity combination, IP entity should not be combined with User or ClientId")
        name = kinds[IP]
        if name is not None:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                raise QuotaError(f"{name} is not a valid IP or resolvable host.") from None
        return _IP_KEYS
    return _USER_CLIENT_KEYS


def check_value(entity: Entity, key: str, value: float) -> None:
    keys = _keys_for(entity)
    kind = keys.get(key)
    if kind is None:
        raise QuotaError(f"Invalid configuration key {key}")
    if not value > 0.0:
        raise QuotaError(f"Quota {key} must be greater than 0")
    if kind in _LIMITS:
        if value > _LIMITS[kind]:
            raise QuotaError(f"Proposed value for {key} is too large for {'a LONG' if kind == 'long' else 'an INT'}.")
        if abs(math.fmod(value, 1.0)) > 1e-6:
            raise QuotaError(f"{key} cannot be a fractional value.")
    if key not in ENFORCED:
        raise QuotaError(f"Quota {key} is not supported by groupd (it enforces {', '.join(ENFORCED)})")


@dataclass(frozen=True, slots=True)
class Component:
    """A DescribeClientQuotas filter component: match_type 0 exact name, 1 the default, 2 any name."""

    entity_type: str
    match_type: int
    match: str | None


def describe(
    quotas: dict[Entity, dict[str, float]], components: list[Component], strict: bool
) -> list[tuple[Entity, dict[str, float]]]:
    """The entities matching a filter, as Kafka's metadata image answers DescribeClientQuotas."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for c in components:
        if not c.entity_type:
            raise QuotaError("Invalid empty entity type.")
        if c.entity_type in exact or c.entity_type in typed:
            raise QuotaError(f"Entity type {c.entity_type} cannot appear more than once in the filter.")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise QuotaError(f"Unsupported entity type {c.entity_type}", unsupported=True)
        if c.match_type == 0:
            if c.match is None:
                raise QuotaError("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[c.entity_type] = c.match
        elif c.match_type == 1:
            if c.match is not None:
                raise QuotaError("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[c.entity_type] = None
        elif c.match_type == 2:
            if c.match is not None:
                raise QuotaError("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            typed.add(c.entity_type)
        else:
            raise QuotaError(f"Unknown match type {c.match_type}")
    if (IP in exact or IP in typed) and ({USER, CLIENT_ID} & (set(exact) | typed)):
        raise QuotaError(
            "Invalid entity filter component combination. IP filter component should not be used with user or clientId "
            "filter component."
        )
    out = []
    for entity, values in quotas.items():
        kinds = dict(entity)
        if strict and len(kinds) != len(exact) + len(typed):
            continue
        if all(k in kinds and kinds[k] == v for k, v in exact.items()) and all(k in kinds for k in typed):
            out.append((entity, dict(values)))
    return out


# ---------------------------------------------------------------- rates


@dataclass(slots=True)
class _Sample:
    start_ms: int
    last_ms: int
    value: float = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_ms = now_ms
        self.value = 0.0


@dataclass(slots=True)
class Rate:
    """Kafka's sampled Rate over a windowed sum: ``samples`` windows of ``window_ms`` (one spare)."""

    samples: int
    window_ms: int
    _samples: list[_Sample] = field(default_factory=list)
    _current: int = 0
    last_record_ms: int = 0

    def record(self, value: float, now_ms: int) -> None:
        self.last_record_ms = now_ms
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.window_ms:
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(self._samples):
                sample = _Sample(now_ms, now_ms)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now_ms)
        sample.value += value
        sample.last_ms = now_ms

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for s in self._samples:
            if now_ms - s.last_ms >= expire:
                s.reset(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def per_second(self, now_ms: int) -> float:
        self._purge(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (self.window_size_ms(now_ms) / 1000.0)


# ---------------------------------------------------------------- one quota type (produce or fetch)

_DEFAULT = None


class ClientQuota:
    """One quota type's limits by entity and the rates of the clients measured against them."""

    def __init__(self, key: str, samples: int = 11, window_ms: int = 1000) -> None:
        self.key = key
        self.samples = samples
        self.window_ms = window_ms
        # (user, client id) -> bound; a missing side is "", the default side None (Kafka's DefaultTags)
        self._limits: dict[tuple[str | None, str | None], float] = {}
        self._rates: dict[tuple[str, str], Rate] = {}
        self._last_sweep_ms = 0
        self.enabled = False  # a plain attribute: Produce and Fetch test it on every request

    def set_limits(self, quotas: dict[Entity, dict[str, float]]) -> None:
        limits = {}
        for entity, values in quotas.items():
            if self.key in values:
                kinds = dict(entity)
                user = kinds.get(USER, "")
                client = kinds.get(CLIENT_ID, "")
                limits[(user, client)] = values[self.key]
        self.enabled = bool(limits)
        self._limits = limits  # rates stay: Kafka updates the bound of the sensors it has, not their history

    def _tags(self, user: str, client_id: str) -> tuple[str, str]:
        """Which entity's rate a client shares (Kafka's DefaultQuotaCallback.quotaMetricTags)."""
        has = self._limits.__contains__
        if has((user, client_id)) or has((user, _DEFAULT)):
            return user, client_id
        if has((user, "")):
            return user, ""
        if has((_DEFAULT, client_id)) or has((_DEFAULT, _DEFAULT)):
            return user, client_id
        if has((_DEFAULT, "")):
            return user, ""
        return "", client_id

    def limit(self, user: str, client_id: str) -> float | None:
        """The bound for a client (Kafka's DefaultQuotaCallback.quotaLimit), None when it has none."""
        tag_user, tag_client = self._tags(user, client_id)
        get = self._limits.get
        order: tuple[tuple[str | None, str | None], ...]
        if tag_user and tag_client:
            order = ((tag_user, tag_client), (tag_user, _DEFAULT), (_DEFAULT, tag_client), (_DEFAULT, _DEFAULT))
        elif tag_user:
            order = ((tag_user, ""), (_DEFAULT, ""))
        elif tag_client:
            order = (("", tag_client), ("", _DEFAULT))
        else:
            return None
        for key in order:
            bound = get(key)
            if bound is not None:
                return bound
        return None

    def _rate(self, user: str, client_id: str, now_ms: int) -> tuple[Rate, float | None]:
        tags = self._tags(user, client_id)
        rate = self._rates.get(tags)
        if rate is None:
            rate = self._rates[tags] = Rate(self.samples, self.window_ms)
        if now_ms - self._last_sweep_ms >= INACTIVE_SENSOR_MS:
            self._last_sweep_ms = now_ms
            for k in [
                k for k, r in self._rates.items() if now_ms - r.last_record_ms >= INACTIVE_SENSOR_MS and r is not rate
            ]:
                del self._rates[k]
        return rate, self.limit(user, client_id)

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` (bytes) and return the throttle time in ms (0 within the quota)."""
        rate, bound = self._rate(user, client_id, now_ms)
        rate.record(value, now_ms)
        if bound is None:
            return 0
        observed = rate.per_second(now_ms)
        if observed <= bound:
            return 0
        return math.floor((observed - bound) / bound * rate.window_size_ms(now_ms) + 0.5)  # Java's Math.round

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled fetch is answered empty), as Kafka does."""
        self._rate(user, client_id, now_ms)[0].record(-value, now_ms)

    def max_in_window(self, user: str, client_id: str) -> float:
        """The most a single request may carry without being throttled for certain (Fetch caps max_bytes)."""
        bound = self.limit(user, client_id)
        return math.inf if bound is None else bound * (self.samples - 1) * self.window_ms / 1000.0


# ---------------------------------------------------------------- topic and partition mutations (KIP-599)


@dataclass(slots=True)
class TokenBucket:
    """Kafka's TokenBucket: full (a burst of samples x window x rate) when new, refilled at the rate."""

    tokens: float = 0.0
    last_ms: int = 0
    last_record_ms: int = 0

    def refill(self, rate: float, burst: float, now_ms: int) -> None:
        self.tokens = min(burst, self.tokens + rate * (now_ms - self.last_ms) / 1000.0)
        self.last_ms = now_ms


class Mutations:
    """One request's partition mutations against its client's bucket (Kafka's ControllerMutationQuota).

    Strict (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+): a topic is refused, answered
    THROTTLING_QUOTA_EXCEEDED, while the bucket is below zero, and every later topic of the request too;
    one topic may take the bucket below zero. Permissive (older versions): every topic goes through, and
    the request is only throttled."""

    def __init__(self, bucket: TokenBucket | None, rate: float, burst: float, strict: bool) -> None:
        self._bucket, self._rate, self._burst, self._strict = bucket, rate, burst, strict
        self._throttle_ms = 0
        self._at_ms = 0

    def _violated(self, bucket: TokenBucket, now_ms: int) -> None:
        self._throttle_ms = math.floor(-bucket.tokens / self._rate * 1000 + 0.5)
        self._at_ms = now_ms

    def record(self, partitions: int, now_ms: int) -> bool:
        """Take ``partitions`` permits; False when a strict quota refuses them."""
        bucket = self._bucket
        if bucket is None:
            return True
        bucket.last_record_ms = now_ms
        if self._strict:
            if self._throttle_ms > 0:
                return False
            bucket.refill(self._rate, self._burst, now_ms)
            if bucket.tokens < 0:
                self._violated(bucket, now_ms)
                return False
            bucket.tokens = min(self._burst, bucket.tokens - partitions)
            return True
        bucket.refill(self._rate, self._burst, now_ms)
        bucket.tokens = min(self._burst, bucket.tokens - partitions)
        if bucket.tokens < 0:
            self._violated(bucket, now_ms)
        return True

    def throttle_ms(self, now_ms: int) -> int:
        """The throttle time left, the time since it was measured taken off."""
        return max(0, self._throttle_ms - (now_ms - self._at_ms))


class MutationQuota(ClientQuota):
    """``controller_mutation_rate``: partitions created or deleted per second, as a token bucket."""

    def __init__(self, samples: int = 11, window_ms: int = 1000) -> None:
        super().__init__(CONTROLLER_MUTATION_RATE, samples, window_ms)
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def for_request(self, user: str, client_id: str, strict: bool) -> Mutations:
        bound = self.limit(user, client_id) if self.enabled else None
        if bound is None:
            return Mutations(None, 0.0, 0.0, strict)
        tags = self._tags(user, client_id)
        bucket = self._buckets.get(tags)
        if bucket is None:
            bucket = self._buckets[tags] = TokenBucket()
        return Mutations(bucket, bound, self.samples * self.window_ms / 1000.0 * bound, strict)


class Quotas:
    """Every entity's quota values, and the enforced quota types built from them."""

    def __init__(self, samples: int = 11, window_ms: int = 1000) -> None:
        self.values: dict[Entity, dict[str, float]] = {}
        self.produce = ClientQuota(PRODUCER_BYTE_RATE, samples, window_ms)
        self.fetch = ClientQuota(CONSUMER_BYTE_RATE, samples, window_ms)
        self.mutations = MutationQuota(samples, window_ms)

    def load(self, values: dict[Entity, dict[str, float]]) -> None:
        self.values = {e: dict(v) for e, v in values.items() if v}
        for quota in (self.produce, self.fetch, self.mutations):
            quota.set_limits(self.values)

    def alter(self, entity: Entity, ops: list[tuple[str, float | None]], validate_only: bool) -> bool:
        """Apply one entity's operations (value None removes the key); raises QuotaError, changes
        nothing then. Returns whether anything changed."""
        _keys_for(entity)
        current = dict(self.values.get(entity, {}))
        for key, value in ops:
            if value is None:
                current.pop(key, None)
            else:
                check_value(entity, key, value)
                current[key] = float(value)
        if validate_only or current == self.values.get(entity, {}):
            return False
        values = dict(self.values)
        if current:
            values[entity] = current
        else:
            values.pop(entity, None)
        self.load(values)
        return True

    # persistence: a JSON-friendly list of {"entity": [[type, name], ...], "values": {key: value}}
    def to_doc(self) -> list[dict]:
        return [
            {"entity": [list(p) for p in entity], "values": values}
            for entity, values in sorted(self.values.items(), key=lambda kv: str(kv[0]))
        ]

    @staticmethod
    def from_doc(doc: list[dict]) -> dict[Entity, dict[str, float]]:
        return {
            tuple((k, n) for k, n in item["entity"]): {k: float(v) for k, v in item["values"].items()} for item in doc
        }


QUOTAS_FILE = "client-quotas.json"


class QuotaStore:
    """The quota values persisted in the storage's metadata (Kafka keeps them in its metadata log): one
    document, rewritten whole before AlterClientQuotas is answered; in a cluster shared by every node
    (storage/shared_document.py), so a quota set at one node binds at every node after its next heartbeat."""

    def __init__(self, metadata: MetadataStore, quotas: Quotas) -> None:
        self.quotas = quotas
        self.document = SharedDocument(metadata, QUOTAS_FILE, self._followed)

    def load(self) -> None:
        self.quotas.load(_parse(self.document.load()))

    def _followed(self, raw: bytes | None) -> None:
        """Another node's version (or the last stored one again, after a failed write)."""
        try:
            values = _parse(raw)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.error("cannot read client quotas from %s: %s; they stay as they were", QUOTAS_FILE, exc)
            return
        self.quotas.load(values)

    def change(self, mutate: Callable[[], tuple[T, bool]]) -> T:
        """``mutate`` alters ``quotas`` and says whether anything changed; made durable (in a cluster over
        the other nodes' latest version, ``mutate`` run again when another node won)."""

        def encoded() -> tuple[T, bytes | None]:
            answer, changed = mutate()
            doc = {"version": 1, "quotas": self.quotas.to_doc()}
            return answer, json.dumps(doc, indent=1).encode() if changed else None

        return self.document.change(encoded)


def _parse(raw: bytes | None) -> dict[Entity, dict[str, float]]:
    return {} if raw is None else Quotas.from_doc(json.loads(raw)["quotas"])
