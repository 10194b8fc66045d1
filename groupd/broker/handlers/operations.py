"""The operations a resource allows, as Kafka reports them in ``*_authorized_operations`` fields.

groupd has no authorizer, and Kafka without one authorizes every operation a resource type supports
(AclEntry.supportedOperations, packed by Utils.to32BitField: bit n set for operation code n). The
fields stay at Integer.MIN_VALUE, the schema's default, unless the request asks for them."""

from __future__ import annotations

NOT_REQUESTED = -(1 << 31)

# AclOperation codes
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12

_SUPPORTED = {
    "topic": (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    "group": (READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    "cluster": (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE),
}
_BITS = {kind: sum(1 << op for op in ops) for kind, ops in _SUPPORTED.items()}


def authorized_operations(kind: str, requested: bool = True) -> int:
    """The bit field for a ``topic``, ``group`` or ``cluster``; the schema default when not requested."""
    return _BITS[kind] if requested else NOT_REQUESTED
