"""Kafka's ``__consumer_offsets`` record formats, byte for byte.

Keys and values start with an int16 version. Key versions 0 and 1 are offset commits, 2 is group
metadata (Kafka's GroupMetadataKey); values follow Kafka's JSON schemas (OffsetCommitValue v0-v4,
GroupMetadataValue v0-v4, flexible from v4). kio has no schemas for these, so this is a small codec over
struct; what we write is what Kafka 3.9/4.x writes: OffsetCommitKey v1, OffsetCommitValue v1 when an
explicit expire timestamp exists (OffsetCommit v2-v4 retention) else v3, GroupMetadataValue v3.
"""

from __future__ import annotations

import struct
from typing import Any

from groupd.coordinator.consumer import records as _consumer
from groupd.coordinator.record_codec import Reader, RecordFormatError, Writer, key_version
from groupd.coordinator.share import records as _share
from groupd.coordinator.values import value

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_KEY_HEAD = struct.Struct(">hh")


# Keys and offset values are values (coordinator/values.py): not ``frozen``, as a frozen constructor
# costs about five times as much, paid once per record at every start-up and once per committed partition.


@value
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@value
class GroupMetadataKey:
    group: str


@value
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1


@value
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@value
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...]


# Consumer-group (KIP-848) keys and values (coordinator/consumer/records.py) go through the same four
# functions below; the type aliases name the classic ones, which the classic core handles.
Key = OffsetCommitKey | GroupMetadataKey | _consumer.ConsumerKey
Value = OffsetCommitValue | GroupMetadataValue | _consumer.ConsumerValue | _share.ShareValue

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
GROUP_METADATA_VALUE_VERSION = 3


# ---------------------------------------------------------------- writers


# Offset keys of a group and topic differ only in their last four bytes (the partition), and a client
# commits the same partitions over and over: the rest is encoded once and kept.
_KEY_PREFIXES: dict[tuple[str, str], bytes] = {}
_KEY_PREFIXES_MAX = 65_536


def _offset_key_prefix(group: str, topic: str) -> bytes:
    w = Writer(OFFSET_COMMIT_KEY_VERSION, False)
    w.string(group)
    w.string(topic)
    prefix = bytes(w.buf)
    if len(_KEY_PREFIXES) >= _KEY_PREFIXES_MAX:
        _KEY_PREFIXES.clear()
    _KEY_PREFIXES[group, topic] = prefix
    return prefix


def encode_key(key: Key) -> bytes:
    if not isinstance(key, (OffsetCommitKey, GroupMetadataKey)):
        return _consumer.encode_consumer_key(key)
    if isinstance(key, OffsetCommitKey):
        prefix = _KEY_PREFIXES.get((key.group, key.topic))
        if prefix is None:
            prefix = _offset_key_prefix(key.group, key.topic)
        return prefix + _I.pack(key.partition)
    w = Writer(GROUP_METADATA_KEY_VERSION, False)
    w.string(key.group)
    return bytes(w.buf)


_V3_HEAD = struct.Struct(">hqih")  # version 3: offset, leader epoch, metadata length
_V1_HEAD = struct.Struct(">hqh")  # version 1: offset, metadata length


def encode_value(value: Value | None) -> bytes | None:
    """The version Kafka writes; None (a tombstone) stays None.

    Offset values, one per committed partition, are laid out with one or two struct calls; the
    general writer (``encode_value_version``) gives the same bytes (tests/unit/test_records.py)."""
    if value is None:
        return None
    if not isinstance(value, (OffsetCommitValue, GroupMetadataValue)):
        return (
            _share.encode_share_value(value)
            if isinstance(value, _share.OWN_VALUES)
            else _consumer.encode_consumer_value(value)
        )
    if isinstance(value, OffsetCommitValue):
        meta = value.metadata
        if meta is None:
            return encode_value_version(value, 1 if value.expire_timestamp != -1 else 3)
        if value.expire_timestamp == -1:
            if not meta:
                return _V3_NO_METADATA.pack(3, value.offset, value.leader_epoch, 0, value.commit_timestamp)
            data = meta.encode()
            return (
                _V3_HEAD.pack(3, value.offset, value.leader_epoch, len(data)) + data + _Q.pack(value.commit_timestamp)
            )
        data = meta.encode()
        return (
            _V1_HEAD.pack(1, value.offset, len(data)) + data + _QQ.pack(value.commit_timestamp, value.expire_timestamp)
        )
    return encode_value_version(value, GROUP_METADATA_VALUE_VERSION)


def encode_value_version(value: Value, version: int) -> bytes:
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown value version {version}")
    w = Writer(version, version >= 4)
    if isinstance(value, OffsetCommitValue):
        w.int64(value.offset)
        if version >= 3:
            w.int32(value.leader_epoch)
        w.string(value.metadata)
        w.int64(value.commit_timestamp)
        if version == 1:
            w.int64(value.expire_timestamp)
        w.tags()
        return bytes(w.buf)
    assert isinstance(value, GroupMetadataValue)  # consumer-group values left above
    w.string(value.protocol_type)
    w.int32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    if version >= 2:
        w.int64(value.current_state_timestamp)
    w.array_len(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tags()
    w.tags()
    return bytes(w.buf)


# ---------------------------------------------------------------- readers


def decode_key(data: bytes) -> Key | None:
    """The key, or None for a record type this coordinator does not know (Kafka skips those: type 9
    and anything newer)."""
    version = key_version(data)
    if version in (0, 1):
        fast = _decode_offset_key_fast(data)
        if fast is not None:
            return fast
    r = Reader(data, 2, False)
    if version in (0, 1):
        group, topic = r.string(), r.string()
        return OffsetCommitKey(group or "", topic or "", r.int32())
    if version == 2:
        return GroupMetadataKey(r.string() or "")
    if version in _share.KEY_VERSIONS:
        return _share.decode_share_key(data)  # share-group types (10-15)
    return _consumer.decode_consumer_key(data)  # consumer-group types (3-8, 16), or None


def decode_value(key: Key, data: bytes | None) -> Value | None:
    if not isinstance(key, (OffsetCommitKey, GroupMetadataKey)):
        if _share.is_share_key(key):
            return _share.decode_share_value(key, data)  # type: ignore[arg-type]
        return _consumer.decode_consumer_value(key, data)
    if data is None:
        return None
    version = key_version(data)
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown value version {version}")
    if isinstance(key, OffsetCommitKey) and version in (1, 3):
        fast = _decode_offset_value_fast(data, version)
        if fast is not None:
            return fast
    r = Reader(data, 2, version >= 4)
    if isinstance(key, OffsetCommitKey):
        offset = r.int64()
        leader_epoch = r.int32() if version >= 3 else -1
        metadata = r.string() or ""
        commit_ts = r.int64()
        expire_ts = r.int64() if version == 1 else -1
        r.skip_tags()
        return OffsetCommitValue(offset, metadata, commit_ts, leader_epoch, expire_ts)
    protocol_type = r.string() or ""
    generation = r.int32()
    protocol = r.string()
    leader = r.string()
    state_ts = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.string() or ""
        instance = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.skip_tags()
        if version == 0 or rebalance_timeout == -1:
            # 3.x: v0 has none; 4.x also maps -1 (unknown) to the session timeout when loading
            rebalance_timeout = session_timeout
        members.append(
            MemberMetadata(
                member_id,
                instance,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    r.skip_tags()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


# ---------------------------------------------------------------- fast paths (start-up replay)

_I_AT = _I.unpack_from
_QIH = struct.Struct(">qih")  # v3: offset, leader epoch, metadata length
_QH = struct.Struct(">qh")  # v1: offset, metadata length
_QQ = struct.Struct(">qq")  # v1: commit timestamp, expire timestamp


_V3_NO_METADATA = struct.Struct(">hqihq")  # version 3, offset, leader epoch, metadata length 0, commit ts


_UNSEEN: Any = object()  # a prefix not yet read (None: read, and not an offset commit's)


def decode_offset_commit(
    key: bytes, value: bytes | None, names: dict[bytes, tuple[str, str] | None]
) -> tuple[str, str, int, OffsetCommitValue | None] | None:
    """The start-up load's path for the records that make up most of a store: an offset commit's
    group, topic, partition and value (None: a tombstone). None for any other record, or one that
    looks off in any way: ``decode_key``/``decode_value`` then handle it or say what is wrong with it.

    ``names`` is the caller's cache of key prefixes (version, group, topic) already read: a store holds
    many keys per group and topic, and equal names come back as the same string objects."""
    prefix = key[:-4]
    names_of = names.get(prefix, _UNSEEN)
    if names_of is _UNSEEN:
        names_of = names[prefix] = _group_and_topic(prefix)
    if names_of is None:
        return None
    partition = _I_AT(key, len(prefix))[0]
    if value is None:
        return names_of[0], names_of[1], partition, None
    if len(value) == 24 and value[1] == 3 and not value[0]:  # what commits without metadata write
        _, offset, epoch, mlen, ts = _V3_NO_METADATA.unpack(value)
        if not mlen:
            return names_of[0], names_of[1], partition, OffsetCommitValue(offset, "", ts, epoch, -1)
    if len(value) < 2 or value[0] or value[1] not in (1, 3):
        return None
    parsed = _decode_offset_value_fast(value, value[1])
    return None if parsed is None else (names_of[0], names_of[1], partition, parsed)


def _group_and_topic(prefix: bytes) -> tuple[str, str] | None:
    """An offset key without its partition: key version 0 or 1, then group and topic strings."""
    n = len(prefix)
    if n < 4 or prefix[0] or prefix[1] > 1:
        return None
    glen = prefix[2] << 8 | prefix[3]
    tpos = 4 + glen
    if glen >= 0x8000 or tpos + 2 > n or prefix[tpos] >= 0x80:
        return None
    if tpos + 2 + (prefix[tpos] << 8 | prefix[tpos + 1]) != n:
        return None
    try:
        return prefix[4:tpos].decode(), prefix[tpos + 2 :].decode()
    except UnicodeDecodeError:
        return None


def _decode_offset_key_fast(data: bytes) -> OffsetCommitKey | None:
    """Offset keys as straight slices; None when anything looks off, so the checked path reports it."""
    names = _group_and_topic(data[:-4])
    return None if names is None else OffsetCommitKey(names[0], names[1], _I_AT(data, len(data) - 4)[0])


def _decode_offset_value_fast(data: bytes, version: int) -> OffsetCommitValue | None:
    n = len(data)
    if version == 3:
        if n < 16:
            return None
        offset, epoch, mlen = _QIH.unpack_from(data, 2)
        mpos = 16
        if mlen < 0 or mpos + mlen + 8 != n:
            return None
        try:
            metadata = data[mpos : mpos + mlen].decode() if mlen else ""
        except UnicodeDecodeError:
            return None
        return OffsetCommitValue(offset, metadata, _Q.unpack_from(data, mpos + mlen)[0], epoch, -1)
    if n < 12:
        return None
    offset, mlen = _QH.unpack_from(data, 2)
    mpos = 12
    if mlen < 0 or mpos + mlen + 16 != n:
        return None
    try:
        metadata = data[mpos : mpos + mlen].decode() if mlen else ""
    except UnicodeDecodeError:
        return None
    commit_ts, expire_ts = _QQ.unpack_from(data, mpos + mlen)
    return OffsetCommitValue(offset, metadata, commit_ts, -1, expire_ts)
