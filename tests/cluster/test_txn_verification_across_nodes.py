"""Produce-time verification of transactions across two hand-stepped nodes (KIP-890): the leader of a
partition asks the node coordinating the producer's transactional id (AddPartitionsToTxn v5,
``verify_only``) before it writes the first transactional batch of a transaction there, and answers the
producer as Kafka's ReplicaManager does."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

from groupd.broker.app import Broker
from groupd.coordinator.partitioning import partition_for
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import TXN_STATE_TOPIC
from tests.cluster.stepped import TwoNodes, settled, two_started
from tests.harness import WireClient
from tests.wire.test_data_plane import produce_body
from tests.wire.test_transactions import add_body, committed_fetch, end_body, init_body, txn_batch


def txn_produce_body(tid: str, topic: str, partition: int, records: bytes, version: int = 9):  # type: ignore[no-untyped-def]
    """A Produce from a transactional producer: it names its transactional id, as every client does."""
    return dataclasses.replace(produce_body(topic, partition, records, version=version), transactional_id=tid)


async def produced(client: WireClient, tid: str, topic: str, partition: int, records: bytes, version: int = 9):  # type: ignore[no-untyped-def]
    resp = await client.call(0, version, txn_produce_body(tid, topic, partition, records, version))
    p = resp.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def split(both: TwoNodes, topic: str, partitions: int) -> tuple[str, int, list[int]]:
    """A transactional id, the node coordinating it, and partitions of ``topic`` the other node leads."""
    one = both.nodes[1]
    assert one.cluster is not None
    shards = one.transactions.num_partitions
    for i in range(200):
        tid = f"txn-{i}"
        coordinator = one.cluster.leader(TXN_STATE_TOPIC, partition_for(tid, shards))
        led = [p for p in range(partitions) if one.cluster.leader(topic, p) not in (coordinator, None)]
        if coordinator is not None and len(led) >= 2:
            return tid, coordinator, led
    raise AssertionError("no transactional id coordinated by one node with two partitions led by the other")


async def started_topic(both: TwoNodes) -> tuple[str, int, int, list[int]]:
    """(tid, coordinator, leader, partitions the leader leads) once both nodes lease everything."""
    count = len((await settled(both, "t")).partitions)
    tid, coordinator, led = split(both, "t", count)
    return tid, coordinator, 3 - coordinator, led


def verifier_of(node: Broker):  # type: ignore[no-untyped-def]
    verifier = node.transactions.verifier
    assert verifier is not None
    return verifier


def test_a_batch_led_elsewhere_is_verified_at_the_coordinator(tmp_path: Path, postgresql_url: str) -> None:
    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            tid, coordinator, leader, led = await started_topic(both)
            p, q = led[:2]
            at_coordinator, at_leader = both.clients[coordinator], both.clients[leader]
            init = await at_coordinator.call(22, 4, init_body(tid))
            pid, epoch = init.producer_id, init.producer_epoch
            added = await at_coordinator.call(24, 3, add_body(tid, pid, epoch, {"t": [p]}))
            assert {
                e.partition_error_code for t in added.results_by_topic_v3_and_below for e in t.results_by_partition
            } == {ErrorCode.none}
            verifier = verifier_of(both.nodes[leader])
            sent = verifier.requests_sent
            # the added partition: verified by one request to the coordinator, then written
            assert await produced(at_leader, tid, "t", p, txn_batch(pid, epoch, 0, [b"a"])) == (ErrorCode.none, 0)
            assert verifier.requests_sent == sent + 1
            # the transaction is open on the partition now: the next batch is not verified again
            assert await produced(at_leader, tid, "t", p, txn_batch(pid, epoch, 1, [b"b"])) == (ErrorCode.none, 1)
            assert verifier.requests_sent == sent + 1
            # a partition never added: the coordinator answers TRANSACTION_ABORTABLE; Produce v11+ clients hear
            # it, older ones (up to v10, Kafka's defaultError) INVALID_TXN_STATE
            outside = txn_batch(pid, epoch, 0, [b"x"])
            assert (await produced(at_leader, tid, "t", q, outside, version=9))[0] == ErrorCode.invalid_txn_state
            assert (await produced(at_leader, tid, "t", q, outside, version=11))[0] == ErrorCode.transaction_abortable
            # a producer id the coordinator does not know for this id
            stranger = txn_batch(pid + 1000, 0, 0, [b"x"])
            assert (await produced(at_leader, tid, "t", q, stranger))[0] == ErrorCode.invalid_producer_id_mapping
            # nothing refused was written; the transaction commits and its two records are read committed
            ended = await at_coordinator.call(26, 3, end_body(tid, pid, epoch, True))
            assert ended.error_code == ErrorCode.none
            for _ in range(50):
                got = await at_leader.call(1, 11, committed_fetch("t", p, 0))
                part = got.responses[0].partitions[0]
                if part.last_stable_offset >= 3:
                    break
                await asyncio.sleep(0.05)
            assert part.last_stable_offset == part.high_watermark == 3  # two records and the commit marker
            empty = (await at_leader.call(1, 11, committed_fetch("t", q, 0))).responses[0].partitions[0]
            assert empty.high_watermark == 0
            # a new InitProducerId bumps the epoch: PRODUCER_FENCED at the coordinator for the old one, which
            # the producer hears as INVALID_PRODUCER_EPOCH (Kafka's AddPartitionsToTxnManager)
            again = await at_coordinator.call(22, 4, init_body(tid))
            assert (again.producer_id, again.producer_epoch) == (pid, epoch + 1)
            await at_coordinator.call(24, 3, add_body(tid, pid, epoch + 1, {"t": [q]}))
            fenced = txn_batch(pid, epoch, 0, [b"x"])
            assert (await produced(at_leader, tid, "t", q, fenced))[0] == ErrorCode.invalid_producer_epoch

    asyncio.run(scenario())


def test_concurrent_verifications_to_one_node_go_in_one_request(tmp_path: Path, postgresql_url: str) -> None:
    """As Kafka's AddPartitionsToTxnManager: what waits for one node while it is asked goes in one request."""

    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            tid, coordinator, leader, led = await started_topic(both)
            at_coordinator = both.clients[coordinator]
            init = await at_coordinator.call(22, 4, init_body(tid))
            pid, epoch = init.producer_id, init.producer_epoch
            await at_coordinator.call(24, 3, add_body(tid, pid, epoch, {"t": [led[0]]}))
            verifier = verifier_of(both.nodes[leader])
            sent = verifier.requests_sent
            asks = [verifier.verify(tid, pid, epoch, [("t", p)]) for p in led + led]
            answers = await asyncio.gather(*asks)
            assert verifier.requests_sent == sent + 1
            for answer in answers:
                ((tp, error),) = answer.items()
                # the raw answer of the coordinator (v5): TRANSACTION_ABORTABLE for a partition not added
                assert error == (ErrorCode.none if tp == ("t", led[0]) else ErrorCode.transaction_abortable)
            # an older epoch asked beside a newer one of the same id: the older hears INVALID_PRODUCER_EPOCH
            old, new = await asyncio.gather(
                verifier.verify(tid, pid, epoch - 1, [("t", led[1])]), verifier.verify(tid, pid, epoch, [("t", led[0])])
            )
            assert old == {("t", led[1]): ErrorCode.invalid_producer_epoch}
            assert new == {("t", led[0]): ErrorCode.none}

    asyncio.run(scenario())


def _transactions_of_librdkafka(bootstrap: str, tid: str, partitions: int, rounds: int) -> list[str]:
    """A confluent-kafka transactional producer: ``rounds`` transactions over every partition, committed
    but for the second, aborted; the errors it met (none expected)."""
    from confluent_kafka import KafkaException, Producer

    errors: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5})
    try:
        producer.init_transactions(20)
        for r in range(rounds):
            producer.begin_transaction()
            for p in range(partitions):
                producer.produce("t", b"%d-%d" % (r, p), partition=p)
            if r == 1:
                producer.abort_transaction(20)
            else:
                producer.commit_transaction(20)
    except KafkaException as exc:
        errors.append(str(exc))
    finally:
        producer.flush(5)
    return errors


def _read_committed(bootstrap: str, partitions: int, expected: int) -> list[bytes]:
    """What a read_committed librdkafka consumer reads from every partition (bounded: 20 s)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "check",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition("t", p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 20
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        end = time.monotonic() + 1  # nothing more comes (an aborted record would)
        while time.monotonic() < end:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_a_librdkafka_transactional_producer_across_two_nodes(tmp_path: Path, postgresql_url: str) -> None:
    """Its partitions are led by both nodes and its coordinator is one of them: the other node's partitions
    are verified at the coordinator, and every committed record (none of the aborted) is read committed."""

    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            tid, coordinator, leader, led = await started_topic(both)
            bootstrap = ",".join(f"127.0.0.1:{both.nodes[n].port}" for n in (1, 2))
            verifier = verifier_of(both.nodes[leader])
            sent = verifier.requests_sent
            errors = await asyncio.to_thread(_transactions_of_librdkafka, bootstrap, tid, 4, 3)
            assert errors == []
            assert verifier.requests_sent > sent  # the leader that does not coordinate asked the one that does
            values = await asyncio.to_thread(_read_committed, bootstrap, 4, 8)
            assert sorted(values) == sorted(b"%d-%d" % (r, p) for r in (0, 2) for p in range(4))
            assert leader in {both.nodes[1].cluster.leader("t", p) for p in led}  # type: ignore[union-attr]

    asyncio.run(scenario())


def test_an_unreachable_coordinator_makes_the_produce_retried(tmp_path: Path, postgresql_url: str) -> None:
    """The coordinator's node is gone and the leader has not stepped since: the verification cannot be
    made (Kafka's NETWORK_EXCEPTION), and the producer hears NOT_ENOUGH_REPLICAS, which it retries."""

    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            tid, coordinator, leader, led = await started_topic(both)
            init = await both.clients[coordinator].call(22, 4, init_body(tid))
            pid, epoch = init.producer_id, init.producer_epoch
            await both.clients[coordinator].call(24, 3, add_body(tid, pid, epoch, {"t": [led[0]]}))
            await both.stop(coordinator)
            batch = txn_batch(pid, epoch, 0, [b"a"])
            assert await produced(both.clients[leader], tid, "t", led[0], batch) == (ErrorCode.not_enough_replicas, -1)

    asyncio.run(scenario())
