"""Consumer-protocol (KIP-848) records of ``__consumer_offsets``, read just enough for the pipeline.

Kafka 4's coordinator writes these beside the classic ones: the key's int16 version is the record
type (3 ConsumerGroupMetadata, 4 ConsumerGroupPartitionMetadata, 5 ConsumerGroupMemberMetadata, 6 and 7
target assignment, 8 current member assignment, 16 regular expression; shares and streams use others).
Keys are not flexible (int16-length strings); values are flexible (an int16 version, then compact fields).

The pipeline makes one "generation" row of a consumer group per group-epoch bump (type 3), with the
member set the member records (type 5) built before it in the same partition, so the history, storms
and report read epochs exactly as classic generations. Everything else is skipped: unknown types are
never an error (Kafka's loader skips them too).
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.records import RecordFormatError
from coordinator.records import _Reader as Reader  # the store's primitive reader: no second decoder

GROUP_METADATA = 3
MEMBER_METADATA = 5


@dataclass(slots=True)
class GroupEpochKey:
    group: str


@dataclass(slots=True)
class MemberKey:
    group: str
    member_id: str


@dataclass(slots=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int


def decode_key(data: bytes) -> GroupEpochKey | MemberKey | None:
    """The key of a record type the pipeline reads, or None (another KIP-848 type, or unknown)."""
    r = Reader(data, 0, False)
    record_type = r.int16()
    if record_type == GROUP_METADATA:
        return GroupEpochKey(r.string() or "")
    if record_type == MEMBER_METADATA:
        return MemberKey(r.string() or "", r.string() or "")
    return None


def group_epoch(data: bytes) -> int:
    """ConsumerGroupMetadataValue: version, then Epoch (int32); the tagged MetadataHash is not needed."""
    r = Reader(data, 0, True)
    if r.int16() != 0:
        raise RecordFormatError("unknown ConsumerGroupMetadataValue version")
    return r.int32()


def member(key: MemberKey, data: bytes) -> Member:
    """ConsumerGroupMemberMetadataValue v0: InstanceId?, RackId?, ClientId, ClientHost, SubscribedTopicNames,
    SubscribedTopicRegex?, RebalanceTimeoutMs, ... (the rest is not needed)."""
    r = Reader(data, 0, True)
    if r.int16() != 0:
        raise RecordFormatError("unknown ConsumerGroupMemberMetadataValue version")
    instance = r.string()
    r.string()  # rack
    client_id, client_host = r.string() or "", r.string() or ""
    for _ in range(r.array_len()):
        r.string()
    r.string()  # regex
    return Member(key.member_id, instance, client_id, client_host, r.int32())
