"""The share-group (KIP-932) records of ``__consumer_offsets``, byte for byte as Kafka 4.3 writes them.

Key versions: 10 member metadata, 11 group metadata, 12 target assignment metadata, 13 target assignment
member, 14 current member assignment, 15 state partition metadata (the share partitions being
initialized, initialized, being deleted). Keys have the consumer records' shapes (the group, or group and
member: ``GroupKey`` / ``MemberKey`` with these kinds); values are version 0 and flexible. Two values are
the consumer records' own, in the same bytes: the target assignment metadata (``AssignmentTimestamp``,
tag 0, KIP-1263) and the target assignment member. Unlike the consumer group's, the group metadata's
``MetadataHash`` is a plain field, and the current assignment has no pending revocations and no
assignment epochs.
"""

from __future__ import annotations

import uuid

from groupd.coordinator.consumer.records import (
    GroupKey,
    MemberKey,
    SchemaReader,
    SchemaWriter,
    TargetAssignmentMember,
    TargetAssignmentMetadata,
    TopicPartitions,
    encode_consumer_value,
    read_group_key,
    read_topic_partitions,
    write_topic_partitions,
)
from groupd.coordinator.record_codec import RecordFormatError, key_version
from groupd.coordinator.values import value

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15
KEY_VERSIONS = frozenset(range(MEMBER_METADATA, STATE_PARTITION_METADATA + 1))
_MEMBER_KEYED = frozenset((MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT))

ShareKey = GroupKey | MemberKey

__all__ = [
    "ShareMemberMetadata", "ShareGroupMetadata", "ShareCurrentAssignment", "TopicPartitionsInfo", "TopicInfo",
    "StatePartitionMetadata", "TargetAssignmentMetadata", "TargetAssignmentMember", "TopicPartitions",
    "ShareValue", "is_share_key", "encode_share_value", "decode_share_key", "decode_share_value",
]


@value
class ShareMemberMetadata:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@value
class ShareGroupMetadata:
    epoch: int
    metadata_hash: int = 0


@value
class ShareCurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: tuple[TopicPartitions, ...]


@value
class TopicPartitionsInfo:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@value
class TopicInfo:
    topic_id: uuid.UUID
    topic_name: str


@value
class StatePartitionMetadata:
    initializing: tuple[TopicPartitionsInfo, ...] = ()
    initialized: tuple[TopicPartitionsInfo, ...] = ()
    deleting: tuple[TopicInfo, ...] = ()


ShareValue = (
    ShareMemberMetadata
    | ShareGroupMetadata
    | TargetAssignmentMetadata
    | TargetAssignmentMember
    | ShareCurrentAssignment
    | StatePartitionMetadata
)
OWN_VALUES = (ShareMemberMetadata, ShareGroupMetadata, ShareCurrentAssignment, StatePartitionMetadata)


def is_share_key(key: object) -> bool:
    return isinstance(key, (GroupKey, MemberKey)) and key.kind in KEY_VERSIONS


def encode_share_value(value: ShareValue | None) -> bytes | None:
    """Value version 0; None (a tombstone) stays None."""
    if value is None:
        return None
    if not isinstance(value, OWN_VALUES):
        return encode_consumer_value(value)  # target metadata and member: the consumer records' bytes
    w = SchemaWriter(0, True)
    if isinstance(value, ShareMemberMetadata):
        w.string(value.rack_id)
        w.string(value.client_id)
        w.string(value.client_host)
        w.strings(value.subscribed_topic_names)
    elif isinstance(value, ShareGroupMetadata):
        w.int32(value.epoch)
        w.int64(value.metadata_hash)
    elif isinstance(value, ShareCurrentAssignment):
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.int8(value.state)
        write_topic_partitions(w, value.assigned, False)
    else:
        for infos in (value.initializing, value.initialized):
            w.array_len(len(infos))
            for info in infos:
                w.uuid(info.topic_id)
                w.string(info.topic_name)
                w.int32s(info.partitions)
                w.tagged([])
        w.array_len(len(value.deleting))
        for t in value.deleting:
            w.uuid(t.topic_id)
            w.string(t.topic_name)
            w.tagged([])
    w.tagged([])
    return bytes(w.buf)


def decode_share_key(data: bytes) -> ShareKey | None:
    """The key of a share-group record, or None for any other key version."""
    kind = key_version(data)
    if kind not in KEY_VERSIONS:
        return None
    return read_group_key(data, kind, kind in _MEMBER_KEYED)


def _infos(r: SchemaReader) -> tuple[TopicPartitionsInfo, ...]:
    out = []
    for _ in range(r.array_len()):
        info = TopicPartitionsInfo(r.uuid(), r.text(), r.int32s())
        r.tagged()
        out.append(info)
    return tuple(out)


def decode_share_value(key: ShareKey, data: bytes | None) -> ShareValue | None:
    if data is None:
        return None
    version = key_version(data)
    if version != 0:
        raise RecordFormatError(f"unknown value version {version} for record type {key.kind}")
    r = SchemaReader(data, 2, True)
    kind = key.kind
    value: ShareValue
    if kind == MEMBER_METADATA:
        value = ShareMemberMetadata(r.string(), r.text(), r.text(), r.strings())
    elif kind == GROUP_METADATA:
        value = ShareGroupMetadata(r.int32(), r.int64())
    elif kind == TARGET_ASSIGNMENT_METADATA:
        epoch = r.int32()
        tags = r.tagged()
        value = TargetAssignmentMetadata(epoch, tags[0].int64() if 0 in tags else 0)
        if r.pos != len(data):
            raise RecordFormatError(f"{len(data) - r.pos} trailing bytes after a type {kind} value")
        return value
    elif kind == TARGET_ASSIGNMENT_MEMBER:
        value = TargetAssignmentMember(read_topic_partitions(r))
    elif kind == CURRENT_MEMBER_ASSIGNMENT:
        value = ShareCurrentAssignment(r.int32(), r.int32(), r.int8(), read_topic_partitions(r))
    else:
        initializing, initialized = _infos(r), _infos(r)
        deleting = []
        for _ in range(r.array_len()):
            deleting.append(TopicInfo(r.uuid(), r.text()))
            r.tagged()
        value = StatePartitionMetadata(initializing, initialized, tuple(deleting))
    r.tagged()
    if r.pos != len(data):
        raise RecordFormatError(f"{len(data) - r.pos} trailing bytes after a type {kind} value")
    return value
