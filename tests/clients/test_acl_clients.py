"""ACLs end to end with real clients over SASL PLAIN: an admin (a super user) creates, describes and
deletes ACLs with confluent-kafka's AdminClient; alice, allowed her topic and group, produces and
consumes in a group; a group or topic she is not allowed is refused with Kafka's error
(GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED), as librdkafka reports it."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.clients.test_security_clients import broker_with, ck_consume, ck_produce, create_topic

pytestmark = pytest.mark.client

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";'
)


def sasl(name: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": name,
        "sasl.password": f"{name}-secret",
    }


@pytest.fixture
def authorized(tmp_path):
    proc = broker_with(
        tmp_path,
        {"SASL_PLAINTEXT": None},
        **{
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
        },
    )
    yield proc
    proc.kill()


def first_error(config: dict, topic: str, seconds: float = 15.0):
    """The first error a confluent-kafka consumer in ``config``'s group reports (None if none came)."""
    from confluent_kafka import Consumer

    consumer = Consumer({"auto.offset.reset": "earliest", **config})
    consumer.subscribe([topic])
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is not None:
                return msg.error().code()
        return None
    finally:
        consumer.close()


def topic_alice_reads(broker, topic: str) -> str:
    """A new topic that alice may READ (and no group); the SASL listener's address."""
    bootstrap = broker.bootstraps["SASL_PLAINTEXT"]
    create_topic(bootstrap, topic, 1, **sasl("admin"))
    admin = AdminClient({"bootstrap.servers": bootstrap, **sasl("admin")})
    allow, read = AclPermissionType.ALLOW, AclOperation.READ
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", read, allow)
    for future in admin.create_acls([binding]).values():
        assert future.result(15) is None
    return bootstrap


def test_acls_decide_who_produces_and_consumes(authorized):
    from confluent_kafka import KafkaError

    bootstrap = authorized.bootstraps["SASL_PLAINTEXT"]
    create_topic(bootstrap, "acl-t", 2, **sasl("admin"))
    admin = AdminClient({"bootstrap.servers": bootstrap, **sasl("admin")})
    allow = AclPermissionType.ALLOW
    bindings = [
        AclBinding(ResourceType.TOPIC, "acl-", ResourcePatternType.PREFIXED, "User:alice", "*", op, allow)
        for op in (AclOperation.WRITE, AclOperation.READ)
    ] + [
        AclBinding(
            ResourceType.GROUP, "alice-g", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ, allow
        ),
        AclBinding(ResourceType.GROUP, "bob-g", ResourcePatternType.LITERAL, "User:bob", "*", AclOperation.READ, allow),
    ]
    for future in admin.create_acls(bindings).values():
        assert future.result(15) is None
    any_topic = AclBindingFilter(
        ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    described = admin.describe_acls(any_topic).result(15)
    assert {(b.name, b.resource_pattern_type, b.operation) for b in described} == {
        ("acl-", ResourcePatternType.PREFIXED, AclOperation.WRITE),
        ("acl-", ResourcePatternType.PREFIXED, AclOperation.READ),
    }

    # alice: her prefixed topic and her group
    ck_produce(bootstrap, "acl-t", [f"v{i}" for i in range(20)], **sasl("alice"))
    got = ck_consume({"bootstrap.servers": bootstrap, "group.id": "alice-g", **sasl("alice")}, "acl-t", 20)
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(20))
    # a group she has no ACL for
    refused = first_error({"bootstrap.servers": bootstrap, "group.id": "other-g", **sasl("alice")}, "acl-t")
    assert refused == KafkaError.GROUP_AUTHORIZATION_FAILED
    # bob may use his group but not read the topic
    refused = first_error({"bootstrap.servers": bootstrap, "group.id": "bob-g", **sasl("bob")}, "acl-t")
    assert refused == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # alice may not administer ACLs (ALTER on the cluster)
    alice_admin = AdminClient({"bootstrap.servers": bootstrap, **sasl("alice")})
    with pytest.raises(Exception, match="CLUSTER_AUTHORIZATION_FAILED|[Cc]luster authorization"):
        for future in alice_admin.create_acls(bindings[:1]).values():
            future.result(15)

    # deleting returns what went; alice then is refused her topic
    deleted = admin.delete_acls([any_topic]).values()
    assert sum(len(f.result(15)) for f in deleted) == 2
    refused = first_error({"bootstrap.servers": bootstrap, "group.id": "alice-g", **sasl("alice")}, "acl-t")
    assert refused == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_groupd_acls_adds_lists_and_removes_with_kafka_acls_flags(authorized, tmp_path, capsys):
    from groupd.cli import acls_cli

    bootstrap = authorized.bootstraps["SASL_PLAINTEXT"]
    props = tmp_path / "admin.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";\n'
    )
    base = ["--bootstrap-server", bootstrap, "--command-config", str(props)]
    # --consumer: READ and DESCRIBE on the topic, READ on the group (kafka-acls.sh's AclCommand)
    assert (
        acls_cli.main(
            [*base, "--add", "--allow-principal", "User:carol", "--consumer", "--topic", "c-t", "--group", "c-g"]
        )
        == 0
    )
    assert (
        acls_cli.main([*base, "--add", "--deny-principal", "User:carol", "--operation", "IdempotentWrite", "--cluster"])
        == 0
    )
    capsys.readouterr()
    assert acls_cli.main([*base, "--list"]) == 0
    listed = capsys.readouterr().out
    assert "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=c-t, patternType=LITERAL)`" in listed
    assert "(principal=User:carol, host=*, operation=READ, permissionType=ALLOW)" in listed
    assert "(principal=User:carol, host=*, operation=DESCRIBE, permissionType=ALLOW)" in listed
    assert "resourceType=GROUP, name=c-g" in listed
    assert "(principal=User:carol, host=*, operation=IDEMPOTENT_WRITE, permissionType=DENY)" in listed
    # --remove with a principal and an operation removes just that ACL
    assert (
        acls_cli.main([*base, "--remove", "--allow-principal", "User:carol", "--operation", "Read", "--topic", "c-t"])
        == 0
    )
    assert "Removed ACL User:carol READ ALLOW" in capsys.readouterr().out
    assert acls_cli.main([*base, "--list", "--topic", "c-t"]) == 0
    left = capsys.readouterr().out
    assert "operation=DESCRIBE" in left and "operation=READ" not in left
    # without the admin's credentials: ANONYMOUS on PLAINTEXT may not (CLUSTER_AUTHORIZATION_FAILED)
    assert acls_cli.main(["--bootstrap-server", authorized.bootstrap, "--list"]) == 1
    assert "ClusterAuthorizationFailed" in capsys.readouterr().err


def test_acls_survive_a_sigkill_right_after_create_acls_was_answered(authorized):

    bootstrap = authorized.bootstraps["SASL_PLAINTEXT"]
    admin = AdminClient({"bootstrap.servers": bootstrap, **sasl("admin")})
    binding = AclBinding(
        ResourceType.GROUP,
        "g-",
        ResourcePatternType.PREFIXED,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.DENY,
    )
    for future in admin.create_acls([binding]).values():
        assert future.result(15) is None
    authorized.kill()  # SIGKILL: the answer above promised the ACL is durable
    authorized.start()
    admin = AdminClient({"bootstrap.servers": bootstrap, **sasl("admin")})
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    assert admin.describe_acls(everything).result(15) == [binding]


def test_transactional_producer_needs_write_on_its_transactional_id(authorized):
    from confluent_kafka import KafkaError, KafkaException, Producer

    bootstrap = authorized.bootstraps["SASL_PLAINTEXT"]
    create_topic(bootstrap, "tx-t", 1, **sasl("admin"))
    admin = AdminClient({"bootstrap.servers": bootstrap, **sasl("admin")})
    allow = AclPermissionType.ALLOW
    bindings = [
        AclBinding(
            ResourceType.TOPIC, "tx-t", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.WRITE, allow
        ),
        AclBinding(
            ResourceType.TRANSACTIONAL_ID,
            "alice-",
            ResourcePatternType.PREFIXED,
            "User:alice",
            "*",
            AclOperation.WRITE,
            allow,
        ),
    ]
    for future in admin.create_acls(bindings).values():
        assert future.result(15) is None
    # KafkaApis: FindCoordinator and InitProducerId need DESCRIBE / WRITE on the transactional id
    mine = Producer({"bootstrap.servers": bootstrap, "transactional.id": "alice-1", **sasl("alice")})
    mine.init_transactions(15)
    mine.begin_transaction()
    mine.produce("tx-t", b"committed")
    mine.commit_transaction(15)
    other = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bob-1", **sasl("alice")})
    with pytest.raises(KafkaException) as refused:
        other.init_transactions(15)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_kafka_python_consumer_in_an_unpermitted_group_is_refused(authorized):
    from kafka import KafkaConsumer
    from kafka.errors import GroupAuthorizationFailedError

    bootstrap = topic_alice_reads(authorized, "kp-t")
    consumer = KafkaConsumer(
        "kp-t",
        bootstrap_servers=bootstrap,
        group_id="nobody-g",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password="alice-secret",
    )
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            for _ in range(20):
                consumer.poll(500)
    finally:
        consumer.close()


def test_consumer_protocol_group_needs_read_on_the_group(authorized):
    from confluent_kafka import KafkaError

    bootstrap = topic_alice_reads(authorized, "cp-t")
    # KafkaApis.handleConsumerGroupHeartbeat: READ on the group
    config = {"bootstrap.servers": bootstrap, "group.id": "cp-g", "group.protocol": "consumer", **sasl("alice")}
    assert first_error(config, "cp-t") == KafkaError.GROUP_AUTHORIZATION_FAILED
