"""SSL and SASL_SSL listeners through real TLS sockets: the handshake, client certificates and the
principal they give, SASL over TLS, and each listener advertising itself."""

from __future__ import annotations

import asyncio
import ssl

import pytest

from broker.app import Broker
from protocol.errors import ErrorCode
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


async def test_ssl_without_a_client_certificate_is_refused_when_required(tls_broker, certs):
    with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):  # TLS 1.3: refused after the client's handshake
        client = await connect_tls(tls_broker.port_of("SSL"), client_context(certs, with_cert=False))
        await client.call(18, 3, {"client_software_name": "t", "client_software_version": "1"}, timeout=5)


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


async def test_a_plaintext_client_on_the_ssl_port_gets_nothing(tls_broker):
    client = await WireClient.connect(tls_broker.port_of("SSL"))
    client.send(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert await closed(client)


async def test_sasl_ssl_plain_login_over_tls_without_a_client_certificate(tls_broker, certs):
    port = tls_broker.port_of("SASL_SSL")
    client = await connect_tls(port, client_context(certs, with_cert=False))  # ssl.client.auth needs the prefix on SASL_SSL
    auth = await login(client)
    assert auth.error_code == ErrorCode.none
    md = await client.call(3, 12, METADATA)
    assert [b.port for b in md.brokers] == [port]
    assert principals(tls_broker, "SASL_SSL") == ["User:alice"]
    await client.close()
    client = await connect_tls(port, client_context(certs, with_cert=False))
    assert (await login(client, password="nope")).error_code == ErrorCode.sasl_authentication_failed
    assert await closed(client)
