"""Kafka's StandardAuthorizer as a pure object: the ACLs, super.users, allow.everyone.if.no.acl.found
and the decision for one (principal, host, operation, resource). No I/O: groupd/broker/security/
acl_store.py keeps the bindings durable, groupd/broker/security/access.py asks on a request's behalf.

The decision is Kafka's (StandardAuthorizerData.authorize/findResult):
- a super user is allowed everything;
- the bindings that apply to a resource are the literal ones of its name, the prefixed ones whose name
  starts it, and the literal wildcard ``*`` of its type;
- of those, a binding counts when its principal is the request's or ``User:*``, its host is ``*`` or the
  client's address, and its operation is ALL, the one asked, or (ALLOW only) one that implies it;
- any counting DENY denies; else any counting ALLOW allows; else the resource's having bindings at all
  denies, and only a resource with none gets allow.everyone.if.no.acl.found's answer.

Bindings are indexed by resource type, then literal name and prefix (looked up by the prefix lengths in
use), and decisions are cached until the bindings change, so a check costs a dictionary lookup when the
same principal asks about the same resource again (the common case: a consumer's fetches).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from groupd.broker.security.acl import (
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    invalid_binding,
)

CACHE_LIMIT = 100_000  # decisions kept before the cache starts over (a bound, not a tuning knob)

# Kafka's SecurityUtils.resourceTypeName: how its audit log names a resource type
RESOURCE_TYPE_NAMES = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}


def applies(acl: AclBinding, principal: str, host: str, op: Operation) -> Permission | None:
    """The binding's permission if it counts for this principal, host and operation, else None
    (Kafka's StandardAuthorizerData.findResult; the resource is matched by the caller)."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != Operation.ALL and acl.operation != op:
        if acl.permission != Permission.ALLOW:
            return None  # a DENY of READ does not deny DESCRIBE
        if op == Operation.DESCRIBE:
            if acl.operation not in IMPLIES_DESCRIBE:
                return None
        elif op == Operation.DESCRIBE_CONFIGS:
            if acl.operation not in IMPLIES_DESCRIBE_CONFIGS:
                return None
        else:
            return None
    return acl.permission


def describe_binding(acl: AclBinding) -> str:
    return (
        f"StandardAcl(resourceType={acl.resource_type.name}, resourceName={acl.name}, "
        f"patternType={acl.pattern.name}, principal={acl.principal}, host={acl.host}, "
        f"operation={acl.operation.name}, permissionType={acl.permission.name})"
    )


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    rule: str  # Kafka's rule wording: SuperUser, DefaultAllow, DefaultDeny, MatchingAcl(acl=...)


SUPER_USER = Decision(True, "SuperUser")
DEFAULT_DENY = Decision(False, "DefaultDeny")
DEFAULT_ALLOW = Decision(True, "DefaultAllow")


@dataclass
class _Section:
    """The bindings of one resource type."""

    literal: dict[str, list[AclBinding]] = field(default_factory=dict)
    prefixed: dict[str, list[AclBinding]] = field(default_factory=dict)
    prefix_lengths: list[int] = field(default_factory=list)  # the lengths of the prefixes in use, sorted

    def add(self, acl: AclBinding) -> None:
        table = self.literal if acl.pattern == PatternType.LITERAL else self.prefixed
        table.setdefault(acl.name, []).append(acl)
        if acl.pattern == PatternType.PREFIXED and len(acl.name) not in self.prefix_lengths:
            self.prefix_lengths.append(len(acl.name))
            self.prefix_lengths.sort()

    def remove(self, acl: AclBinding) -> None:
        table = self.literal if acl.pattern == PatternType.LITERAL else self.prefixed
        rows = table[acl.name]
        rows.remove(acl)
        if not rows:
            del table[acl.name]
            if acl.pattern == PatternType.PREFIXED and not any(len(p) == len(acl.name) for p in self.prefixed):
                self.prefix_lengths.remove(len(acl.name))

    def applicable(self, name: str) -> Iterable[list[AclBinding]]:
        """The lists of bindings that apply to the resource ``name``: its literal, its prefixes, then the
        wildcard (Kafka searches the wildcard last, after a DENY of the name's own section settled it)."""
        rows = self.literal.get(name)
        if rows:
            yield rows
        for length in self.prefix_lengths:
            if length > len(name):
                break
            rows = self.prefixed.get(name[:length])
            if rows:
                yield rows
        if name != WILDCARD:
            rows = self.literal.get(WILDCARD)
            if rows:
                yield rows


class Authorizer:
    """The ACLs and the decisions made from them; the one instance a broker configured with
    ``authorizer.class.name`` holds."""

    def __init__(
        self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False, bindings: Iterable[AclBinding] = ()
    ) -> None:
        self.super_users = frozenset(super_users)
        self.default = DEFAULT_ALLOW if allow_if_no_acl else DEFAULT_DENY
        self._bindings: dict[AclBinding, None] = {}  # an ordered set: DescribeAcls answers in creation order
        self._sections: dict[ResourceType, _Section] = {}
        # (principal, host, operation, resource type, name) -> the decision; read directly by Access.allowed
        self.cache: dict[tuple[str, str, Operation, ResourceType, str], Decision] = {}
        # (connection's user name, host, operation, resource type, name) of the allowed checks: the hot paths'
        # question answered by one set lookup, no principal string built (Access.allowed); forgotten with cache
        self.allowed_users: set[tuple[str, str, Operation, ResourceType, str]] = set()
        for acl in bindings:
            self._add(acl)

    def __len__(self) -> int:
        return len(self._bindings)

    @property
    def bindings(self) -> list[AclBinding]:
        return list(self._bindings)

    # ------------------------------------------------------------ decisions

    def decide(self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> Decision:
        key = (principal, host, op, rtype, name)
        decision = self.cache.get(key)
        if decision is None:
            if len(self.cache) >= CACHE_LIMIT:
                self._forget()
            decision = self.cache[key] = self._decide(principal, host, op, rtype, name)
        return decision

    def authorize(self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> bool:
        return self.decide(principal, host, op, rtype, name).allowed

    def _decide(self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> Decision:
        if principal in self.super_users:
            return SUPER_USER
        section = self._sections.get(rtype)
        if section is None:
            return self.default
        has_acls = False
        allow: AclBinding | None = None
        for rows in section.applicable(name):
            has_acls = True
            for acl in rows:
                permission = applies(acl, principal, host, op)
                if permission == Permission.DENY:
                    return Decision(False, f"MatchingAcl(acl={describe_binding(acl)})")
                if permission == Permission.ALLOW and allow is None:
                    allow = acl
        if allow is not None:
            return Decision(True, f"MatchingAcl(acl={describe_binding(allow)})")
        return DEFAULT_DENY if has_acls else self.default

    def authorize_by_resource_type(self, principal: str, host: str, op: Operation, rtype: ResourceType) -> bool:
        """Whether the principal may do ``op`` on *some* resource of the type (Kafka's
        Authorizer.authorizeByResourceType): allowed by a made-up name (super users, the default), or by
        an ALLOW binding of theirs (exactly ``op`` or ALL) that no DENY of the same literal name or of a
        prefix of it cancels; a DENY of the literal wildcard denies outright."""
        if self.authorize(principal, host, op, rtype, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allows: list[AclBinding] = []
        for acl in self._bindings:
            if acl.resource_type != rtype or acl.host not in (host, WILDCARD):
                continue
            if acl.principal not in (principal, WILDCARD_PRINCIPAL) or acl.operation not in (op, Operation.ALL):
                continue
            if acl.permission == Permission.DENY:
                if acl.pattern == PatternType.LITERAL:
                    if acl.name == WILDCARD:
                        return False
                    deny_literal.add(acl.name)
                else:
                    deny_prefixed.add(acl.name)
            elif acl.pattern == PatternType.LITERAL and acl.name == WILDCARD:
                return True
            else:
                allows.append(acl)
        for acl in allows:
            if acl.pattern == PatternType.LITERAL and acl.name in deny_literal:
                continue
            if not any(acl.name[:i] in deny_prefixed for i in range(1, len(acl.name) + 1)):
                return True
        return False

    def authorized_operations(self, principal: str, host: str, rtype: ResourceType, name: str) -> int:
        """The 32-bit field of the operations allowed on the resource, out of those its type supports:
        bit ``1 << code`` per operation (Kafka's AuthHelper.authorizedOperations, Utils.to32BitField)."""
        bits = 0
        for op in SUPPORTED_OPERATIONS[rtype]:
            if self.authorize(principal, host, op, rtype, name):
                bits |= 1 << op
        return bits

    # ------------------------------------------------------------ the ACL admin APIs

    def create(self, bindings: Iterable[AclBinding]) -> list[str | None]:
        """Store each valid binding (an existing one is not stored twice, and still succeeds, as Kafka's
        AclControlManager); per binding, the INVALID_REQUEST message that refused it or None."""
        results: list[str | None] = []
        for acl in bindings:
            why = invalid_binding(acl)
            if why is None and acl not in self._bindings:
                self._add(acl)
            results.append(why)
        self._forget()
        return results

    def delete(self, flt: AclFilter) -> list[AclBinding]:
        """Remove and return every binding the filter matches."""
        gone = [acl for acl in self._bindings if flt.matches(acl)]
        for acl in gone:
            del self._bindings[acl]
            self._sections[acl.resource_type].remove(acl)
        if gone:
            self._forget()
        return gone

    def describe(self, flt: AclFilter) -> list[AclBinding]:
        return [acl for acl in self._bindings if flt.matches(acl)]

    def remember_allowed(self, key: tuple[str, str, Operation, ResourceType, str]) -> None:
        """Note a check by user name that was allowed (Access.allowed), within the caches' bound."""
        if len(self.allowed_users) >= CACHE_LIMIT:
            self._forget()
        self.allowed_users.add(key)

    def _forget(self) -> None:
        """The decisions made so far are stale (the bindings changed) or too many: start over."""
        self.cache.clear()
        self.allowed_users.clear()

    def _add(self, acl: AclBinding) -> None:
        self._bindings[acl] = None
        self._sections.setdefault(acl.resource_type, _Section()).add(acl)
