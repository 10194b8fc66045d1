"""The SASL state machines without sockets: Kafka's SaslServerAuthenticator order of requests, PLAIN's
checks and messages, handshake v0's bare tokens."""

import struct

import pytest

from groupd.broker.security.errors import AuthenticationFailed
from groupd.broker.security.sasl import PlainServer, SaslGate
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from tests.harness import request_bytes

USERS = {"alice": "alice-secret"}


def gate(enabled=("PLAIN",)):
    return SaslGate(enabled, {"PLAIN": lambda: PlainServer(USERS)})


def frame(api_key, version, body, cid=1):
    return request_bytes(api_key, version, body, cid)[4:]


def answer(api_key, version, reply):
    (size,) = struct.unpack_from(">i", reply, 0)
    assert size == len(reply) - 4
    header = codec.response_header_class(api_key, version)
    _, used = codec.decode(header, reply, 4)
    body, _ = codec.decode(codec.response_class(api_key, version), reply, 4 + used)
    return body


def handshake(g, mechanism="PLAIN", version=1):
    return g.receive(frame(17, version, {"mechanism": mechanism}))


def authenticate(g, token, version=2):
    return g.receive(frame(36, version, {"auth_bytes": token}))


@pytest.mark.parametrize(
    "token, message",
    [
        (b"\x00alice\x00wrong", "Authentication failed: Invalid username or password"),
        (b"\x00mallory\x00alice-secret", "Authentication failed: Invalid username or password"),
        (b"\x00\x00x", "Authentication failed: username not specified"),
        (b"\x00alice\x00", "Authentication failed: password not specified"),
        (b"alice\x00alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
        (
            b"bob\x00alice\x00alice-secret",
            "Authentication failed: Client requested an authorization id that is different from username",
        ),
    ],
)
def test_plain_refusals_carry_kafkas_messages(token, message):
    with pytest.raises(AuthenticationFailed, match=f"^{message}$"):
        PlainServer(USERS).evaluate(token)


def test_plain_accepts_with_or_without_an_equal_authzid():
    for token in (b"\x00alice\x00alice-secret", b"alice\x00alice\x00alice-secret"):
        server = PlainServer(USERS)
        assert server.evaluate(token) == b"" and server.complete and server.authorization_id == "alice"


@pytest.mark.parametrize("with_api_versions", [False, True])
def test_handshake_v1_then_authenticate(with_api_versions):
    g = gate()
    if with_api_versions:
        assert g.receive(frame(18, 3, {"client_software_name": "t", "client_software_version": "1"})).passthrough
    step = handshake(g)
    reply = answer(17, 1, step.reply)
    assert reply.error_code == ErrorCode.none and reply.mechanisms == ("PLAIN",)
    assert step.close is None and step.principal is None
    step = authenticate(g, b"\x00alice\x00alice-secret")
    reply = answer(36, 2, step.reply)
    assert reply.error_code == ErrorCode.none and reply.error_message is None and reply.auth_bytes == b""
    assert codec.millis(reply.session_lifetime) == 0  # connections.max.reauth.ms 0: no expiry
    assert step.principal == "User:alice" and step.close is None


def test_wrong_password_answers_sasl_authentication_failed_then_closes():
    g = gate()
    handshake(g)
    step = authenticate(g, b"\x00alice\x00nope", version=1)
    reply = answer(36, 1, step.reply)
    assert reply.error_code == ErrorCode.sasl_authentication_failed
    assert reply.error_message == "Authentication failed: Invalid username or password"
    assert step.close and step.failed and step.principal is None


def test_unknown_mechanism_answers_the_enabled_list_then_closes():
    g = gate(("PLAIN", "SCRAM-SHA-256"))
    step = handshake(g, "GSSAPI")
    reply = answer(17, 1, step.reply)
    assert reply.error_code == ErrorCode.unsupported_sasl_mechanism
    assert reply.mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert step.close == "Unsupported SASL mechanism GSSAPI" and step.failed


@pytest.mark.parametrize(
    "before",
    [
        [],  # Metadata first
        ["versions"],  # Metadata after ApiVersions
        ["versions", "handshake"],  # Metadata where SaslAuthenticate was due
    ],
)
def test_any_other_request_before_authentication_closes_without_an_answer(before):
    g = gate()
    for what in before:
        if what == "versions":
            g.receive(frame(18, 3, {"client_software_name": "t", "client_software_version": "1"}))
        else:
            handshake(g)
    step = g.receive(
        frame(3, 12, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    )
    assert step.reply is None and step.close.startswith("Unexpected Kafka request of type Metadata during SASL")


def test_api_versions_only_once_and_only_first():
    g = gate()
    g.receive(frame(18, 3, {"client_software_name": "t", "client_software_version": "1"}))
    step = g.receive(frame(18, 3, {"client_software_name": "t", "client_software_version": "1"}))
    assert step.close and not step.passthrough


def test_authenticate_before_handshake_closes():
    step = authenticate(gate(), b"\x00alice\x00alice-secret")
    assert step.close == "Unexpected Kafka request of type SaslAuthenticate during SASL handshake"


def test_a_frame_that_is_no_kafka_request_closes():
    step = gate().receive(b"\x60\x01")  # what a 0.9 GSSAPI client would send first
    assert step.close and step.failed


def test_handshake_v0_takes_bare_tokens():
    g = gate()
    step = handshake(g, version=0)
    assert answer(17, 0, step.reply).error_code == ErrorCode.none
    step = g.receive(b"\x00alice\x00alice-secret")  # the frame is the token itself
    assert step.reply == b"\x00\x00\x00\x00"  # PLAIN's empty answer, size-prefixed
    assert step.principal == "User:alice"


def test_handshake_v0_bad_password_closes_without_an_answer():
    g = gate()
    handshake(g, version=0)
    step = g.receive(b"\x00alice\x00nope")
    assert step.reply is None and step.close and step.failed


def test_api_versions_too_new_may_be_retried_older():
    """Kafka answers UNSUPPORTED_VERSION and stays ready for ApiVersions, which librdkafka then resends at v0."""
    g = gate()
    too_new = request_bytes(18, 4, {"client_software_name": "t", "client_software_version": "1"})[4:]
    too_new = too_new[:2] + struct.pack(">h", 99) + too_new[4:]
    assert g.receive(too_new).passthrough
    assert g.receive(frame(18, 0, {})).passthrough
    assert answer(17, 1, handshake(g).reply).error_code == ErrorCode.none
