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
    from confluent_kafka import Consumer, Producer

    create_topic(secured.sasl_bootstrap, "ck-sasl", 2, **CK_SASL)
    producer = Producer({"bootstrap.servers": secured.sasl_bootstrap, "enable.idempotence": True, **CK_SASL})
    for i in range(40):
        producer.produce("ck-sasl", value=f"v{i}")
    assert producer.flush(15) == 0
    consumer = Consumer({
        "bootstrap.servers": secured.sasl_bootstrap, "group.id": "ck-sasl-g", "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 300, **CK_SASL,
    })
    consumer.subscribe(["ck-sasl"])
    got = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(got) < 40:
        m = consumer.poll(0.1)
        if m is not None and m.error() is None:
            got.append(m.value())
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(40))
    assert consumer.commit(asynchronous=False)
    consumer.close()
    # and the PLAINTEXT listener's clients see the same data
    plain = Consumer({"bootstrap.servers": secured.bootstrap, "group.id": "ck-plain-g", "auto.offset.reset": "earliest"})
    plain.subscribe(["ck-sasl"])
    seen = 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and seen < 40:
        m = plain.poll(0.1)
        seen += m is not None and m.error() is None
    plain.close()
    assert seen == 40


def test_confluent_kafka_wrong_password_is_an_authentication_error(secured):
    from confluent_kafka import KafkaError, Producer

    errors: list = []
    producer = Producer({
        "bootstrap.servers": secured.sasl_bootstrap, **CK_SASL, "sasl.password": "guess", "error_cb": errors.append,
        "reconnect.backoff.ms": 1000,
    })
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        producer.poll(0.1)
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth and "Invalid username or password" in auth[0].str()
    producer.flush(0)
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
