"""Three groupd nodes over one PostgreSQL on loopback, with real clients (kafka-python): a producer with
acks=all and a classic group; SIGKILL of the node owning the most leases. Every acknowledged record is
still readable at its acknowledged offset, committed offsets never go backwards, and the group consumes
again within the lease plus 5 s. Also: every node's Metadata names the same leaders, and a controlled
stop (SIGTERM) hands its leases over without waiting for them to expire."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaConnectionError

from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch
from tests.harness import BrokerProcess, WireClient
from tests.wire.test_data_plane import produce_body

TOPIC, PARTITIONS = "orders", 6
LEASE_MS = 1500
SHARDS = 6  # offsets.topic.num.partitions: few shards keep the takeovers quick to read
TXN_SHARDS = 3  # transaction.state.log.num.partitions, likewise
SHARE_SHARDS = 3  # share.coordinator.state.topic.num.partitions, likewise


def settings(url: str, node: int) -> dict[str, object]:
    return {
        "storage.engine": "postgresql",
        "storage.postgresql.url": url,
        "cluster.enabled": "true",
        "node.id": node,
        "cluster.lease.ms": LEASE_MS,
        "offsets.topic.num.partitions": SHARDS,
        "transaction.state.log.num.partitions": TXN_SHARDS,
        "share.coordinator.state.topic.num.partitions": SHARE_SHARDS,
    }


@pytest.fixture
def nodes(tmp_path: Path, postgresql_url: str) -> Iterator[list[BrokerProcess]]:
    yield from three_nodes(tmp_path, [settings(postgresql_url, n) for n in (1, 2, 3)])


def three_nodes(tmp_path: Path, configs: list[dict[str, object]]) -> Iterator[list[BrokerProcess]]:
    """Nodes 1, 2 and 3 with these settings, started together; killed after the test, whose logs must hold
    no traceback."""
    started = [BrokerProcess(tmp_path / f"n{n}", config) for n, config in enumerate(configs, 1)]
    with ThreadPoolExecutor(3) as pool:  # the three start together: a node's start-up is mostly waiting
        list(pool.map(BrokerProcess.start, started))
    try:
        yield started
    finally:
        for node in started:
            if node.proc is not None:
                node.kill()
    for node in started:  # whatever happened to it: errors are log lines, never a traceback
        assert "Traceback" not in node.log_text(), node.log_text()[-3000:]


def owners(url: str) -> dict[tuple[str, int], int | None]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT topic, partition, owner FROM groupd_lease WHERE expires_at > now()").fetchall()
    return {(t, p): o for t, p, o in rows}


def wait_for(check, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout}s: {what}")


def leaders(bootstrap: str) -> dict[int, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        (described,) = admin.describe_topics([TOPIC])
    finally:
        admin.close()
    return {p["partition_index"]: p["leader_id"] for p in described["partitions"]}


def test_sigkill_of_the_busiest_owner_loses_nothing_acknowledged_and_the_group_recovers(
    nodes: list[BrokerProcess], postgresql_url: str
) -> None:
    bootstrap = ",".join(n.bootstrap for n in nodes)
    KafkaAdminClient(bootstrap_servers=nodes[0].bootstrap).create_topics([NewTopic(TOPIC, PARTITIONS, 1)])

    def settled() -> dict[tuple[str, int], int | None] | None:
        """The leases once every partition is owned, the leases are spread over the three nodes, and every
        node's Metadata names each partition's lease holder as its leader (leases move while the nodes
        spread them)."""
        held = owners(postgresql_url)
        holders = {p: held.get((TOPIC, p)) for p in range(PARTITIONS)}
        if None in holders.values() or set(held.values()) != {1, 2, 3}:
            return None
        return held if all(leaders(n.bootstrap) == holders for n in nodes) else None

    wait_for(settled, 15, "every partition owned, the leases spread, each leader named by every node")

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, retries=50, retry_backoff_ms=200)
    acked: dict[tuple[int, int], bytes] = {}

    def produce(first: int, count: int) -> None:
        sent = [
            (producer.send(TOPIC, b"v%d" % i, partition=i % PARTITIONS), b"v%d" % i)
            for i in range(first, first + count)
        ]
        producer.flush(30)
        for future, value in sent:
            meta = future.get(30)
            acked[(meta.partition, meta.offset)] = value

    produce(0, 300)
    consumer = KafkaConsumer(
        TOPIC, bootstrap_servers=bootstrap, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False
    )
    got = 0
    deadline = time.monotonic() + 20
    while got < 120 and time.monotonic() < deadline:
        got += sum(len(b) for b in consumer.poll(500, max_records=120 - got).values())
    consumer.commit()
    before = {p: consumer.committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}
    consumer.close()
    assert sum(o or 0 for o in before.values()) == 120

    counts: dict[int, int] = {}
    for owner in owners(postgresql_url).values():
        if owner is not None:
            counts[owner] = counts.get(owner, 0) + 1
    victim = max(counts, key=lambda n: counts[n])
    survivors = [n for i, n in enumerate(nodes, 1) if i != victim]
    nodes[victim - 1].kill()  # SIGKILL: no hand-over, its leases expire
    killed_at = time.monotonic()

    produce(300, 300)  # the producer follows the new leaders by itself
    alive = ",".join(n.bootstrap for n in survivors)
    consumer = KafkaConsumer(
        TOPIC, bootstrap_servers=alive, group_id="g", auto_offset_reset="earliest", enable_auto_commit=False
    )
    first_record_at = None
    consumed = 0
    deadline = time.monotonic() + 30
    while consumed < 480 and time.monotonic() < deadline:
        try:
            n = sum(len(b) for b in consumer.poll(500, max_records=500).values())
        except KafkaConnectionError:
            # kafka-python 3 raises this from poll when a metadata refresh picks the node just killed,
            # which Metadata lists until its registration expires (Kafka too lists a dead broker until its
            # session times out); an application polls again, as this loop does
            continue
        if n and first_record_at is None:
            first_record_at = time.monotonic()
        consumed += n
    consumer.commit()
    after = {p: consumer.committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}
    consumer.close()
    producer.close()

    assert first_record_at is not None
    recovered_s = first_record_at - killed_at
    assert recovered_s < LEASE_MS / 1000 + 5, recovered_s
    assert consumed == 480  # resumed at the commits: nothing before them again, nothing missing
    assert all((after[p] or 0) >= (before[p] or 0) for p in range(PARTITIONS))  # never backwards
    stored = read_all_of(alive, PARTITIONS)
    assert len(acked) == 600
    assert all(stored.get(key) == value for key, value in acked.items())  # every ack, at its offset
    assert set(owners(postgresql_url).values()) <= {n for n in (1, 2, 3) if n != victim}


def test_sigterm_hands_the_leases_over_without_waiting_for_them_to_expire(
    nodes: list[BrokerProcess], postgresql_url: str
) -> None:
    shards = SHARDS + TXN_SHARDS + SHARE_SHARDS  # __consumer_offsets, __transaction_state, __share_group_state
    wait_for(lambda: len(owners(postgresql_url)) == shards, 10, "every shard owned")
    assert nodes[1].stop() == 0
    stopped_at = time.monotonic()
    wait_for(
        lambda: (o := owners(postgresql_url)) and len(o) == shards and 2 not in o.values(),
        LEASE_MS / 1000,  # well before node 2's leases could have expired
        "node 2's shards taken over",
    )
    assert time.monotonic() - stopped_at < LEASE_MS / 1000


def test_an_owner_paused_for_three_leases_has_nothing_accepted_and_rejoins_as_a_normal_node(
    nodes: list[BrokerProcess], postgresql_url: str
) -> None:
    KafkaAdminClient(bootstrap_servers=nodes[0].bootstrap).create_topics([NewTopic(TOPIC, 3, 1)])
    held = wait_for(
        lambda: (o := owners(postgresql_url)) and sum(1 for (t, _p) in o if t == TOPIC) == 3 and o, 10, "owned"
    )
    victim = held[(TOPIC, 0)]
    assert victim is not None
    paused = nodes[victim - 1]
    survivors = ",".join(n.bootstrap for i, n in enumerate(nodes, 1) if i != victim)

    async def scenario() -> ErrorCode:
        client = await WireClient.connect(paused.port)
        try:
            assert paused.proc is not None
            paused.proc.send_signal(signal.SIGSTOP)
            stopped_at = time.monotonic()
            # the lease goes to another node while the owner sleeps
            await asyncio.to_thread(
                wait_for, lambda: owners(postgresql_url).get((TOPIC, 0)) not in (None, victim), 10, "taken over"
            )
            # a write reaches the sleeping ex-owner's socket and waits there
            client.send(
                0, 9, produce_body(TOPIC, 0, build_batch([(None, b"from-the-paused-owner")], timestamp_ms=1_000))
            )
            producer = KafkaProducer(bootstrap_servers=survivors, acks="all", retries=20)
            meta = producer.send(TOPIC, b"from-the-new-owner", partition=0).get(20)
            producer.close()
            assert meta.offset >= 0
            await asyncio.sleep(max(0.0, 3 * LEASE_MS / 1000 - (time.monotonic() - stopped_at)))
            paused.proc.send_signal(signal.SIGCONT)
            answer = await client.recv()
            return ErrorCode(answer.responses[0].partition_responses[0].error_code)
        finally:
            await client.close()

    assert asyncio.run(scenario()) == ErrorCode.not_leader_or_follower
    values = set(read_all_of(survivors, 1).values())
    assert b"from-the-new-owner" in values and b"from-the-paused-owner" not in values
    # it carries on as a normal node: registered again, given its share back at a new epoch
    wait_for(lambda: victim in owners(postgresql_url).values(), 10, "the paused node owns leases again")
    wait_for(lambda: len(leaders(paused.bootstrap)) == 3 and paused.proc is not None, 5, "it answers Metadata")


def read_all_of(bootstrap: str, partitions: int) -> dict[tuple[int, int], bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    parts = [TopicPartition(TOPIC, p) for p in range(partitions)]
    consumer.assign(parts)
    consumer.seek_to_beginning(*parts)
    try:
        return {(m.partition, m.offset): m.value for m in consumer}
    finally:
        consumer.close()


def test_an_idempotent_librdkafka_producer_across_a_sigkill_leaves_no_duplicate_and_loses_no_ack(
    nodes: list[BrokerProcess], postgresql_url: str
) -> None:
    producer, acked, failed, report = idempotent_producer(nodes, postgresql_url)

    def send(first: int, count: int) -> None:
        for i in range(first, first + count):
            producer.produce(TOPIC, b"c%d" % i, partition=i % 3, on_delivery=report)
            producer.poll(0)

    send(0, 300)
    producer.flush(20)
    victim = owners(postgresql_url)[(TOPIC, 0)]
    assert victim is not None
    send(300, 150)  # some of these are in flight at the victim when it dies
    nodes[victim - 1].kill()
    send(450, 150)
    assert producer.flush(30) == 0
    assert failed == []
    assert len(acked) == 600
    alive = ",".join(n.bootstrap for i, n in enumerate(nodes, 1) if i != victim)
    stored = read_all_of(alive, 3)
    assert all(stored.get(key) == value for key, value in acked.items())  # every ack, at its offset
    values = sorted(stored.values())
    assert len(values) == len(set(values)) == 600  # retried batches were not stored twice


def test_a_rolling_restart_of_every_node_gives_the_producer_no_error(
    nodes: list[BrokerProcess], postgresql_url: str
) -> None:
    producer, acked, failed, report = idempotent_producer(nodes, postgresql_url)
    send = Sender(producer, report, b"r")

    for i, node in enumerate(nodes, 1):
        send(100)
        assert node.stop() == 0  # SIGTERM: its leases handed over
        send(100)
        producer.poll(0.5)
        node.start()
        wait_for(lambda n=i: n in owners(postgresql_url).values(), 10, f"node {i} owns leases again")
    assert producer.flush(30) == 0
    assert failed == []
    assert len(acked) == send.sent == 600
    stored = read_all_of(nodes[0].bootstrap, 3)
    assert all(stored.get(key) == value for key, value in acked.items())
    assert len(set(stored.values())) == len(stored) == 600


class Sender:
    """Sends numbered records (``prefix`` and a running number, round robin over 3 partitions)."""

    def __init__(self, producer: Any, report: Any, prefix: bytes) -> None:
        self.producer, self.report, self.prefix = producer, report, prefix
        self.sent = 0

    def __call__(self, count: int) -> None:
        for _ in range(count):
            self.producer.produce(
                TOPIC, self.prefix + b"%d" % self.sent, partition=self.sent % 3, on_delivery=self.report
            )
            self.producer.poll(0)
            self.sent += 1


def idempotent_producer(nodes: list[BrokerProcess], url: str):  # type: ignore[no-untyped-def]
    """A 3-partition topic owned across the nodes, and a librdkafka idempotent producer (acks=all, retries
    until delivery.timeout.ms) with its delivery reports: (producer, acked, failed, report callback)."""
    from confluent_kafka import Producer

    KafkaAdminClient(bootstrap_servers=nodes[0].bootstrap).create_topics([NewTopic(TOPIC, 3, 1)])
    wait_for(lambda: sum(1 for (t, _p) in owners(url) if t == TOPIC) == 3, 10, "owned")
    producer = Producer(
        {
            "bootstrap.servers": ",".join(n.bootstrap for n in nodes),
            "enable.idempotence": True,
            "linger.ms": 5,
            "delivery.timeout.ms": 30000,
        }
    )
    acked: dict[tuple[int, int], bytes] = {}
    failed: list[str] = []

    def report(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()
        else:
            failed.append(str(err))

    return producer, acked, failed, report


def test_a_kip848_group_carries_on_after_a_sigkill_of_its_coordinator(
    nodes: list[BrokerProcess], postgresql_url: str
) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as Tp

    from groupd.coordinator.partitioning import partition_for
    from groupd.protocol.topic_names import OFFSETS_TOPIC

    producer, acked, failed, report = idempotent_producer(nodes, postgresql_url)
    for i in range(150):
        producer.produce(TOPIC, b"k%d" % i, partition=i % 3, on_delivery=report)
    assert producer.flush(20) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": ",".join(n.bootstrap for n in nodes),
            "group.id": "g848",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    seen: list[bytes] = []

    def poll_for(count: int, seconds: float) -> float | None:
        """Poll until ``count`` more records came; when the first of them came (None: none did)."""
        first, target, deadline = None, len(seen) + count, time.monotonic() + seconds
        while len(seen) < target and time.monotonic() < deadline:
            m = consumer.poll(0.1)
            if m is not None and m.error() is None:
                first = first or time.monotonic()
                seen.append(m.value())
        return first

    try:
        poll_for(150, 30)
        assert len(seen) == 150
        consumer.commit(asynchronous=False)
        before = {tp.partition: tp.offset for tp in consumer.committed([Tp(TOPIC, p) for p in range(3)], 10)}
        coordinator = owners(postgresql_url)[(OFFSETS_TOPIC, partition_for("g848", SHARDS))]
        assert coordinator is not None
        nodes[coordinator - 1].kill()
        killed_at = time.monotonic()
        for i in range(150, 300):
            producer.produce(TOPIC, b"k%d" % i, partition=i % 3, on_delivery=report)
        assert producer.flush(30) == 0
        first = poll_for(150, 30)
        assert first is not None and first - killed_at < LEASE_MS / 1000 + 5, first and first - killed_at
        consumer.commit(asynchronous=False)
        after = {tp.partition: tp.offset for tp in consumer.committed([Tp(TOPIC, p) for p in range(3)], 10)}
    finally:
        consumer.close()
    assert failed == [] and len(acked) == 300
    assert sorted(set(seen)) == sorted(b"k%d" % i for i in range(300))  # everything, once the group resumed
    assert all(after[p] >= before[p] for p in range(3))  # commits never go backwards
    assert sum(after.values()) == 300


def test_a_node_stopped_as_soon_as_it_listens_stops_cleanly(tmp_path: Path, postgresql_url: str) -> None:
    """SIGTERM as soon as the port answers, while the node still registers and takes its first leases:
    a controlled stop once started (exit status 0), never the signal's default death."""
    for n in range(3):
        node = BrokerProcess(tmp_path / f"n{n}", settings(postgresql_url, 1)).start()
        assert node.stop() == 0, node.log_text()[-2000:]
        assert "Traceback" not in node.log_text()
