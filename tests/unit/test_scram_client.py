"""The client side of SCRAM a cluster node logs in to its peers with (inter-broker SASL), checked against
RFC 7677's example exchange and against groupd's own server."""

import pytest

from groupd.broker.security.errors import AuthenticationFailed, InvalidCredentials
from groupd.broker.security.scram import SHA_256, SHA_512, ScramClient, ScramServer, credential, salted_password
from tests.unit.test_scram import (
    RFC_CLIENT_FINAL,
    RFC_CLIENT_FIRST,
    RFC_SERVER_FINAL,
    RFC_SERVER_FIRST,
)

RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"


def rfc_client(password: str = "pencil") -> ScramClient:
    return ScramClient(SHA_256, "user", password, nonce=lambda: RFC_CLIENT_NONCE)


def test_rfc_7677_exchange_from_the_client_side():
    client = rfc_client()
    assert client.first() == RFC_CLIENT_FIRST
    assert client.final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify(RFC_SERVER_FINAL)  # the server's signature checks: no exception


def test_a_server_that_does_not_know_the_password_is_refused():
    client = rfc_client()
    client.final(RFC_SERVER_FIRST)
    with pytest.raises(AuthenticationFailed, match="Invalid server signature"):
        client.verify(b"v=" + b"A" * 43 + b"=")
    with pytest.raises(AuthenticationFailed, match="refused"):
        rfc_client().verify(b"e=invalid-proof")


def test_a_server_nonce_not_extending_the_clients_or_too_few_iterations_is_refused():
    with pytest.raises(AuthenticationFailed, match="Invalid SCRAM server first message"):
        rfc_client().final(b"r=someone-else,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    with pytest.raises(AuthenticationFailed, match="less than the minimum"):
        rfc_client().final(RFC_SERVER_FIRST.replace(b"i=4096", b"i=1024"))


@pytest.mark.parametrize("password, accepted", [("secret", True), ("wrong", False)])
def test_against_groupds_server_with_a_name_to_escape(password, accepted):
    salt = b"0123456789abcdef"
    cred = credential(SHA_512, salt, salted_password(SHA_512, "secret", salt, 4096), 4096)
    server = ScramServer(SHA_512, lambda user, mech: cred if user == "node,=1" else None)
    client = ScramClient(SHA_512, "node,=1", password)
    assert client.first().startswith(b"n,,n=node=2C=3D1,r=")
    server_first = server.evaluate(client.first())
    client_final = client.final(server_first)
    if not accepted:
        with pytest.raises(InvalidCredentials):
            server.evaluate(client_final)
        return
    client.verify(server.evaluate(client_final))
    assert server.complete and server.authorization_id == "node,=1"
