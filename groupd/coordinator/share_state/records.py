"""The records of ``__share_group_state``, byte for byte as Kafka 4.3's share coordinator writes them.

Two record types (share-coordinator/src/main/resources/common/message/), numbered by the key's version
prefix as every coordinator record is: 0 ShareSnapshot (the whole state of one share-partition) and 1
ShareUpdate (a delta over the last snapshot). Both keys are non-flexible {GroupId string, TopicId uuid,
Partition int32}; both values are version 0 and flexible. ``DeliveryCompleteCount`` (KIP-1226, Kafka
4.2) is tag 0 of both values, default -1, written only when it differs from -1 as Kafka's generated
code does; tagged fields go after every plain field, whatever their place in the schema. A snapshot
key with a null value is the tombstone of a deleted share-partition.

The writer and reader are the consumer records' (coordinator/consumer/records.py), which add int8,
uuid and tagged fields to coordinator/record_codec.py's primitives.
"""

from __future__ import annotations

import struct
import uuid

from groupd.coordinator.consumer.records import SchemaReader, SchemaWriter
from groupd.coordinator.record_codec import RecordFormatError, key_version
from groupd.coordinator.share_state.persister import SharePartitionKey, StateBatch
from groupd.coordinator.values import value

_I = struct.Struct(">i")
_BATCH = struct.Struct(">qqbh")  # FirstOffset, LastOffset, DeliveryState, DeliveryCount

SHARE_SNAPSHOT = 0
SHARE_UPDATE = 1
VALUE_VERSION = 0
NO_DELIVERY_COMPLETE_COUNT = -1  # the tagged field's default


@value
class ShareStateKey:
    """ShareSnapshotKey (``kind`` 0) or ShareUpdateKey (``kind`` 1)."""

    kind: int
    group_id: str
    topic_id: uuid.UUID
    partition: int

    @property
    def share_partition(self) -> SharePartitionKey:
        return SharePartitionKey(self.group_id, self.topic_id, self.partition)


@value
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int  # tag 0, -1 when unknown
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[StateBatch, ...]


@value
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int  # -1: unchanged
    delivery_complete_count: int  # tag 0
    state_batches: tuple[StateBatch, ...]


ShareStateValue = ShareSnapshotValue | ShareUpdateValue


def snapshot_key(key: SharePartitionKey) -> ShareStateKey:
    return ShareStateKey(SHARE_SNAPSHOT, key.group_id, key.topic_id, key.partition)


def update_key(key: SharePartitionKey) -> ShareStateKey:
    return ShareStateKey(SHARE_UPDATE, key.group_id, key.topic_id, key.partition)


# ---------------------------------------------------------------- writing


def encode_key(key: ShareStateKey) -> bytes:
    w = SchemaWriter(key.kind, False)
    w.string(key.group_id)
    w.uuid(key.topic_id)
    w.int32(key.partition)
    return bytes(w.buf)


def encode_value(v: ShareStateValue | None) -> bytes | None:
    if v is None:
        return None
    w = SchemaWriter(VALUE_VERSION, True)
    w.int32(v.snapshot_epoch)
    if isinstance(v, ShareSnapshotValue):
        w.int32(v.state_epoch)
    w.int32(v.leader_epoch)
    w.int64(v.start_offset)
    if isinstance(v, ShareSnapshotValue):
        w.int64(v.create_timestamp)
        w.int64(v.write_timestamp)
    w.array_len(len(v.state_batches))
    for b in v.state_batches:
        w.int64(b.first_offset)
        w.int64(b.last_offset)
        w.int8(b.delivery_state)
        w.int16(b.delivery_count)
        w.tagged([])
    count = v.delivery_complete_count
    w.tagged([(0, _I.pack(count))] if count != NO_DELIVERY_COMPLETE_COUNT else [])
    return bytes(w.buf)


# ---------------------------------------------------------------- reading


def decode_key(data: bytes) -> ShareStateKey | None:
    """The key of a share-state record, or None for a record type this coordinator does not know
    (Kafka's replay ignores those too)."""
    kind = key_version(data)
    if kind not in (SHARE_SNAPSHOT, SHARE_UPDATE):
        return None
    r = SchemaReader(data, 2, False)
    key = ShareStateKey(kind, r.text(), r.uuid(), r.int32())
    if r.pos != len(data):
        raise RecordFormatError(f"{len(data) - r.pos} trailing bytes after a type {kind} key")
    return key


def decode_value(kind: int, data: bytes | None) -> ShareStateValue | None:
    if data is None:
        return None
    version = key_version(data)
    if version != VALUE_VERSION:
        raise RecordFormatError(f"share-state value version {version} is unknown (0 only)")
    r = SchemaReader(data, 2, True)
    snapshot_epoch = r.int32()
    state_epoch = r.int32() if kind == SHARE_SNAPSHOT else 0
    leader_epoch = r.int32()
    start_offset = r.int64()
    created = written = 0
    if kind == SHARE_SNAPSHOT:
        created, written = r.int64(), r.int64()
    batches = []
    for _ in range(r.array_len()):  # the start-up replay's loop: one unpack a batch
        first, last, state, count = _BATCH.unpack_from(r.data, r._take(_BATCH.size))
        r.tagged()
        batches.append(StateBatch(first, last, state, count))
    tags = r.tagged()
    count = tags[0].int32() if 0 in tags else NO_DELIVERY_COMPLETE_COUNT
    if r.pos != len(data):
        raise RecordFormatError(f"{len(data) - r.pos} trailing bytes after a type {kind} value")
    if kind == SHARE_SNAPSHOT:
        return ShareSnapshotValue(
            snapshot_epoch, state_epoch, leader_epoch, start_offset, count, created, written, tuple(batches)
        )
    return ShareUpdateValue(snapshot_epoch, leader_epoch, start_offset, count, tuple(batches))
