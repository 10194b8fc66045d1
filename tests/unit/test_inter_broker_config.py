"""The inter-broker listener a cluster node reaches its peers on, by Kafka's rules (KafkaConfig 4.x,
getInterBrokerListenerNameAndSecurityProtocol and validateValues), each asserted here:

- ``inter.broker.listener.name`` and ``security.inter.broker.protocol`` may not both be set ("Only one of
  ... should be set.");
- a listener name is normalised (upper case) and must be in listener.security.protocol.map, whose protocol
  it takes;
- without a name, the listener is named after ``security.inter.broker.protocol`` (default PLAINTEXT);
- the inter-broker listener must be an advertised one;
- over SASL, ``sasl.mechanism.inter.broker.protocol`` (default GSSAPI) must be among the listener's
  ``sasl.enabled.mechanisms``; the node logs in with the username and password of the listener's JAAS
  config for that mechanism.
A single node has no peers: nothing of it is resolved or refused there."""

from __future__ import annotations

import pytest

from groupd.broker.config import ConfigError, default_config

CLUSTER = {"storage.engine": "postgresql", "cluster.enabled": "true"}
TWO = {
    "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "listener.name.internal.plain.sasl.jaas.config": (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="node" password="node-secret" user_node="node-secret";'
    ),
    "listener.name.internal.scram-sha-256.sasl.jaas.config": (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="n2" password="s2";'
    ),
}


def inter_broker(**settings: str):  # type: ignore[no-untyped-def]
    resolved = default_config(**CLUSTER, **settings).inter_broker
    assert resolved is not None
    return resolved


def refused(**settings: str) -> str:
    with pytest.raises(ConfigError) as caught:
        default_config(**CLUSTER, **settings)
    return str(caught.value)


def test_by_default_the_plaintext_listener_in_plaintext():
    got = inter_broker(listeners="PLAINTEXT://127.0.0.1:9092")
    assert (got.listener, got.protocol, got.sasl, got.tls) == ("PLAINTEXT", "PLAINTEXT", False, False)


def test_without_a_name_the_listener_is_named_after_the_protocol():
    jaas = TWO["listener.name.internal.plain.sasl.jaas.config"]
    got = inter_broker(
        **{
            "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
            "security.inter.broker.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
        }
    )
    assert (got.listener, got.protocol, got.mechanism) == ("SASL_PLAINTEXT", "SASL_PLAINTEXT", "PLAIN")
    assert (got.username, got.password) == ("node", "node-secret")


def test_a_named_listener_takes_its_protocol_from_the_map_and_its_login_from_its_jaas_config():
    got = inter_broker(
        **TWO, **{"inter.broker.listener.name": "internal", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}
    )
    assert (got.listener, got.protocol, got.mechanism) == ("INTERNAL", "SASL_PLAINTEXT", "SCRAM-SHA-256")
    assert (got.username, got.password) == ("n2", "s2")


def test_both_keys_set_is_refused_even_when_they_agree():
    assert refused(
        **TWO, **{"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"}
    ) == ("Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.")


def test_a_name_missing_from_the_protocol_map_is_refused():
    assert refused(**TWO, **{"inter.broker.listener.name": "REPLICATION"}) == (
        "Listener with name REPLICATION defined in inter.broker.listener.name not found in "
        "listener.security.protocol.map."
    )


def test_the_inter_broker_listener_must_be_advertised():
    message = refused(**TWO, **{"advertised.listeners": "INTERNAL://127.0.0.1:9093"})  # PLAINTEXT by default
    assert message == (
        "inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid options "
        "based on currently configured listeners are INTERNAL"
    )
    assert refused(
        listeners="SSL_ONLY://127.0.0.1:9092", **{"listener.security.protocol.map": "SSL_ONLY:PLAINTEXT"}
    ).startswith("inter.broker.listener.name must be a listener name defined in advertised.listeners")


def test_the_sasl_mechanism_must_be_enabled_on_the_listener():
    # Kafka's default mechanism, GSSAPI, is not among the listener's
    message = refused(**TWO, **{"inter.broker.listener.name": "INTERNAL"})
    assert message.startswith(
        "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when SASL is used for "
        "inter-broker communication"
    )
    assert "SCRAM-SHA-512" in refused(
        **TWO, **{"inter.broker.listener.name": "INTERNAL", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}
    )


def test_a_login_needs_the_listeners_jaas_config_with_username_and_password():
    without = {k: v for k, v in TWO.items() if "scram" not in k}
    message = refused(
        **without, **{"inter.broker.listener.name": "INTERNAL", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}
    )
    assert message.startswith("listener.name.internal.scram-sha-256.sasl.jaas.config is not set")
    no_user = {
        **TWO,
        "listener.name.internal.plain.sasl.jaas.config": (
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_node="node-secret";'
        ),
    }
    message = refused(
        **no_user, **{"inter.broker.listener.name": "INTERNAL", "sasl.mechanism.inter.broker.protocol": "PLAIN"}
    )
    assert "names no username and password" in message


def test_host_name_checking_follows_ssl_endpoint_identification_algorithm():
    assert inter_broker().check_hostname  # Kafka's default: https
    assert not inter_broker(**{"ssl.endpoint.identification.algorithm": ""}).check_hostname


def test_a_single_node_resolves_nothing_and_refuses_nothing():
    config = default_config(
        **TWO, **{"inter.broker.listener.name": "REPLICATION", "security.inter.broker.protocol": "SSL"}
    )
    assert config.inter_broker is None
