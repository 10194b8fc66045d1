"""SCRAM as Kafka's ScramSaslServer runs it (RFC 5802/7677), and the credential rules of Kafka's
ScramControlManager and ScramImage."""

import base64
import hashlib
import hmac

import pytest

from groupd.broker.security.errors import AuthenticationFailed, InvalidCredentials
from groupd.broker.security.scram import (
    SHA_256,
    SHA_512,
    ScramCredentials,
    ScramServer,
    credential,
    salted_password,
    username,
)
from groupd.protocol.errors import ErrorCode

# RFC 7677 section 3: user "user", password "pencil"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_server(iterations=4096, users=("user",)):
    cred = credential(SHA_256, RFC_SALT, salted_password(SHA_256, "pencil", RFC_SALT, iterations), iterations)
    return ScramServer(
        SHA_256,
        lambda user, mech: cred if user in users and mech == "SCRAM-SHA-256" else None,
        nonce=lambda: RFC_SERVER_NONCE,
    )


def test_rfc_7677_exchange():
    server = rfc_server()
    assert server.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not server.complete
    assert server.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.authorization_id == "user"


def test_a_wrong_proof_is_invalid_credentials():
    server = rfc_server()
    server.evaluate(RFC_CLIENT_FIRST)
    bad = RFC_CLIENT_FINAL[:-8] + b"AAAAAAA="
    with pytest.raises(InvalidCredentials, match="Invalid client credentials"):
        server.evaluate(bad)
    assert not server.complete


def test_an_unknown_user_is_invalid_credentials_at_the_first_message():
    with pytest.raises(InvalidCredentials, match="Invalid user credentials"):
        rfc_server(users=()).evaluate(RFC_CLIENT_FIRST)


def test_a_final_message_with_another_nonce_is_refused():
    server = rfc_server()
    server.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(InvalidCredentials, match="Invalid client nonce"):
        server.evaluate(RFC_CLIENT_FINAL.replace(b"k0,p=", b"k1,p="))


def test_too_few_stored_iterations_are_refused():
    with pytest.raises(InvalidCredentials, match="Iterations 4095 is less than the minimum 4096 for SCRAM-SHA-256"):
        rfc_server(iterations=4095).evaluate(RFC_CLIENT_FIRST)


@pytest.mark.parametrize("first", [b"y,,n=user,r=abc", b"n,,n=user", b"n=user,r=abc", b"n,,n=us,er,r=abc"])
def test_malformed_first_messages(first):
    with pytest.raises(InvalidCredentials, match="Invalid SCRAM client first message format"):
        rfc_server().evaluate(first)


def test_another_authorization_id_is_refused_with_kafkas_message():
    with pytest.raises(
        AuthenticationFailed, match="Client requested an authorization id that is different from username"
    ):
        rfc_server().evaluate(b"n,a=admin,n=user,r=rOprNGfwEbeRWgbNEkqO")


def test_saslname_escapes():
    assert username("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(ValueError):
        username("a=4Fb")


def client_final(mechanism, password, first_bare, server_first):
    """A SCRAM client's final message, written from RFC 5802, and the server-final it must get back."""
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(mechanism.hash, password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", mechanism.hash).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.new(mechanism.hash, client_key).digest(), auth, mechanism.hash).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    verifier = hmac.new(hmac.new(salted, b"Server Key", mechanism.hash).digest(), auth, mechanism.hash).digest()
    return f"{without_proof},p={proof}", "v=" + base64.b64encode(verifier).decode()


def client_exchange(server, mechanism, user, password):
    first_bare = f"n={user},r=clientnonce"
    server_first = server.evaluate(f"n,,{first_bare}".encode()).decode()
    final, expected = client_final(mechanism, password, first_bare, server_first)
    assert server.evaluate(final.encode()).decode() == expected


def test_sha_512_round_trip_through_the_credential_store():
    creds = ScramCredentials()
    salt = b"0123456789abcdef"
    results, changed = creds.alter(
        [], [("bob", SHA_512.type, 8192, salt, salted_password(SHA_512, "secret", salt, 8192))]
    )
    assert changed and [(r.user, r.error) for r in results] == [("bob", ErrorCode.none)]
    server = ScramServer(SHA_512, creds.get)
    client_exchange(server, SHA_512, "bob", "secret")
    assert server.complete and server.authorization_id == "bob"
    with pytest.raises(InvalidCredentials):
        client_exchange(ScramServer(SHA_512, creds.get), SHA_512, "bob", "wrong")
    with pytest.raises(InvalidCredentials):  # a SHA-512 credential is not a SHA-256 one
        client_exchange(ScramServer(SHA_256, creds.get), SHA_256, "bob", "secret")


def upsert(name, mech=1, iterations=4096):
    return (name, mech, iterations, b"salt", b"x" * 32)


def test_alter_refusals_as_kafkas_controller_answers_them():
    creds = ScramCredentials()
    creds.alter([], [upsert("kept")])
    results, changed = creds.alter(
        [("kept", 1), ("ghost", 1), ("", 1)],
        [
            upsert("few", iterations=4095),
            upsert("many", iterations=16385),
            upsert("odd", mech=3),
            upsert("twice"),
            upsert("twice", 2),
            upsert("new", 2),
        ],
    )
    got = {r.user: (r.error, r.message) for r in results}
    assert got == {
        "kept": (ErrorCode.none, None),
        "new": (ErrorCode.none, None),
        "ghost": (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"),
        "": (ErrorCode.unacceptable_credential, "Username must not be empty"),
        "few": (ErrorCode.unacceptable_credential, "Too few iterations"),
        "many": (ErrorCode.unacceptable_credential, "Too many iterations"),
        "odd": (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        "twice": (ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"),
    }
    assert [r.user for r in results][:2] == ["kept", "new"]  # deletions, then upsertions, then refusals
    assert changed and set(creds.items) == {("new", "SCRAM-SHA-512")}


def test_a_deletion_and_an_upsertion_of_one_user_is_altering_twice():
    creds = ScramCredentials()
    creds.alter([], [upsert("u")])
    results, changed = creds.alter([("u", 1)], [upsert("u", 2)])
    assert [(r.user, r.error) for r in results] == [("u", ErrorCode.duplicate_resource)]
    assert not changed and ("u", "SCRAM-SHA-256") in creds.items


def test_describe_named_all_missing_and_duplicated():
    creds = ScramCredentials()
    creds.alter([], [upsert("a"), upsert("b", 2, 8192)])
    creds.alter([], [upsert("a", 2, 5000)])
    assert [(r.user, infos) for r, infos in creds.describe(None)] == [("a", [(1, 4096), (2, 5000)]), ("b", [(2, 8192)])]
    out = {r.user: (r.error, r.message, infos) for r, infos in creds.describe(["b", "zed", "a", "a"])}
    assert out["b"] == (ErrorCode.none, None, [(2, 8192)])
    assert out["zed"] == (
        ErrorCode.resource_not_found,
        "Attempt to describe a user credential that does not exist: zed",
        [],
    )
    assert out["a"] == (
        ErrorCode.duplicate_resource,
        "Cannot describe SCRAM credentials for the same user twice in a single request: a",
        [],
    )


def test_json_round_trip_keeps_keys_not_passwords():
    creds = ScramCredentials()
    creds.alter([], [("u", 1, 4096, b"s", salted_password(SHA_256, "pw", b"s", 4096))])
    doc = creds.to_json()
    assert "pw" not in str(doc) and set(doc["credentials"][0]) == {
        "user",
        "mechanism",
        "iterations",
        "salt",
        "stored_key",
        "server_key",
    }
    assert ScramCredentials.from_json(doc).items == creds.items


def test_delegation_token_logins_are_refused_there_being_no_tokens():
    with pytest.raises(InvalidCredentials, match="Token Authentication failed"):
        rfc_server().evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO,tokenauth=true")
    assert rfc_server().evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO,other=x").startswith(b"r=rOprNGfwEbeRWgbNEkqO")
