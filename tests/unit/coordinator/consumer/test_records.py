"""Consumer-group records of __consumer_offsets against bytes laid out by hand from Kafka's JSON schemas
(group-coordinator/src/main/resources/common/message/ConsumerGroup*Key/Value.json, Kafka 4.3)."""

import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from groupd.coordinator.consumer.records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    CurrentMemberAssignment,
    GroupKey,
    GroupMetadata,
    MemberKey,
    MemberMetadata,
    PartitionMetadata,
    PartitionRacks,
    RegexKey,
    RegularExpression,
    TargetAssignmentMember,
    TargetAssignmentMetadata,
    TopicMetadata,
    TopicPartitions,
    decode_consumer_key,
    decode_consumer_value,
    encode_consumer_key,
    encode_consumer_value,
)
from groupd.coordinator.records import RecordFormatError, decode_key, decode_value, encode_key, encode_value

T1 = uuid.UUID("00000000-0000-0000-0000-000000000001")


def s16(text: str) -> bytes:  # non-flexible string (keys)
    return struct.pack(">h", len(text.encode())) + text.encode()


def cs(text: str | None) -> bytes:  # compact string: uvarint(len + 1), 0 = null
    if text is None:
        return b"\x00"
    return bytes([len(text.encode()) + 1]) + text.encode()


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


@pytest.mark.parametrize(
    "key, raw",
    [
        # the key version is the record type: 3 group metadata, 4 partition metadata, 6 target metadata
        (GroupKey(3, "g"), b"\x00\x03" + s16("g")),
        (GroupKey(4, "g"), b"\x00\x04" + s16("g")),
        (GroupKey(6, "g"), b"\x00\x06" + s16("g")),
        # 5 member metadata, 7 target member, 8 current assignment: group id then member id
        (MemberKey(5, "g", "m1"), b"\x00\x05" + s16("g") + s16("m1")),
        (MemberKey(7, "g", "m1"), b"\x00\x07" + s16("g") + s16("m1")),
        (MemberKey(8, "g", "m1"), b"\x00\x08" + s16("g") + s16("m1")),
        # 16 regular expression: group id then the regex
        (RegexKey("g", "foo.*"), b"\x00\x10" + s16("g") + s16("foo.*")),
    ],
)
def test_keys(key, raw):
    assert encode_consumer_key(key) == raw
    assert decode_consumer_key(raw) == key


def test_offset_and_classic_keys_are_not_consumer_keys():
    assert decode_consumer_key(b"\x00\x02" + s16("g")) is None
    assert decode_consumer_key(b"\x00\x01" + s16("g") + s16("t") + i32(0)) is None


def test_the_offsets_codec_dispatches_consumer_records():
    # groupd/coordinator/records.py's four functions, which the store's load and the pipeline call, hand
    # consumer-group records to this codec
    key = MemberKey(8, "g", "m")
    value = CurrentMemberAssignment(1, 0, 0, (TopicPartitions(T1, (0,), (1,)),), ())
    assert encode_key(key) == encode_consumer_key(key)
    assert encode_value(value) == encode_consumer_value(value)
    assert decode_key(encode_key(key)) == key
    assert decode_value(key, encode_value(value)) == value
    assert decode_value(key, None) is None


def test_group_metadata_value_tags_only_when_not_default():
    key = GroupKey(3, "g")
    plain = b"\x00\x00" + i32(2) + b"\x00"  # version 0, Epoch, no tagged fields
    assert encode_consumer_value(GroupMetadata(2)) == plain
    assert decode_consumer_value(key, plain) == GroupMetadata(2)
    # MetadataHash is tag 0 (int64, default 0); CreationTimeMs tag 1 (int64, default -1)
    hashed = b"\x00\x00" + i32(2) + b"\x01" + b"\x00\x08" + i64(12345)
    assert encode_consumer_value(GroupMetadata(2, 12345)) == hashed
    assert decode_consumer_value(key, hashed) == GroupMetadata(2, 12345)
    both = b"\x00\x00" + i32(2) + b"\x02" + b"\x00\x08" + i64(7) + b"\x01\x08" + i64(99)
    assert encode_consumer_value(GroupMetadata(2, 7, 99)) == both
    assert decode_consumer_value(key, both) == GroupMetadata(2, 7, 99)


def test_target_assignment_metadata_timestamp_tag():
    key = GroupKey(6, "g")
    assert encode_consumer_value(TargetAssignmentMetadata(1)) == b"\x00\x00" + i32(1) + b"\x00"
    raw = b"\x00\x00" + i32(3) + b"\x01\x00\x08" + i64(1000)  # AssignmentTimestamp, tag 0 (4.3)
    assert encode_consumer_value(TargetAssignmentMetadata(3, 1000)) == raw
    assert decode_consumer_value(key, raw) == TargetAssignmentMetadata(3, 1000)


def test_member_metadata_value():
    value = MemberMetadata(None, "r1", "cid", "/1.2.3.4", ("a", "b"), None, 5000, "uniform")
    raw = (
        b"\x00\x00" + cs(None) + cs("r1") + cs("cid") + cs("/1.2.3.4")
        + b"\x03" + cs("a") + cs("b")  # compact array of 2
        + cs(None) + i32(5000) + cs("uniform") + b"\x00"
    )
    assert encode_consumer_value(value) == raw
    assert decode_consumer_value(MemberKey(5, "g", "m"), raw) == value


def test_member_metadata_classic_tag_is_a_nullable_struct():
    classic = ClassicMemberMetadata(45000, (ClassicProtocol("range", b"\x01\x02"),))
    value = MemberMetadata("i1", None, "c", "h", (), None, 3000, None, classic)
    # tagged nullable struct: uvarint size, then uvarint 1 (present), SessionTimeoutMs, protocols, tags
    struct_body = b"\x01" + i32(45000) + b"\x02" + cs("range") + b"\x03\x01\x02" + b"\x00" + b"\x00"
    raw = (
        b"\x00\x00" + cs("i1") + cs(None) + cs("c") + cs("h") + b"\x01" + cs(None) + i32(3000) + cs(None)
        + b"\x01\x00" + bytes([len(struct_body)]) + struct_body
    )
    assert encode_consumer_value(value) == raw
    assert decode_consumer_value(MemberKey(5, "g", "m"), raw) == value


def test_current_assignment_with_assignment_epochs():
    value = CurrentMemberAssignment(
        3, 2, 1,
        (TopicPartitions(T1, (0, 1), (2, 3)),),
        (TopicPartitions(T1, (4,), None),),
    )
    raw = (
        b"\x00\x00" + i32(3) + i32(2) + b"\x01"
        + b"\x02" + T1.bytes + b"\x03" + i32(0) + i32(1) + b"\x01\x00\x09\x03" + i32(2) + i32(3)
        + b"\x02" + T1.bytes + b"\x02" + i32(4) + b"\x00"
        + b"\x00"
    )
    assert encode_consumer_value(value) == raw
    assert decode_consumer_value(MemberKey(8, "g", "m"), raw) == value


def test_target_member_and_regex_values():
    target = TargetAssignmentMember((TopicPartitions(T1, (5,)),))
    raw = b"\x00\x00" + b"\x02" + T1.bytes + b"\x02" + i32(5) + b"\x00" + b"\x00"
    assert encode_consumer_value(target) == raw
    assert decode_consumer_value(MemberKey(7, "g", "m"), raw) == target
    regex = RegularExpression(("foo1", "foo2"), 7, 1000)
    raw = b"\x00\x00" + b"\x03" + cs("foo1") + cs("foo2") + i64(7) + i64(1000) + b"\x00"
    assert encode_consumer_value(regex) == raw
    assert decode_consumer_value(RegexKey("g", "foo.*"), raw) == regex


def test_tombstones_are_null_values():
    assert encode_consumer_value(None) is None
    assert decode_consumer_value(MemberKey(8, "g", "m"), None) is None


def test_unknown_value_version_and_truncation_are_format_errors():
    with pytest.raises(RecordFormatError):
        decode_consumer_value(GroupKey(3, "g"), b"\x00\x01" + i32(1) + b"\x00")
    with pytest.raises(RecordFormatError):
        decode_consumer_value(GroupKey(3, "g"), b"\x00\x00" + i32(1))
    with pytest.raises(RecordFormatError):
        decode_consumer_value(GroupKey(3, "g"), b"\x00\x00" + i32(1) + b"\x00\xff")


def test_unknown_tags_are_skipped():
    raw = b"\x00\x00" + i32(4) + b"\x01\x05\x02\xab\xcd"  # an unknown tag 5 with 2 bytes
    assert decode_consumer_value(GroupKey(3, "g"), raw) == GroupMetadata(4)


# ---------------------------------------------------------------- round trips

names = st.text(max_size=8)
ids = st.uuids()
ints = st.integers(-(2**31), 2**31 - 1)
longs = st.integers(-(2**63), 2**63 - 1)
parts = st.lists(st.integers(0, 10_000), max_size=5).map(tuple)


@st.composite
def topic_partitions(draw, with_epochs):
    p = draw(parts)
    epochs = draw(st.none() | st.lists(ints, min_size=len(p), max_size=len(p)).map(tuple)) if with_epochs else None
    return TopicPartitions(draw(ids), p, epochs)


values = st.one_of(
    st.builds(GroupMetadata, ints, longs, longs),
    st.builds(
        PartitionMetadata,
        st.lists(
            st.builds(
                TopicMetadata,
                ids,
                names,
                ints,
                st.lists(st.builds(PartitionRacks, ints, st.lists(names).map(tuple))).map(tuple),
            ),
            max_size=3,
        ).map(tuple),
    ),
    st.builds(
        MemberMetadata,
        st.none() | names,
        st.none() | names,
        names,
        names,
        st.lists(names, max_size=4).map(tuple),
        st.none() | names,
        ints,
        st.none() | names,
        st.none()
        | st.builds(
            ClassicMemberMetadata, ints, st.lists(st.builds(ClassicProtocol, names, st.binary(max_size=20))).map(tuple)
        ),
    ),
    st.builds(TargetAssignmentMetadata, ints, longs),
    st.builds(TargetAssignmentMember, st.lists(topic_partitions(False), max_size=3).map(tuple)),
    st.builds(
        CurrentMemberAssignment,
        ints,
        ints,
        st.integers(-128, 127),
        st.lists(topic_partitions(True), max_size=3).map(tuple),
        st.lists(topic_partitions(True), max_size=3).map(tuple),
    ),
    st.builds(RegularExpression, st.lists(names, max_size=4).map(tuple), longs, longs),
)

KEY_FOR = {
    GroupMetadata: GroupKey(3, "g"),
    PartitionMetadata: GroupKey(4, "g"),
    MemberMetadata: MemberKey(5, "g", "m"),
    TargetAssignmentMetadata: GroupKey(6, "g"),
    TargetAssignmentMember: MemberKey(7, "g", "m"),
    CurrentMemberAssignment: MemberKey(8, "g", "m"),
    RegularExpression: RegexKey("g", "r"),
}


@given(values)
def test_values_round_trip(value):
    key = KEY_FOR[type(value)]
    assert decode_consumer_value(key, encode_consumer_value(value)) == value


@given(names, names, st.sampled_from([3, 4, 5, 6, 7, 8, 16]))
def test_keys_round_trip(group, other, kind):
    key = (
        GroupKey(kind, group)
        if kind in (3, 4, 6)
        else RegexKey(group, other)
        if kind == 16
        else MemberKey(kind, group, other)
    )
    assert decode_consumer_key(encode_consumer_key(key)) == key
