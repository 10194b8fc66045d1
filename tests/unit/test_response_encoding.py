"""Response frames: the packed header and the reused bodies are byte for byte what kio writes."""

import io
import struct

from kio.serial import entity_writer

from groupd.protocol import codec
from groupd.protocol.request import encode_response


def kio_frame(api_key, version, cid, response):
    out = io.BytesIO()
    header = codec.response_header_class(api_key, version)(correlation_id=cid)
    entity_writer(type(header))(out, header)
    entity_writer(type(response))(out, response)
    body = out.getvalue()
    return struct.pack(">i", len(body)) + body


def heartbeat(version, error=0):
    return codec.make(codec.response_class(12, version), throttle_time=0, error_code=error)


def test_header_v0_and_v1_match_kio():
    for version in range(5):  # Heartbeat v0-v3 use header v0, v4 header v1 (flexible)
        assert encode_response(12, version, 77, heartbeat(version)) == kio_frame(12, version, 77, heartbeat(version))
    api = codec.make(codec.response_class(18, 3), error_code=0, api_keys=(), throttle_time=0)
    assert encode_response(18, 3, 5, api) == kio_frame(18, 3, 5, api)  # ApiVersions: header v0 always


def leave(version, error=0):
    return codec.make(codec.response_class(13, version), throttle_time=0, error_code=error, members=())


def test_reused_bodies_follow_the_value_not_the_first_answer():
    for cid, error in [(1, 0), (2, 27), (3, 0), (4, 25)]:  # LeaveGroup: its bodies are reused by value
        frame = encode_response(13, 4, cid, leave(4, error))
        assert frame == kio_frame(13, 4, cid, leave(4, error))


def test_encoded_answers_carry_their_bytes_and_error():
    from groupd.broker.dispatch import RequestContext
    from groupd.protocol.request import Encoded, RequestHeader

    for version in range(5):
        for error in (0, 27):
            answer = RequestContext(RequestHeader(12, version, 1, "c"), "h", "c1").encoded(
                throttle_time=0, error_code=error
            )
            assert isinstance(answer, Encoded) and answer.error_code == error
            assert encode_response(12, version, 9, answer) == kio_frame(12, version, 9, heartbeat(version, error))
