"""The handlers' one door to the authorizer: ``broker.access.allowed(ctx, op, resource_type, name)``.

The request's principal is its connection's (``User:<SASL name>``, the TLS subject, ``User:ANONYMOUS``)
and its host the client's address, as Kafka's RequestContext gives them to the authorizer. Without an
authorizer (``authorizer.class.name`` empty) every question is answered yes at the cost of one attribute
read, so a broker without ACLs behaves as before.

A denial the client asked for is logged at INFO with Kafka's authorizer-log wording ("Principal = ... is
Denied operation = ... from host = ... on resource = Topic:LITERAL:t for request = Fetch with
resourceRefCount = 1 based on rule ..."), but once per (principal, operation, resource) per
``LOG_INTERVAL_S``, never once per request; ``denials`` counts them all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from groupd.broker.security import acl_store
from groupd.broker.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclFilter,
    Operation,
    ResourceType,
)
from groupd.broker.security.authorizer import RESOURCE_TYPE_NAMES, Authorizer
from groupd.coordinator.service import CoordinatorError
from groupd.protocol.errors import ErrorCode
from groupd.storage.engine import MetadataStore
from groupd.storage.shared_document import SharedDocument

if TYPE_CHECKING:
    from collections.abc import Mapping

    from groupd.broker.dispatch import RequestContext

log = logging.getLogger("kafka.authorizer.logger")  # Kafka's audit logger's name
LOG_INTERVAL_S = 60.0
LOG_KEYS_LIMIT = 10_000  # remembered (principal, operation, resource) of recent denial lines

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = (
    Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE, Operation.ALTER, Operation.DESCRIBE,
)  # fmt: skip
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = (
    Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE,
)  # fmt: skip
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = (
    ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID,
)  # fmt: skip


NOTHING: frozenset[str] = frozenset()


class _EveryName(frozenset[str]):
    """A refusal of every name, an unknown one (None) too."""

    def __contains__(self, name: object) -> bool:
        return True


EVERY_NAME: frozenset[str] = _EveryName()  # a follower's Fetch without CLUSTER_ACTION: every partition refused
CLUSTER_DENIED = "Cluster authorization failed."  # Kafka's message for CLUSTER_AUTHORIZATION_FAILED
NOT_REQUESTED = -(1 << 31)  # an authorized-operations field nobody asked for

# Kafka's AclEntry.authorizationError
AUTHORIZATION_ERRORS = {
    TOPIC: ErrorCode.topic_authorization_failed,
    GROUP: ErrorCode.group_authorization_failed,
    CLUSTER: ErrorCode.cluster_authorization_failed,
    TRANSACTIONAL_ID: ErrorCode.transactional_id_authorization_failed,
    ResourceType.DELEGATION_TOKEN: ErrorCode.delegation_token_authorization_failed,
}


ANONYMOUS = "User:ANONYMOUS"


def _principal(ctx: RequestContext) -> str:
    return ctx.conn.principal if ctx.conn is not None else ANONYMOUS


class Access:
    def __init__(
        self,
        authorizer: Authorizer | None,
        metadata: MetadataStore,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.authorizer = authorizer
        self.metadata = metadata
        # the stored bindings: in a cluster shared by every node, followed at each heartbeat
        self.document = SharedDocument(metadata, acl_store.KEY, self._followed)
        self.clock = clock
        self.denials = 0
        self._logged: dict[tuple[str, Operation, ResourceType, str], float] = {}

    @classmethod
    def of(cls, config: Mapping[str, object], metadata: MetadataStore) -> Access:
        authorizer = None
        if config.get("authorizer.class.name"):
            super_users = config.get("super.users") or frozenset()
            assert isinstance(super_users, frozenset)
            authorizer = Authorizer(super_users, bool(config.get("allow.everyone.if.no.acl.found")))
        return cls(authorizer, metadata)

    @property
    def enabled(self) -> bool:
        return self.authorizer is not None

    def load(self) -> None:
        """The stored ACLs, read at start-up (kept even with no authorizer configured: a broker started
        without one and then with one again finds them)."""
        raw = self.document.load()
        if self.authorizer is not None:
            bindings = acl_store.parse(raw)
            self.authorizer.create(bindings)
            if bindings:
                acl_store.log.info("loaded %d ACLs", len(bindings))

    def _followed(self, raw: bytes | None) -> None:
        """Another node's version of the ACLs (or the last stored one again, after a failed write): the
        authorizer's bindings become exactly those, its cached decisions forgotten."""
        if self.authorizer is None:
            return
        try:
            bindings = acl_store.parse(raw)
        except RuntimeError as exc:
            acl_store.log.error("%s; the ACLs stay as they were", exc)
            return
        self.authorizer.delete(AclFilter.everything())
        self.authorizer.create(bindings)

    # ------------------------------------------------------------ the checks

    def allowed(
        self, ctx: RequestContext, op: Operation, rtype: ResourceType, name: str, log_denied: bool = True
    ) -> bool:
        """Whether the request's principal may do ``op`` on the literal resource ``name``."""
        authorizer = self.authorizer
        if authorizer is None:
            return True
        conn = ctx.conn
        # keyed by the connection's user name, not its principal: the connection's ``principal`` property
        # formats a new string per call (a Python frame, and a hash to compute again), which cost about as
        # much as the rest of the check; an allowed check on the hot paths is one set lookup
        key = (conn.user if conn is not None else "ANONYMOUS", ctx.client_host, op, rtype, name)
        if key in authorizer.allowed_users:
            return True
        principal = conn.principal if conn is not None else ANONYMOUS
        decision = authorizer.decide(principal, ctx.client_host, op, rtype, name)
        if decision.allowed:
            authorizer.remember_allowed(key)
            return True
        if log_denied:
            self._denied(ctx, principal, op, rtype, name, decision.rule)
        return False

    def cluster(self, ctx: RequestContext, op: Operation, log_denied: bool = True) -> bool:
        return self.allowed(ctx, op, CLUSTER, CLUSTER_NAME, log_denied)

    def may_create_topic(self, ctx: RequestContext, name: str) -> bool:
        """CREATE on the cluster (its denial not logged) or on the topic: what Metadata's auto-creation and
        CreateTopics ask (KafkaApis)."""
        return self.cluster(ctx, CREATE, log_denied=False) or self.allowed(ctx, CREATE, TOPIC, name)

    def asked_operations(self, ctx: RequestContext, rtype: ResourceType, name: str, asked: bool) -> int:
        """``operations`` when the request asked for them, else the schema's default (Integer.MIN_VALUE)."""
        return self.operations(ctx, rtype, name) if asked else NOT_REQUESTED

    def cluster_operations(self, ctx: RequestContext) -> int:
        """The cluster's authorized-operations bits: 0 without DESCRIBE on it (AuthHelper)."""
        return self.operations(ctx, CLUSTER, CLUSTER_NAME) if self.cluster(ctx, DESCRIBE) else 0

    def names(
        self, ctx: RequestContext, op: Operation, rtype: ResourceType, names: Iterable[str], log_denied: bool = True
    ) -> set[str]:
        """The names among ``names`` the principal may do ``op`` on (Kafka's filterByAuthorized)."""
        if self.authorizer is None:
            return set(names)
        return {name for name in set(names) if self.allowed(ctx, op, rtype, name, log_denied)}

    def refused_names(
        self, ctx: RequestContext, op: Operation, rtype: ResourceType, names: Iterable[str | None]
    ) -> frozenset[str]:
        """The names among ``names`` the principal may *not* do ``op`` on (None, an unknown topic id,
        is no name): what a handler answers TOPIC_AUTHORIZATION_FAILED and the like for."""
        if self.authorizer is None:
            return NOTHING
        denied: set[str] | None = None
        for name in names:  # a name asked twice is decided from the cache
            if name is not None and not self.allowed(ctx, op, rtype, name):
                if denied is None:
                    denied = set()
                denied.add(name)
        return NOTHING if denied is None else frozenset(denied)

    def refused(self, ctx: RequestContext, op: Operation, rtype: ResourceType, name: str) -> CoordinatorError | None:
        """None when allowed; else Kafka's error for the resource type (AclEntry.authorizationError) as the
        refusal a group handler's ``finish`` answers a coordinator's with."""
        if self.authorizer is None or self.allowed(ctx, op, rtype, name):
            return None
        return CoordinatorError(AUTHORIZATION_ERRORS[rtype])

    def describable_topics(self, ctx: RequestContext) -> Callable[[frozenset[str]], frozenset[str]] | None:
        """Without an authorizer None; else the topics among some the request's principal may DESCRIBE, asked
        later (a regex resolution) for that principal and host, a denial not logged (GroupMetadataManager's
        Action(DESCRIBE, topic, logIfAllowed=true, logIfDenied=false))."""
        authorizer = self.authorizer
        if authorizer is None:
            return None
        principal, host = _principal(ctx), ctx.client_host

        def describable(names: frozenset[str]) -> frozenset[str]:
            return frozenset(n for n in names if authorizer.authorize(principal, host, DESCRIBE, TOPIC, n))

        return describable

    def any_of_type(self, ctx: RequestContext, op: Operation, rtype: ResourceType) -> bool:
        """Whether the principal may do ``op`` on some resource of the type (authorizeByResourceType)."""
        if self.authorizer is None:
            return True
        return self.authorizer.authorize_by_resource_type(_principal(ctx), ctx.client_host, op, rtype)

    def operations(self, ctx: RequestContext, rtype: ResourceType, name: str) -> int:
        """The authorized-operations bit field of a resource (every supported operation without an
        authorizer, as Kafka's AuthHelper.authorizedOperations)."""
        if self.authorizer is None:
            return sum(1 << op for op in SUPPORTED_OPERATIONS[rtype])
        return self.authorizer.authorized_operations(_principal(ctx), ctx.client_host, rtype, name)

    def _denied(
        self, ctx: RequestContext, principal: str, op: Operation, rtype: ResourceType, name: str, rule: str
    ) -> None:
        self.denials += 1
        now = self.clock()
        key = (principal, op, rtype, name)
        last = self._logged.get(key)
        if last is not None and now - last < LOG_INTERVAL_S:
            return
        if len(self._logged) >= LOG_KEYS_LIMIT:
            self._logged.clear()
        self._logged[key] = now
        from groupd.broker.ops.metrics import api_name

        log.info(
            "Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s for request = %s "
            "with resourceRefCount = 1 based on rule %s",
            principal, op.name, ctx.client_host, RESOURCE_TYPE_NAMES.get(rtype, rtype.name), name,
            api_name(ctx.header.api_key), rule,
        )  # fmt: skip

    # ------------------------------------------------------------ the ACL admin APIs

    def create(self, bindings: list[AclBinding]) -> list[str | None]:
        """Store the valid bindings durably; per binding the INVALID_REQUEST message or None. Raises
        what the store raised (then nothing changed)."""
        authorizer = self.authorizer
        assert authorizer is not None

        def mutate() -> tuple[list[str | None], bytes | None]:
            before = authorizer.bindings
            results = authorizer.create(bindings)
            return results, self._encoded(before)

        return self.document.change(mutate)

    def delete(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        authorizer = self.authorizer
        assert authorizer is not None

        def mutate() -> tuple[list[list[AclBinding]], bytes | None]:
            before = authorizer.bindings
            return [authorizer.delete(f) for f in filters], self._encoded(before)

        return self.document.change(mutate)

    def _encoded(self, before: list[AclBinding]) -> bytes | None:
        """The document to store after a change (None: the bindings are the same). Raises what the store
        raised, with the bindings as they were stored (then nothing changed)."""
        assert self.authorizer is not None
        after = self.authorizer.bindings
        return None if after == before else acl_store.encode(after)
