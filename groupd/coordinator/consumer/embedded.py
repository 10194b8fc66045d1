"""The consumer protocol embedded in classic JoinGroup/SyncGroup bytes (Kafka's ConsumerProtocol), read
and written through kio's ConsumerProtocolSubscription / ConsumerProtocolAssignment entities.

A classic member of a consumer group (KIP-848 migration) tells the coordinator its topics, rack and owned
partitions only through these bytes, and receives its assignment the same way, in the version of the
metadata it sent. Like Kafka's ConsumerProtocol, a version above the newest known one is read as the newest
(later versions only append fields), and bytes that do not parse are ``MalformedProtocol``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kio.schema.consumer_protocol_assignment.v3 import ConsumerProtocolAssignment as AssignmentV3
from kio.schema.consumer_protocol_assignment.v3.data import TopicPartition as AssignedTopicV3
from kio.schema.consumer_protocol_subscription.v0 import ConsumerProtocolSubscription as SubscriptionV0
from kio.schema.consumer_protocol_subscription.v1 import ConsumerProtocolSubscription as SubscriptionV1
from kio.schema.consumer_protocol_subscription.v2 import ConsumerProtocolSubscription as SubscriptionV2
from kio.schema.consumer_protocol_subscription.v3 import ConsumerProtocolSubscription as SubscriptionV3
from kio.static.primitive import i32

from groupd.protocol.codec import decode, encode

_SUBSCRIPTIONS = (SubscriptionV0, SubscriptionV1, SubscriptionV2, SubscriptionV3)
NEWEST = 3

TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]  # (topic name, partitions)


class MalformedProtocol(ValueError):
    """Bytes that are not a ConsumerProtocol subscription or assignment (Kafka's SchemaException)."""


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None
    owned: TopicPartitions  # v1+; empty before
    generation: int  # v2+; -1 before
    rack_id: str | None  # v3+


def version_of(data: bytes) -> int:
    """The version a ConsumerProtocol message starts with (ConsumerProtocol.deserializeVersion)."""
    if len(data) < 2:
        raise MalformedProtocol("no version")
    (version,) = struct.unpack_from(">h", data)
    if version < 0:
        raise MalformedProtocol(f"unsupported version {version}")
    return version


def parse_subscription(data: bytes) -> Subscription:
    version = version_of(data)
    cls = _SUBSCRIPTIONS[min(version, NEWEST)]
    try:
        entity, _ = decode(cls, data, 2)
    except Exception as exc:  # kio raises whatever its reader meets on short or bad bytes
        raise MalformedProtocol(f"subscription v{version}: {exc}") from None
    owned = tuple((tp.topic, tuple(int(p) for p in tp.partitions)) for tp in getattr(entity, "owned_partitions", ()))
    return Subscription(
        version, tuple(entity.topics), entity.user_data, owned,
        int(getattr(entity, "generation_id", -1)), getattr(entity, "rack_id", None),
    )


def parse_assignment(data: bytes) -> tuple[TopicPartitions, bytes | None]:
    """(assigned partitions, user data) of a ConsumerProtocolAssignment; every version has the same fields."""
    version = version_of(data)
    try:
        entity, _ = decode(AssignmentV3, data, 2)
    except Exception as exc:
        raise MalformedProtocol(f"assignment v{version}: {exc}") from None
    return tuple(
        (tp.topic, tuple(int(p) for p in tp.partitions)) for tp in entity.assigned_partitions
    ), entity.user_data


def assignment_bytes(partitions: TopicPartitions, version: int) -> bytes:
    """A ConsumerProtocolAssignment of ``partitions`` in ``version`` (capped at the newest known), no user data."""
    version = min(max(version, 0), NEWEST)
    entity = AssignmentV3(
        assigned_partitions=tuple(
            AssignedTopicV3(topic=name, partitions=tuple(i32(p) for p in sorted(ps)))  # type: ignore[arg-type]
            for name, ps in partitions
            if ps
        ),
        user_data=None,
    )
    return struct.pack(">h", version) + encode(entity)
