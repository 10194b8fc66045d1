"""Real clients through a SASL_PLAINTEXT listener (PLAIN) while a PLAINTEXT listener on another port
serves others: produce, consume in a group, commit; and a wrong password refused."""

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


@pytest.fixture
def secured(tmp_path):
    """A broker process: PLAINTEXT on its usual port, SASL_PLAINTEXT (PLAIN) on a second one."""
    sasl_port = free_port()
    proc = BrokerProcess(tmp_path / "data")
    proc.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{proc.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    })
    proc.sasl_bootstrap = f"127.0.0.1:{sasl_port}"
    proc.start()
    yield proc
    proc.kill()


def create_topic(bootstrap: str, name: str, partitions: int, **auth: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, **auth})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(15)


CK_SASL = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}
KP_SASL = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}


def ck_consume(config: dict, topic: str, want: int) -> list[bytes]:
    """Values a confluent-kafka consumer in ``config``'s group reads from ``topic``, up to ``want``."""
    from confluent_kafka import Consumer

    consumer = Consumer({"auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 300, **config})
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


def test_kafka_python_group_over_sasl_while_plaintext_serves_another(secured):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    create_topic(secured.sasl_bootstrap, "kp-sasl", 3, **CK_SASL)
    producer = KafkaProducer(bootstrap_servers=secured.sasl_bootstrap, **KP_SASL)
    for i in range(60):
        producer.send("kp-sasl", key=str(i).encode(), value=f"v{i}".encode())
    producer.flush(15)
    producer.close()

    def consume(bootstrap: str, group: str, **auth) -> tuple[list[bytes], dict[int, int]]:
        consumer = KafkaConsumer(
            "kp-sasl", bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
            session_timeout_ms=6000, heartbeat_interval_ms=300, **auth,
        )
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(got) < 60:
            for records in consumer.poll(200).values():
                got.extend(r.value for r in records)
        consumer.commit()
        committed = {p: consumer.committed(TopicPartition("kp-sasl", p)) for p in range(3)}
        consumer.close()
        return got, committed

    results: dict[str, tuple] = {}
    plain = threading.Thread(target=lambda: results.__setitem__("plain", consume(secured.bootstrap, "kp-plain")))
    plain.start()
    results["sasl"] = consume(secured.sasl_bootstrap, "kp-sasl-g", **KP_SASL)
    plain.join(40)
    for name in ("sasl", "plain"):
        got, committed = results[name]
        assert sorted(got) == sorted(f"v{i}".encode() for i in range(60)), name
        assert sum(committed.values()) == 60, name


def test_confluent_kafka_group_over_sasl(secured):
    from confluent_kafka import Producer

    create_topic(secured.sasl_bootstrap, "ck-sasl", 2, **CK_SASL)
    producer = Producer({"bootstrap.servers": secured.sasl_bootstrap, "enable.idempotence": True, **CK_SASL})
    for i in range(40):
        producer.produce("ck-sasl", value=f"v{i}")
    assert producer.flush(15) == 0
    got = ck_consume({"bootstrap.servers": secured.sasl_bootstrap, "group.id": "ck-sasl-g", **CK_SASL}, "ck-sasl", 40)
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(40))
    # and the PLAINTEXT listener's clients see the same data
    assert len(ck_consume({"bootstrap.servers": secured.bootstrap, "group.id": "ck-plain-g"}, "ck-sasl", 40)) == 40


def test_confluent_kafka_wrong_password_is_an_authentication_error(secured):
    assert "Invalid username or password" in ck_auth_error({"bootstrap.servers": secured.sasl_bootstrap, **CK_SASL, "sasl.password": "guess"})
    assert "Invalid username or password" in secured.log_text()


def test_aiokafka_group_over_sasl(secured):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    create_topic(secured.sasl_bootstrap, "ak-sasl", 2, **CK_SASL)

    async def main() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=secured.sasl_bootstrap, **KP_SASL)
        await producer.start()
        for i in range(30):
            await producer.send("ak-sasl", f"v{i}".encode())
        await producer.stop()
        consumer = AIOKafkaConsumer(
            "ak-sasl", bootstrap_servers=secured.sasl_bootstrap, group_id="ak-sasl-g", auto_offset_reset="earliest",
            session_timeout_ms=6000, heartbeat_interval_ms=300, **KP_SASL,
        )
        await consumer.start()
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(got) < 30:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                got.extend(r.value for r in records)
        await consumer.commit()
        await consumer.stop()
        return got

    got = asyncio.run(main())
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(30))


def test_a_sasl_listener_with_kafkas_default_gssapi_is_refused_at_start(tmp_path):
    import subprocess
    import sys

    from tests.harness import ROOT

    out = subprocess.run(
        [sys.executable, str(ROOT / "server.py"), "--override", f"listeners=SASL_PLAINTEXT://127.0.0.1:{free_port()}",
         "--override", f"log.dirs={tmp_path}", "--override", "metrics.listener="],
        capture_output=True, text=True, timeout=30,
    )
    assert out.returncode == 2
    assert "GSSAPI (Kerberos), which groupd does not serve" in out.stderr


@pytest.fixture
def scram_secured(tmp_path):
    """PLAINTEXT (for the admin) beside a SASL_PLAINTEXT listener offering both SCRAM mechanisms."""
    sasl_port = free_port()
    proc = BrokerProcess(tmp_path / "data")
    proc.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{proc.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    })
    proc.sasl_bootstrap = f"127.0.0.1:{sasl_port}"
    proc.start()
    yield proc
    proc.kill()


def create_scram_users(bootstrap: str, users: dict[str, tuple[str, int]]) -> None:
    """confluent-kafka's AdminClient sends AlterUserScramCredentials (a salt and a salted password)."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    mechanisms = {256: ScramMechanism.SCRAM_SHA_256, 512: ScramMechanism.SCRAM_SHA_512}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanisms[bits], 8192), password.encode()) for user, (password, bits) in users.items()]
    for f in admin.alter_user_scram_credentials(upserts).values():
        f.result(15)


def test_scram_users_created_by_admin_then_kafka_python_and_aiokafka_and_librdkafka_log_in(scram_secured):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaConsumer, KafkaProducer

    create_scram_users(scram_secured.bootstrap, {"carol": ("c-pass", 256), "dave": ("d-pass", 512)})
    admin = AdminClient({"bootstrap.servers": scram_secured.bootstrap})  # kept: its futures die with it
    described = admin.describe_user_scram_credentials(["carol", "dave"])
    infos = {user: [(i.mechanism.name, i.iterations) for i in f.result(15).scram_credential_infos] for user, f in described.items()}
    assert infos == {"carol": [("SCRAM_SHA_256", 8192)], "dave": [("SCRAM_SHA_512", 8192)]}
    create_topic(scram_secured.bootstrap, "scram-t", 2)
    sasl = scram_secured.sasl_bootstrap

    kp = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "carol", "sasl_plain_password": "c-pass"}
    producer = KafkaProducer(bootstrap_servers=sasl, **kp)
    for i in range(20):
        producer.send("scram-t", f"kp{i}".encode())
    producer.flush(15)
    producer.close()

    ck = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "dave", "sasl.password": "d-pass"}
    rd = Producer({"bootstrap.servers": sasl, **ck})
    for i in range(20):
        rd.produce("scram-t", value=f"rd{i}")
    assert rd.flush(15) == 0

    async def aiokafka_consume() -> list[bytes]:
        from aiokafka import AIOKafkaConsumer

        consumer = AIOKafkaConsumer(
            "scram-t", bootstrap_servers=sasl, group_id="scram-ak", auto_offset_reset="earliest",
            security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="dave", sasl_plain_password="d-pass",
        )
        await consumer.start()
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(got) < 40:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                got.extend(r.value for r in records)
        await consumer.commit()
        await consumer.stop()
        return got

    expected = sorted([f"kp{i}".encode() for i in range(20)] + [f"rd{i}".encode() for i in range(20)])
    assert sorted(asyncio.run(aiokafka_consume())) == expected
    consumer = KafkaConsumer("scram-t", bootstrap_servers=sasl, group_id="scram-kp", auto_offset_reset="earliest", **kp)
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(got) < 40:
        for records in consumer.poll(200).values():
            got.extend(r.value for r in records)
    consumer.close()
    assert sorted(got) == expected
    assert len(ck_consume({"bootstrap.servers": sasl, "group.id": "scram-rd", **ck}, "scram-t", 40)) == 40


def test_scram_credentials_survive_a_restart_and_a_wrong_password_fails(scram_secured):
    create_scram_users(scram_secured.bootstrap, {"erin": ("e-pass", 256)})
    scram_secured.restart()
    ck = {"bootstrap.servers": scram_secured.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "erin"}
    create_topic(scram_secured.sasl_bootstrap, "after-restart", 1, **{k: v for k, v in ck.items() if k != "bootstrap.servers"}, **{"sasl.password": "e-pass"})
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in ck_auth_error({**ck, "sasl.password": "nope"})
