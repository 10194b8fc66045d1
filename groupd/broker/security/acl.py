"""Kafka's ACL model: what one access-control binding says and how a filter selects bindings.

The codes are the wire's (Kafka's AclOperation, ResourceType, PatternType, AclPermissionType), so a
binding read from CreateAcls is stored and answered in DescribeAcls without translation. Matching a
*request* against bindings is groupd/broker/security/authorizer.py's; this module only says what a
binding is, whether CreateAcls may store it (``invalid_binding``) and whether a DescribeAcls/DeleteAcls
filter selects it (``AclFilter.matches``, Kafka's ResourcePatternFilter and AccessControlEntryFilter).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

WILDCARD = "*"  # a resource name or host matching any (Kafka's ResourcePattern.WILDCARD_RESOURCE)
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# An ALLOW binding for one of these operations also allows DESCRIBE (DESCRIBE_CONFIGS); a DENY binding
# denies only its own operation (Kafka's StandardAuthorizerData.IMPLIES_DESCRIBE(_CONFIGS)).
IMPLIES_DESCRIBE = frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS})

# The operations that make sense on each resource type: the authorized-operations bits of Metadata,
# DescribeCluster and the group describes range over these (Kafka's AclEntry.supportedOperations).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset(
        {
            Operation.READ,
            Operation.WRITE,
            Operation.CREATE,
            Operation.DESCRIBE,
            Operation.DELETE,
            Operation.ALTER,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset(
        {Operation.READ, Operation.DESCRIBE, Operation.DELETE, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}
    ),
    ResourceType.CLUSTER: frozenset(
        {
            Operation.CREATE,
            Operation.CLUSTER_ACTION,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
            Operation.IDEMPOTENT_WRITE,
            Operation.ALTER,
            Operation.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({Operation.DESCRIBE, Operation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({Operation.DESCRIBE}),
    ResourceType.USER: frozenset({Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS}),
}


def _code(enum: type[IntEnum], code: int) -> IntEnum:
    """A wire code as its enum member; codes Kafka does not know read as UNKNOWN (its fromCode)."""
    try:
        return enum(code)
    except ValueError:
        return enum(0)


def _codes(
    resource_type: int, pattern: int, operation: int, permission: int
) -> tuple[ResourceType, PatternType, Operation, Permission]:
    return (
        ResourceType(_code(ResourceType, resource_type)),
        PatternType(_code(PatternType, pattern)),
        Operation(_code(Operation, operation)),
        Permission(_code(Permission, permission)),
    )


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One stored ACL: who (principal, host) may or may not (permission) do what (operation) on which
    resources (type, name, pattern)."""

    resource_type: ResourceType
    name: str
    pattern: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    @classmethod
    def of_wire(
        cls, resource_type: int, name: str, pattern: int, principal: str, host: str, operation: int, permission: int
    ) -> AclBinding:
        rt, pt, op, pm = _codes(resource_type, pattern, operation, permission)
        return cls(rt, name, pt, principal, host, op, pm)

    def to_json(self) -> list[object]:
        return [
            int(self.resource_type),
            self.name,
            int(self.pattern),
            self.principal,
            self.host,
            int(self.operation),
            int(self.permission),
        ]

    @classmethod
    def from_json(cls, row: list[object]) -> AclBinding:
        rt, name, pattern, principal, host, op, perm = row
        return cls.of_wire(
            int(str(rt)), str(name), int(str(pattern)), str(principal), str(host), int(str(op)), int(str(perm))
        )


def invalid_binding(binding: AclBinding) -> str | None:
    """Why CreateAcls refuses to store this binding (INVALID_REQUEST with this message), or None.

    Kafka's checks, in its order: the broker's (AclApis: the CLUSTER resource's one name, a non-empty
    name), then the controller's (AclControlManager.validateNewAcl: concrete type, LITERAL or PREFIXED,
    a concrete operation and permission), then the principal must parse as ``Type:name``
    (SecurityUtils.parseKafkaPrincipal)."""
    if binding.resource_type == ResourceType.CLUSTER and binding.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not binding.name:
        return "Invalid empty resource name"
    if binding.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {binding.resource_type.name}"
    if binding.pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {binding.pattern.name}"
    if binding.operation in (Operation.UNKNOWN, Operation.ANY):
        return f"Invalid operation {binding.operation.name}"
    if binding.permission not in (Permission.ALLOW, Permission.DENY):
        return f"Invalid permissionType {binding.permission.name}"
    if ":" not in binding.principal:
        return f"expected a string in format principalType:principalName but got {binding.principal}"
    return None


@dataclass(frozen=True, slots=True)
class AclFilter:
    """A DescribeAcls/DeleteAcls filter: None (a null name, principal or host) and ANY match anything;
    MATCH selects every binding that would apply to the named resource (its literal, the wildcard ``*``
    and every prefix of it)."""

    resource_type: ResourceType
    name: str | None
    pattern: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    @classmethod
    def of_wire(
        cls,
        resource_type: int,
        name: str | None,
        pattern: int,
        principal: str | None,
        host: str | None,
        operation: int,
        permission: int,
    ) -> AclFilter:
        rt, pt, op, pm = _codes(resource_type, pattern, operation, permission)
        return cls(rt, name, pt, principal, host, op, pm)

    @classmethod
    def everything(cls) -> AclFilter:
        return cls(ResourceType.ANY, None, PatternType.ANY, None, None, Operation.ANY, Permission.ANY)

    def unknown(self) -> str | None:
        """Why Kafka refuses this filter (INVALID_REQUEST): an UNKNOWN field, as its request classes and
        AclControlManager.validateFilter find them (a code Kafka does not know reads as UNKNOWN)."""
        if self.resource_type == ResourceType.UNKNOWN or self.pattern == PatternType.UNKNOWN:
            return "Unknown patternFilter."
        if self.operation == Operation.UNKNOWN or self.permission == Permission.UNKNOWN:
            return "Unknown entryFilter."
        return None

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if self.pattern not in (PatternType.ANY, PatternType.MATCH) and self.pattern != b.pattern:
            return False
        if self.name is not None:
            if self.pattern in (PatternType.ANY, b.pattern):
                if self.name != b.name:
                    return False
            elif b.pattern == PatternType.LITERAL:  # MATCH against a literal: the name or the wildcard
                if b.name not in (self.name, WILDCARD):
                    return False
            elif not self.name.startswith(b.name):  # MATCH against a prefix
                return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != Operation.ANY and self.operation != b.operation:
            return False
        return self.permission == Permission.ANY or self.permission == b.permission


STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def parse_authorizer_class(raw: str) -> str:
    """``authorizer.class.name``: empty (no authorizer: every request allowed, the ACL APIs answer
    SECURITY_DISABLED) or Kafka's StandardAuthorizer, which groupd implements; any other class is refused."""
    value = raw.strip()
    if value not in ("", STANDARD_AUTHORIZER):
        raise ValueError(f"expected empty or {STANDARD_AUTHORIZER} (the only authorizer groupd has)")
    return value


def parse_super_users(raw: str) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (StandardAuthorizer.getConfiguredSuperUsers)."""
    users = frozenset(u.strip() for u in raw.split(";") if u.strip())
    for user in users:
        if ":" not in user:
            raise ValueError(f"{user!r} is not a principal (expected Type:name, such as User:admin)")
    return users
