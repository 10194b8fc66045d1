"""__consumer_offsets formats against bytes written by hand from Kafka's JSON schemas."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from groupd.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    encode_value_version,
)


def s16(text: str) -> bytes:  # non-flexible string: int16 length + UTF-8
    return struct.pack(">h", len(text.encode())) + text.encode()


def test_offset_commit_key_v1():
    key = OffsetCommitKey("g1", "t", 3)
    expected = b"\x00\x01" + s16("g1") + s16("t") + b"\x00\x00\x00\x03"
    assert encode_key(key) == expected
    assert decode_key(expected) == key
    # v0 has the same layout
    assert decode_key(b"\x00\x00" + expected[2:]) == key


def test_group_metadata_key_v2():
    assert encode_key(GroupMetadataKey("grp")) == b"\x00\x02" + s16("grp")
    assert decode_key(b"\x00\x02" + s16("grp")) == GroupMetadataKey("grp")


def test_unknown_key_version_is_skipped():
    # 9 is unused by Kafka, 10-15 are share groups (groupd/coordinator/share), 3-8 and 16 consumer groups
    # (groupd/coordinator/consumer)
    for version in (9, 17, 100):
        assert decode_key(struct.pack(">h", version) + s16("x")) is None


def test_offset_commit_value_v3_is_written_without_expire():
    value = OffsetCommitValue(offset=42, metadata="m", commit_timestamp=1000, leader_epoch=5)
    expected = b"\x00\x03" + struct.pack(">q", 42) + struct.pack(">i", 5) + s16("m") + struct.pack(">q", 1000)
    assert encode_value(value) == expected
    assert decode_value(OffsetCommitKey("g", "t", 0), expected) == value


def test_offset_commit_value_v1_carries_expire_timestamp():
    value = OffsetCommitValue(offset=7, metadata="", commit_timestamp=10, expire_timestamp=99)
    expected = b"\x00\x01" + struct.pack(">q", 7) + s16("") + struct.pack(">q", 10) + struct.pack(">q", 99)
    assert encode_value(value) == expected
    assert decode_value(OffsetCommitKey("g", "t", 0), expected) == value


def test_offset_commit_value_v0_and_v4():
    key = OffsetCommitKey("g", "t", 0)
    v0 = b"\x00\x00" + struct.pack(">q", 1) + s16("a") + struct.pack(">q", 2)
    assert decode_value(key, v0) == OffsetCommitValue(1, "a", 2)
    # v4 is flexible: compact string (len+1 as uvarint) and an empty tagged-field section
    v4 = b"\x00\x04" + struct.pack(">q", 1) + struct.pack(">i", -1) + b"\x02a" + struct.pack(">q", 2) + b"\x00"
    assert decode_value(key, v4) == OffsetCommitValue(1, "a", 2)
    assert encode_value_version(OffsetCommitValue(1, "a", 2), 4) == v4


def test_group_metadata_value_v3():
    member = MemberMetadata("m-1", "inst", "cid", "/127.0.0.1", 300000, 10000, b"sub", b"asg")
    value = GroupMetadataValue("consumer", 4, "range", "m-1", 1234, (member,))
    expected = (
        b"\x00\x03"
        + s16("consumer")
        + struct.pack(">i", 4)
        + s16("range")
        + s16("m-1")
        + struct.pack(">q", 1234)
        + struct.pack(">i", 1)
        + s16("m-1")
        + s16("inst")
        + s16("cid")
        + s16("/127.0.0.1")
        + struct.pack(">i", 300000)
        + struct.pack(">i", 10000)
        + struct.pack(">i", 3) + b"sub"
        + struct.pack(">i", 3) + b"asg"
    )
    assert encode_value(value) == expected
    assert decode_value(GroupMetadataKey("g"), expected) == value


def test_group_metadata_value_v0_empty_group_with_null_protocol():
    expected = b"\x00\x00" + s16("consumer") + struct.pack(">i", 1) + b"\xff\xff" + b"\xff\xff" + struct.pack(">i", 0)
    value = decode_value(GroupMetadataKey("g"), expected)
    assert value == GroupMetadataValue("consumer", 1, None, None, -1, ())
    assert encode_value_version(value, 0) == expected


def test_tombstones():
    assert encode_value(None) is None
    assert decode_value(GroupMetadataKey("g"), None) is None


@pytest.mark.parametrize("cut", range(1, 30))
def test_truncated_values_raise(cut):
    data = encode_value(OffsetCommitValue(offset=42, metadata="meta", commit_timestamp=1000, leader_epoch=5))
    if cut < len(data):
        with pytest.raises(RecordFormatError):
            decode_value(OffsetCommitKey("g", "t", 0), data[:cut])


texts = st.text(max_size=20)


@given(
    st.builds(
        GroupMetadataValue,
        texts,
        st.integers(-(2**31), 2**31 - 1),
        st.none() | texts,
        st.none() | texts,
        st.integers(-1, 2**62),
        st.lists(
            st.builds(
                MemberMetadata,
                texts,
                st.none() | texts,
                texts,
                texts,
                st.integers(0, 2**31 - 1),
                st.integers(0, 2**31 - 1),
                st.binary(max_size=30),
                st.binary(max_size=30),
            ),
            max_size=4,
        ).map(tuple),
    ),
    st.sampled_from([3, 4]),
)
def test_group_metadata_round_trip(value, version):
    assert decode_value(GroupMetadataKey("g"), encode_value_version(value, version)) == value


@given(st.integers(0, 2**62), texts, st.integers(0, 2**62), st.integers(-1, 2**31 - 1), st.sampled_from([3, 4]))
def test_offset_commit_round_trip(offset, metadata, ts, epoch, version):
    value = OffsetCommitValue(offset, metadata, ts, epoch)
    assert decode_value(OffsetCommitKey("g", "t", 1), encode_value_version(value, version)) == value


# ---------------------------------------------------------------- fast paths agree with the checked reader


@given(
    texts,
    texts,
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    texts,
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.sampled_from([1, 3]),
)
def test_fast_paths_match_the_generic_reader(group, topic, partition, offset, metadata, ts, epoch, version):
    from groupd.coordinator import records

    key_bytes = b"".join([b"\x00\x01", s16(group), s16(topic), struct.pack(">i", partition)])
    key = decode_key(key_bytes)
    assert key == OffsetCommitKey(group, topic, partition)
    value = OffsetCommitValue(offset, metadata, ts, epoch if version == 3 else -1, 5 if version == 1 else -1)
    data = encode_value_version(value, version)
    assert records._decode_offset_value_fast(data, version) == value
    assert decode_value(key, data) == value


@given(
    texts,
    texts,
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    texts,
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-1, 2**62),
)
def test_the_commit_writers_lay_out_what_the_general_writer_does(
    group, topic, partition, offset, metadata, ts, epoch, expire
):
    """encode_key (a cached prefix) and encode_value (struct layouts) against Writer, field by field."""
    from groupd.coordinator import records

    key = OffsetCommitKey(group, topic, partition)
    expected_key = b"".join([b"\x00\x01", s16(group), s16(topic), struct.pack(">i", partition)])
    assert encode_key(key) == expected_key
    assert encode_key(OffsetCommitKey(group, topic, partition)) == expected_key  # from the cache
    value = OffsetCommitValue(offset, metadata, ts, epoch, expire)
    assert encode_value(value) == encode_value_version(value, 1 if expire != -1 else 3)
    records._KEY_PREFIXES.clear()


def test_the_key_prefix_cache_is_bounded(monkeypatch):
    from groupd.coordinator import records

    monkeypatch.setattr(records, "_KEY_PREFIXES_MAX", 4)
    for i in range(10):
        assert decode_key(encode_key(OffsetCommitKey(f"g{i}", "t", i))) == OffsetCommitKey(f"g{i}", "t", i)
        assert len(records._KEY_PREFIXES) <= 4


def test_fast_path_declines_odd_bytes_and_the_checked_reader_reports_them():
    from groupd.coordinator import records

    good = b"\x00\x01" + s16("g") + s16("t") + struct.pack(">i", 0)
    assert records._decode_offset_key_fast(good + b"\x00") is None  # trailing byte: not the fast shape
    assert records._decode_offset_key_fast(good[:-1]) is None
    with pytest.raises(RecordFormatError):
        decode_key(good[:-1])
    value = encode_value_version(OffsetCommitValue(1, "m", 2, 3), 3)
    assert records._decode_offset_value_fast(value[:-1], 3) is None
    with pytest.raises(RecordFormatError):
        decode_value(OffsetCommitKey("g", "t", 0), value[:-1])


def test_group_member_rebalance_timeout_minus_one_reads_as_session_timeout():
    member = MemberMetadata("m", None, "c", "h", -1, 10000, b"", b"")
    group = GroupMetadataValue("consumer", 1, "range", "m", 5, (member,))
    decoded = decode_value(GroupMetadataKey("g"), encode_value_version(group, 3))
    assert decoded.members[0].rebalance_timeout == 10000


def offset_record_bytes(group, topic, partition, key_version, value):
    return b"".join([struct.pack(">h", key_version), s16(group), s16(topic), struct.pack(">i", partition)]), value


@given(
    st.one_of(
        st.tuples(st.binary(max_size=40), st.none() | st.binary(max_size=60)),  # anything at all
        st.builds(  # well-formed offset commits, tombstones included, cut or grown by a byte or not
            offset_record_bytes,
            texts,
            texts,
            st.integers(-(2**31), 2**31 - 1),
            st.sampled_from([0, 1, 2]),
            st.none()
            | st.builds(
                lambda v, version: encode_value_version(v, version),
                st.builds(
                    OffsetCommitValue, st.integers(0, 2**62), texts, st.integers(0, 2**62), st.integers(-1, 2**31 - 1)
                ),
                st.sampled_from([1, 3, 4]),
            ),
        ),
    ),
    st.sampled_from([None, -1, 1]),
)
def test_the_loads_offset_path_agrees_with_the_checked_decoders(record, damage):
    from groupd.coordinator.records import decode_offset_commit

    key, value = record
    if damage == -1 and value:
        value = value[:-1]
    elif damage == 1 and value is not None:
        value = value + b"\x00"
    fast = decode_offset_commit(key, value, {})
    if fast is None:
        return  # the checked decoders take it from here (and may skip or report it)
    group, topic, partition, parsed = fast
    assert decode_key(key) == OffsetCommitKey(group, topic, partition)
    assert decode_value(OffsetCommitKey(group, topic, partition), value) == parsed


def test_the_loads_offset_path_takes_what_groupd_and_kafka_write():
    from groupd.coordinator.records import decode_offset_commit

    key = encode_key(OffsetCommitKey("g", "t", 3))
    for value in (OffsetCommitValue(5, "m", 7, 2), OffsetCommitValue(5, "", 7, -1, 9)):
        assert decode_offset_commit(key, encode_value(value), {}) == ("g", "t", 3, value)
    names: dict = {}
    assert decode_offset_commit(key, None, names) == ("g", "t", 3, None)
    again = decode_offset_commit(encode_key(OffsetCommitKey("g", "t", 4)), None, names)
    assert again == ("g", "t", 4, None) and again[0] is names[key[:-4]][0]  # one string per name
    assert decode_offset_commit(encode_key(GroupMetadataKey("g")), None, names) is None  # checked path
