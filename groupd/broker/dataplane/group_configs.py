"""Per-group configuration (KIP-848's and KIP-932's group configs): Kafka 4.3's GroupConfig keys, their
validation against the broker's bounds, and the store that keeps each group's overrides.

Kafka keeps group configs in its metadata log as ConfigRecords on GROUP resources (type 32): any group
id may carry them, existing or not, and deleting a group leaves them in place. Its controller validates
a change on the whole resulting set merged over the broker's values (GroupConfig.validate): every name
must be a group config, every value must parse and pass its own check, each bounded value must lie
within the broker's min/max keys, and each session timeout must exceed its heartbeat interval. Brokers
apply a group's configs clamped into the broker's current bounds (GroupConfig.evaluate), which differs
from the stored value only when the bounds changed after the config was set; DescribeConfigs shows the
stored value.

groupd keeps them in one metadata document (``__group_configs.json``), rewritten whole and made durable
before the change is answered, so an answered change survives a crash, as the topic registry does; in a
cluster every node shares it (storage/shared_document.py): changed by compare-and-set, followed at every
heartbeat.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from groupd.broker.dataplane.topic_configs import BOOLEAN, INT, STRING, InvalidConfig
from groupd.storage.engine import MetadataStore
from groupd.storage.shared_document import SharedDocument

log = logging.getLogger("groupd.group_configs")

FILE = "__group_configs.json"
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
_JAVA_WHITESPACE = "".join(chr(c) for c in range(33))  # String.trim() drops every char <= U+0020


class InvalidRequest(ValueError):
    """A refusal Kafka answers with INVALID_REQUEST (empty group name, null values, duplicate keys)."""


# ---------------------------------------------------------------- value checks (ConfigDef's)


def _trim(value: str) -> str:
    return value.strip(_JAVA_WHITESPACE)


def _invalid(name: str, value: object, why: str) -> InvalidConfig:
    """ConfigException's sentence."""
    return InvalidConfig(f"Invalid value {value} for configuration {name}: {why}")


def _parse_int(name: str, raw: str) -> int:
    """Integer.parseInt of the trimmed text: an optional sign and decimal digits, within 32 bits."""
    text = _trim(raw)
    if not re.fullmatch(r"[+-]?\d+", text) or not INT32_MIN <= (number := int(text)) <= INT32_MAX:
        raise _invalid(name, raw, "Not a number of type INT")
    return number


def _parse_boolean(name: str, raw: str) -> bool:
    text = _trim(raw).lower()
    if text not in ("true", "false"):
        raise _invalid(name, raw, "Expected value to be either true or false")
    return text == "true"


# java.time.Duration.parse's grammar (case-insensitive): PnDTnHnMn.nS, each part signed, a 'T' needs a part
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)


def iso_duration_ms(text: str) -> int | None:
    """An ISO-8601 duration as Java's Duration.parse reads it, in whole milliseconds (None: not one)."""
    m = _DURATION.fullmatch(text)
    if m is None or m.group(3) is not None and m.group(3).upper() == "T":
        return None
    days, hours, minutes, seconds, fraction = (m.group(i) for i in (2, 4, 5, 6, 7))
    if days is None and hours is None and minutes is None and seconds is None:
        return None
    nanos = int(((fraction or "") + "000000000")[:9])
    if seconds is not None and seconds.startswith("-"):
        nanos = -nanos
    total_ns = ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60 + int(seconds or 0)
    total_ns = total_ns * 1_000_000_000 + nanos
    if m.group(1) == "-":
        total_ns = -total_ns
    if not -(2**63) <= total_ns // 1_000_000_000 < 2**63:
        return None
    return total_ns // 1_000_000


def _check_offset_reset(name: str, value: str) -> None:
    """ShareGroupAutoOffsetResetStrategy: earliest, latest, or by_duration:<non-negative ISO-8601>."""
    if value in ("earliest", "latest"):
        return
    if value.startswith("by_duration:"):
        duration = iso_duration_ms(value[len("by_duration:"):])
        if duration is not None and duration >= 0:
            return
    raise _invalid(name, value, (
        f"Invalid value `{value}` for configuration {name}. "
        "The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
    ))


def _check_isolation(name: str, value: str) -> None:
    if value not in ("read_committed", "read_uncommitted"):
        raise _invalid(name, value, "String must be one of: read_committed, read_uncommitted")


# ---------------------------------------------------------------- the keys


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    name: str
    type: int  # DescribeConfigs' config type
    default: str  # GroupConfig's default: the broker key's Kafka default where there is one
    broker_key: str | None  # the broker-level synonym whose value a group without its own gets
    doc: str
    at_least: int | None = None  # ConfigDef's Range.atLeast
    check: Callable[[str, str], None] | None = None  # a string key's own validator

    def parse(self, raw: str) -> int | bool | str:
        """The value as ConfigDef parses and checks it; InvalidConfig with Kafka's sentence if it cannot."""
        if self.type == INT:
            number = _parse_int(self.name, raw)
            if self.at_least is not None and number < self.at_least:
                raise _invalid(self.name, number, f"Value must be at least {self.at_least}")
            return number
        if self.type == BOOLEAN:
            return _parse_boolean(self.name, raw)
        text = _trim(raw)
        if self.check is not None:
            self.check(self.name, text)
        return text


def _canonical(value: int | bool | str) -> str:
    """ConfigDef.convertToString: how a parsed value is shown back."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def shown(name: str, raw: str) -> str:
    """A stored value as DescribeConfigs shows it: parsed and written back (trimmed, ints as digits)."""
    try:
        return _canonical(GROUP_CONFIGS[name].parse(raw))
    except InvalidConfig:
        return raw


# In GroupConfig.CONFIG_DEF's order: ConfigDef.parse checks them in this order, so the first bad key named
# is Kafka's. consumer.assignor.offload.enable and its share/streams siblings exist as constants in 4.3 but
# are not defined, so they are unknown names.
GROUP_CONFIG_KEYS: tuple[GroupConfigKey, ...] = (
    GroupConfigKey(
        "consumer.session.timeout.ms",
        INT,
        "45000",
        "group.consumer.session.timeout.ms",
        "A consumer-protocol member of this group is removed after this long without a heartbeat.",
        at_least=1,
    ),
    GroupConfigKey(
        "consumer.heartbeat.interval.ms",
        INT,
        "5000",
        "group.consumer.heartbeat.interval.ms",
        "The heartbeat interval the coordinator gives this group's consumer-protocol members.",
        at_least=1,
    ),
    GroupConfigKey(
        "consumer.assignment.interval.ms",
        INT,
        "1000",
        "group.consumer.assignment.interval.ms",
        "The least time between two target assignments of this consumer group.",
        at_least=0,
    ),
    GroupConfigKey(
        "share.session.timeout.ms",
        INT,
        "45000",
        "group.share.session.timeout.ms",
        "A member of this share group is removed after this long without a heartbeat.",
        at_least=1,
    ),
    GroupConfigKey(
        "share.heartbeat.interval.ms",
        INT,
        "5000",
        "group.share.heartbeat.interval.ms",
        "The heartbeat interval the coordinator gives this share group's members.",
        at_least=1,
    ),
    GroupConfigKey(
        "share.record.lock.duration.ms",
        INT,
        "30000",
        "group.share.record.lock.duration.ms",
        "How long a record acquired by a member of this share group stays locked to it.",
        at_least=1000,
    ),
    GroupConfigKey(
        "share.delivery.count.limit",
        INT,
        "5",
        "group.share.delivery.count.limit",
        "Deliveries of one record to this share group before it is archived.",
        at_least=2,
    ),
    GroupConfigKey(
        "share.partition.max.record.locks",
        INT,
        "2000",
        "group.share.partition.max.record.locks",
        "Records of one partition this share group may hold acquired at once.",
        at_least=100,
    ),
    GroupConfigKey(
        "share.auto.offset.reset",
        STRING,
        "latest",
        None,
        "Where this share group starts on a partition it has no state for: latest, earliest, or "
        "by_duration:<ISO-8601 duration> (that long before now; not negative).",
        check=_check_offset_reset,
    ),
    GroupConfigKey(
        "share.isolation.level",
        STRING,
        "read_uncommitted",
        None,
        "read_committed: this share group is given only committed transactional records; "
        "read_uncommitted: every record.",
        check=_check_isolation,
    ),
    GroupConfigKey(
        "share.renew.acknowledge.enable",
        BOOLEAN,
        "true",
        None,
        "Whether this share group's members may renew their acquisition locks by acknowledgement.",
    ),
    GroupConfigKey(
        "share.assignment.interval.ms",
        INT,
        "1000",
        "group.share.assignment.interval.ms",
        "The least time between two target assignments of this share group.",
        at_least=0,
    ),
    GroupConfigKey(
        "streams.session.timeout.ms",
        INT,
        "45000",
        "group.streams.session.timeout.ms",
        "Session timeout of this streams group's members (groupd serves no streams groups).",
        at_least=1,
    ),
    GroupConfigKey(
        "streams.heartbeat.interval.ms",
        INT,
        "5000",
        "group.streams.heartbeat.interval.ms",
        "Heartbeat interval of this streams group's members (groupd serves no streams groups).",
        at_least=1,
    ),
    GroupConfigKey(
        "streams.num.standby.replicas",
        INT,
        "0",
        "group.streams.num.standby.replicas",
        "Standby replicas per task in this streams group (groupd serves no streams groups).",
        at_least=0,
    ),
    GroupConfigKey(
        "streams.initial.rebalance.delay.ms",
        INT,
        "3000",
        "group.streams.initial.rebalance.delay.ms",
        "Delay of this streams group's first rebalance (groupd serves no streams groups).",
        at_least=0,
    ),
    GroupConfigKey(
        "streams.assignment.interval.ms",
        INT,
        "1000",
        "group.streams.assignment.interval.ms",
        "The least time between two target assignments of this streams group (groupd serves no streams groups).",
        at_least=0,
    ),
)
GROUP_CONFIGS: dict[str, GroupConfigKey] = {k.name: k for k in GROUP_CONFIG_KEYS}

# The broker-level keys groupd may not define (yet): their Kafka 4.3 defaults (GroupCoordinatorConfig,
# ShareGroupConfig). A key the broker's configuration holds is read from it instead.
BROKER_DEFAULTS: dict[str, int] = {
    "group.consumer.session.timeout.ms": 45_000,
    "group.consumer.min.session.timeout.ms": 45_000,
    "group.consumer.max.session.timeout.ms": 60_000,
    "group.consumer.heartbeat.interval.ms": 5_000,
    "group.consumer.min.heartbeat.interval.ms": 5_000,
    "group.consumer.max.heartbeat.interval.ms": 15_000,
    "group.consumer.assignment.interval.ms": 1_000,
    "group.consumer.min.assignment.interval.ms": 0,
    "group.consumer.max.assignment.interval.ms": 15_000,
    "group.share.session.timeout.ms": 45_000,
    "group.share.min.session.timeout.ms": 45_000,
    "group.share.max.session.timeout.ms": 60_000,
    "group.share.heartbeat.interval.ms": 5_000,
    "group.share.min.heartbeat.interval.ms": 5_000,
    "group.share.max.heartbeat.interval.ms": 15_000,
    "group.share.assignment.interval.ms": 1_000,
    "group.share.min.assignment.interval.ms": 0,
    "group.share.max.assignment.interval.ms": 15_000,
    "group.share.record.lock.duration.ms": 30_000,
    "group.share.min.record.lock.duration.ms": 15_000,
    "group.share.max.record.lock.duration.ms": 60_000,
    "group.share.delivery.count.limit": 5,
    "group.share.min.delivery.count.limit": 2,
    "group.share.max.delivery.count.limit": 10,
    "group.share.partition.max.record.locks": 2_000,
    "group.share.min.partition.max.record.locks": 100,
    "group.share.max.partition.max.record.locks": 4_000,
    "group.streams.session.timeout.ms": 45_000,
    "group.streams.min.session.timeout.ms": 45_000,
    "group.streams.max.session.timeout.ms": 60_000,
    "group.streams.heartbeat.interval.ms": 5_000,
    "group.streams.min.heartbeat.interval.ms": 5_000,
    "group.streams.max.heartbeat.interval.ms": 15_000,
    "group.streams.num.standby.replicas": 0,
    "group.streams.max.standby.replicas": 2,
    "group.streams.initial.rebalance.delay.ms": 3_000,
    "group.streams.assignment.interval.ms": 1_000,
    "group.streams.min.assignment.interval.ms": 0,
    "group.streams.max.assignment.interval.ms": 15_000,
}


@dataclass(frozen=True, slots=True)
class Bound:
    """One of GroupConfig.validateValues' range checks: ``key`` within the broker's ``low``/``high`` keys."""

    key: str
    low: str | None
    high: str | None
    only_if_set: bool = False  # the assignment intervals: checked only when the group sets them (4.3)


# validateValues' order: the first failing check names Kafka's message
BOUNDS: tuple[Bound, ...] = (
    Bound(
        "consumer.heartbeat.interval.ms",
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
    ),
    Bound(
        "consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"
    ),
    Bound(
        "consumer.assignment.interval.ms",
        "group.consumer.min.assignment.interval.ms",
        "group.consumer.max.assignment.interval.ms",
        True,
    ),
    Bound(
        "share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"
    ),
    Bound("share.session.timeout.ms", "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    Bound(
        "share.record.lock.duration.ms",
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    ),
    Bound("share.delivery.count.limit", "group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
    Bound(
        "share.partition.max.record.locks",
        "group.share.min.partition.max.record.locks",
        "group.share.max.partition.max.record.locks",
    ),
    Bound(
        "share.assignment.interval.ms",
        "group.share.min.assignment.interval.ms",
        "group.share.max.assignment.interval.ms",
        True,
    ),
    Bound(
        "streams.heartbeat.interval.ms",
        "group.streams.min.heartbeat.interval.ms",
        "group.streams.max.heartbeat.interval.ms",
    ),
    Bound("streams.session.timeout.ms", "group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
    Bound("streams.num.standby.replicas", None, "group.streams.max.standby.replicas"),
    Bound(
        "streams.assignment.interval.ms",
        "group.streams.min.assignment.interval.ms",
        "group.streams.max.assignment.interval.ms",
        True,
    ),
)
# (session timeout, heartbeat interval): the session must be the longer
SESSION_OVER_HEARTBEAT = (
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
    ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"),
)


def broker_value(broker_config: Mapping[str, Any], key: str) -> int:
    """A broker-level group key's value: the broker's own if it defines the key, else Kafka's default."""
    value = broker_config.get(key)
    return int(value) if value is not None else BROKER_DEFAULTS[key]


def broker_explicit(broker_config: Mapping[str, Any], key: str) -> bool:
    """Whether the broker's value differs from Kafka's default (shown as STATIC_BROKER_CONFIG)."""
    value = broker_config.get(key)
    return value is not None and int(value) != BROKER_DEFAULTS[key]


def default_value(broker_config: Mapping[str, Any], spec: GroupConfigKey) -> str:
    """What a group without its own value gets: the broker's synonym, else GroupConfig's default."""
    return str(broker_value(broker_config, spec.broker_key)) if spec.broker_key is not None else spec.default


# ---------------------------------------------------------------- validation (GroupConfig.validate)


def validate(group_id: str, configs: Mapping[str, str | None], broker_config: Mapping[str, Any]) -> dict[str, str]:
    """The group's whole new set of configs, checked as Kafka's controller checks it; returned as given.

    InvalidRequest for an empty group name or a null value, InvalidConfig (Kafka's sentence) for the rest.
    """
    if not group_id:
        raise InvalidRequest("Default group resources are not allowed.")
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        raise InvalidConfig(f"Null value not supported for group configs: {','.join(nulls)}")
    given: dict[str, str] = {k: v for k, v in configs.items() if v is not None}
    for name in given:
        if name not in GROUP_CONFIGS:
            raise InvalidConfig(f"Unknown group config name: {name}")
    values: dict[str, int | bool | str] = {}
    for spec in GROUP_CONFIG_KEYS:
        if spec.name in given:
            values[spec.name] = spec.parse(given[spec.name])
        else:
            # the broker's values stand in for what the group does not set (extractGroupConfigMap)
            values[spec.name] = spec.parse(default_value(broker_config, spec))
    for bound in BOUNDS:
        if bound.only_if_set and bound.key not in given:
            continue
        number = values[bound.key]
        assert isinstance(number, int)
        if bound.low is not None and number < broker_value(broker_config, bound.low):
            raise InvalidConfig(f"{bound.key} must be greater than or equal to {bound.low}")
        if bound.high is not None and number > broker_value(broker_config, bound.high):
            raise InvalidConfig(f"{bound.key} must be less than or equal to {bound.high}")
    for session, heartbeat in SESSION_OVER_HEARTBEAT:
        if values[session] <= values[heartbeat]:  # type: ignore[operator]
            raise InvalidConfig(f"{session} must be greater than {heartbeat}")
    return given


def evaluate(group_id: str, configs: Mapping[str, str], broker_config: Mapping[str, Any]) -> dict[str, str]:
    """The configs as the group's coordinator and share partitions apply them (GroupConfig.evaluate): each
    value canonical (trimmed, ints as digits, booleans lower case) and clamped into the broker's current
    bounds, with a warning when clamping changes it (the bounds moved after the value was set)."""
    out: dict[str, str] = {}
    for name, raw in configs.items():
        spec = GROUP_CONFIGS.get(name)
        if spec is None:
            continue  # no longer a group config: Kafka skips such records at replay
        try:
            value = spec.parse(raw)
        except InvalidConfig as exc:
            log.warning("group %s: config %s=%r is ignored: %s", group_id, name, raw, exc)
            continue
        out[name] = _canonical(value)
    for bound in BOUNDS:
        if bound.key not in out:
            continue
        number = int(out[bound.key])
        low = broker_value(broker_config, bound.low) if bound.low is not None else None
        high = broker_value(broker_config, bound.high) if bound.high is not None else None
        clamped = max(number, low) if low is not None else number
        clamped = min(clamped, high) if high is not None else clamped
        if clamped != number:
            log.warning(
                "group %s: config %s=%d is outside the broker's bounds [%s, %s]; %d applies",
                group_id,
                bound.key,
                number,
                low,
                high,
                clamped,
            )
            out[bound.key] = str(clamped)
    return out


# ---------------------------------------------------------------- the store


class GroupConfigStore:
    """Every group's configs, one metadata document; reloaded at start-up, saved before a change is answered."""

    def __init__(self, metadata: MetadataStore, broker_config: Mapping[str, Any]) -> None:
        self.broker_config = broker_config
        self._stored: dict[str, dict[str, str]] = {}  # as set (DescribeConfigs shows these)
        self._applied: dict[str, Mapping[str, str]] = {}  # evaluated (what the groups run with)
        self.document = SharedDocument(metadata, FILE, self._followed)

    def load(self) -> None:
        groups = _parse(self.document.load())
        self._replace(groups)
        if groups:
            log.info("loaded the configs of %d groups", len(groups))

    def follow(self) -> None:
        """In a cluster, read another node's changes now (an alteration starts from the group's configs)."""
        self.document.follow()

    def _followed(self, raw: bytes | None) -> None:
        """Another node's version (or the last stored one again, after a failed write)."""
        try:
            groups = _parse(raw)
        except RuntimeError as exc:
            log.error("%s; the group configs stay as they were", exc)
            return
        changed = sorted(g for g in {*groups, *self._stored} if groups.get(g, {}) != self._stored.get(g, {}))
        self._replace(groups)
        if changed:
            log.info("followed the configs of groups %s", ", ".join(changed))

    def _replace(self, groups: dict[str, dict[str, str]]) -> None:
        self._stored.clear()
        self._applied.clear()
        for group_id, configs in groups.items():
            self._put(group_id, configs)

    def _put(self, group_id: str, configs: Mapping[str, str]) -> None:
        if configs:
            self._stored[group_id] = dict(configs)
            self._applied[group_id] = MappingProxyType(evaluate(group_id, configs, self.broker_config))
        else:
            self._stored.pop(group_id, None)
            self._applied.pop(group_id, None)

    def _encoded(self) -> bytes:
        return json.dumps({"version": 1, "groups": self._stored}, indent=1, sort_keys=True).encode()

    # queries
    def overrides(self, group_id: str) -> Mapping[str, str]:
        """The group's own configs as they apply (evaluated: canonical, within the broker's bounds); only the
        keys that were set. The coordinator and the share partitions read this."""
        return self._applied.get(group_id, _EMPTY)

    def stored(self, group_id: str) -> dict[str, str]:
        """The group's configs as they were set (DescribeConfigs, the next alteration's starting point)."""
        return dict(self._stored.get(group_id, {}))

    def group_ids(self) -> list[str]:
        """The groups that have configs (ListConfigResources' GROUP resources)."""
        return sorted(self._stored)

    # changes
    def set(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Replace the group's configs (an empty set removes the resource) and make it durable."""
        before = self._stored.get(group_id, {})

        def mutate() -> tuple[None, bytes]:
            self._put(group_id, configs)
            return None, self._encoded()

        self.document.change(mutate)
        if dict(configs) != before:
            log.info("group %s configs are now %s", group_id, dict(sorted(configs.items())) or "{}")


_EMPTY: Mapping[str, str] = MappingProxyType({})


def _parse(raw: bytes | None) -> dict[str, dict[str, str]]:
    if raw is None:
        return {}
    try:
        doc = json.loads(raw)
        return {str(g): {str(k): str(v) for k, v in configs.items()} for g, configs in doc["groups"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise RuntimeError(f"cannot read group configs from {FILE}: {exc}") from None
