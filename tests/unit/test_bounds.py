"""The bounds check before kio (groupd/protocol/bounds.py): it walks every request of every version in the API
table exactly as kio reads it, accepts everything kio writes, and refuses what Kafka's generated readers
refuse (a count larger than the bytes left, a null where the schema forbids one) before kio reserves
memory for it."""

import struct

import pytest
from hypothesis import HealthCheck, given, settings

from groupd.protocol import bounds, codec
from groupd.protocol.api_table import API_TABLE, ApiKey
from groupd.protocol.request import parse_request
from tests.harness import request_bytes
from tests.unit.test_fastwrite import entity, kio_bytes

REQUESTS = sorted(
    {
        codec.request_class(spec.key, v)
        for spec in API_TABLE.values()
        for v in range(spec.min_version, spec.max_version + 1)
    },
    key=lambda c: (c.__module__, c.__qualname__),
)


@pytest.mark.parametrize("cls", REQUESTS, ids=lambda c: c.__module__.split("schema.")[-1])
def test_walk_ends_where_kio_ends_and_accepts_what_kio_writes(cls):
    whole = bounds.walker(cls)  # the full walk, top-level tail included
    check = bounds.checker(cls)

    @settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
    @given(entity(cls))
    def walk(e):
        data = kio_bytes(e)
        assert whole(data, 0, len(data)) == len(data)
        if check is not None:
            check(data, 0)
        _, used = codec.decode(cls, data)
        assert used == len(data)

    walk()


def test_requests_without_arrays_have_no_check():
    assert bounds.checker(codec.request_class(12, 4)) is None  # Heartbeat: nothing to allocate
    assert bounds.checker(codec.request_class(3, 9)) is not None  # Metadata: a topics array


def _frame_body(frame: bytes) -> bytes:
    return frame[4:]


METADATA_V9_HUGE = bytes.fromhex("000300090000000100047465737400ffffffff0f")  # the 24-byte frame, unsized
METADATA_V1_HUGE = bytes.fromhex("0003000100000001000474657374") + struct.pack(">i", 0x7FFFFFFF)


@pytest.mark.parametrize("body", [METADATA_V9_HUGE, METADATA_V1_HUGE], ids=["compact", "int32"])
def test_count_larger_than_the_frame_is_refused_before_kio(body):
    with pytest.raises(bounds.Unparseable, match="tried to allocate a collection of size"):
        parse_request(body)


def test_a_nested_count_is_checked_too():
    cls = codec.request_class(8, 2)
    partition = codec.make(
        codec.nested(cls, "OffsetCommitRequestPartition"), partition_index=0, committed_offset=5, committed_metadata=""
    )
    topic = codec.make(codec.nested(cls, "OffsetCommitRequestTopic"), name="t", partitions=(partition,))
    frame = _frame_body(
        request_bytes(
            8,
            2,
            {
                "group_id": "g",
                "generation_id_or_member_epoch": 1,
                "member_id": "m",
                "retention_time_ms": -1,
                "topics": (topic,),
            },
        )
    )
    count_at = frame.index(b"\x00\x01t") + 3  # the partitions count follows the topic name
    assert struct.unpack_from(">i", frame, count_at)[0] == 1
    parse_request(frame)
    forged = frame[:count_at] + struct.pack(">i", 1_000_000) + frame[count_at + 4 :]
    with pytest.raises(bounds.Unparseable, match="OffsetCommitRequestTopic.partitions"):
        parse_request(forged)


def test_null_for_a_required_array_is_refused():
    # OffsetCommit v2: topics is not nullable; Kafka's reader throws "non-nullable field topics was serialized as null"
    frame = _frame_body(
        request_bytes(
            8,
            2,
            {
                "group_id": "g",
                "generation_id_or_member_epoch": 1,
                "member_id": "m",
                "retention_time_ms": -1,
                "topics": [],
            },
        )
    )
    assert frame.endswith(b"\x00\x00\x00\x00")
    with pytest.raises(bounds.Unparseable, match="non-nullable field OffsetCommitRequest.topics"):
        parse_request(frame[:-4] + b"\xff\xff\xff\xff")
    # FindCoordinator v4: coordinator_keys, compact (0 means null), then the empty tagged fields
    frame = _frame_body(request_bytes(10, 4, {"key_type": 0, "coordinator_keys": []}))
    assert frame.endswith(b"\x01\x00")
    with pytest.raises(bounds.Unparseable, match="non-nullable field FindCoordinatorRequest.coordinator_keys"):
        parse_request(frame[:-2] + b"\x00\x00")


def test_null_where_the_schema_allows_it_still_reads():
    header, request = parse_request(bytes.fromhex("0003000100000001000474657374ffffffff"))
    assert request.topics is None  # Metadata v1: null topics means all topics


def test_a_walk_off_the_end_is_unparseable_not_an_index_error():
    frame = _frame_body(
        request_bytes(
            8,
            2,
            {
                "group_id": "g",
                "generation_id_or_member_epoch": 1,
                "member_id": "m",
                "retention_time_ms": -1,
                "topics": [],
            },
        )
    )
    with pytest.raises(bounds.Unparseable, match="truncated"):
        parse_request(frame[:-6])


def test_an_overlong_varint_is_unparseable():
    with pytest.raises(bounds.Unparseable, match="varint is too long"):
        parse_request(METADATA_V9_HUGE[:-5] + b"\xff" * 6 + b"\x01")


def test_decode_bench_measures_every_hot_request(capsys):
    from bench import decode_bench

    decode_bench.main(rounds=1, reps=5)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "µs" in line]
    assert len(rows) == len(decode_bench.requests()) == 6
    assert bounds.checker(codec.request_class(8, 8)) is not None  # the bench put the checks back
    from groupd.protocol import request

    assert all(
        request._readers[k, v][1] is not None for k, v, _ in decode_bench.requests().values() if k != ApiKey.HEARTBEAT
    )


def _forged(body: bytes, field, value: int) -> bytes:
    from groupd.protocol.fastwrite import _uvarint

    if field.form == "uv":
        return body[: field.pos] + _uvarint(value + 1) + body[field.pos + field.size :]
    return body[: field.pos] + struct.pack(">i", value) + body[field.pos + 4 :]


@pytest.mark.parametrize("cls", REQUESTS, ids=lambda c: c.__module__.split("schema.")[-1])
def test_every_array_count_anywhere_is_checked(cls):
    """Each array count of a request (first, middle or last element, any depth) set past the bytes
    left is refused before kio sees it; and set to null where the schema forbids null, too."""
    from tests.fuzz import Values, length_fields

    values = Values(hash(cls.__module__) & 0xFFFF)
    check = bounds.checker(cls)
    seen = 0
    for _ in range(6):
        body = kio_bytes(values.entity(cls))
        for field in length_fields(cls, body):
            if field.what != "array":
                continue
            seen += 1
            with pytest.raises(bounds.Unparseable, match="tried to allocate"):
                check(_forged(body, field, 2**31 - 1), 0)
            if not field.nullable:
                with pytest.raises(bounds.Unparseable, match="non-nullable field"):
                    check(_forged(body, field, -1), 0)
    assert (check is None) == (seen == 0)
