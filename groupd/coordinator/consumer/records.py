"""The consumer-group (KIP-848) records of ``__consumer_offsets``, byte for byte as Kafka 4.3 writes them.

Kafka numbers a record type by its key version: 3 group metadata, 4 partition metadata (legacy, only
ever tombstoned since 4.1), 5 member metadata, 6 target assignment metadata, 7 target assignment member,
8 current member assignment, 16 regular expression. Keys are non-flexible (int16 version, then int16
length strings); every value is version 0 and flexible (compact strings and arrays, tagged fields).
Tagged fields are written only when they differ from their default, as Kafka's generated code does:
``MetadataHash`` (tag 0, default 0) and ``CreationTimeMs`` (tag 1, default -1) on the group metadata,
``AssignmentTimestamp`` (tag 0, default 0) on the target metadata, ``ClassicMemberMetadata`` (tag 0,
nullable struct) on the member metadata and ``AssignmentEpochs`` (tag 0, nullable int32 array, KIP-1251)
on each topic of a current assignment. A tombstone is a key with a null value.

The low-level writer and reader are coordinator/record_codec.py's, with the two types these schemas add
(int8, uuid).
"""

from __future__ import annotations

import struct
import uuid

from groupd.coordinator.record_codec import Reader, RecordFormatError, Writer, key_version
from groupd.coordinator.values import value

_B = struct.Struct(">b")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16
KEY_VERSIONS = frozenset(
    (GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA, TARGET_ASSIGNMENT_METADATA,
     TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT, REGULAR_EXPRESSION)
)


# ---------------------------------------------------------------- keys


@value
class GroupKey:
    """Types 3, 4 and 6 (share groups: 11, 12, 15): keyed by the group alone; ``kind`` is the key version."""

    kind: int
    group: str


@value
class MemberKey:
    """Types 5, 7 and 8 (share groups: 10, 13, 14): keyed by group and member."""

    kind: int
    group: str
    member_id: str


@value
class RegexKey:
    """Type 16."""

    group: str
    regex: str


ConsumerKey = GroupKey | MemberKey | RegexKey


# ---------------------------------------------------------------- values


@value
class GroupMetadata:
    epoch: int
    metadata_hash: int = 0
    creation_time_ms: int = -1


@value
class PartitionRacks:
    partition: int
    racks: tuple[str, ...]


@value
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    num_partitions: int
    partitions: tuple[PartitionRacks, ...] = ()


@value
class PartitionMetadata:
    """Written by Kafka 3.7-4.0; read and tombstoned, never written by 4.1+."""

    topics: tuple[TopicMetadata, ...]


@value
class ClassicProtocol:
    name: str
    metadata: bytes


@value
class ClassicMemberMetadata:
    session_timeout_ms: int
    protocols: tuple[ClassicProtocol, ...]


@value
class MemberMetadata:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None


@value
class TargetAssignmentMetadata:
    assignment_epoch: int
    assignment_timestamp: int = 0


@value
class TopicPartitions:
    topic_id: uuid.UUID
    partitions: tuple[int, ...]
    assignment_epochs: tuple[int, ...] | None = None  # only on current assignments (KIP-1251)


@value
class TargetAssignmentMember:
    topics: tuple[TopicPartitions, ...]


@value
class CurrentMemberAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: tuple[TopicPartitions, ...]
    pending_revocation: tuple[TopicPartitions, ...]


@value
class RegularExpression:
    topics: tuple[str, ...]
    version: int
    timestamp: int


ConsumerValue = (
    GroupMetadata
    | PartitionMetadata
    | MemberMetadata
    | TargetAssignmentMetadata
    | TargetAssignmentMember
    | CurrentMemberAssignment
    | RegularExpression
)

_VALUE_KIND = {
    GroupMetadata: GROUP_METADATA,
    PartitionMetadata: PARTITION_METADATA,
    MemberMetadata: MEMBER_METADATA,
    TargetAssignmentMetadata: TARGET_ASSIGNMENT_METADATA,
    TargetAssignmentMember: TARGET_ASSIGNMENT_MEMBER,
    CurrentMemberAssignment: CURRENT_MEMBER_ASSIGNMENT,
    RegularExpression: REGULAR_EXPRESSION,
}


def key_kind(key: ConsumerKey) -> int:
    return REGULAR_EXPRESSION if isinstance(key, RegexKey) else key.kind


def value_kind(value: ConsumerValue) -> int:
    return _VALUE_KIND[type(value)]


# ---------------------------------------------------------------- writing


class SchemaWriter(Writer):
    __slots__ = ()

    def int8(self, v: int) -> None:
        self.buf += _B.pack(v)

    def uuid(self, v: uuid.UUID) -> None:
        self.buf += v.bytes

    def strings(self, items: tuple[str, ...]) -> None:
        self.array_len(len(items))
        for s in items:
            self.string(s)

    def int32s(self, items: tuple[int, ...]) -> None:
        self.array_len(len(items))
        for v in items:
            self.int32(v)

    def tagged(self, fields: list[tuple[int, bytes]]) -> None:
        """The tagged-field section: count, then (tag, size, payload) in tag order."""
        self.uvarint(len(fields))
        for tag, payload in fields:
            self.uvarint(tag)
            self.uvarint(len(payload))
            self.buf += payload


def fragment() -> SchemaWriter:
    """A writer for a tagged field's payload (the version prefix it starts with is cut off)."""
    return SchemaWriter(0, True)


def payload_of(w: SchemaWriter) -> bytes:
    return bytes(w.buf[2:])


def encode_consumer_key(key: ConsumerKey) -> bytes:
    w = SchemaWriter(key_kind(key), False)
    w.string(key.group)
    if isinstance(key, MemberKey):
        w.string(key.member_id)
    elif isinstance(key, RegexKey):
        w.string(key.regex)
    return bytes(w.buf)


def write_topic_partitions(w: SchemaWriter, topics: tuple[TopicPartitions, ...], with_epochs: bool) -> None:
    w.array_len(len(topics))
    for tp in topics:
        w.uuid(tp.topic_id)
        w.int32s(tp.partitions)
        if with_epochs and tp.assignment_epochs is not None:
            f = fragment()
            f.int32s(tp.assignment_epochs)
            w.tagged([(0, payload_of(f))])
        else:
            w.tagged([])


def encode_consumer_value(value: ConsumerValue | None) -> bytes | None:
    """Value version 0 of the record; None (a tombstone) stays None."""
    if value is None:
        return None
    w = SchemaWriter(0, True)
    if isinstance(value, GroupMetadata):
        w.int32(value.epoch)
        tags = []
        if value.metadata_hash != 0:
            tags.append((0, _Q.pack(value.metadata_hash)))
        if value.creation_time_ms != -1:
            tags.append((1, _Q.pack(value.creation_time_ms)))
        w.tagged(tags)
    elif isinstance(value, PartitionMetadata):
        w.array_len(len(value.topics))
        for t in value.topics:
            w.uuid(t.topic_id)
            w.string(t.name)
            w.int32(t.num_partitions)
            w.array_len(len(t.partitions))
            for p in t.partitions:
                w.int32(p.partition)
                w.strings(p.racks)
                w.tagged([])
            w.tagged([])
        w.tagged([])
    elif isinstance(value, MemberMetadata):
        w.string(value.instance_id)
        w.string(value.rack_id)
        w.string(value.client_id)
        w.string(value.client_host)
        w.strings(value.subscribed_topic_names)
        w.string(value.subscribed_topic_regex)
        w.int32(value.rebalance_timeout_ms)
        w.string(value.server_assignor)
        tags = []
        if value.classic is not None:
            f = fragment()
            f.uvarint(1)  # a tagged nullable struct is prefixed by a varint 1 (null: the tag is absent)
            f.int32(value.classic.session_timeout_ms)
            f.array_len(len(value.classic.protocols))
            for proto in value.classic.protocols:
                f.string(proto.name)
                f.bytes_(proto.metadata)
                f.tagged([])
            f.tagged([])
            tags.append((0, payload_of(f)))
        w.tagged(tags)
    elif isinstance(value, TargetAssignmentMetadata):
        w.int32(value.assignment_epoch)
        w.tagged([(0, _Q.pack(value.assignment_timestamp))] if value.assignment_timestamp != 0 else [])
    elif isinstance(value, TargetAssignmentMember):
        write_topic_partitions(w, value.topics, False)
        w.tagged([])
    elif isinstance(value, CurrentMemberAssignment):
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.int8(value.state)
        write_topic_partitions(w, value.assigned, True)
        write_topic_partitions(w, value.pending_revocation, True)
        w.tagged([])
    else:
        w.strings(value.topics)
        w.int64(value.version)
        w.int64(value.timestamp)
        w.tagged([])
    return bytes(w.buf)


# ---------------------------------------------------------------- reading


class SchemaReader(Reader):
    __slots__ = ()

    def int8(self) -> int:
        return _B.unpack_from(self.data, self._take(1))[0]

    def uuid(self) -> uuid.UUID:
        start = self._take(16)
        return uuid.UUID(bytes=bytes(self.data[start : start + 16]))

    def text(self) -> str:
        s = self.string()
        if s is None:
            raise RecordFormatError("null where the schema has a non-nullable string")
        return s

    def strings(self) -> tuple[str, ...]:
        return tuple(self.text() for _ in range(self.array_len()))

    def int32s(self) -> tuple[int, ...]:
        return tuple(self.int32() for _ in range(self.array_len()))

    def tagged(self) -> dict[int, SchemaReader]:
        """Each tagged field as a reader over its payload; unknown tags are kept and ignored by callers."""
        out: dict[int, SchemaReader] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            start = self._take(size)
            out[tag] = SchemaReader(self.data[start : start + size], 0, True)
        return out


def decode_consumer_key(data: bytes) -> ConsumerKey | None:
    """The key of a consumer-group record, or None for any other key version."""
    kind = key_version(data)
    if kind not in KEY_VERSIONS:
        return None
    if kind == REGULAR_EXPRESSION:
        r = SchemaReader(data, 2, False)
        key: ConsumerKey = RegexKey(r.text(), r.text())
        if r.pos != len(data):
            raise RecordFormatError(f"{len(data) - r.pos} trailing bytes after a type {kind} key")
        return key
    return read_group_key(data, kind, kind in (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT))


def read_group_key(data: bytes, kind: int, by_member: bool) -> GroupKey | MemberKey:
    """A key of the group alone or of group and member (consumer and share group records alike)."""
    r = SchemaReader(data, 2, False)
    group = r.text()
    key: GroupKey | MemberKey = MemberKey(kind, group, r.text()) if by_member else GroupKey(kind, group)
    if r.pos != len(data):
        raise RecordFormatError(f"{len(data) - r.pos} trailing bytes after a type {kind} key")
    return key


def read_topic_partitions(r: SchemaReader) -> tuple[TopicPartitions, ...]:
    out = []
    for _ in range(r.array_len()):
        topic_id = r.uuid()
        partitions = r.int32s()
        tags = r.tagged()
        epochs = None
        if 0 in tags:
            t = tags[0]
            n = t.uvarint() - 1
            epochs = None if n < 0 else tuple(t.int32() for _ in range(n))
        out.append(TopicPartitions(topic_id, partitions, epochs))
    return tuple(out)


def decode_consumer_value(key: ConsumerKey, data: bytes | None) -> ConsumerValue | None:
    if data is None:
        return None
    version = key_version(data)
    if version != 0:
        raise RecordFormatError(f"unknown value version {version} for record type {key_kind(key)}")
    r = SchemaReader(data, 2, True)
    kind = key_kind(key)
    value: ConsumerValue
    if kind == GROUP_METADATA:
        epoch = r.int32()
        tags = r.tagged()
        value = GroupMetadata(
            epoch,
            tags[0].int64() if 0 in tags else 0,
            tags[1].int64() if 1 in tags else -1,
        )
    elif kind == PARTITION_METADATA:
        topics = []
        for _ in range(r.array_len()):
            topic_id, name, count = r.uuid(), r.text(), r.int32()
            parts = []
            for _ in range(r.array_len()):
                p = PartitionRacks(r.int32(), r.strings())
                r.tagged()
                parts.append(p)
            r.tagged()
            topics.append(TopicMetadata(topic_id, name, count, tuple(parts)))
        r.tagged()
        value = PartitionMetadata(tuple(topics))
    elif kind == MEMBER_METADATA:
        instance, rack, client_id, host = r.string(), r.string(), r.text(), r.text()
        names, regex, timeout, assignor = r.strings(), r.string(), r.int32(), r.string()
        tags = r.tagged()
        classic = None
        if 0 in tags:
            t = tags[0]
            if t.uvarint() > 0:
                session = t.int32()
                protocols = []
                for _ in range(t.array_len()):
                    protocols.append(ClassicProtocol(t.text(), t.bytes_()))
                    t.tagged()
                t.tagged()
                classic = ClassicMemberMetadata(session, tuple(protocols))
        value = MemberMetadata(instance, rack, client_id, host, names, regex, timeout, assignor, classic)
    elif kind == TARGET_ASSIGNMENT_METADATA:
        epoch = r.int32()
        tags = r.tagged()
        value = TargetAssignmentMetadata(epoch, tags[0].int64() if 0 in tags else 0)
    elif kind == TARGET_ASSIGNMENT_MEMBER:
        value = TargetAssignmentMember(read_topic_partitions(r))
        r.tagged()
    elif kind == CURRENT_MEMBER_ASSIGNMENT:
        epoch, previous, state = r.int32(), r.int32(), r.int8()
        assigned = read_topic_partitions(r)
        pending = read_topic_partitions(r)
        r.tagged()
        value = CurrentMemberAssignment(epoch, previous, state, assigned, pending)
    else:
        matched = r.strings()
        value = RegularExpression(matched, r.int64(), r.int64())
        r.tagged()
    if r.pos != len(data):
        raise RecordFormatError(f"{len(data) - r.pos} trailing bytes after a type {kind} value")
    return value
