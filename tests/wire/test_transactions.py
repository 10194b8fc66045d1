"""Transactions through a real socket: the coordinator's answers, markers in the partitions, the last
stable offset and aborted transactions a READ_COMMITTED fetch sees, timeouts and restarts."""

import asyncio

import pytest

from groupd.broker.app import Broker
from groupd.broker.dataplane.txn_index import PartitionTxns
from groupd.broker.dispatch import RequestContext
from groupd.broker.handlers.transactions import describe_transactions
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.protocol.request import RequestHeader
from groupd.storage.batch import ABORT_MARKER, COMMIT_MARKER, build_batch, control_marker, iter_batches
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.wire.test_data_plane import fetch_body, list_offsets_body, produce_body


def init_body(tid, timeout_ms=60_000, version=4, pid=-1, epoch=-1):
    return codec.make(
        codec.request_class(22, version),
        transactional_id=tid,
        transaction_timeout=timeout_ms,
        producer_id=pid,
        producer_epoch=epoch,
    )


def add_body(tid, pid, epoch, topics, version=3):
    cls = codec.request_class(24, version)
    t = codec.nested(cls, "AddPartitionsToTxnTopic")
    topics = tuple(t(name=name, partitions=tuple(ps)) for name, ps in topics.items())
    return codec.make(
        cls,
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=topics,
    )


def end_body(tid, pid, epoch, commit, version=3):
    return codec.make(
        codec.request_class(26, version), transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
    )


def txn_batch(pid, epoch, seq, values, ts=1000):
    return build_batch(
        [(None, v) for v in values],
        timestamp_ms=ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        attributes=0x10,
    )


def committed_fetch(topic, partition, offset, version=11, max_wait=0):
    body = fetch_body(topic, partition, offset, version=version, max_wait=max_wait)
    return codec.make(type(body), **{**{f: getattr(body, f) for f in body.__dataclass_fields__}, "isolation_level": 1})


def partition_errors(resp):
    return {
        (t.name, p.partition_index): p.partition_error_code
        for t in resp.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


async def begin(wire, tid, topics, timeout_ms=60_000):
    init = await wire.call(22, 4, init_body(tid, timeout_ms))
    assert init.error_code == 0, init
    added = await wire.call(24, 3, add_body(tid, init.producer_id, init.producer_epoch, topics))
    assert set(partition_errors(added).values()) == {ErrorCode.none}
    return init.producer_id, init.producer_epoch


async def produce(wire, topic, partition, batch):
    resp = await wire.call(0, 9, produce_body(topic, partition, batch))
    p = resp.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


@pytest.mark.engines
async def test_find_coordinator_names_this_node_for_transactional_ids(broker, wire):
    body = codec.make(codec.request_class(10, 4), key_type=1, coordinator_keys=("my-txn",))
    resp = await wire.call(10, 4, body)
    (c,) = resp.coordinators
    assert (c.error_code, c.node_id, c.port) == (0, broker.node_id, broker.port)


@pytest.mark.engines
async def test_abort_then_commit_read_committed_and_uncommitted(broker, wire):
    broker.create_topic("tx", 1, {})
    pid, epoch = await begin(wire, "t1", {"tx": [0]})
    assert await produce(wire, "tx", 0, txn_batch(pid, epoch, 0, [b"a1", b"a2"])) == (0, 0)
    # open transaction: a READ_COMMITTED reader stops before it, an uncommitted one sees it
    p = (await wire.call(1, 11, committed_fetch("tx", 0, 0))).responses[0].partitions[0]
    assert (p.high_watermark, p.last_stable_offset, bytes(p.records)) == (2, 0, b"")
    p = (await wire.call(1, 11, fetch_body("tx", 0, 0))).responses[0].partitions[0]
    assert p.last_stable_offset == 0 and bytes(p.records) != b"" and p.aborted_transactions is None
    lo = await wire.call(
        2,
        7,
        codec.make(
            codec.request_class(2, 7),
            **{
                **{f: getattr(list_offsets_body("tx", 0, -1), f) for f in ("replica_id", "topics")},
                "isolation_level": 1,
            },
        ),
    )
    assert lo.topics[0].partitions[0].offset == 0  # READ_COMMITTED latest: the last stable offset
    assert (await wire.call(26, 3, end_body("t1", pid, epoch, False))).error_code == 0
    # the abort marker sits at offset 2; the aborted transaction is named for the reader to drop
    p = (await wire.call(1, 11, committed_fetch("tx", 0, 0))).responses[0].partitions[0]
    assert (p.high_watermark, p.last_stable_offset) == (3, 3)
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]
    kinds = [(h.base_offset, h.is_control) for _, h in iter_batches(bytes(p.records))]
    assert kinds == [(0, False), (2, True)]
    assert control_marker(bytes(p.records)[[pos for pos, _ in iter_batches(bytes(p.records))][1] :]) == ABORT_MARKER
    # a second transaction, committed
    added = await wire.call(24, 3, add_body("t1", pid, epoch, {"tx": [0]}))
    assert set(partition_errors(added).values()) == {0}
    assert await produce(wire, "tx", 0, txn_batch(pid, epoch, 2, [b"c1"])) == (0, 3)
    assert (await wire.call(26, 3, end_body("t1", pid, epoch, True))).error_code == 0
    p = (await wire.call(1, 11, committed_fetch("tx", 0, 3))).responses[0].partitions[0]
    assert (p.last_stable_offset, p.high_watermark, list(p.aborted_transactions)) == (5, 5, [])
    batches = list(iter_batches(bytes(p.records)))
    assert [h.base_offset for _, h in batches] == [3, 4] and control_marker(
        bytes(p.records)[batches[1][0] :]
    ) == COMMIT_MARKER
    # retrying the finished commit is fine, the opposite end is not
    assert (await wire.call(26, 3, end_body("t1", pid, epoch, True))).error_code == 0
    assert (await wire.call(26, 3, end_body("t1", pid, epoch, False))).error_code == ErrorCode.invalid_txn_state


@pytest.mark.engines
async def test_produce_is_verified_against_the_transaction(broker, wire):
    broker.create_topic("v", 2, {})
    pid, epoch = await begin(wire, "t2", {"v": [0]})
    # partition 1 was never added
    assert (await produce(wire, "v", 1, txn_batch(pid, epoch, 0, [b"x"])))[0] == ErrorCode.invalid_txn_state
    # an unknown producer id
    assert (await produce(wire, "v", 0, txn_batch(pid + 100, 0, 0, [b"x"])))[0] == ErrorCode.invalid_producer_id_mapping
    assert await produce(wire, "v", 0, txn_batch(pid, epoch, 0, [b"x"])) == (0, 0)
    # the same producer writing outside its open transaction
    plain = build_batch([(None, b"y")], timestamp_ms=1, producer_id=pid, producer_epoch=epoch, base_sequence=1)
    assert (await produce(wire, "v", 0, plain))[0] == ErrorCode.invalid_txn_state
    # a control batch from a client
    marker = build_batch(
        [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
        timestamp_ms=1,
        producer_id=pid,
        producer_epoch=epoch,
        attributes=0x30,
    )
    assert (await produce(wire, "v", 0, marker))[0] == ErrorCode.invalid_record


@pytest.mark.engines
async def test_add_partitions_of_an_unknown_topic(broker, wire):
    broker.create_topic("k", 1, {})
    init = await wire.call(22, 4, init_body("t3"))
    resp = await wire.call(24, 3, add_body("t3", init.producer_id, init.producer_epoch, {"k": [0], "nope": [0]}))
    assert partition_errors(resp) == {
        ("k", 0): ErrorCode.operation_not_attempted,
        ("nope", 0): ErrorCode.unknown_topic_or_partition,
    }


@pytest.mark.engines
async def test_a_second_init_fences_the_first_producer_and_aborts_its_transaction(broker, wire):
    broker.create_topic("f", 1, {})
    pid, epoch = await begin(wire, "t4", {"f": [0]})
    assert await produce(wire, "f", 0, txn_batch(pid, epoch, 0, [b"zombie"])) == (0, 0)
    first = await wire.call(22, 4, init_body("t4"))
    assert first.error_code == ErrorCode.concurrent_transactions  # Kafka aborts, then the client retries
    again = await wire.call(22, 4, init_body("t4"))
    assert again.error_code == 0 and again.producer_id == pid and again.producer_epoch == epoch + 2
    assert (await wire.call(26, 3, end_body("t4", pid, epoch, True))).error_code == ErrorCode.producer_fenced
    p = (await wire.call(1, 11, committed_fetch("f", 0, 0))).responses[0].partitions[0]
    assert p.last_stable_offset == 2 and [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]


@pytest.mark.engines
async def test_describe_and_list_transactions(broker, wire):
    broker.create_topic("d", 2, {})
    pid, _ = await begin(wire, "t5", {"d": [1, 0]})
    resp = await wire.call(65, 0, codec.make(codec.request_class(65, 0), transactional_ids=("t5",)))
    (t5,) = resp.transaction_states
    assert (
        t5.error_code,
        t5.transaction_state,
        t5.producer_id,
        [(t.topic, list(t.partitions)) for t in t5.topics],
    ) == (0, "Ongoing", pid, [("d", [0, 1])])
    # an unknown id: TRANSACTIONAL_ID_NOT_FOUND, with Kafka's start time -1 (which kio cannot read back)
    ctx = RequestContext(RequestHeader(65, 0, 1, "test"), "127.0.0.1", "c")
    (missing,) = describe_transactions(
        broker, ctx, codec.make(codec.request_class(65, 0), transactional_ids=("missing",))
    ).transaction_states
    assert (missing.error_code, missing.producer_id) == (ErrorCode.transactional_id_not_found, -1)
    listed = await wire.call(
        66,
        1,
        codec.make(
            codec.request_class(66, 1), state_filters=("Ongoing", "Bogus"), producer_id_filters=(), duration_filter=-1
        ),
    )
    assert [(s.transactional_id, s.transaction_state) for s in listed.transaction_states] == [("t5", "Ongoing")]
    assert list(listed.unknown_state_filters) == ["Bogus"]


@pytest.mark.engines
async def test_an_open_transaction_is_aborted_when_its_timeout_passes(tmp_path):
    b = Broker(broker_config(tmp_path, **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "50"}))
    await b.start()
    wire = await WireClient.connect(b.port)
    try:
        b.create_topic("late", 1, {})
        pid, epoch = await begin(wire, "t6", {"late": [0]}, timeout_ms=200)
        assert await produce(wire, "late", 0, txn_batch(pid, epoch, 0, [b"never"])) == (0, 0)
        for _ in range(100):
            p = (await wire.call(1, 11, committed_fetch("late", 0, 0))).responses[0].partitions[0]
            if p.last_stable_offset == 2:
                break
            await asyncio.sleep(0.05)
        assert p.last_stable_offset == 2 and [a.producer_id for a in p.aborted_transactions] == [pid]
        # the producer that let it time out is fenced
        assert (await wire.call(26, 3, end_body("t6", pid, epoch, True))).error_code == ErrorCode.producer_fenced
    finally:
        await wire.close()
        await b.stop()


@pytest.mark.parametrize("clean", [True, False], ids=["snapshot", "rebuilt"])
async def test_transactions_and_partition_state_survive_a_restart(tmp_path, clean):
    config = broker_config(tmp_path)
    b = Broker(config)
    await b.start()
    wire = await WireClient.connect(b.port)
    b.create_topic("r", 1, {})
    pid, epoch = await begin(wire, "t7", {"r": [0]})
    assert await produce(wire, "r", 0, txn_batch(pid, epoch, 0, [b"a"])) == (0, 0)
    assert (await wire.call(26, 3, end_body("t7", pid, epoch, False))).error_code == 0
    pid2, epoch2 = await begin(wire, "t8", {"r": [0]})
    assert await produce(wire, "r", 0, txn_batch(pid2, epoch2, 0, [b"open"])) == (0, 2)
    await wire.close()
    await b.stop()

    snapshot = tmp_path / "data" / "r-0" / "transactions"
    assert snapshot.exists()  # a clean stop saved the partition's transactions: the next start reads no log
    if not clean:
        snapshot.unlink()  # as after a crash: rebuilt from the log
    b = Broker(config)
    await b.start()
    wire = await WireClient.connect(b.port)
    try:
        txns = b.partitions.txn_state(("r", 0))
        assert isinstance(txns, PartitionTxns) and txns.ongoing == {pid2: 2} and txns.aborted == [(pid, 0, 1)]
        p = (await wire.call(1, 11, committed_fetch("r", 0, 0))).responses[0].partitions[0]
        assert p.last_stable_offset == 2 and [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [
            (pid, 0)
        ]
        # t7 kept its id and epoch; t8's open transaction can still be committed by its producer
        again = await wire.call(22, 4, init_body("t7"))
        assert (again.producer_id, again.producer_epoch) == (pid, epoch + 1)
        assert (await wire.call(26, 3, end_body("t8", pid2, epoch2, True))).error_code == 0
        p = (await wire.call(1, 11, committed_fetch("r", 0, 2))).responses[0].partitions[0]
        assert p.last_stable_offset == 4 and list(p.aborted_transactions) == []
    finally:
        await wire.close()
        await b.stop()


@pytest.mark.engines
async def test_metrics_count_ended_transactions_and_ids_by_state(tmp_path):
    from tests.wire.test_metrics import http_get, metrics_broker, value

    b = await metrics_broker(tmp_path, **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "50"})
    wire = await WireClient.connect(b.port)
    try:
        b.create_topic("m", 1, {})
        pid, epoch = await begin(wire, "committer", {"m": [0]})
        assert (await wire.call(26, 3, end_body("committer", pid, epoch, True))).error_code == 0
        pid, epoch = await begin(wire, "aborter", {"m": [0]})
        assert (await wire.call(26, 3, end_body("aborter", pid, epoch, False))).error_code == 0
        await begin(wire, "fenced", {"m": [0]})
        assert (await wire.call(22, 4, init_body("fenced"))).error_code == ErrorCode.concurrent_transactions
        await begin(wire, "sleeper", {"m": [0]}, timeout_ms=100)
        await begin(wire, "open", {"m": [0]})
        for _ in range(100):
            _, text = await http_get(b.metrics_server.port, "/metrics")
            if value(text, "groupd_transactions_ended_total", result="timeout") == 1:
                break
            await asyncio.sleep(0.05)
        for result in ("commit", "abort", "fenced", "timeout"):
            assert value(text, "groupd_transactions_ended_total", result=result) == 1, result
        assert value(text, "groupd_transactional_ids", state="Ongoing") == 1
        assert value(text, "groupd_transactional_ids", state="CompleteAbort") == 3
        assert value(text, "groupd_transactional_ids", state="CompleteCommit") == 1
    finally:
        await wire.close()
        await b.stop()


@pytest.mark.engines
async def test_old_versions_hear_invalid_producer_epoch_instead_of_producer_fenced(broker, wire):
    """PRODUCER_FENCED exists from InitProducerId v4 and AddPartitionsToTxn, AddOffsetsToTxn and EndTxn
    v2 (Kafka's message specs); aiokafka speaks v0 of them all."""
    broker.create_topic("o", 1, {})
    pid, epoch = await begin(wire, "t9", {"o": [0]})
    await wire.call(22, 4, init_body("t9"))  # fences epoch `epoch`
    assert (
        await wire.call(26, 1, end_body("t9", pid, epoch, True, version=1))
    ).error_code == ErrorCode.invalid_producer_epoch
    assert (await wire.call(26, 2, end_body("t9", pid, epoch, True, version=2))).error_code == ErrorCode.producer_fenced
    old_add = await wire.call(24, 0, add_body("t9", pid, epoch, {"o": [0]}, version=0))
    assert set(partition_errors(old_add).values()) == {ErrorCode.invalid_producer_epoch}
    offsets_v0 = codec.make(
        codec.request_class(25, 0), transactional_id="t9", producer_id=pid, producer_epoch=epoch, group_id="g"
    )
    assert (await wire.call(25, 0, offsets_v0)).error_code == ErrorCode.invalid_producer_epoch
    # a produce from the fenced epoch
    assert (await produce(wire, "o", 0, txn_batch(pid, epoch, 0, [b"z"])))[0] == ErrorCode.invalid_producer_epoch


@pytest.mark.engines
async def test_describe_producers_shows_epochs_sequences_and_open_transactions(broker, wire):
    broker.create_topic("dp", 1, {})
    pid, epoch = await begin(wire, "t10", {"dp": [0]})
    await produce(
        wire, "dp", 0, build_batch([(None, b"x")], timestamp_ms=5, producer_id=900, producer_epoch=2, base_sequence=0)
    )
    assert await produce(wire, "dp", 0, txn_batch(pid, epoch, 0, [b"a", b"b"], ts=7)) == (0, 1)
    req = codec.make(
        codec.request_class(61, 0),
        topics=(codec.nested(codec.request_class(61, 0), "TopicRequest")(name="dp", partition_indexes=(0, 9)),),
    )
    resp = await wire.call(61, 0, req)
    p0, p9 = resp.topics[0].partitions
    assert p9.error_code == ErrorCode.unknown_topic_or_partition
    rows = {
        s.producer_id: (s.producer_epoch, s.last_sequence, s.last_timestamp, s.current_txn_start_offset)
        for s in p0.active_producers
    }
    assert rows == {900: (2, 0, 5, -1), pid: (epoch, 1, 7, 1)}


@pytest.mark.engines
async def test_an_idle_transactional_id_expires_and_comes_back_with_a_new_producer_id(tmp_path):
    b = Broker(
        broker_config(
            tmp_path,
            **{
                "transactional.id.expiration.ms": "100",
                "transaction.remove.expired.transaction.cleanup.interval.ms": "50",
                "transaction.abort.timed.out.transaction.cleanup.interval.ms": "20",
            },
        )
    )
    await b.start()
    wire = await WireClient.connect(b.port)
    try:
        first = await wire.call(22, 4, init_body("idle"))
        for _ in range(100):
            if b.transactions.describe("idle") is None:
                break
            await asyncio.sleep(0.05)
        assert b.transactions.describe("idle") is None  # forgotten, with a tombstone in its log
        again = await wire.call(22, 4, init_body("idle"))
        assert again.error_code == 0 and (again.producer_id, again.producer_epoch) != (
            first.producer_id,
            first.producer_epoch + 1,
        )
        assert again.producer_epoch == 0
    finally:
        await wire.close()
        await b.stop()
