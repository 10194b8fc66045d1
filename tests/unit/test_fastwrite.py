"""Compiled writers write exactly kio's bytes: every request and response class of every version in the
API table, with generated values (nested entities, arrays, nulls, tagged fields), plus known shapes."""

import datetime
import io
import uuid
from dataclasses import MISSING, fields

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from groupd.protocol import codec
from groupd.protocol.api_table import API_TABLE
from groupd.protocol.fastwrite import compile_values_writer, compile_writer

_INTS = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint8": (0, 2**8 - 1), "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1),
}
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def primitive(kafka_type: str) -> st.SearchStrategy:
    if kafka_type in _INTS:
        lo, hi = _INTS[kafka_type]
        return st.one_of(st.integers(-3, 300), st.integers(lo, hi)).filter(lambda n: lo <= n <= hi)
    if kafka_type == "float64":
        return st.floats(allow_nan=False)
    if kafka_type == "bool":
        return st.booleans()
    if kafka_type == "error_code":
        return st.sampled_from(list(ErrorCode))
    if kafka_type == "timedelta_i32":
        return st.integers(-(2**31), 2**31 - 1).map(lambda ms: datetime.timedelta(milliseconds=ms))
    if kafka_type == "timedelta_i64":
        return st.integers(-(2**40), 2**40).map(lambda ms: datetime.timedelta(milliseconds=ms))
    if kafka_type == "datetime_i64":
        return st.integers(0, 2**41).map(lambda ms: _EPOCH + datetime.timedelta(milliseconds=ms))
    if kafka_type == "uuid":
        return st.uuids()
    if kafka_type == "string":
        return st.text(max_size=12)
    if kafka_type in ("bytes", "records"):
        return st.binary(max_size=24)
    raise AssertionError(kafka_type)


def entity(cls: type, depth: int = 0) -> st.SearchStrategy:
    values = {}
    for field in fields(cls):
        kind = classify_field(field)
        if isinstance(kind, EntityField | EntityTupleField):
            if not kind.is_array:
                base = entity(kind.type_, depth + 1)  # a single entity always nests (ConsumerGroupDescribe: 5 deep)
            elif depth < 3:
                base = st.lists(entity(kind.type_, depth + 1), max_size=2).map(tuple)
            else:
                base = st.just(())  # deeper arrays stay empty
        else:
            one = primitive(get_schema_field_type(field))
            base = st.lists(one, max_size=3).map(tuple) if isinstance(kind, PrimitiveTupleField) else one
        if get_field_tag(field) is not None:
            default = field.default if field.default is not MISSING else get_tagged_field_default(field)
            base = st.one_of(st.just(default), base)
        elif is_optional(field):
            base = st.one_of(st.none(), base)
        values[field.name] = base
    return st.builds(cls, **values)


def kio_bytes(e) -> bytes:
    out = io.BytesIO()
    entity_writer(type(e))(out, e)
    return out.getvalue()


CLASSES = sorted(
    {
        cls
        for spec in API_TABLE.values()
        for v in range(spec.min_version, spec.max_version + 1)
        for cls in (codec.request_class(spec.key, v), codec.response_class(spec.key, v))
    }
    | {
        codec.request_header_class(3, 0),
        codec.request_header_class(3, 9),
        codec.response_header_class(3, 9),
        codec.response_header_class(3, 0),
    },
    key=lambda c: (c.__module__, c.__qualname__),
)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: f"{c.__module__.split('schema.')[-1]}.{c.__qualname__}")
def test_byte_for_byte_kio(cls):
    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(entity(cls))
    def check(e):
        assert compile_writer(cls)(e) == kio_bytes(e)

    check()


def _as_values(e) -> dict:
    """The newest-shape values a handler would pass: durations as int ms, error codes as ints, plus
    a key this version lacks (ignored)."""
    values = {"no_such_field_in_any_version": object()}
    for f in fields(e):
        value = getattr(e, f.name)
        if isinstance(value, datetime.timedelta):
            value = round(value.total_seconds() * 1000)
        elif isinstance(value, ErrorCode):
            value = int(value)
        values[f.name] = value
    return values


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: f"{c.__module__.split('schema.')[-1]}.{c.__qualname__}")
def test_values_writer_byte_for_byte_kio(cls):
    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
    @given(entity(cls))
    def check(e):
        # encode_values falls back to building the entity when a tagged field is away from its default
        assert codec.encode_values(cls, _as_values(e)) == kio_bytes(e)
        assert codec.encode_values(cls, {f.name: getattr(e, f.name) for f in fields(e)}) == kio_bytes(e)

    check()


def _as_nested_values(e):
    """Every nested entity as a dict of its values too (arrays as lists), as a handler may give them."""
    values = {}
    for f in fields(e):
        value = getattr(e, f.name)
        if hasattr(value, "__dataclass_fields__"):
            value = _as_nested_values(value)
        elif isinstance(value, tuple) and value and hasattr(value[0], "__dataclass_fields__"):
            value = [_as_nested_values(x) for x in value]
        values[f.name] = value
    return values


@pytest.mark.parametrize(
    "cls",
    [c for c in CLASSES if any(isinstance(classify_field(f), EntityField | EntityTupleField) for f in fields(c))],
    ids=lambda c: f"{c.__module__.split('schema.')[-1]}.{c.__qualname__}",
)
def test_values_writer_takes_nested_dicts(cls):
    @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
    @given(entity(cls))
    def check(e):
        assert codec.encode_values(cls, _as_nested_values(e)) == kio_bytes(e)

    check()


def test_values_writer_takes_defaults_and_refuses_what_kio_refuses():
    rc = codec.response_class(14, 5)  # SyncGroup: protocol_type/name default to None
    assert compile_values_writer(rc)({"throttle_time": 0, "error_code": 27, "assignment": b""}) == kio_bytes(
        codec.make(rc, throttle_time=0, error_code=27, assignment=b"")
    )
    with pytest.raises(KeyError):
        compile_values_writer(rc)({"throttle_time": 0, "error_code": 0})  # assignment has no default
    with pytest.raises(Exception):  # noqa: B017 - struct.error: the generation does not fit an int32
        codec.encode_values(
            codec.response_class(11, 5),
            {
                "throttle_time": 0,
                "error_code": 0,
                "generation_id": 2**40,
                "protocol_name": "r",
                "leader": "a",
                "member_id": "a",
                "members": (),
            },
        )


def test_known_shapes():
    rc = codec.response_class(11, 5)
    member = codec.nested(rc, "JoinGroupResponseMember")
    join = codec.make(
        rc,
        throttle_time=0,
        error_code=0,
        generation_id=7,
        protocol_name="range",
        leader="m-1",
        member_id="m-1",
        members=tuple(member(member_id=f"m-{i}", group_instance_id=None, metadata=b"\x00\x01sub") for i in range(3)),
    )
    heartbeat = codec.make(codec.response_class(12, 4), throttle_time=0, error_code=27)
    fetch_cls = codec.response_class(1, 11)
    part = codec.make(
        codec.nested(fetch_cls, "PartitionData"),
        partition_index=0,
        error_code=0,
        high_watermark=5,
        last_stable_offset=5,
        log_start_offset=0,
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=b"x" * 100,
    )
    fetch = codec.make(
        fetch_cls,
        throttle_time=0,
        error_code=0,
        session_id=0,
        responses=(codec.make(codec.nested(fetch_cls, "FetchableTopicResponse"), topic="t", partitions=(part,)),),
    )
    api = codec.make(
        codec.response_class(18, 3),
        error_code=0,
        api_keys=(),
        throttle_time=0,
        finalized_features_epoch=3,
        supported_features=(),
        finalized_features=(),
        zk_migration_ready=True,
    )
    for e in (join, heartbeat, fetch, api):
        assert compile_writer(type(e))(e) == kio_bytes(e)
    assert codec.encode(join) == kio_bytes(join)


def test_values_that_do_not_fit_still_raise():
    too_big = codec.make(codec.response_class(12, 0), error_code=0).__class__  # Heartbeat v0: error_code only
    with pytest.raises(Exception):  # noqa: B017 - struct.error or kio's own
        compile_writer(codec.response_class(11, 5))(
            codec.make(
                codec.response_class(11, 5),
                throttle_time=0,
                error_code=0,
                generation_id=2**40,
                protocol_name="r",
                leader="a",
                member_id="a",
                members=(),
            )
        )
    assert too_big is codec.response_class(12, 0)
    with pytest.raises(ValueError):
        compile_writer(codec.response_class(12, 0).__mro__[0])  # compiles
        compile_writer(codec.response_class(11, 0))(
            codec.make(
                codec.response_class(11, 0),
                error_code=0,
                generation_id=1,
                protocol_name="r",
                leader="x" * 40_000,
                member_id="a",
                members=(),
            )
        )


def test_nullable_uuid_and_zero():
    cls = codec.response_class(3, 12)
    topic = codec.nested(cls, "MetadataResponseTopic")
    t = codec.make(
        topic,
        error_code=0,
        name=None,
        topic_id=uuid.UUID(int=0),
        is_internal=False,
        partitions=(),
        topic_authorized_operations=-1,
    )
    assert compile_writer(topic)(t) == kio_bytes(t)


def test_kept_strings_are_bounded_and_written_as_kio_writes_them():
    from groupd.protocol import fastwrite

    rc = codec.response_class(11, 5)  # legacy strings
    fc = codec.response_class(11, 9)  # compact strings
    long_id = "m" * 1000
    for cls in (rc, fc):
        values = {
            "throttle_time": 0,
            "error_code": 0,
            "generation_id": 1,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "leader": long_id,
            "skip_assignment": False,
            "member_id": "short-id",
            "members": (),
        }
        first = codec.encode_values(cls, values)
        assert codec.encode_values(cls, values) == first == kio_bytes(codec.make(cls, **values))
    for kept in (fastwrite._legacy_strings, fastwrite._compact_strings):
        assert "short-id" in kept and long_id not in kept  # long strings are written each time, not kept
        assert len(kept) <= fastwrite._STRINGS_MAX
    for i in range(fastwrite._STRINGS_MAX + 10):
        fastwrite._legacy_str(f"s{i}")
    assert len(fastwrite._legacy_strings) <= fastwrite._STRINGS_MAX
