"""listeners, listener.security.protocol.map, advertised.listeners and SASL settings as Kafka reads
them, and what groupd refuses at start-up."""

import pytest

from groupd.broker.config import ConfigError, load_config, parse_properties

JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_alice="alice-secret";'
)


def sasl(**more):
    return {
        "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        **more,
    }


def load(raw):
    return load_config(None, [f"{k}={v}" for k, v in raw.items()])


def test_default_is_one_plaintext_listener():
    (only,) = load({}).listeners
    assert (only.name, only.protocol, only.host, only.port, only.advertised) == (
        "PLAINTEXT",
        "PLAINTEXT",
        "127.0.0.1",
        9092,
        ("127.0.0.1", 9092),
    )
    assert not only.sasl and not only.tls


def test_two_listeners_map_to_their_protocols_and_advertise_themselves():
    plain, secured = load(sasl()).listeners
    assert (plain.name, plain.protocol, plain.port) == ("PLAINTEXT", "PLAINTEXT", 9092)
    assert (secured.name, secured.protocol, secured.port, secured.advertised) == (
        "SASL_PLAINTEXT",
        "SASL_PLAINTEXT",
        9093,
        ("127.0.0.1", 9093),
    )
    assert secured.mechanisms == ("PLAIN",)
    assert dict(secured.plain_users) == {"admin": "admin-secret", "alice": "alice-secret"}


def test_custom_names_through_the_protocol_map_and_lower_case_names_normalised():
    raw = {
        "listeners": "internal://127.0.0.1:9092,External://127.0.0.1:9093",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.external.plain.sasl.jaas.config": JAAS,
        "advertised.listeners": "INTERNAL://broker-1:19092,EXTERNAL://kafka.example.com:9093",
    }
    internal, external = load(raw).listeners
    assert (internal.name, internal.protocol, internal.advertised) == ("INTERNAL", "PLAINTEXT", ("broker-1", 19092))
    assert (external.name, external.protocol, external.advertised) == (
        "EXTERNAL",
        "SASL_PLAINTEXT",
        ("kafka.example.com", 9093),
    )


def test_a_listener_left_out_of_advertised_listeners_advertises_nothing():
    a, b = load(sasl(**{"advertised.listeners": "SASL_PLAINTEXT://h:1"})).listeners
    assert a.advertised is None and b.advertised == ("h", 1)


def test_per_listener_mechanisms_override_the_global_key():
    raw = sasl(
        **{
            "sasl.enabled.mechanisms": "GSSAPI",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        }
    )
    assert load(raw).listeners[1].mechanisms == ("PLAIN", "SCRAM-SHA-256")


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"listeners": "127.0.0.1:9092"}, "Unable to parse 127.0.0.1:9092 to a broker endpoint"),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093"},
            "Each listener must have a different name",
        ),
        ({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9092"}, "Each listener must have a different port"),
        ({"listeners": "CLIENT://127.0.0.1:9092"}, "No security protocol defined for listener CLIENT"),
        ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "unknown security protocol TLS"),
        ({"advertised.listeners": "OTHER://h:1"}, "must be equal to or a subset"),
        ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "nonroutable meta-address 0.0.0.0"),
        ({"listener.name.nope.sasl.enabled.mechanisms": "PLAIN"}, "listener.name.nope"),
        # Kafka's default sasl.enabled.mechanisms is GSSAPI, which groupd does not serve
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:9093"}, "GSSAPI \\(Kerberos\\), which groupd does not serve"),
        (sasl(**{"sasl.enabled.mechanisms": "OAUTHBEARER"}), "OAUTHBEARER"),
        (sasl(**{"sasl.enabled.mechanisms": "DIGEST-MD5"}), "unknown SASL mechanism DIGEST-MD5"),
        (sasl(**{"sasl.enabled.mechanisms": ""}), "No SASL mechanisms are enabled"),
        (
            sasl(**{"listener.name.sasl_plaintext.plain.sasl.jaas.config": ""}),
            "enables PLAIN but listener.name.sasl_plaintext.plain.sasl.jaas.config is not set",
        ),
        (
            sasl(**{"listener.name.sasl_plaintext.plain.sasl.jaas.config": 'x.Y required user_a="b";'}),
            "login module x.Y is not served for PLAIN",
        ),
        (sasl(**{"listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS[:-1]}), "not terminated by semi-colon"),
        (sasl(**{"connections.max.reauth.ms": "60000"}), "must be <= 0"),
    ],
)
def test_refused_at_start_up(raw, message):
    with pytest.raises(ConfigError, match=message):
        load(raw)


def test_jaas_syntax_quotes_comments_and_flags():
    from groupd.broker.security.jaas import parse_jaas

    module = parse_jaas(
        "org.apache.kafka.common.security.plain.PlainLoginModule Required /* c */ username=admin\n"
        ' password="a b;c" // note\n user_bob="p\\"q" user_eve=\'x\';'
    )
    assert module.flag == "required" and module.options["password"] == "a b;c"
    assert module.users() == {"bob": 'p"q', "eve": "x"}


def test_properties_line_continuations_as_in_kafkas_jaas_examples(tmp_path):
    text = (
        "listeners=PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
        "required \\\n"
        '    username="admin" \\\n'
        '    password="admin-secret" \\\n'
        '    user_admin="admin-secret";\n'
    )
    assert parse_properties(text)["listener.name.sasl_plaintext.plain.sasl.jaas.config"].endswith(
        'user_admin="admin-secret";'
    )
    path = tmp_path / "server.properties"
    path.write_text(text)
    assert dict(load_config(path).listeners[1].plain_users) == {"admin": "admin-secret"}
