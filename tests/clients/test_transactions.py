"""Kafka transactions with real clients: kafka-python, aiokafka and confluent-kafka (librdkafka).

Each test starts its own broker. Every client call that could wait on the broker has a bound of its
own (``max_block_ms``, ``request_timeout_ms``, librdkafka's per-call timeouts) or runs under
``bounded``/``asyncio.wait_for``, so a broker without transactions fails each test in seconds.

Kafka answers EndTxn once the outcome is decided and writes the COMMIT/ABORT markers after that, so
right after a commit the last stable offset and the group's offsets may still be behind: the tests
wait, bounded, for the end offsets and group offsets they expect instead of reading them once.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import ProducerFencedError
from kafka.structs import OffsetAndMetadata

from tests.harness import BrokerProcess

pytestmark = [pytest.mark.client, pytest.mark.timeout(90)]

# The coordinator's sweep for timed-out transactions (Kafka's default is 10 s) runs often here, so a
# transaction past its producer's transaction.timeout.ms is aborted within a fraction of a second.
TXN_CONFIG = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}

# kafka-python waits max_block_ms in init_transactions; commit/abort/send_offsets wait without a limit.
KP_PRODUCER = {"max_block_ms": 10000, "request_timeout_ms": 5000, "retry_backoff_ms": 50}


@pytest.fixture
def broker(tmp_path) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path / "data", TXN_CONFIG)
    proc.start()
    yield proc
    proc.kill()


@pytest.fixture
def closing() -> Iterator[Callable[[Callable[[], Any]], None]]:
    """Register a client's close; every one runs at teardown, whatever the test's outcome."""
    closers: list[Callable[[], Any]] = []
    yield closers.append
    for close in reversed(closers):
        with contextlib.suppress(Exception):
            bounded(close, 10, "close")


def bounded(fn: Callable[[], Any], timeout: float = 15.0, what: str = "the call") -> Any:
    """``fn()`` in a daemon thread: its result or its exception, or a failure after ``timeout`` s."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the test's thread
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise AssertionError(f"{what} did not return within {timeout}s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def eventually(fetch: Callable[[], Any], expected: Any, timeout: float = 10.0, what: str = "the value") -> None:
    """``fetch()`` until it returns ``expected`` (an error counts as not yet), bounded."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = fetch()
        except Exception as exc:
            last = exc
        if last == expected:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: {last!r}, expected {expected!r} within {timeout}s")
        time.sleep(0.05)


def create_topics(bootstrap: str, *names: str, partitions: int = 2) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic(name, partitions, 1) for name in names])
    finally:
        admin.close()


def kp_producer(bootstrap: str, closing, **config: Any) -> KafkaProducer:
    producer = KafkaProducer(bootstrap_servers=bootstrap, **{**KP_PRODUCER, **config})
    closing(lambda: producer.close(timeout=5))
    return producer


def partitions(topic: str, count: int = 2) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(count)]


def read_to_end(bootstrap: str, topic: str, isolation: str, ends: dict[int, int], timeout: float = 15.0):
    """Every record a fresh consumer, assigned partitions 0.. of ``topic`` from their start, returns once
    the end offsets of its isolation level (read_committed: the last stable offset) are ``ends`` and its
    position has reached them, as sorted (partition, offset, value)."""
    tps = partitions(topic, len(ends))
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level=isolation, auto_offset_reset="earliest",
        enable_auto_commit=False, request_timeout_ms=10000,
    )
    records = []
    try:
        consumer.assign(tps)
        deadline = time.monotonic() + timeout
        while True:
            for batch in consumer.poll(timeout_ms=100).values():
                records.extend(batch)
            now = {tp.partition: end for tp, end in consumer.end_offsets(tps, timeout_ms=5000).items()}
            at = {tp.partition: consumer.position(tp, timeout_ms=5000) for tp in tps}
            if now == ends and all(at[p] >= ends[p] for p in ends):
                break
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{isolation} consumer of {topic}: end offsets {now}, positions {at}, expected end offsets"
                    f" {ends} within {timeout}s; records {[(r.partition, r.offset, r.value) for r in records]}")
    finally:
        consumer.close(autocommit=False)
    return sorted((r.partition, r.offset, r.value) for r in records)


def values(records) -> list[bytes]:
    return sorted(r[2] for r in records)


@pytest.mark.scenario('kafka-python', 11)
def test_kafka_python_commit_and_abort_read_committed_and_uncommitted(broker, closing):
    """Aborted records are never returned to read_committed, committed ones are; read_uncommitted sees
    both; the COMMIT/ABORT markers take one offset in each partition of the transaction and are never
    returned as records."""
    bs = broker.bootstrap
    create_topics(bs, "tx1")
    producer = kp_producer(bs, closing, transactional_id="tx1-producer")
    producer.init_transactions()
    producer.begin_transaction()
    for p in range(2):
        producer.send("tx1", value=f"aborted{p}".encode(), partition=p).get(timeout=10)
    bounded(producer.abort_transaction, what="abort_transaction")
    producer.begin_transaction()
    for p in range(2):
        producer.send("tx1", value=f"committed{p}".encode(), partition=p).get(timeout=10)
    bounded(producer.commit_transaction, what="commit_transaction")

    # per partition: offset 0 the aborted record, 1 its ABORT marker, 2 the committed one, 3 its COMMIT
    assert read_to_end(bs, "tx1", "read_committed", {0: 4, 1: 4}) == [(0, 2, b"committed0"), (1, 2, b"committed1")]
    assert read_to_end(bs, "tx1", "read_uncommitted", {0: 4, 1: 4}) == [
        (0, 0, b"aborted0"), (0, 2, b"committed0"), (1, 0, b"aborted1"), (1, 2, b"committed1")]


@pytest.mark.scenario('kafka-python', 11)
@pytest.mark.engines  # storage: on both engines (tests/conftest.py)
def test_kafka_python_consume_transform_produce_commits_group_offsets_with_the_transaction(broker, closing):
    """send_offsets_to_transaction: the group's offsets become the transaction's when it commits, and an
    aborted transaction's offsets are discarded along with its records."""
    bs = broker.bootstrap
    create_topics(bs, "ctp-in", "ctp-out")
    plain = kp_producer(bs, closing)
    for i in range(10):
        plain.send("ctp-in", value=f"in{i}".encode(), partition=i % 2)
    plain.flush(timeout=10)

    consumer = KafkaConsumer(
        "ctp-in", bootstrap_servers=bs, group_id="ctp-group", auto_offset_reset="earliest",
        enable_auto_commit=False, isolation_level="read_committed", session_timeout_ms=6000,
        heartbeat_interval_ms=300, request_timeout_ms=10000,
    )
    closing(lambda: consumer.close(autocommit=False))

    def consume(n: int, timeout: float = 20.0) -> list:
        got: list = []
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=100).values():
                got.extend(batch)
        assert len(got) == n, f"consumed {len(got)} of {n}"
        return got

    def next_offsets(records) -> dict[TopicPartition, OffsetAndMetadata]:
        last: dict[TopicPartition, int] = {}
        for r in records:
            tp = TopicPartition(r.topic, r.partition)
            last[tp] = max(last.get(tp, -1), r.offset)
        return {tp: OffsetAndMetadata(offset + 1, "", -1) for tp, offset in last.items()}

    admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=10000)
    closing(admin.close)

    def group_offsets() -> dict[int, int]:
        listed = admin.list_group_offsets({"ctp-group": None})["ctp-group"]
        return {tp.partition: om.offset for tp, om in listed.items() if tp.topic == "ctp-in"}

    producer = kp_producer(bs, closing, transactional_id="ctp-producer")
    producer.init_transactions()

    first = consume(10)
    producer.begin_transaction()
    for r in first:
        producer.send("ctp-out", value=r.value.replace(b"in", b"out"), partition=r.partition)
    offsets = next_offsets(first)
    assert {tp.partition: om.offset for tp, om in offsets.items()} == {0: 5, 1: 5}
    bounded(lambda: producer.send_offsets_to_transaction(offsets, consumer.group_metadata()),
            what="send_offsets_to_transaction")
    bounded(producer.commit_transaction, what="commit_transaction")
    eventually(group_offsets, {0: 5, 1: 5}, what="the group's offsets after the commit")

    for i in range(10, 14):
        plain.send("ctp-in", value=f"in{i}".encode(), partition=i % 2)
    plain.flush(timeout=10)
    second = consume(4)
    producer.begin_transaction()
    for r in second:
        producer.send("ctp-out", value=r.value.replace(b"in", b"out"), partition=r.partition)
    # the records must be in the log before the abort: kafka-python's abort_transaction drops batches it
    # has not sent yet (as Java's does), and then the partitions hold only the ABORT marker
    producer.flush(timeout=10)
    bounded(lambda: producer.send_offsets_to_transaction(next_offsets(second), consumer.group_metadata()),
            what="send_offsets_to_transaction")
    bounded(producer.abort_transaction, what="abort_transaction")

    # per partition: 5 committed records, COMMIT, 2 aborted records, ABORT
    out = read_to_end(bs, "ctp-out", "read_committed", {0: 9, 1: 9})
    assert values(out) == sorted(f"out{i}".encode() for i in range(10))
    everything = read_to_end(bs, "ctp-out", "read_uncommitted", {0: 9, 1: 9})
    assert values(everything) == sorted(f"out{i}".encode() for i in range(14))
    assert group_offsets() == {0: 5, 1: 5}, "an aborted transaction's offsets are never committed"


def test_kafka_python_second_producer_with_the_same_transactional_id_fences_the_first(broker, closing):
    """A second init_transactions with the same transactional.id aborts the first producer's open
    transaction and bumps the epoch: the first producer's commit fails as fenced, its records are never
    committed, and the second producer's transaction commits."""
    bs = broker.bootstrap
    create_topics(bs, "fence")
    first = kp_producer(bs, closing, transactional_id="fence-id")
    first.init_transactions()
    first.begin_transaction()
    first.send("fence", value=b"first", partition=0).get(timeout=10)

    second = kp_producer(bs, closing, transactional_id="fence-id")
    second.init_transactions()

    with pytest.raises(ProducerFencedError):
        bounded(first.commit_transaction, what="the fenced producer's commit_transaction")

    second.begin_transaction()
    second.send("fence", value=b"second", partition=0).get(timeout=10)
    bounded(second.commit_transaction, what="commit_transaction")
    # partition 0: first's record, the ABORT marker from second's init, second's record, its COMMIT
    assert read_to_end(bs, "fence", "read_committed", {0: 4, 1: 0}) == [(0, 2, b"second")]


def test_kafka_python_transaction_past_its_timeout_is_aborted_by_the_broker(broker, closing):
    """A transaction left open past the producer's transaction.timeout.ms is aborted by the coordinator,
    which bumps the producer's epoch as it does so. A read_committed consumer is held at the open
    transaction's first offset only until then: it goes on to a later committed transaction and never
    sees the aborted records. The stalled producer's commit then fails as fenced."""
    bs = broker.bootstrap
    create_topics(bs, "stall")
    stalled = kp_producer(bs, closing, transactional_id="stall-id", transaction_timeout_ms=1000)
    stalled.init_transactions()
    stalled.begin_transaction()
    for p in range(2):
        stalled.send("stall", value=f"stalled{p}".encode(), partition=p).get(timeout=10)

    later = kp_producer(bs, closing, transactional_id="stall-later")
    later.init_transactions()
    later.begin_transaction()
    for p in range(2):
        later.send("stall", value=f"later{p}".encode(), partition=p).get(timeout=10)
    bounded(later.commit_transaction, what="commit_transaction")

    consumer = KafkaConsumer(
        bootstrap_servers=bs, isolation_level="read_committed", auto_offset_reset="earliest",
        enable_auto_commit=False, request_timeout_ms=10000,
    )
    closing(lambda: consumer.close(autocommit=False))
    consumer.assign(partitions("stall"))
    seen: list = []
    deadline = time.monotonic() + 15
    while len(seen) < 2 and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=100).values():
            seen.extend(batch)
    assert sorted(r.value for r in seen) == [b"later0", b"later1"], \
        "read_committed reaches the later transaction once the timed-out one is aborted"
    # per partition: the stalled record, the later one, the later COMMIT marker and the broker's ABORT
    # marker, the markers in whichever order the two transactions ended
    assert values(read_to_end(bs, "stall", "read_committed", {0: 4, 1: 4})) == [b"later0", b"later1"]

    with pytest.raises(ProducerFencedError):
        bounded(stalled.commit_transaction, what="the timed-out producer's commit_transaction")


@pytest.mark.scenario('aiokafka', 11)
def test_aiokafka_transactions_commit_abort_offsets_and_read_committed(broker, closing):
    """aiokafka sends v0 of every transactional request: abort, then commit through
    ``producer.transaction()`` with offsets for a group; a read_committed AIOKafkaConsumer reads only
    the committed records, and the group's offsets are the committed transaction's."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    bs = broker.bootstrap
    create_topics(bs, "ak-tx")
    tps = [AioTopicPartition("ak-tx", p) for p in range(2)]

    async def scenario() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bs, transactional_id="ak-tx-id", request_timeout_ms=5000,
                                    retry_backoff_ms=50)

        async def transactions() -> None:
            await producer.begin_transaction()
            for p in range(2):
                await producer.send_and_wait("ak-tx", f"aborted{p}".encode(), partition=p)
            await producer.abort_transaction()
            async with producer.transaction():
                for p in range(2):
                    await producer.send_and_wait("ak-tx", f"committed{p}".encode(), partition=p)
                await producer.send_offsets_to_transaction({tps[0]: 3, tps[1]: 4}, "ak-group")

        try:
            # start() waits for the producer id; aiokafka retries the transaction coordinator's lookup
            # and every transactional request without a limit of its own
            await asyncio.wait_for(producer.start(), 15)
            await asyncio.wait_for(transactions(), 15)
        finally:
            await asyncio.wait_for(producer.stop(), 5)

        consumer = AIOKafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign(tps)
            got: list = []
            ends: dict = {}
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                for batch in (await consumer.getmany(timeout_ms=100)).values():
                    got.extend((r.partition, r.offset, r.value) for r in batch)
                ends = {tp.partition: end for tp, end in (await consumer.end_offsets(tps)).items()}
                positions = [await consumer.position(tp) for tp in tps]
                if ends == {0: 4, 1: 4} and all(position >= 4 for position in positions):
                    break
            assert ends == {0: 4, 1: 4}, "the last stable offsets are past the COMMIT markers"
            assert sorted(got) == [(0, 2, b"committed0"), (1, 2, b"committed1")]
        finally:
            await asyncio.wait_for(consumer.stop(), 5)

    asyncio.run(asyncio.wait_for(scenario(), 45))
    admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=10000)
    closing(admin.close)
    eventually(
        lambda: {
            tp.partition: om.offset for tp, om in admin.list_group_offsets({"ak-group": None})["ak-group"].items()
        },
        {0: 3, 1: 4},
        what="the group's offsets after the commit",
    )


@pytest.mark.scenario("confluent-kafka", 11)
@pytest.mark.engines  # storage: on both engines (tests/conftest.py)
def test_confluent_transactions_commit_abort_send_offsets_read_committed(broker, closing):
    """librdkafka: init/begin/produce/abort, then a consume-transform-produce transaction whose
    send_offsets_to_transaction carries the consumer's group metadata; a read_committed Consumer sees
    only the committed records and the group's offsets are the transaction's."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer
    from confluent_kafka import KafkaError as CkKafkaError
    from confluent_kafka import TopicPartition as CkTopicPartition
    from confluent_kafka.admin import AdminClient

    bs = broker.bootstrap
    create_topics(bs, "ck-in", "ck-out")
    plain = Producer({"bootstrap.servers": bs})
    closing(plain.close)
    for i in range(6):
        plain.produce("ck-in", value=f"in{i}", partition=i % 2)
    assert plain.flush(10) == 0

    producer = Producer(
        {
            "bootstrap.servers": bs,
            "transactional.id": "ck-tx-id",
            "transaction.timeout.ms": 30000,
            "socket.timeout.ms": 5000,
        }
    )
    closing(producer.close)
    producer.init_transactions(10)
    producer.begin_transaction()
    for p in range(2):
        producer.produce("ck-out", value=f"aborted{p}", partition=p)
    assert producer.flush(10) == 0
    producer.abort_transaction(10)

    consumer = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "ck-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
        }
    )
    try:
        consumer.subscribe(["ck-in"])
        inputs = []
        deadline = time.monotonic() + 20
        while len(inputs) < 6 and time.monotonic() < deadline:
            m = consumer.poll(0.1)
            if m is not None and m.error() is None:
                inputs.append(m)
        assert len(inputs) == 6
        producer.begin_transaction()
        for m in inputs:
            producer.produce("ck-out", value=m.value().replace(b"in", b"out"), partition=m.partition())
        positions = consumer.position(consumer.assignment())
        assert sorted((tp.partition, tp.offset) for tp in positions) == [(0, 3), (1, 3)]
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 10)
        producer.commit_transaction(10)
    finally:
        consumer.close()

    admin = AdminClient({"bootstrap.servers": bs})

    def group_offsets() -> list[tuple[int, int]]:
        listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("ck-group")])["ck-group"].result(10)
        return sorted((tp.partition, tp.offset) for tp in listed.topic_partitions)

    eventually(group_offsets, [(0, 3), (1, 3)], what="the group's offsets after the commit")

    reader = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "ck-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    closing(reader.close)
    reader.assign([CkTopicPartition("ck-out", p, 0) for p in range(2)])
    got, at_end = [], set()
    deadline = time.monotonic() + 15
    # a partition's EOF is its fetch position reaching the last stable offset; the markers may come later
    while not (len(got) >= 6 and at_end == {0, 1}) and time.monotonic() < deadline:
        m = reader.poll(0.1)
        if m is None:
            continue
        if m.error() is None:
            got.append((m.partition(), m.offset(), m.value()))
            at_end.discard(m.partition())
        elif m.error().code() == CkKafkaError._PARTITION_EOF:
            at_end.add(m.partition())
    assert at_end == {0, 1}, "the read_committed reader reached the last stable offset of both partitions"
    # per partition: an aborted record, its ABORT marker, then the committed records from offset 2
    assert sorted(got) == sorted((i % 2, 2 + i // 2, f"out{i}".encode()) for i in range(6))


@pytest.mark.engines  # storage: on both engines (tests/conftest.py)
def test_kafka_python_open_transaction_survives_a_broker_restart_and_commits(broker, closing):
    """Kafka keeps an open transaction across a clean broker restart: the transaction coordinator reloads
    the transactional id's state (producer id, epoch, Ongoing, its partitions) from its log, and each
    partition rebuilds its producers' state and open transactions from its log. So, within the
    transaction's timeout, the producer's epoch is still valid: it goes on sending in the same
    transaction and commits it. Until then read_committed sees nothing of it, before the restart and
    after it (the last stable offset stays at the transaction's first offset); after the commit it sees
    every record, those sent before the restart and after it."""
    bs = broker.bootstrap
    create_topics(bs, "restart-tx")
    producer = kp_producer(bs, closing, transactional_id="restart-id", transaction_timeout_ms=60000)
    producer.init_transactions()
    producer.begin_transaction()
    for p in range(2):
        producer.send("restart-tx", value=f"before{p}".encode(), partition=p).get(timeout=10)
    assert read_to_end(bs, "restart-tx", "read_committed", {0: 0, 1: 0}) == []
    assert values(read_to_end(bs, "restart-tx", "read_uncommitted", {0: 1, 1: 1})) == [b"before0", b"before1"]

    broker.restart()

    assert read_to_end(bs, "restart-tx", "read_committed", {0: 0, 1: 0}) == [], (
        "the transaction is still open after the restart"
    )
    for p in range(2):
        producer.send("restart-tx", value=f"after{p}".encode(), partition=p).get(timeout=20)
    bounded(producer.commit_transaction, 20, "commit_transaction after the restart")
    assert read_to_end(bs, "restart-tx", "read_committed", {0: 3, 1: 3}) == [
        (0, 0, b"before0"),
        (0, 1, b"after0"),
        (1, 0, b"before1"),
        (1, 1, b"after1"),
    ]
