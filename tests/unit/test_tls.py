"""SSL listener settings with Kafka's PEM keys (KIP-651) and its refusals, and the principal a
client certificate gives (Kafka's default principal builder: the subject in RFC 2253 form)."""

from __future__ import annotations

import pytest

from groupd.broker.config import ConfigError, load_config
from groupd.broker.security.tls import principal, server_context
from tests.tls_certs import CLIENT_PRINCIPAL, KEY_PASSWORD, make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def load(**raw):
    return load_config(None, [f"{k}={v}" for k, v in raw.items()])


def ssl_listener(**more):
    return {"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093", **more}


def test_pem_keystore_file_and_truststore(certs):
    cfg = load(**ssl_listener(**{
        "ssl.keystore.type": "PEM", "ssl.keystore.location": certs.server_keystore, "ssl.truststore.type": "PEM",
        "ssl.truststore.location": certs.ca, "ssl.client.auth": "required",
    }))
    tls = cfg.listeners[1].ssl
    assert cfg.listeners[1].tls and tls.client_auth == "required" and "BEGIN CERTIFICATE" in tls.trusted
    assert tls.chain.count("BEGIN CERTIFICATE") == 2 and "PRIVATE KEY" not in tls.chain
    server_context(tls)


def test_inline_chain_and_encrypted_key_as_continued_properties_lines(certs):
    # server.properties continuation lines turn the PEM's line breaks into spaces; Kafka accepts that
    flat = {
        "ssl.keystore.certificate.chain": certs.server_cert.read_text().replace("\n", " "),
        "ssl.keystore.key": certs.server_key_encrypted.read_text().replace("\n", " "),
    }
    cfg = load(**ssl_listener(**{"ssl.keystore.type": "PEM", **flat, "ssl.key.password": KEY_PASSWORD}))
    server_context(cfg.listeners[1].ssl)
    with pytest.raises(ConfigError, match="Invalid PEM keystore configs"):
        load(**ssl_listener(**{"ssl.keystore.type": "PEM", **flat, "ssl.key.password": "wrong"}))


def test_per_listener_keys_and_client_auth_on_sasl_ssl_only_with_the_prefix(certs):
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'
    base = {
        "listeners": "SSL://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": certs.server_keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": certs.ca,
        "ssl.client.auth": "required",
    }
    ssl_l, sasl_ssl = load(**base).listeners
    assert ssl_l.ssl.client_auth == "required" and sasl_ssl.ssl.client_auth == "none"
    assert sasl_ssl.sasl and sasl_ssl.tls
    _, sasl_ssl = load(**base, **{"listener.name.sasl_ssl.ssl.client.auth": "requested"}).listeners
    assert sasl_ssl.ssl.client_auth == "requested"


@pytest.mark.parametrize(
    "keys, message",
    [
        ({}, "SSL needs a key store"),
        ({"ssl.keystore.location": "KS"}, "ssl.keystore.type JKS is not supported: groupd reads PEM key stores only"),
        ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "KS"}, "ssl.keystore.type PKCS12 is not supported"),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.key": "KEY"},
            "SSL private key is specified, but certificate chain is not specified.",
        ),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": "CERT"},
            "SSL certificate chain is specified, but private key is not specified",
        ),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "KS",
                "ssl.keystore.key": "KEY",
                "ssl.keystore.certificate.chain": "CERT",
            },
            "Both SSL key store location and separate private key are specified.",
        ),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": "KS", "ssl.keystore.password": "x"},
            "SSL key store password cannot be specified with PEM format",
        ),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent/ks.pem"},
            "ssl.keystore.location: cannot read /nonexistent/ks.pem",
        ),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": "KS", "ssl.truststore.location": "CA"},
            "ssl.truststore.type JKS is not supported",
        ),
        (
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "KS",
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": "CA",
                "ssl.truststore.certificates": "X",
            },
            "Both SSL trust store location and separate trust certificates",
        ),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "CA"}, "Expected one private key, but found 0"),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": "KS", "ssl.client.auth": "sometimes"},
            "expected one of none, requested, required",
        ),
    ],
)
def test_refused_at_start_up(certs, keys, message):
    paths = {"KS": str(certs.server_keystore), "CA": str(certs.ca)}
    keys = {k: paths.get(v, v) for k, v in keys.items()}
    with pytest.raises(ConfigError, match=message):
        load(**ssl_listener(**keys))


def test_principal_is_the_subject_most_specific_first():
    cert = {
        "subject": (
            (("countryName", "US"),),
            (("organizationName", "Example Corp"),),
            (("organizationalUnitName", "Eng"),),
            (("commonName", "client-one"),),
        )
    }
    assert principal(cert) == CLIENT_PRINCIPAL
    escaped = {"subject": ((("organizationName", "A, B+C"),), (("commonName", "#x "),), (("emailAddress", "a@b.c"),))}
    assert principal(escaped) == "User:1.2.840.113549.1.9.1=#16056140622e63,CN=\\#x\\ ,O=A\\, B\\+C"
    assert principal(None) == principal({}) == "User:ANONYMOUS"
