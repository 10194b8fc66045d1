"""librdkafka's cooperative-sticky protocol, and three different clients sharing one group."""

import asyncio
import threading
import time

import pytest

from tests.clients.kp import ChildConsumer, wait_until
from tests.clients.test_other_clients import create_topic

pytestmark = pytest.mark.client


@pytest.mark.scenario("confluent-kafka", 8)
def test_cooperative_sticky_keeps_unmoved_partitions(broker_process):
    from confluent_kafka import Consumer

    bs = broker_process.bootstrap
    create_topic(bs, "coop", 6)
    revoked: dict[str, list[int]] = {"a": [], "b": []}

    def consumer(name):
        c = Consumer(
            {
                "bootstrap.servers": bs,
                "group.id": "coop-g",
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 300,
            }
        )
        c.subscribe(["coop"], on_revoke=lambda _c, parts: revoked[name].extend(p.partition for p in parts))
        return c

    a = consumer("a")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(a.assignment()) != 6:
        a.poll(0.05)
    assert len(a.assignment()) == 6
    b = consumer("b")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (len(a.assignment()) + len(b.assignment()) == 6 and b.assignment()):
        a.poll(0.05)
        b.poll(0.05)
    kept = {p.partition for p in a.assignment()}
    moved = {p.partition for p in b.assignment()}
    assert kept and moved and kept.isdisjoint(moved) and kept | moved == set(range(6))
    assert set(revoked["a"]) == moved, "incremental: only the partitions that moved were revoked from a"
    a.close()
    b.close()


@pytest.mark.scenario("kafka-python", 10)
@pytest.mark.scenario("aiokafka", 10)
@pytest.mark.scenario("confluent-kafka", 10)
def test_three_client_libraries_share_one_group(broker_process):
    from aiokafka import AIOKafkaConsumer
    from confluent_kafka import Consumer

    bs = broker_process.bootstrap
    create_topic(bs, "mixed", 6)
    kp = ChildConsumer(
        bs, "mixed", group_id="mixed-g", session_timeout_ms=10000, heartbeat_interval_ms=300, enable_auto_commit=False
    )
    ck = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "mixed-g",
            "partition.assignment.strategy": "range",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 300,
        }
    )
    ck.subscribe(["mixed"])
    ak_assignment: set[int] = set()
    stop = threading.Event()

    def run_aiokafka():
        async def main():
            from aiokafka.coordinator.assignors.range import RangePartitionAssignor

            c = AIOKafkaConsumer(
                "mixed",
                bootstrap_servers=bs,
                group_id="mixed-g",
                session_timeout_ms=10000,
                heartbeat_interval_ms=300,
                partition_assignment_strategy=(RangePartitionAssignor,),  # aiokafka's default is round-robin only
            )
            await c.start()
            while not stop.is_set():
                await c.getmany(timeout_ms=100)
                ak_assignment.clear()
                ak_assignment.update(tp.partition for tp in c.assignment())
            await c.stop()

        asyncio.run(main())

    thread = threading.Thread(target=run_aiokafka, daemon=True)
    thread.start()
    try:

        def shared():
            ck.poll(0.05)
            parts = [kp.assignment, {p.partition for p in ck.assignment()}, set(ak_assignment)]
            return all(parts) and sum(map(len, parts)) == 6 and set().union(*parts) == set(range(6))

        wait_until(shared, 45, "kafka-python, confluent-kafka and aiokafka to share 6 partitions")
    finally:
        stop.set()
        thread.join(20)
        ck.close()
        kp.stop()


@pytest.mark.scenario("kafka-python", 8)
def test_kafka_python_cooperative_sticky_revokes_only_what_moves(broker_process):
    from tests.clients.kp import ChildMember

    bs = broker_process.bootstrap
    create_topic(bs, "kcoop", 6)
    a = ChildMember("kafka-python", bs, "kcoop", "kcoop-g", 6000, assignor="cooperative-sticky")
    try:
        wait_until(lambda: len(a.assignment) == 6, 30, "the first member to own all 6 partitions")
        b = ChildMember("kafka-python", bs, "kcoop", "kcoop-g", 6000, assignor="cooperative-sticky")
        try:
            wait_until(
                lambda: a.assignment and b.assignment and len(a.assignment) + len(b.assignment) == 6,
                45,
                "two members sharing 6 partitions",
            )
            assert a.assignment.isdisjoint(b.assignment)
            assert set(a.revoked) == b.assignment, f"incremental: only moved partitions revoked, got {a.revoked}"
        finally:
            b.kill()
    finally:
        a.kill()
