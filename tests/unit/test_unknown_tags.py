"""Tagged fields kio's schemas do not know are skipped, as Kafka's generated readers skip them
(groupd/protocol/unknown_tags.py): in the request header v2, at a body's top level, in a nested struct, in an
array's elements. Kafka keeps them aside as ``_unknownTaggedFields`` and serves the request; kio 0.6.5
raises KeyError. What Kafka's reader refuses in a tag section is refused (bounds.Unparseable: the
connection is closed)."""

import struct
import uuid

import pytest
from kio.serial.errors import BufferUnderflow

from groupd.protocol import bounds, codec
from groupd.protocol.api_table import API_TABLE, ApiKey
from groupd.protocol.fastwrite import _uvarint
from groupd.protocol.request import encode_request, parse_request
from tests.fuzz import Values, length_fields

CLIENT = "tagged-client"


def section(*entries: tuple[int, bytes]) -> bytes:
    """A tagged-fields section: the count, then each field's tag, size and value."""
    return _uvarint(len(entries)) + b"".join(_uvarint(tag) + _uvarint(len(value)) + value for tag, value in entries)


def frame_of(key: int, version: int, body) -> bytes:
    """A request's header and body (no size prefix), as parse_request takes it."""
    return encode_request(key, version, body, 7, CLIENT)[4:]


def _header_len(key: int, version: int) -> int:
    """api key, version, correlation id, client id (int16 length), and in header v2 an empty section."""
    return 2 + 2 + 4 + 2 + len(CLIENT) + (1 if codec.is_flexible(key, version) else 0)


def replace_empty(frame: bytes, at: int, new_section: bytes) -> bytes:
    """``frame`` with the empty tagged-fields section (one 0 byte) at ``at`` replaced."""
    assert frame[at] == 0, f"no empty section at {at}: {frame[at]:#x}"
    return frame[:at] + new_section + frame[at + 1 :]


HEARTBEAT = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}


def test_kio_refuses_an_unknown_tag_kafka_skips():
    """The issue: kio's reader raises KeyError where Kafka's generated reader keeps the field aside."""
    cls = codec.request_class(ApiKey.HEARTBEAT, 4)
    body = codec.encode(codec.make(cls, **HEARTBEAT))
    assert body.endswith(b"\x00")
    tagged = body[:-1] + bytes.fromhex("0107 02abcd")
    with pytest.raises(KeyError, match="Unknown tagged field tag: 7"):
        codec.decode(cls, tagged)
    frame = frame_of(ApiKey.HEARTBEAT, 4, HEARTBEAT)
    header, request = parse_request(frame[: -len(body)] + tagged)
    assert (header, request) == parse_request(frame)
    assert request.member_id == "m" and header.client_id == CLIENT and header.correlation_id == 7


def test_top_level_several_unknown_tags_in_any_order_and_repeated():
    frame = frame_of(ApiKey.HEARTBEAT, 4, HEARTBEAT)
    many = section(
        (9, b"\x01\x02"), (3, b""), (9, b"x" * 300), (2**31 - 1, b"\xff")
    )  # out of order, 9 twice, a 2-byte size
    assert parse_request(replace_empty(frame, len(frame) - 1, many)) == parse_request(frame)


def test_header_v2_tags_are_all_unknown_and_skipped():
    """Kafka's RequestHeader.json declares no tagged field: every tag in header v2 is unknown."""
    frame = frame_of(ApiKey.HEARTBEAT, 4, HEARTBEAT)
    at = _header_len(ApiKey.HEARTBEAT, 4) - 1
    tagged = replace_empty(frame, at, section((0, b"\x05"), (1, b"abc")))
    assert parse_request(tagged) == parse_request(frame)
    both = replace_empty(tagged, len(tagged) - 1, section((4, b"z")))
    assert parse_request(both) == parse_request(frame)


def test_header_client_id_keeps_its_int16_length_in_the_walk():
    """ClientId has ``flexibleVersions: none``: a long client id (a compact length would differ) still
    walks to the header's own tag section."""
    body = {"client_software_name": "x", "client_software_version": "1"}
    frame = encode_request(ApiKey.API_VERSIONS, 3, body, 1, "c" * 200)[4:]
    at = 2 + 2 + 4 + 2 + 200
    tagged = replace_empty(frame, at, section((6, b"\x00" * 4)))
    header, request = parse_request(tagged)
    assert header.client_id == "c" * 200 and (header, request) == parse_request(frame)


def test_nested_struct_section():
    """DescribeTopicPartitions v0: ``cursor`` is a nullable struct with its own tagged section."""
    key = ApiKey.DESCRIBE_TOPIC_PARTITIONS
    cls = codec.request_class(key, 0)
    cursor = codec.make(codec.nested(cls, "Cursor"), topic_name="t", partition_index=3)
    frame = frame_of(key, 0, {"topics": (), "response_partition_limit": 10, "cursor": cursor})
    inner = codec.encode(cursor)
    at = frame.index(inner) + len(inner) - 1
    tagged = replace_empty(frame, at, section((8, b"nested")))
    assert parse_request(tagged)[1].cursor == cursor
    assert parse_request(tagged) == parse_request(frame)


def _commit(partitions: int):
    cls = codec.request_class(ApiKey.OFFSET_COMMIT, 8)
    parts = tuple(
        codec.make(
            codec.nested(cls, "OffsetCommitRequestPartition"),
            partition_index=i,
            committed_offset=100 + i,
            committed_leader_epoch=-1,
            committed_metadata=f"m{i}",
        )
        for i in range(partitions)
    )
    topic = codec.make(codec.nested(cls, "OffsetCommitRequestTopic"), name="orders", partitions=parts)
    body = {
        "group_id": "g",
        "generation_id_or_member_epoch": 1,
        "member_id": "m",
        "group_instance_id": None,
        "topics": (topic,),
    }
    return frame_of(ApiKey.OFFSET_COMMIT, 8, body), parts


def test_array_elements_first_middle_and_last_and_their_parent():
    frame, parts = _commit(3)
    tagged = frame
    ends = [tagged.index(codec.encode(p)) + len(codec.encode(p)) - 1 for p in parts]
    for at in reversed(ends[0::2]):  # the first and the last partition
        tagged = replace_empty(tagged, at, section((5, b"p"), (6, b"")))
    # then the topic's section, and the top level's: the body ends with them
    tagged = replace_empty(tagged, len(tagged) - 2, section((12, b"topic")))
    tagged = replace_empty(tagged, len(tagged) - 1, section((13, b"top")))
    assert parse_request(tagged) == parse_request(frame)
    middle = replace_empty(frame, ends[1], section((5, b"only the middle one")))
    assert parse_request(middle) == parse_request(frame)


# -------------------------------------------------------------- known tags mixed with unknown (Fetch)


def _fetch(version: int, **extra) -> bytes:
    cls = codec.request_class(ApiKey.FETCH, version)
    part = codec.make(
        codec.nested(cls, "FetchPartition"),
        partition=0,
        current_leader_epoch=0,
        fetch_offset=5,
        last_fetched_epoch=0,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    name = {"topic_id": uuid.UUID(int=1)} if version >= 13 else {"topic": "t"}
    topic = codec.make(codec.nested(cls, "FetchTopic"), **name, partitions=(part,))
    body = {
        "replica_id": -1,
        "max_wait": 500,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": (topic,),
        "forgotten_topics_data": (),
        "rack_id": "",
        **extra,
    }
    return frame_of(ApiKey.FETCH, version, body)


def _replica_state(replica_id: int, epoch: int, tags: bytes = b"\x00") -> bytes:
    return struct.pack(">iq", replica_id, epoch) + tags


def test_known_tags_kept_unknown_ones_skipped_in_any_order():
    """Fetch v15: ClusterId (tag 0) and ReplicaState (tag 1) are known; 5 and 9 are not, and ReplicaState's
    own section carries an unknown tag too."""
    frame = _fetch(15)
    mixed = section((5, b"abc"), (1, _replica_state(3, 8, section((4, b"in the struct")))), (9, b""), (0, b"\x05clus"))
    header, request = parse_request(replace_empty(frame, len(frame) - 1, mixed))
    assert request.cluster_id == "clus"
    assert (request.replica_state.replica_id, request.replica_state.replica_epoch) == (3, 8)
    assert request.topics == parse_request(frame)[1].topics


def test_a_repeated_known_tag_keeps_its_last_value():
    """Kafka's reader assigns the field once per occurrence: the last one stands."""
    frame = _fetch(15)
    repeated = section((1, _replica_state(3, 8)), (7, b"x"), (1, _replica_state(4, 9)))
    request = parse_request(replace_empty(frame, len(frame) - 1, repeated))[1]
    assert (request.replica_state.replica_id, request.replica_state.replica_epoch) == (4, 9)


def test_a_known_tag_is_read_where_it_lies_whatever_its_size_says():
    """Kafka's generated reader reads a known tagged value in place and goes on after it; the size is
    only used to skip unknown ones. A size larger than the value does not move the next tag."""
    frame = _fetch(15)
    value = _replica_state(3, 8)
    lying = b"\x02" + b"\x01" + _uvarint(len(value) + 3) + value + _uvarint(9) + _uvarint(1) + b"x"
    request = parse_request(replace_empty(frame, len(frame) - 1, lying))[1]
    assert request.replica_state.replica_id == 3


def test_partition_level_known_and_unknown_tags():
    """Fetch v17: FetchPartition's ReplicaDirectoryId (tag 0) is known; tag 3 is not."""
    frame = _fetch(17)
    at = (
        len(frame) - 5
    )  # the body ends: partition's section, topic's, forgotten topics (empty: 01), rack id (""), top's
    mixed = section((3, b"later"), (0, uuid.UUID(int=42).bytes))
    request = parse_request(replace_empty(frame, at, mixed))[1]
    assert request.topics[0].partitions[0].replica_directory_id == uuid.UUID(int=42)


# -------------------------------------------------------------- malformed sections: Kafka closes


def test_an_unknown_tag_whose_size_runs_past_the_end():
    """Kafka's readUnknownTaggedField: "Error reading byte array of N byte(s): only M byte(s) available"."""
    frame = frame_of(ApiKey.HEARTBEAT, 4, HEARTBEAT)
    with pytest.raises(
        bounds.Unparseable, match=r"error reading byte array of 5 byte\(s\): only 2 byte\(s\) available"
    ):
        parse_request(frame[:-1] + bytes.fromhex("0107 05abcd"))
    with pytest.raises(
        bounds.Unparseable, match="error reading byte array"
    ):  # a size of 2^32-1 (Kafka: -1, refused too)
        parse_request(frame[:-1] + bytes.fromhex("0109 ffffffff0f"))
    header_at = _header_len(ApiKey.HEARTBEAT, 4) - 1
    with pytest.raises(bounds.Unparseable, match="error reading byte array of 1000"):
        parse_request(replace_empty(frame, header_at, b"\x01\x02" + _uvarint(1000)))


def test_an_unknown_tag_past_the_end_in_an_array_element():
    frame, parts = _commit(2)
    at = frame.index(codec.encode(parts[0])) + len(codec.encode(parts[0])) - 1
    with pytest.raises(bounds.Unparseable, match="error reading byte array of 100000"):
        parse_request(replace_empty(frame, at, b"\x01\x05" + _uvarint(100_000)))


def test_more_tags_counted_than_the_section_holds():
    """Kafka's reader runs off the end of the buffer: unparseable (kio says so itself, or the walk does)."""
    frame = frame_of(ApiKey.HEARTBEAT, 4, HEARTBEAT)
    with pytest.raises((bounds.Unparseable, BufferUnderflow)):
        parse_request(frame[:-1] + b"\x03" + section((7, b"ab"))[1:])  # count 3, one field
    with pytest.raises((bounds.Unparseable, BufferUnderflow)):
        parse_request(frame[:-1] + b"\x01\x07")  # the size is missing
    fetch = _fetch(15)
    with pytest.raises(
        bounds.Unparseable, match="truncated"
    ):  # a known tag first: kio stops at tag 7, the walk runs off the end
        parse_request(replace_empty(fetch, len(fetch) - 1, b"\x03" + section((0, b"\x01"), (7, b"ab"))[1:]))


def test_an_overlong_tag_varint():
    frame = frame_of(ApiKey.HEARTBEAT, 4, HEARTBEAT)
    with pytest.raises(ValueError, match="(?i)varint is too long"):  # kio's own message, or ours
        parse_request(frame[:-1] + b"\x01" + b"\xff" * 5 + b"\x01\x00")


def test_a_tag_of_another_version_is_refused():
    """Kafka generates one reader per struct for all versions: a tag the struct holds in other versions
    only is refused ("Tag 1 is not valid for version 12"), not skipped. Fetch's ReplicaState is tag 1
    from v15; FetchPartition's ReplicaDirectoryId is tag 0 from v17."""
    frame = _fetch(12)
    with pytest.raises(bounds.Unparseable, match="FetchRequest: tag 1 is not valid for version 12"):
        parse_request(replace_empty(frame, len(frame) - 1, section((1, _replica_state(3, 8)))))
    at = len(frame) - 5
    with pytest.raises(bounds.Unparseable, match="FetchPartition: tag 0 is not valid for version 12"):
        parse_request(replace_empty(frame, at, section((0, bytes(16)))))
    assert (
        parse_request(replace_empty(frame, at, section((2, bytes(16)))))[1] == parse_request(frame)[1]
    )  # no version has tag 2


# -------------------------------------------------------------- every section of every flexible request

FLEXIBLE = sorted(
    {
        (spec.key, v)
        for spec in API_TABLE.values()
        for v in range(spec.min_version, spec.max_version + 1)
        if codec.is_flexible(spec.key, v)
    }
)
UNKNOWN = section((1000, b""), (77777, b"u" * 130))  # no struct holds such tags in any version


@pytest.mark.parametrize(("key", "version"), FLEXIBLE, ids=lambda x: str(x))
def test_unknown_tags_in_every_section_of_every_flexible_request(key, version):
    """Every tagged section (found by the fuzzer's own walk, tests/fuzz.py, not the one under test) of
    requests with varied values gets two unknown tags in front of what it holds; the request reads as
    it did without them."""
    values = Values(key * 100 + version)
    cls = codec.request_class(key, version)
    for _ in range(3):
        frame = encode_request(key, version, values.entity(cls), 9, CLIENT)[4:]
        head = _header_len(key, version)
        sections = [head - 1] + [head + f.pos for f in length_fields(cls, frame[head:]) if f.what == "tags"]
        tagged = frame
        for at in reversed(sections):
            count, after = bounds.read_uvarint(tagged, at)
            tagged = tagged[:at] + _uvarint(count + 2) + UNKNOWN[1:] + tagged[after:]
        (header, request), (clean_header, clean) = parse_request(tagged), parse_request(frame)
        assert header == clean_header and codec.encode(request) == codec.encode(
            clean
        )  # by bytes: a NaN is not equal to itself


def test_unknown_tags_bench_measures_every_hot_request(capsys):
    from bench import unknown_tags_bench
    from bench.decode_bench import requests

    unknown_tags_bench.main(rounds=1, reps=3)  # it also checks each variant reads as the clean request
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "µs" in line]
    assert len(rows) == len(requests()) == 6
