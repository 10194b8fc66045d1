"""Real clients under a byte-rate quota: they are told their throttle time, slowed to about the rate,
and lose nothing."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.harness import BrokerProcess, WireClient
from tests.wire.test_quotas import alter_body

pytestmark = pytest.mark.client

RATE = 40_000  # bytes/s, for client id "throttled"
TOTAL = 40  # records of 3,000 bytes: three times what the first window lets through


def quota_broker_process(tmp_path) -> BrokerProcess:
    """Two one-second samples: a client's first window counts as one second."""
    return BrokerProcess(tmp_path / "data", {"quota.window.num": 2, "quota.window.size.seconds": 1})


@pytest.fixture
def quota_process(tmp_path):
    with quota_broker_process(tmp_path) as proc:
        yield proc


def set_quotas(port: int, client_id: str = "throttled") -> None:
    async def go() -> None:
        wire = await WireClient.connect(port)
        resp = await wire.call(
            49,
            1,
            alter_body(1, [([("client-id", client_id)], [("producer_byte_rate", RATE), ("consumer_byte_rate", RATE)])]),
        )
        assert resp.entries[0].error_code == 0
        await wire.close()

    asyncio.run(go())


def _throttle_max(metrics: dict) -> float:
    return max(
        (v for group in metrics.values() for k, v in group.items() if k == "throttle-time-max" and v == v), default=0.0
    )


@pytest.mark.scenario("kafka-python", 12)
def test_kafka_python_producer_and_consumer_are_throttled_and_lose_nothing(quota_process):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=quota_process.bootstrap)
    admin.create_topics([NewTopic("quota", 1, 1)])
    admin.close()
    set_quotas(quota_process.port)

    producer = KafkaProducer(
        bootstrap_servers=quota_process.bootstrap, client_id="throttled", linger_ms=0, batch_size=4096
    )
    started = time.monotonic()
    for i in range(TOTAL):
        producer.send("quota", value=bytes([i]) * 3000)
        producer.flush(timeout=30)
    produced_in = time.monotonic() - started
    assert _throttle_max(producer.metrics()) > 0
    producer.close()
    # 120 kB at 40 kB/s, the first second's 40 kB free: about two seconds at the least
    assert produced_in > 1.2, produced_in

    consumer = KafkaConsumer(
        "quota",
        bootstrap_servers=quota_process.bootstrap,
        client_id="throttled",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=20_000,
        fetch_max_bytes=1 << 20,
    )
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == TOTAL:
            break
    assert [v[0] for v in values] == list(range(TOTAL))
    assert _throttle_max(consumer.metrics()) > 0
    consumer.close()


@pytest.mark.scenario("confluent-kafka", 12)
def test_confluent_producer_sees_its_throttle_time(quota_process):
    import json

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": quota_process.bootstrap})
    for f in admin.create_topics([NewTopic("quota", 1, 1)]).values():
        f.result(10)
    set_quotas(quota_process.port)

    throttles: list[int] = []
    producer = Producer(
        {
            "bootstrap.servers": quota_process.bootstrap,
            "client.id": "throttled",
            "linger.ms": 0,
            "statistics.interval.ms": 100,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
            "stats_cb": lambda s: throttles.extend(
                b["throttle"]["max"] for b in json.loads(s)["brokers"].values() if b["throttle"]["max"]
            ),
        }
    )
    delivered = []
    for i in range(TOTAL):
        producer.produce("quota", value=bytes([i]) * 3000, on_delivery=lambda err, msg: delivered.append(err))
        producer.flush(30)
    deadline = time.monotonic() + 5
    while not throttles and time.monotonic() < deadline:
        producer.poll(0.1)
    assert delivered == [None] * TOTAL
    assert throttles and max(throttles) > 0


@pytest.mark.scenario("aiokafka", 12)
def test_aiokafka_producer_and_consumer_are_slowed_and_lose_nothing(quota_process):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    async def go() -> tuple[float, list[int]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=quota_process.bootstrap)
        await admin.start()
        await admin.create_topics([NewTopic("quota", 1, 1)])
        await admin.close()
        await asyncio.to_thread(set_quotas, quota_process.port)  # its own event loop, in a thread
        producer = AIOKafkaProducer(bootstrap_servers=quota_process.bootstrap, client_id="throttled")
        await producer.start()
        started = time.monotonic()
        for i in range(TOTAL):
            await producer.send_and_wait("quota", bytes([i]) * 3000)
        produced_in = time.monotonic() - started
        await producer.stop()
        consumer = AIOKafkaConsumer(
            "quota", bootstrap_servers=quota_process.bootstrap, client_id="throttled", auto_offset_reset="earliest"
        )
        await consumer.start()
        seen: list[int] = []
        try:
            async with asyncio.timeout(30):
                async for message in consumer:
                    seen.append(message.value[0])
                    if len(seen) == TOTAL:
                        break
        finally:
            await consumer.stop()
        return produced_in, seen

    produced_in, seen = asyncio.run(go())
    assert seen == list(range(TOTAL))
    assert produced_in > 1.2, produced_in
