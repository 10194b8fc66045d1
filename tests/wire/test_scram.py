"""SCRAM credentials through Describe/AlterUserScramCredentials, then SCRAM-SHA-256/512 logins on a
SASL listener, and the credentials surviving a restart."""

from __future__ import annotations

import asyncio
import io
import logging

import pytest

from groupd.broker.app import Broker
from groupd.broker.ops.logoutput import VALUE_MAX_CHARS, TextFieldsFormatter, TurnBufferedHandler
from groupd.broker.security.scram import SHA_256, SHA_512, salted_password
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.unit.test_scram import client_final
from tests.wire.test_sasl import JAAS, METADATA, closed

CONFIG = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": (
        "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    ),
    "connection.failed.authentication.delay.ms": 0,
}


@pytest.fixture
async def scram_broker(tmp_path):
    b = Broker(broker_config(tmp_path, **CONFIG))
    await b.start()
    yield b
    await b.stop()


def upsertion(name, mechanism, password, iterations=4096, salt=b"salt-of-the-earth"):
    return {
        "name": name,
        "mechanism": mechanism.type,
        "iterations": iterations,
        "salt": salt,
        "salted_password": salted_password(mechanism, password, salt, iterations),
    }


def entities(api_key, name, rows):
    cls = codec.nested(codec.request_class(api_key, 0), name)
    return tuple(codec.make(cls, **row) for row in rows)


async def alter(client, deletions=(), upsertions=()):
    body = {
        "deletions": entities(51, "ScramCredentialDeletion", deletions),
        "upsertions": entities(51, "ScramCredentialUpsertion", upsertions),
    }
    resp = await client.call(51, 0, body)
    return {r.user: (r.error_code, r.error_message) for r in resp.results}


async def describe(client, users):
    resp = await client.call(
        50, 0, {"users": None if users is None else entities(50, "UserName", [{"name": u} for u in users])}
    )
    assert resp.error_code == ErrorCode.none
    return {
        r.user: (r.error_code, r.error_message, [(c.mechanism, c.iterations) for c in r.credential_infos])
        for r in resp.results
    }


async def scram_login(port, mechanism, user, password, *, client_nonce="fyko+d2lbbFgONRv9qkxdawL"):
    """A SCRAM client (RFC 5802) over SaslHandshake v1 + SaslAuthenticate; (client, last answer)."""
    client = await WireClient.connect(port)
    hs = await client.call(17, 1, {"mechanism": mechanism.name})
    assert hs.error_code == ErrorCode.none
    first_bare = f"n={user},r={client_nonce}"
    first = await client.call(36, 2, {"auth_bytes": f"n,,{first_bare}".encode()})
    if first.error_code != ErrorCode.none:
        return client, first
    server_first = first.auth_bytes.decode()
    assert server_first.startswith(f"r={client_nonce}") and not server_first.startswith(f"r={client_nonce},")
    message, verifier = client_final(mechanism, password, first_bare, server_first)
    final = await client.call(36, 2, {"auth_bytes": message.encode()})
    if final.error_code == ErrorCode.none:
        assert final.auth_bytes.decode() == verifier
    return client, final


async def test_created_credentials_describe_and_authenticate(scram_broker):
    admin = await WireClient.connect(scram_broker.port_of("PLAINTEXT"))
    assert await alter(
        admin, upsertions=[upsertion("carol", SHA_256, "c-pass"), upsertion("dave", SHA_512, "d-pass", 8192)]
    ) == {
        "carol": (ErrorCode.none, None),
        "dave": (ErrorCode.none, None),
    }
    assert await describe(admin, None) == {
        "carol": (ErrorCode.none, None, [(1, 4096)]),
        "dave": (ErrorCode.none, None, [(2, 8192)]),
    }
    assert (await describe(admin, ["nobody"]))["nobody"][:2] == (
        ErrorCode.resource_not_found,
        "Attempt to describe a user credential that does not exist: nobody",
    )
    port = scram_broker.port_of("SASL_PLAINTEXT")
    for mechanism, user, password in ((SHA_256, "carol", "c-pass"), (SHA_512, "dave", "d-pass")):
        client, final = await scram_login(port, mechanism, user, password)
        assert final.error_code == ErrorCode.none, final
        assert [b.port for b in (await client.call(3, 12, METADATA)).brokers] == [port]
        await client.close()
    await admin.close()


@pytest.mark.parametrize(
    "user, password, mechanism", [("carol", "wrong", SHA_256), ("nobody", "x", SHA_256), ("carol", "c-pass", SHA_512)]
)
async def test_bad_password_unknown_user_or_other_mechanism_fail_alike(scram_broker, user, password, mechanism):
    admin = await WireClient.connect(scram_broker.port_of("PLAINTEXT"))
    await alter(admin, upsertions=[upsertion("carol", SHA_256, "c-pass")])
    client, answer = await scram_login(scram_broker.port_of("SASL_PLAINTEXT"), mechanism, user, password)
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    # Kafka does not tell an unknown user from a bad proof
    assert (
        answer.error_message
        == "Authentication failed during authentication due to invalid credentials with SASL mechanism "
        f"{mechanism.name}"
    )
    assert await closed(client)
    await admin.close()


async def test_alter_refusals_over_the_wire(scram_broker):
    admin = await WireClient.connect(scram_broker.port_of("PLAINTEXT"))
    got = await alter(
        admin,
        deletions=[{"name": "ghost", "mechanism": 1}],
        upsertions=[
            upsertion("few", SHA_256, "p", iterations=1000),
            upsertion("", SHA_256, "p"),
            upsertion("x", SHA_256, "p"),
            upsertion("x", SHA_512, "p"),
        ],
    )
    assert got == {
        "ghost": (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"),
        "few": (ErrorCode.unacceptable_credential, "Too few iterations"),
        "": (ErrorCode.unacceptable_credential, "Username must not be empty"),
        "x": (ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"),
    }
    assert await describe(admin, None) == {}
    await admin.close()


async def test_credentials_survive_a_restart_and_deletion_takes_effect(tmp_path):
    b = Broker(broker_config(tmp_path, **CONFIG))
    await b.start()
    admin = await WireClient.connect(b.port_of("PLAINTEXT"))
    await alter(admin, upsertions=[upsertion("erin", SHA_512, "e-pass")])
    await admin.close()
    await b.stop()
    stored = (tmp_path / "data" / "__scram_credentials.json").read_text()
    assert "e-pass" not in stored and "erin" in stored
    b = Broker(broker_config(tmp_path, **CONFIG))
    await b.start()
    try:
        client, final = await scram_login(b.port_of("SASL_PLAINTEXT"), SHA_512, "erin", "e-pass")
        assert final.error_code == ErrorCode.none
        await client.close()
        admin = await WireClient.connect(b.port_of("PLAINTEXT"))
        assert await alter(admin, deletions=[{"name": "erin", "mechanism": 2}]) == {"erin": (ErrorCode.none, None)}
        await admin.close()
        client, final = await scram_login(b.port_of("SASL_PLAINTEXT"), SHA_512, "erin", "e-pass")
        assert final.error_code == ErrorCode.sasl_authentication_failed
        await client.close()
    finally:
        await b.stop()


async def test_a_forged_log_line_in_a_client_first_message_stays_on_the_failure_line(scram_broker, tmp_path):
    """Issue 26 item 4: a user name carrying a newline and a log line of its own, then a 500 KB
    token, through the broker's text format: each failure is one line, capped."""
    stream = io.StringIO()
    handler = TurnBufferedHandler(stream)
    handler.setFormatter(TextFieldsFormatter())
    watched = logging.getLogger("groupd")
    watched.addHandler(handler)
    try:
        port = scram_broker.port_of("SASL_PLAINTEXT")
        forged = "x\n2026-11-25 14:00:00,000 INFO groupd.broker: FORGED"
        for first in (f"n,,n={forged},r=abc", "n,,n=u,x=" + "A" * 500_000):
            client = await WireClient.connect(port)
            assert (await client.call(17, 1, {"mechanism": "SCRAM-SHA-256"})).error_code == ErrorCode.none
            answer = await client.call(36, 2, {"auth_bytes": first.encode()})
            assert answer.error_code == ErrorCode.sasl_authentication_failed
            assert await closed(client)
            await client.close()
        await asyncio.sleep(0)
        handler.flush()
    finally:
        watched.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and all("Invalid SCRAM client first message format" in line for line in lines), lines
    assert not any(line.startswith("2026-11-25 14:00:00,000") for line in lines), lines
    assert max(len(line) for line in lines) < 2 * VALUE_MAX_CHARS + 400
