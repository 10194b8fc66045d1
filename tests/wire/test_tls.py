"""SSL and SASL_SSL listeners through real TLS sockets: the handshake, client certificates and the
principal they give, SASL over TLS, and each listener advertising itself."""

from __future__ import annotations

import asyncio
import logging
import ssl

import pytest
from prometheus_client import generate_latest

from groupd.broker.app import Broker
from groupd.protocol.errors import ErrorCode
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.tls_certs import CLIENT_PRINCIPAL, make_certs
from tests.wire.test_sasl import JAAS, METADATA, closed, login


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def tls_config(certs, client_auth="required"):
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server_keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca), "ssl.client.auth": client_auth,
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "connection.failed.authentication.delay.ms": 0,
    }


@pytest.fixture
async def tls_broker(tmp_path, certs):
    b = Broker(broker_config(tmp_path, **tls_config(certs)))
    await b.start()
    yield b
    await b.stop()


def client_context(certs, with_cert=True):
    context = ssl.create_default_context(cafile=str(certs.ca))
    if with_cert:
        context.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    return context


async def connect_tls(port, context):
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="localhost")
    return WireClient(reader, writer)


def principals(broker, listener):
    return sorted(c.principal for c in broker._connections if c.listener == listener)


async def test_ssl_client_certificate_names_the_principal_and_metadata_advertises_the_ssl_port(tls_broker, certs):
    port = tls_broker.port_of("SSL")
    client = await connect_tls(port, client_context(certs))
    md = await client.call(3, 12, METADATA)
    assert [(b.host, b.port) for b in md.brokers] == [("127.0.0.1", port)]
    assert principals(tls_broker, "SSL") == [CLIENT_PRINCIPAL]
    await client.close()


async def test_ssl_without_a_client_certificate_is_refused_when_required(tls_broker, certs, caplog):
    refused = (
        ssl.SSLError,
        ConnectionError,
        asyncio.IncompleteReadError,
    )  # TLS 1.3: refused after the client's handshake
    with caplog.at_level(logging.WARNING, logger="groupd.connection"), pytest.raises(refused):
        client = await connect_tls(tls_broker.port_of("SSL"), client_context(certs, with_cert=False))
        await client.call(18, 3, {"client_software_name": "t", "client_software_version": "1"}, timeout=5)
    assert any(
        "(listener SSL) closed: TLS handshake failed" in r.getMessage() and "CERTIFICATE" in r.getMessage()
        for r in caplog.records
    )
    text = generate_latest(tls_broker.metrics.registry).decode()
    assert 'groupd_authentications_total{listener="SSL",mechanism="SSL",result="failure"} 1.0' in text


async def test_ssl_client_auth_none_gives_anonymous(tmp_path, certs):
    b = Broker(broker_config(tmp_path, **tls_config(certs, client_auth="none")))
    await b.start()
    try:
        client = await connect_tls(b.port_of("SSL"), client_context(certs, with_cert=False))
        assert (await client.call(3, 12, METADATA)).brokers
        assert principals(b, "SSL") == ["User:ANONYMOUS"]
        await client.close()
    finally:
        await b.stop()


async def test_a_plaintext_client_on_the_ssl_port_gets_nothing(tls_broker, caplog):
    client = await WireClient.connect(tls_broker.port_of("SSL"))
    with caplog.at_level(logging.WARNING, logger="groupd.connection"):
        client.send(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert await closed(client)
    assert any("TLS handshake failed" in r.getMessage() for r in caplog.records)


async def test_sasl_ssl_plain_login_over_tls_without_a_client_certificate(tls_broker, certs):
    port = tls_broker.port_of("SASL_SSL")
    client = await connect_tls(
        port, client_context(certs, with_cert=False)
    )  # ssl.client.auth needs the prefix on SASL_SSL
    auth = await login(client)
    assert auth.error_code == ErrorCode.none
    md = await client.call(3, 12, METADATA)
    assert [b.port for b in md.brokers] == [port]
    assert principals(tls_broker, "SASL_SSL") == ["User:alice"]
    await client.close()
    client = await connect_tls(port, client_context(certs, with_cert=False))
    assert (await login(client, password="nope")).error_code == ErrorCode.sasl_authentication_failed
    assert await closed(client)


async def test_a_handshake_not_finished_in_time_is_closed_and_logged(tls_broker, monkeypatch, caplog):
    import groupd.broker.network.secure_connection

    monkeypatch.setattr(groupd.broker.network.secure_connection, "TLS_HANDSHAKE_TIMEOUT", 0.2)
    client = await WireClient.connect(tls_broker.port_of("SASL_SSL"))  # connects, never says hello
    with caplog.at_level(logging.WARNING, logger="groupd.connection"):
        assert await closed(client)
    assert any(
        "(listener SASL_SSL) closed: TLS handshake failed: not finished within" in r.getMessage()
        for r in caplog.records
    )


async def test_large_answers_and_pipelined_requests_over_tls(tls_broker, certs):
    client = await connect_tls(tls_broker.port_of("SSL"), client_context(certs))
    for i in range(300):
        tls_broker.create_topic(f"topic-with-a-long-name-{i:04d}", 4, {})
    for _ in range(3):
        client.send(3, 12, METADATA)
    for _ in range(3):
        md = await asyncio.wait_for(client.recv(), 10)
        assert len(md.topics) == 300  # an answer of several TLS records
    await client.close()
