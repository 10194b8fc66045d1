"""SASL_PLAINTEXT beside PLAINTEXT through real sockets: the handshake order Kafka enforces, its error
answers and closes, and each listener's own advertised address in Metadata and FindCoordinator."""

from __future__ import annotations

import asyncio
import logging
import struct
import time

import pytest
from prometheus_client import generate_latest

from groupd.broker.app import Broker
from groupd.protocol.errors import ErrorCode
from tests.conftest import broker_config
from tests.harness import WireClient

JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";'
)
SASL_CONFIG = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "connection.failed.authentication.delay.ms": 0,
}
METADATA = {
    "topics": None,
    "allow_auto_topic_creation": False,
    "include_topic_authorized_operations": False,
    "include_cluster_authorized_operations": False,
}


@pytest.fixture
async def sasl_broker(tmp_path):
    b = Broker(broker_config(tmp_path, **SASL_CONFIG))
    await b.start()
    yield b
    await b.stop()


async def closed(client: WireClient, timeout: float = 5.0) -> bool:
    """True once the broker has closed the connection (EOF), having sent nothing more."""
    try:
        data = await asyncio.wait_for(client.reader.read(), timeout)
    except ConnectionError:
        return True
    return data == b""


async def login(client: WireClient, user: str = "alice", password: str = "alice-secret", version: int = 2):
    hs = await client.call(17, 1, {"mechanism": "PLAIN"})
    assert hs.error_code == ErrorCode.none and hs.mechanisms == ("PLAIN",)
    return await client.call(36, version, {"auth_bytes": f"\x00{user}\x00{password}".encode()})


async def test_each_listener_advertises_itself_after_plain_login(sasl_broker):
    sasl_port, plain_port = sasl_broker.port_of("SASL_PLAINTEXT"), sasl_broker.port_of("PLAINTEXT")
    assert sasl_port != plain_port
    client = await WireClient.connect(sasl_port)
    versions = await client.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}[17] == (0, 1)
    auth = await login(client)
    assert auth.error_code == ErrorCode.none and auth.error_message is None
    md = await client.call(3, 12, METADATA)
    assert [(b.host, b.port) for b in md.brokers] == [("127.0.0.1", sasl_port)]
    # the SASL user is the connection's principal, and the user its quotas are keyed by
    users = {(c.listener, c.user, c.principal) for c in sasl_broker._connections}
    assert users == {("SASL_PLAINTEXT", "alice", "User:alice")}
    fc = await client.call(10, 4, {"key_type": 0, "coordinator_keys": ("g",)})
    assert (fc.coordinators[0].error_code, fc.coordinators[0].port) == (ErrorCode.none, sasl_port)
    dc = await client.call(60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 1})
    assert [b.port for b in dc.brokers] == [sasl_port]
    plain = await WireClient.connect(plain_port)
    md = await plain.call(3, 12, METADATA)
    assert [(b.host, b.port) for b in md.brokers] == [("127.0.0.1", plain_port)]
    fc = await plain.call(10, 3, {"key": "g", "key_type": 0})
    assert fc.port == plain_port
    # on PLAINTEXT, and once authenticated, Kafka's KafkaApis answers the SASL requests ILLEGAL_SASL_STATE
    assert (await plain.call(17, 1, {"mechanism": "PLAIN"})).error_code == ErrorCode.illegal_sasl_state
    again = await client.call(36, 2, {"auth_bytes": b"\x00alice\x00alice-secret"})
    assert again.error_code == ErrorCode.illegal_sasl_state
    assert again.error_message == "SaslAuthenticate request received after successful authentication"
    await client.close()
    await plain.close()


async def test_requests_pipelined_behind_the_last_token_are_served(sasl_broker):
    reader, writer = await asyncio.open_connection("127.0.0.1", sasl_broker.port_of("SASL_PLAINTEXT"))
    client = WireClient(reader, writer)
    client.send(17, 1, {"mechanism": "PLAIN"})
    client.send(36, 2, {"auth_bytes": b"\x00bob\x00bob-secret"})
    client.send(3, 12, METADATA)
    assert (await client.recv()).error_code == ErrorCode.none
    assert (await client.recv()).error_code == ErrorCode.none
    assert [b.port for b in (await client.recv()).brokers] == [sasl_broker.port_of("SASL_PLAINTEXT")]
    await client.close()


async def test_wrong_password_is_answered_then_closed(sasl_broker, caplog):
    client = await WireClient.connect(sasl_broker.port_of("SASL_PLAINTEXT"))
    with caplog.at_level(logging.WARNING, logger="groupd.connection"):
        auth = await login(client, password="guess")
        assert auth.error_code == ErrorCode.sasl_authentication_failed
        assert auth.error_message == "Authentication failed: Invalid username or password"
        assert await closed(client)
    assert any(
        "Invalid username or password" in r.getMessage() and "SASL_PLAINTEXT" in r.getMessage() for r in caplog.records
    )


async def test_failed_authentication_close_is_delayed(tmp_path):
    b = Broker(broker_config(tmp_path, **{**SASL_CONFIG, "connection.failed.authentication.delay.ms": 300}))
    await b.start()
    try:
        client = await WireClient.connect(b.port_of("SASL_PLAINTEXT"))
        await client.call(17, 1, {"mechanism": "PLAIN"})
        began = time.monotonic()
        auth = await client.call(36, 1, {"auth_bytes": b"\x00alice\x00x"})
        assert auth.error_code == ErrorCode.sasl_authentication_failed
        assert time.monotonic() - began < 0.25, "the answer is not delayed, only the close"
        assert await closed(client)
        assert time.monotonic() - began >= 0.25
    finally:
        await b.stop()


async def test_unknown_mechanism_gets_the_enabled_list_then_close(sasl_broker):
    client = await WireClient.connect(sasl_broker.port_of("SASL_PLAINTEXT"))
    hs = await client.call(17, 1, {"mechanism": "SCRAM-SHA-256"})
    assert hs.error_code == ErrorCode.unsupported_sasl_mechanism and hs.mechanisms == ("PLAIN",)
    assert await closed(client)


@pytest.mark.parametrize("after_handshake", [False, True])
async def test_a_request_before_authentication_closes_the_connection(sasl_broker, after_handshake, caplog):
    client = await WireClient.connect(sasl_broker.port_of("SASL_PLAINTEXT"))
    if after_handshake:
        await client.call(17, 1, {"mechanism": "PLAIN"})
    with caplog.at_level(logging.WARNING, logger="groupd.connection"):
        client.send(3, 12, METADATA)
        assert await closed(client)
    assert any("Unexpected Kafka request of type Metadata" in r.getMessage() for r in caplog.records)
    # the plaintext listener is unaffected
    plain = await WireClient.connect(sasl_broker.port_of("PLAINTEXT"))
    assert (await plain.call(3, 12, METADATA)).brokers
    await plain.close()


async def test_handshake_v0_then_bare_tokens(sasl_broker):
    client = await WireClient.connect(sasl_broker.port_of("SASL_PLAINTEXT"))
    hs = await client.call(17, 0, {"mechanism": "PLAIN"})
    assert hs.error_code == ErrorCode.none
    token = b"\x00alice\x00alice-secret"  # shorter than a request header: framed all the same
    client.writer.write(struct.pack(">i", len(token)) + token)
    assert await asyncio.wait_for(client.reader.readexactly(4), 5) == b"\x00\x00\x00\x00"
    assert (await client.call(3, 12, METADATA)).brokers
    await client.close()


async def test_oversized_frame_before_authentication_closes(sasl_broker, caplog):
    reader, writer = await asyncio.open_connection("127.0.0.1", sasl_broker.port_of("SASL_PLAINTEXT"))
    with caplog.at_level(logging.WARNING, logger="groupd.connection"):
        writer.write(struct.pack(">i", 524_289) + b"\x00" * 16)  # past sasl.server.max.receive.size
        assert await closed(WireClient(reader, writer))
    assert any("invalid receive size 524289" in r.getMessage() for r in caplog.records)


async def test_authentications_counted_by_listener_mechanism_and_result(sasl_broker):
    for password in ("alice-secret", "bad"):
        client = await WireClient.connect(sasl_broker.port_of("SASL_PLAINTEXT"))
        await login(client, password=password)
        await client.close()
    text = generate_latest(sasl_broker.metrics.registry).decode()
    assert 'groupd_authentications_total{listener="SASL_PLAINTEXT",mechanism="PLAIN",result="success"} 1.0' in text
    assert 'groupd_authentications_total{listener="SASL_PLAINTEXT",mechanism="PLAIN",result="failure"} 1.0' in text


async def test_a_listener_not_advertised_gets_no_broker(tmp_path):
    b = Broker(
        broker_config(tmp_path, **{**SASL_CONFIG, "advertised.listeners": "SASL_PLAINTEXT://kafka.example.com:9093"})
    )
    await b.start()
    try:
        plain = await WireClient.connect(b.port_of("PLAINTEXT"))
        assert (await plain.call(3, 12, METADATA)).brokers == ()
        fc = await plain.call(10, 3, {"key": "g", "key_type": 0})
        assert fc.error_code == ErrorCode.coordinator_not_available
        await plain.close()
        client = await WireClient.connect(b.port_of("SASL_PLAINTEXT"))
        await login(client)
        assert [(x.host, x.port) for x in (await client.call(3, 12, METADATA)).brokers] == [("kafka.example.com", 9093)]
        await client.close()
    finally:
        await b.stop()
