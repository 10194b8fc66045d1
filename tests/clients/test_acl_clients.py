"""ACLs end to end with real clients over SASL PLAIN and SCRAM: an admin (a super user) creates, describes and
deletes ACLs with confluent-kafka's AdminClient; alice, allowed her topic and group, produces and consumes
in a classic group, a consumer-protocol group and a share group, and as a transactional producer; what she
is not allowed is refused with Kafka's error (GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) as kafka-python, aiokafka and librdkafka report it."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from tests.clients.test_security_clients import (
    broker_with,
    ck_consume,
    ck_produce,
    create_scram_users,
    create_topic,
    scram,
)

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


def start_authorized(path, mechanisms: str = "PLAIN"):
    """A broker with StandardAuthorizer, admin its super user, PLAINTEXT and a SASL_PLAINTEXT listener."""
    return broker_with(
        path,
        {"SASL_PLAINTEXT": None},
        **{
            "sasl.enabled.mechanisms": mechanisms,
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
        },
    )


@pytest.fixture
def authorized(tmp_path):
    proc = start_authorized(tmp_path)
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


# ---------------------------------------------------------------- the clients x mechanisms matrix

ADMIN = sasl("admin")
SCRAM_BITS = {"SCRAM-SHA-256": 256, "SCRAM-SHA-512": 512}
# each library over PLAIN and over a SCRAM mechanism (alice's and bob's SCRAM credentials are their PLAIN
# passwords, created by the admin with AlterUserScramCredentials: the same principals either way)
LOGINS = [
    ("kafka-python", "PLAIN"),
    ("kafka-python", "SCRAM-SHA-256"),
    ("aiokafka", "PLAIN"),
    ("aiokafka", "SCRAM-SHA-512"),
    ("confluent-kafka", "SCRAM-SHA-256"),
    ("confluent-kafka", "SCRAM-SHA-512"),
]


@pytest.fixture(scope="module")
def matrix_broker(tmp_path_factory):
    """One authorizing broker for the matrix (each test its own topics, groups and ACLs), PLAIN and both
    SCRAM mechanisms on its SASL listener."""
    proc = start_authorized(tmp_path_factory.mktemp("matrix"), "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512")
    bootstrap = proc.bootstraps["SASL_PLAINTEXT"]
    for bits in SCRAM_BITS.values():
        users = {user: (f"{user}-secret", bits) for user in ("alice", "bob")}
        create_scram_users(bootstrap, users, **ADMIN)  # AlterUserScramCredentials: ALTER on the cluster
    yield proc
    proc.kill()


def login(library: str, mechanism: str, user: str) -> dict[str, str]:
    return scram("librdkafka" if library == "confluent-kafka" else "python", mechanism, user, f"{user}-secret")


def error_name(error: BaseException) -> str:
    """Kafka's name of the error a Python client raised (kafka-python's and aiokafka's errors carry it)."""
    if isinstance(error, KafkaException):
        return error.args[0].name()
    return getattr(error, "message", None) or type(error).__name__


def grant(bootstrap: str, principal: str, *acls: tuple[ResourceType, str, ResourcePatternType, AclOperation]):
    admin = AdminClient({"bootstrap.servers": bootstrap, **ADMIN})
    bindings = [
        AclBinding(rtype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)
        for rtype, name, pattern, op in acls
    ]
    for future in admin.create_acls(bindings).values():
        assert future.result(15) is None


def produce(library: str, bootstrap: str, auth: dict, topic: str, values: list[bytes], tid: str | None = None) -> str:
    """Send ``values`` (in one committed transaction with ``tid``); "" when all were acknowledged, else the
    name of the Kafka error the client reported first."""
    try:
        return by_library(library, (_ck_produce, _kp_produce, _ak_produce), bootstrap, auth, topic, values, tid)
    except Exception as error:  # the client's own exception type: its Kafka error name is what is compared
        return error_name(error)


def by_library(library: str, runs: tuple, *args):
    """confluent-kafka's, kafka-python's or aiokafka's (a coroutine, run here) way of doing one thing."""
    ck, kp, ak = runs
    if library == "confluent-kafka":
        return ck(*args)
    if library == "kafka-python":
        return kp(*args)
    return asyncio.run(ak(*args))


def _ck_produce(bootstrap: str, auth: dict, topic: str, values: list[bytes], tid: str | None) -> str:
    from confluent_kafka import Producer

    errors: list = []
    config = {"bootstrap.servers": bootstrap, "message.timeout.ms": 15000, **auth}
    producer = Producer({**config, "transactional.id": tid} if tid else config)
    if tid:
        producer.init_transactions(15)
        producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda err, msg: err and errors.append(err))
    if tid:
        producer.commit_transaction(15)
    assert producer.flush(20) == 0
    return errors[0].name() if errors else ""


def _kp_produce(bootstrap: str, auth: dict, topic: str, values: list[bytes], tid: str | None) -> str:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, max_block_ms=15000, **auth)
    try:
        if tid:
            producer.init_transactions()
            producer.begin_transaction()
        for future in [producer.send(topic, value) for value in values]:
            future.get(15)
        if tid:
            producer.commit_transaction()
        return ""
    finally:
        producer.close(5)


async def _ak_produce(bootstrap: str, auth: dict, topic: str, values: list[bytes], tid: str | None) -> str:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, request_timeout_ms=15000, **auth)
    await producer.start()
    try:
        if tid:
            async with producer.transaction():
                for value in values:
                    await producer.send_and_wait(topic, value)
        else:
            for value in values:
                await asyncio.wait_for(producer.send_and_wait(topic, value), 15)
        return ""
    finally:
        await producer.stop()


def consume(library: str, bootstrap: str, auth: dict, topic: str, group: str, want: int) -> tuple[list[bytes], str]:
    """A group member's values (up to ``want``, committed) and the first Kafka error it reported ("" if none)."""
    try:
        return by_library(library, (_ck_consume, _kp_consume, _ak_consume), bootstrap, auth, topic, group, want)
    except Exception as error:
        return [], error_name(error)


def _ck_consume(bootstrap: str, auth: dict, topic: str, group: str, want: int) -> tuple[list[bytes], str]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest", **auth})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and len(got) < want:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is not None:
                return got, msg.error().name()
            if msg is not None:
                got.append(msg.value())
        consumer.commit(asynchronous=False)
        return got, ""
    finally:
        consumer.close()


def _kp_consume(bootstrap: str, auth: dict, topic: str, group: str, want: int) -> tuple[list[bytes], str]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
        **auth,
    )  # fmt: skip
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and len(got) < want:
            for records in consumer.poll(200).values():
                got.extend(r.value for r in records)
            # kafka-python records a topic Metadata refused (TOPIC_AUTHORIZATION_FAILED) in its cluster view and
            # logs it; its poll() does not raise it (the metadata listener that would runs inside the client)
            if topic in consumer._client.cluster.unauthorized_topics:
                return got, "TOPIC_AUTHORIZATION_FAILED"
        consumer.commit()
        return got, ""
    finally:
        consumer.close()


async def _ak_consume(bootstrap: str, auth: dict, topic: str, group: str, want: int) -> tuple[list[bytes], str]:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
        **auth,
    )  # fmt: skip
    await consumer.start()
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and len(got) < want:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                got.extend(r.value for r in records)
        await consumer.commit()
        return got, ""
    finally:
        await consumer.stop()


@pytest.mark.parametrize(("library", "mechanism"), LOGINS)
def test_producing_and_consuming_in_a_group_with_and_without_the_acls(matrix_broker, library, mechanism):
    """alice may WRITE and READ her topic (a literal ACL, or a prefixed one) and READ her group; bob may only
    READ the topic (DESCRIBE implied: Metadata shows it to him), READ his group and WRITE another topic (an
    idempotent producer's InitProducerId needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic,
    KafkaApis.handleInitProducerIdRequest: kafka-python 3 is idempotent by default)."""
    bootstrap = matrix_broker.bootstraps["SASL_PLAINTEXT"]
    slug = f"{library}-{mechanism}".lower()
    topic, other, group = f"m-{slug}", f"x-{slug}", f"g-{slug}"
    for name in (topic, other):
        create_topic(bootstrap, name, 1, **ADMIN)
    pattern = ResourcePatternType.PREFIXED if "SCRAM" in mechanism else ResourcePatternType.LITERAL
    topic_acl = "m-" if pattern == ResourcePatternType.PREFIXED else topic
    grant(
        bootstrap, "User:alice",
        (ResourceType.TOPIC, topic_acl, pattern, AclOperation.WRITE),
        (ResourceType.TOPIC, topic_acl, pattern, AclOperation.READ),
        (ResourceType.GROUP, group, ResourcePatternType.LITERAL, AclOperation.READ),
    )  # fmt: skip
    grant(
        bootstrap, "User:bob",
        (ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, AclOperation.READ),
        (ResourceType.GROUP, f"bob-{group}", ResourcePatternType.LITERAL, AclOperation.READ),
        (ResourceType.TOPIC, f"bob-{slug}", ResourcePatternType.LITERAL, AclOperation.WRITE),
    )  # fmt: skip
    alice, bob = login(library, mechanism, "alice"), login(library, mechanism, "bob")
    sent = [f"{library}-{i}".encode() for i in range(10)]
    assert produce(library, bootstrap, alice, topic, sent) == ""
    # KafkaApis.handleProduceRequest: WRITE on each topic, else TOPIC_AUTHORIZATION_FAILED for its partitions
    assert produce(library, bootstrap, bob, topic, [b"no"]) == "TOPIC_AUTHORIZATION_FAILED"
    got, error = consume(library, bootstrap, alice, topic, group, len(sent))
    assert (sorted(got), error) == (sorted(sent), "")
    # bob reads the topic in his own group: READ on the topic and on the group is all a consumer needs
    got, error = consume(library, bootstrap, bob, topic, f"bob-{group}", len(sent))
    assert (sorted(got), error) == (sorted(sent), "")
    # FindCoordinator (DESCRIBE on the group) and JoinGroup (READ on it): GROUP_AUTHORIZATION_FAILED
    assert consume(library, bootstrap, alice, topic, f"bob-{group}", 1) == ([], "GROUP_AUTHORIZATION_FAILED")
    # a topic alice has no ACL on: Metadata refuses it when named (handleTopicMetadataRequest)
    assert consume(library, bootstrap, alice, other, group, 1) == ([], "TOPIC_AUTHORIZATION_FAILED")


@pytest.mark.parametrize(("library", "mechanism"), [LOGINS[1], LOGINS[2], LOGINS[4]])
def test_transactional_producer_needs_write_on_its_transactional_id(matrix_broker, library, mechanism):
    bootstrap = matrix_broker.bootstraps["SASL_PLAINTEXT"]
    topic = f"tx-{library}-{mechanism}".lower()
    create_topic(bootstrap, topic, 1, **ADMIN)
    grant(
        bootstrap, "User:alice",
        (ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, AclOperation.WRITE),
        (ResourceType.TRANSACTIONAL_ID, f"alice-{library}-", ResourcePatternType.PREFIXED, AclOperation.WRITE),
    )  # fmt: skip
    alice = login(library, mechanism, "alice")
    # FindCoordinator (DESCRIBE, implied by WRITE) and InitProducerId (WRITE) on the transactional id
    assert produce(library, bootstrap, alice, topic, [b"committed"], tid=f"alice-{library}-1") == ""
    refused = produce(library, bootstrap, alice, topic, [b"refused"], tid=f"bob-{library}-1")
    assert refused == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


def alice_reads(bootstrap: str, prefix: str, partitions: int) -> tuple[str, str, str]:
    """Two new topics and a group prefix: alice may READ the first topic (a literal ACL) and every group whose
    name starts with the prefix (a PREFIXED ACL), and nothing of the second topic."""
    topic, other, group = f"{prefix}-t", f"{prefix}-x", f"{prefix}-g"
    for name in (topic, other):
        create_topic(bootstrap, name, partitions, **ADMIN)
    grant(
        bootstrap, "User:alice",
        (ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, AclOperation.READ),
        (ResourceType.GROUP, group, ResourcePatternType.PREFIXED, AclOperation.READ),
    )  # fmt: skip
    return topic, other, group


def share_poll(bootstrap: str, auth: dict, group: str, topic: str) -> tuple[bytes | None, str]:
    """A ShareConsumer's first record of ``topic`` in ``group`` (the admin producing a marker every poll,
    a new share group starting at the latest offset) and the first error it reported ("" if none)."""
    from confluent_kafka import Producer, ShareConsumer

    errors: list = []
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "error_cb": errors.append, **auth})
    producer = Producer({"bootstrap.servers": bootstrap, **ADMIN})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 25
    try:
        while time.monotonic() < deadline:
            producer.produce(topic, value=b"marker")
            producer.flush(5)
            try:
                messages = consumer.poll(0.5)
            except KafkaException as error:
                return None, error_name(error)
            for message in messages:
                if message.error() is not None:
                    return None, message.error().name()
                return message.value(), ""
            refusals = [e.name() for e in errors if "AUTHORIZATION" in e.name()]
            if refusals:
                return None, refusals[0]
        return None, ""
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_share_consumer_needs_read_on_its_group_and_topic(matrix_broker, mechanism):
    bootstrap = matrix_broker.bootstraps["SASL_PLAINTEXT"]
    topic, other, group = alice_reads(bootstrap, f"share-{mechanism}".lower(), 1)
    alice = login("confluent-kafka", mechanism, "alice")
    # READ on the group (ShareGroupHeartbeat) and on the topic (ShareFetch, KafkaApis.handleShareFetchRequest)
    assert share_poll(bootstrap, alice, group, topic) == (b"marker", "")
    # KafkaApis.handleShareGroupHeartbeat: READ on the group, else GROUP_AUTHORIZATION_FAILED
    assert share_poll(bootstrap, alice, f"nobody-{group}", topic) == (None, "GROUP_AUTHORIZATION_FAILED")
    # ... and DESCRIBE on each subscribed topic, else TOPIC_AUTHORIZATION_FAILED (a group her prefix allows)
    assert share_poll(bootstrap, alice, f"{group}-2", other) == (None, "TOPIC_AUTHORIZATION_FAILED")


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_consumer_protocol_group_with_and_without_the_acls(matrix_broker, mechanism):
    """librdkafka's KIP-848 consumer (group.protocol=consumer), the only one of the three libraries with it."""
    bootstrap = matrix_broker.bootstraps["SASL_PLAINTEXT"]
    topic, other, group = alice_reads(bootstrap, f"cp-{mechanism}".lower(), 2)
    sent = [f"cp-{i}".encode() for i in range(10)]
    assert produce("confluent-kafka", bootstrap, sasl("admin"), topic, sent) == ""
    alice = {"group.protocol": "consumer", **login("confluent-kafka", mechanism, "alice")}
    got, error = consume("confluent-kafka", bootstrap, alice, topic, group, len(sent))
    assert (sorted(got), error) == (sorted(sent), "")
    # KafkaApis.handleConsumerGroupHeartbeat: READ on the group, else GROUP_AUTHORIZATION_FAILED
    refused = consume("confluent-kafka", bootstrap, alice, topic, f"nobody-{group}", 1)
    assert refused == ([], "GROUP_AUTHORIZATION_FAILED")
    # ... and DESCRIBE on each subscribed topic (a group her prefix allows), else TOPIC_AUTHORIZATION_FAILED
    assert consume("confluent-kafka", bootstrap, alice, other, f"{group}-2", 1) == ([], "TOPIC_AUTHORIZATION_FAILED")
