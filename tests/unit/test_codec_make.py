"""codec.make: one newest-shape description of a response, kept per version as kio's entity."""

import datetime

import pytest
from kio.schema.errors import ErrorCode

from groupd.protocol import codec


def test_fields_the_version_lacks_are_dropped_and_the_rest_converted():
    v0 = codec.make(codec.response_class(11, 0), throttle_time=5, error_code=27, generation_id=3,
                    protocol_name="range", leader="a", member_id="a", members=(), skip_assignment=False)
    assert not hasattr(v0, "throttle_time")  # JoinGroup v0 has no throttle time
    assert v0.error_code is ErrorCode.rebalance_in_progress
    v5 = codec.make(codec.response_class(11, 5), throttle_time=5, error_code=0, generation_id=3,
                    protocol_name="range", leader="a", member_id="a", members=())
    assert v5.throttle_time == datetime.timedelta(milliseconds=5)
    assert v5.error_code is ErrorCode.none


def test_given_kio_values_pass_through_and_defaults_fill_the_rest():
    hb = codec.make(
        codec.response_class(12, 4), throttle_time=datetime.timedelta(seconds=1), error_code=ErrorCode.unknown_member_id
    )
    assert hb.throttle_time == datetime.timedelta(seconds=1)
    assert hb.error_code is ErrorCode.unknown_member_id
    # a field with a schema default may be left out
    sync = codec.make(codec.response_class(14, 5), throttle_time=0, error_code=0, assignment=b"x")
    assert sync.protocol_type is None and sync.protocol_name is None


def test_a_missing_required_field_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="protocol_name"):
        codec.make(codec.response_class(11, 5), throttle_time=0, error_code=0)


def test_an_error_code_unknown_to_the_table_still_fails_loudly():
    with pytest.raises(ValueError):
        codec.make(codec.response_class(12, 4), throttle_time=0, error_code=31999)
