"""Real clients through secured listeners while a PLAINTEXT listener on another port serves others:
SASL_PLAINTEXT with PLAIN and with SCRAM (users created by an admin client), SSL with client
certificates and SASL_SSL; produce, consume in a group, commit; wrong passwords refused."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tests.harness import BrokerProcess, free_port

pytestmark = pytest.mark.client

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)
CK_SASL = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "alice",
    "sasl.password": "alice-secret",
}
KP_SASL = {
    "security_protocol": "SASL_PLAINTEXT",
    "sasl_mechanism": "PLAIN",
    "sasl_plain_username": "alice",
    "sasl_plain_password": "alice-secret",
}


def broker_with(tmp_path, listeners: dict[str, int | None], **settings: str) -> BrokerProcess:
    """A broker process with PLAINTEXT on its usual port and the other listeners on free ports;
    ``proc.bootstraps[name]`` is each listener's address."""
    proc = BrokerProcess(tmp_path / "data")
    ports = {"PLAINTEXT": proc.port, **{name: free_port() for name in listeners}}
    proc.overrides.update(
        {"listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()), **settings}
    )
    proc.bootstraps = {name: f"127.0.0.1:{port}" for name, port in ports.items()}
    return proc.start()


@pytest.fixture
def secured(tmp_path):
    proc = broker_with(
        tmp_path,
        {"SASL_PLAINTEXT": None},
        **{"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS},
    )
    yield proc
    proc.kill()


def create_topic(bootstrap: str, name: str, partitions: int, **auth: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **auth})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(15)


def ck_produce(bootstrap: str, topic: str, values: list[str], **auth: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **auth})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(15) == 0


def ck_consume(config: dict, topic: str, want: int) -> list[bytes]:
    """Values a confluent-kafka consumer in ``config``'s group reads from ``topic``, up to ``want``."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {"auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 300, **config}
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(got) < want:
        m = consumer.poll(0.1)
        if m is not None and m.error() is None:
            got.append(m.value())
    if got:
        consumer.commit(asynchronous=False)
    consumer.close()
    return got


def ck_auth_error(config: dict) -> str:
    """The authentication error librdkafka reports for ``config`` (empty if none within 15 s)."""
    from confluent_kafka import KafkaError, Producer

    errors: list = []
    producer = Producer({**config, "error_cb": errors.append, "reconnect.backoff.ms": 1000})
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        producer.poll(0.1)
    producer.flush(0)
    return next((e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION), "")


def kp_produce(bootstrap: str, topic: str, values: list[str], **auth) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, **auth)
    for value in values:
        producer.send(topic, value.encode())
    producer.flush(15)
    producer.close()


def kp_consume(bootstrap: str, topic: str, group: str, want: int, **auth) -> tuple[list[bytes], int]:
    """What a kafka-python group member reads (up to ``want``), and the sum of its committed offsets."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=300,
        **auth,
    )
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(got) < want:
        for records in consumer.poll(200).values():
            got.extend(r.value for r in records)
    consumer.commit()
    committed = sum(consumer.committed(TopicPartition(topic, p)) or 0 for p in consumer.partitions_for_topic(topic))
    consumer.close()
    return got, committed


def ak_consume(bootstrap: str, topic: str, group: str, want: int, **auth) -> list[bytes]:
    """What an aiokafka group member reads, up to ``want``; it commits before leaving."""
    from aiokafka import AIOKafkaConsumer

    async def main() -> list[bytes]:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
            **auth,
        )
        await consumer.start()
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(got) < want:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                got.extend(r.value for r in records)
        await consumer.commit()
        await consumer.stop()
        return got

    return asyncio.run(main())


def values(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def encoded(*groups: list[str]) -> list[bytes]:
    return sorted(v.encode() for group in groups for v in group)


# ---------------------------------------------------------------- SASL_PLAINTEXT, PLAIN


@pytest.mark.scenario("kafka-python", 13)
def test_kafka_python_group_over_sasl_while_plaintext_serves_another(secured):
    sasl = secured.bootstraps["SASL_PLAINTEXT"]
    create_topic(sasl, "kp-sasl", 3, **CK_SASL)
    kp_produce(sasl, "kp-sasl", values("v", 60), **KP_SASL)
    results: dict[str, tuple] = {}
    plain = threading.Thread(
        target=lambda: results.__setitem__("plain", kp_consume(secured.bootstrap, "kp-sasl", "kp-plain", 60))
    )
    plain.start()
    results["sasl"] = kp_consume(sasl, "kp-sasl", "kp-sasl-g", 60, **KP_SASL)
    plain.join(40)
    for name in ("sasl", "plain"):
        got, committed = results[name]
        assert sorted(got) == encoded(values("v", 60)), name
        assert committed == 60, name


@pytest.mark.scenario("confluent-kafka", 13)
def test_confluent_kafka_group_over_sasl(secured):
    sasl = secured.bootstraps["SASL_PLAINTEXT"]
    create_topic(sasl, "ck-sasl", 2, **CK_SASL)
    ck_produce(sasl, "ck-sasl", values("v", 40), **CK_SASL)
    assert sorted(
        ck_consume({"bootstrap.servers": sasl, "group.id": "ck-sasl-g", **CK_SASL}, "ck-sasl", 40)
    ) == encoded(values("v", 40))
    # and the PLAINTEXT listener's clients see the same data
    assert len(ck_consume({"bootstrap.servers": secured.bootstrap, "group.id": "ck-plain-g"}, "ck-sasl", 40)) == 40


def test_confluent_kafka_wrong_password_is_an_authentication_error(secured):
    assert "Invalid username or password" in ck_auth_error(
        {"bootstrap.servers": secured.bootstraps["SASL_PLAINTEXT"], **CK_SASL, "sasl.password": "guess"}
    )
    assert "Invalid username or password" in secured.log_text()


@pytest.mark.scenario("aiokafka", 13)
def test_aiokafka_group_over_sasl(secured):
    from aiokafka import AIOKafkaProducer

    sasl = secured.bootstraps["SASL_PLAINTEXT"]
    create_topic(sasl, "ak-sasl", 2, **CK_SASL)

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=sasl, **KP_SASL)
        await producer.start()
        for value in values("v", 30):
            await producer.send("ak-sasl", value.encode())
        await producer.stop()

    asyncio.run(produce())
    assert sorted(ak_consume(sasl, "ak-sasl", "ak-sasl-g", 30, **KP_SASL)) == encoded(values("v", 30))


def test_a_sasl_listener_with_kafkas_default_gssapi_is_refused_at_start(tmp_path):
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "groupd",
            "--override",
            f"listeners=SASL_PLAINTEXT://127.0.0.1:{free_port()}",
            "--override",
            f"log.dirs={tmp_path}",
            "--override",
            "metrics.listener=",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2
    assert "GSSAPI (Kerberos), which groupd does not serve" in out.stderr


# ---------------------------------------------------------------- SCRAM


@pytest.fixture
def scram_secured(tmp_path):
    proc = broker_with(tmp_path, {"SASL_PLAINTEXT": None}, **{"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"})
    yield proc
    proc.kill()


def create_scram_users(bootstrap: str, users: dict[str, tuple[str, int]], **auth: str) -> None:
    """confluent-kafka's AdminClient sends AlterUserScramCredentials (a salt and a salted password); ``auth``:
    the admin's own login (with an authorizer, a user allowed ALTER on the cluster)."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    mechanisms = {256: ScramMechanism.SCRAM_SHA_256, 512: ScramMechanism.SCRAM_SHA_512}
    admin = AdminClient({"bootstrap.servers": bootstrap, **auth})
    upserts = [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanisms[bits], 8192), password.encode())
        for user, (password, bits) in users.items()
    ]
    for f in admin.alter_user_scram_credentials(upserts).values():
        f.result(15)


def scram(client: str, mechanism: str, user: str, password: str) -> dict[str, str]:
    if client == "librdkafka":
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


@pytest.mark.scenario("kafka-python", 13)
@pytest.mark.scenario("aiokafka", 13)
@pytest.mark.scenario("confluent-kafka", 13)
def test_scram_users_created_by_admin_then_kafka_python_and_aiokafka_and_librdkafka_log_in(scram_secured):
    from confluent_kafka.admin import AdminClient

    create_scram_users(scram_secured.bootstrap, {"carol": ("c-pass", 256), "dave": ("d-pass", 512)})
    admin = AdminClient({"bootstrap.servers": scram_secured.bootstrap})  # kept: its futures die with it
    described = admin.describe_user_scram_credentials(["carol", "dave"])
    infos = {
        user: [(i.mechanism.name, i.iterations) for i in f.result(15).scram_credential_infos]
        for user, f in described.items()
    }
    assert infos == {"carol": [("SCRAM_SHA_256", 8192)], "dave": [("SCRAM_SHA_512", 8192)]}
    create_topic(scram_secured.bootstrap, "scram-t", 2)
    sasl = scram_secured.bootstraps["SASL_PLAINTEXT"]
    carol, dave = (
        scram("python", "SCRAM-SHA-256", "carol", "c-pass"),
        scram("python", "SCRAM-SHA-512", "dave", "d-pass"),
    )
    kp_produce(sasl, "scram-t", values("kp", 20), **carol)
    ck_produce(sasl, "scram-t", values("rd", 20), **scram("librdkafka", "SCRAM-SHA-512", "dave", "d-pass"))
    expected = encoded(values("kp", 20), values("rd", 20))
    assert sorted(ak_consume(sasl, "scram-t", "scram-ak", 40, **dave)) == expected
    assert sorted(kp_consume(sasl, "scram-t", "scram-kp", 40, **carol)[0]) == expected
    rd = scram("librdkafka", "SCRAM-SHA-256", "carol", "c-pass")
    assert len(ck_consume({"bootstrap.servers": sasl, "group.id": "scram-rd", **rd}, "scram-t", 40)) == 40


def test_scram_credentials_survive_a_restart_and_a_wrong_password_fails(scram_secured):
    create_scram_users(scram_secured.bootstrap, {"erin": ("e-pass", 256)})
    scram_secured.restart()
    sasl = scram_secured.bootstraps["SASL_PLAINTEXT"]
    create_topic(sasl, "after-restart", 1, **scram("librdkafka", "SCRAM-SHA-256", "erin", "e-pass"))
    bad = {"bootstrap.servers": sasl, **scram("librdkafka", "SCRAM-SHA-256", "erin", "nope")}
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in ck_auth_error(bad)


# ---------------------------------------------------------------- SSL and SASL_SSL


@pytest.fixture
def tls_secured(tmp_path):
    """SSL (client certificates required) and SASL_SSL (PLAIN) beside PLAINTEXT, PEM keys made by openssl."""
    from tests.tls_certs import make_certs

    certs = make_certs(tmp_path / "certs")
    proc = broker_with(
        tmp_path,
        {"SSL": None, "SASL_SSL": None},
        **{
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certs.server_keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(certs.ca),
            "ssl.client.auth": "required",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        },
    )
    proc.certs = certs
    yield proc
    proc.kill()


@pytest.mark.scenario("kafka-python", 14)
@pytest.mark.scenario("aiokafka", 14)
@pytest.mark.scenario("confluent-kafka", 14)
def test_ssl_and_sasl_ssl_with_confluent_kafka_kafka_python_and_aiokafka(tls_secured):
    from aiokafka.helpers import create_ssl_context

    certs, ssl_bs, sasl_ssl_bs = tls_secured.certs, tls_secured.bootstraps["SSL"], tls_secured.bootstraps["SASL_SSL"]
    ck_ssl = {
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
        "ssl.certificate.location": str(certs.client_cert),
        "ssl.key.location": str(certs.client_key),
    }
    ck_sasl_ssl = {**CK_SASL, "security.protocol": "SASL_SSL", "ssl.ca.location": str(certs.ca)}
    create_topic(ssl_bs, "tls-t", 2, **ck_ssl)
    ck_produce(sasl_ssl_bs, "tls-t", values("rd", 20), **ck_sasl_ssl)
    kp_ssl = {
        "security_protocol": "SSL",
        "ssl_cafile": str(certs.ca),
        "ssl_certfile": str(certs.client_cert),
        "ssl_keyfile": str(certs.client_key),
    }
    kp_produce(ssl_bs, "tls-t", values("kp", 20), **kp_ssl)
    expected = encoded(values("rd", 20), values("kp", 20))
    assert sorted(ck_consume({"bootstrap.servers": ssl_bs, "group.id": "tls-rd", **ck_ssl}, "tls-t", 40)) == expected
    kp_sasl_ssl = {**KP_SASL, "security_protocol": "SASL_SSL", "ssl_cafile": str(certs.ca)}
    assert sorted(kp_consume(sasl_ssl_bs, "tls-t", "tls-kp", 40, **kp_sasl_ssl)[0]) == expected
    context = create_ssl_context(cafile=str(certs.ca), certfile=str(certs.client_cert), keyfile=str(certs.client_key))
    assert sorted(ak_consume(ssl_bs, "tls-t", "tls-ak", 40, security_protocol="SSL", ssl_context=context)) == expected


# ---------------------------------------------------------------- kafkajs


@pytest.mark.scenario("kafkajs", 13)
def test_kafkajs_commits_and_resumes_over_sasl_plain_and_scram(tmp_path):
    from tests.clients.test_kafkajs import run

    proc = broker_with(
        tmp_path,
        {"SASL_PLAINTEXT": None},
        **{
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        },
    )
    try:
        sasl = proc.bootstraps["SASL_PLAINTEXT"]
        result = run("resume", sasl, sasl={"mechanism": "plain", "username": "alice", "password": "alice-secret"})
        assert result["first"] == 30 and result["again"] == ["later"]
        create_scram_users(proc.bootstrap, {"frank": ("f-pass", 256)})
        assert (
            "js-resume"
            in run("connect", sasl, sasl={"mechanism": "scram-sha-256", "username": "frank", "password": "f-pass"})[
                "topics"
            ]
        )
    finally:
        proc.kill()


@pytest.mark.scenario("kafkajs", 14)
def test_kafkajs_over_ssl_with_a_client_certificate_and_over_sasl_ssl(tls_secured):
    from tests.clients.test_kafkajs import run

    certs = tls_secured.certs
    files = {"ca": str(certs.ca), "cert": str(certs.client_cert), "key": str(certs.client_key)}
    result = run("resume", tls_secured.bootstraps["SSL"], ssl=files)
    assert result["first"] == 30 and result["again"] == ["later"]
    topics = run(
        "connect",
        tls_secured.bootstraps["SASL_SSL"],
        ssl=files,
        sasl={"mechanism": "plain", "username": "alice", "password": "alice-secret"},
    )["topics"]
    assert "js-resume" in topics
