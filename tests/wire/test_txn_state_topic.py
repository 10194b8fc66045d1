"""``__transaction_state`` as Kafka lays it out: ``transaction.state.log.num.partitions`` partitions,
each transactional id in ``abs(javaHashCode(id)) % partitions``, an internal compacted topic that
Metadata and DescribeTopicPartitions list once it exists (Kafka creates it at the first transaction
coordinator lookup), in Kafka's TransactionLog record formats.

The store of earlier groupd versions was one log, ``__transaction_state-0``, holding every id; a broker
run with one partition writes exactly that, so it stands for the old version here."""

import asyncio
import contextlib
import time

import pytest

from groupd.broker.app import Broker
from groupd.coordinator.partitioning import partition_for
from groupd.coordinator.transactions import rules as T
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch, iter_records, split_batches
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.wire.test_data_plane import fetch_body, list_offsets_body, produce_body
from tests.wire.test_describe_apis import dtp_body
from tests.wire.test_transactions import begin, committed_fetch, end_body, init_body, produce, txn_batch

TXN = "__transaction_state"
PARTS = 5
# one id per partition of 5: t-c -> 0, t-d -> 1, t-e -> 2, t-a -> 3, t-b -> 4
IDS = {"t-a": 3, "t-b": 4, "t-c": 0, "t-d": 1, "t-e": 2}


@contextlib.asynccontextmanager
async def running(tmp_path, partitions=PARTS, **overrides):
    """A broker with ``partitions`` transaction state partitions, and a client of it."""
    b = Broker(broker_config(tmp_path, **{"transaction.state.log.num.partitions": str(partitions), **overrides}))
    await b.start()
    try:
        c = await WireClient.connect(b.port)
        try:
            yield b, c
        finally:
            await c.close()
    finally:
        await b.stop()


async def all_topics(c):
    resp = await c.call(
        3, 12, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    )
    return {t.name: t for t in resp.topics}


def stored(b, partition):
    """{transactional id: Txn or None (a tombstone)} of one partition's log, the last record of each."""
    latest = {}
    for _, raw in b.transactions.logs[partition].batches():
        for rec in iter_records(raw):
            tid = T.decode_key(bytes(rec.key))
            latest[tid] = None if rec.value is None else T.decode_value(tid, bytes(rec.value))
    return latest


def test_the_ids_here_land_in_every_partition():
    assert {tid: partition_for(tid, PARTS) for tid in IDS} == IDS


async def test_listed_once_a_transaction_coordinator_was_looked_up(tmp_path):
    async with running(tmp_path) as (b, c):
        assert TXN not in await all_topics(c)  # Kafka has not created it either
        assert not b.transactions.logs  # and an empty broker opened none of its partitions
        found = await c.call(10, 4, {"key_type": 1, "coordinator_keys": ("t-a",)})
        assert (found.coordinators[0].error_code, found.coordinators[0].node_id) == (0, b.node_id)
        entry = (await all_topics(c))[TXN]
        assert (entry.error_code, entry.is_internal, [p.partition_index for p in entry.partitions]) == (
            0,
            True,
            list(range(PARTS)),
        )
        # by id too, and in DescribeTopicPartitions
        by_id = await c.call(3, 12, metadata_body(name=None, topic_id=entry.topic_id))
        assert [(t.name, t.error_code) for t in by_id.topics] == [(TXN, 0)]
        dtp = await c.call(75, 0, dtp_body([TXN]))
        assert [(t.name, t.is_internal, t.topic_id, len(t.partitions)) for t in dtp.topics] == [
            (TXN, True, entry.topic_id, PARTS)
        ]
        # described with the configs Kafka creates it with (TransactionStateManager.transactionTopicConfigs)
        req = codec.request_class(32, 4)
        described = await c.call(
            32,
            4,
            {
                "resources": (
                    codec.nested(req, "DescribeConfigsResource")(
                        resource_type=2, resource_name=TXN, configuration_keys=None
                    ),
                ),
                "include_synonyms": False,
                "include_documentation": False,
            },
        )
        own = {e.name: e.value for e in described.results[0].configs if e.config_source == 1}
        assert own == {"cleanup.policy": "compact", "compression.type": "uncompressed", "segment.bytes": "104857600"}
        # clients may not write to it, by name or by id
        batch = build_batch([(b"k", b"v")], timestamp_ms=1)
        refused = await c.call(0, 9, produce_body(TXN, 0, batch))
        by_id = await c.call(0, 13, produce_body(None, 0, batch, version=13, topic_id=entry.topic_id))
        assert [r.responses[0].partition_responses[0].error_code for r in (refused, by_id)] == [
            ErrorCode.invalid_topic_exception
        ] * 2


def metadata_body(auto=False, **wanted):
    cls = codec.request_class(3, 12)
    topic = codec.nested(cls, "MetadataRequestTopic")(**wanted)
    return codec.make(cls, topics=(topic,), allow_auto_topic_creation=auto, include_topic_authorized_operations=False)


async def test_asked_for_by_name_with_auto_creation_it_is_created(tmp_path):
    async with running(tmp_path) as (b, c):
        resp = await c.call(3, 12, metadata_body(auto=True, name=TXN, topic_id=None))
        assert [(t.name, t.error_code, t.is_internal, len(t.partitions)) for t in resp.topics] == [
            (TXN, 0, True, PARTS)
        ]
        assert b.topics.get(TXN) is None  # no data topic was made of it


async def test_ids_spread_over_the_partitions_and_transactions_survive_restarts(tmp_path):
    producers = {}
    async with running(tmp_path) as (b, c):
        b.create_topic("r", 1, {})
        for offset, tid in enumerate(IDS):  # one transaction per id, each left open
            pid, epoch = await begin(c, tid, {"r": [0]})
            assert await produce(c, "r", 0, txn_batch(pid, epoch, 0, [tid.encode()])) == (0, offset)
            producers[tid] = (pid, epoch)
        # t-a and t-b end before the restart, the rest after
        assert (await c.call(26, 3, end_body("t-a", *producers["t-a"], True))).error_code == 0
        assert (await c.call(26, 3, end_body("t-b", *producers["t-b"], False))).error_code == 0
        for tid, p in IDS.items():
            assert set(stored(b, p)) == {tid}, p  # each id in its own partition, nothing elsewhere
        assert stored(b, IDS["t-a"])["t-a"].state == T.COMPLETE_COMMIT
        assert stored(b, IDS["t-c"])["t-c"].state == T.ONGOING
        # the partitions read as a topic: Fetch and ListOffsets, Kafka's TransactionLog key in each record
        p = IDS["t-c"]
        end = (await c.call(2, 7, list_offsets_body(TXN, p, -1))).topics[0].partitions[0].offset
        fetched = (await c.call(1, 11, fetch_body(TXN, p, 0))).responses[0].partitions[0]
        assert fetched.error_code == 0 and fetched.high_watermark == end >= 2
        assert {
            T.decode_key(bytes(r.key)) for batch in split_batches(fetched.records) for r in iter_records(batch)
        } == {"t-c"}

    for round_ in range(2):  # the restart, then one more: nothing moves, nothing is lost
        async with running(tmp_path) as (b, c):
            assert sorted(b.transactions.logs) == list(range(PARTS))  # every partition found is replayed
            assert {tid: b.transactions.describe(tid).state_name for tid in IDS} == {
                "t-a": "CompleteCommit" if round_ == 0 else "Empty",  # initialised again in the first round
                "t-b": "CompleteAbort",
                **{t: ("Ongoing" if round_ == 0 else "CompleteCommit") for t in ("t-c", "t-d", "t-e")},
            }
            assert TXN in await all_topics(c)  # it has records: listed from the start
            if round_ == 0:
                for tid in ("t-c", "t-d", "t-e"):
                    assert (await c.call(26, 3, end_body(tid, *producers[tid], True))).error_code == 0
                part = (await c.call(1, 11, committed_fetch("r", 0, 0))).responses[0].partitions[0]
                assert part.last_stable_offset == part.high_watermark and [
                    a.producer_id for a in part.aborted_transactions
                ] == [producers["t-b"][0]]
            again = await c.call(22, 4, init_body("t-a"))
            assert (again.producer_id, again.producer_epoch) == (producers["t-a"][0], producers["t-a"][1] + 1 + round_)


async def test_a_store_of_one_partition_is_spread_at_start_up(tmp_path):
    """The upgrade: every id in __transaction_state-0 (as earlier groupd versions kept them), one of
    them with an open transaction. Each id is written into its own partition, then tombstoned in 0."""
    producers = {}
    async with running(tmp_path, partitions=1) as (old, c):
        old.create_topic("u", 1, {})
        for tid in IDS:
            pid, epoch = await begin(c, tid, {"u": [0]})
            assert (await produce(c, "u", 0, txn_batch(pid, epoch, 0, [b"x"])))[0] == 0
            if tid != "t-d":
                assert (await c.call(26, 3, end_body(tid, pid, epoch, tid != "t-e"))).error_code == 0
            producers[tid] = (pid, epoch)
    assert sorted(p.name for p in (tmp_path / "data").glob(f"{TXN}-*")) == [f"{TXN}-0"]
    left_in_0 = {tid: None for tid in IDS if IDS[tid] != 0}  # tombstones

    async with running(tmp_path) as (b, c):
        for tid, p in IDS.items():
            assert stored(b, p)[tid] == b.transactions.describe(tid), tid  # home, as the state it had
        assert stored(b, 0) == {"t-c": b.transactions.describe("t-c"), **left_in_0}
        assert b.transactions.describe("t-d").state == T.ONGOING
        # the open transaction is committed by its producer after the upgrade
        assert (await c.call(26, 3, end_body("t-d", *producers["t-d"], True))).error_code == 0
        assert IDS["t-d"] != 0 and stored(b, IDS["t-d"])["t-d"].state == T.COMPLETE_COMMIT
        again = await c.call(22, 4, init_body("t-e"))
        assert (again.producer_id, again.producer_epoch) == (producers["t-e"][0], producers["t-e"][1] + 1)

    async with running(tmp_path) as (b, c):  # and once settled, a start moves nothing more
        assert stored(b, 0) == {"t-c": b.transactions.describe("t-c"), **left_in_0}
        assert b.transactions.describe("t-d").state == T.COMPLETE_COMMIT
        assert b.transactions.describe("t-e").producer_epoch == producers["t-e"][1] + 1


async def test_expiry_tombstones_the_ids_partition_and_compaction_runs_on_every_partition(tmp_path):
    async with running(
        tmp_path,
        **{
            "transaction.state.log.segment.bytes": "1024",
            "transactional.id.expiration.ms": "300",
            "transaction.remove.expired.transaction.cleanup.interval.ms": "50",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "20",
        },
    ) as (b, c):
        for _ in range(30):  # 30 transitions of one id: its partition rolls segments
            assert (await c.call(22, 4, init_body("t-a"))).error_code == 0
        await c.call(22, 4, init_body("t-b"))
        lg = b.transactions.logs[IDS["t-a"]]
        assert len(lg.segments) > 2
        deadline = time.monotonic() + 10
        # both ids expire, possibly in different cleanup rounds: t-b's last transition came later
        while time.monotonic() < deadline and (
            b.transactions.describe("t-a") is not None or b.transactions.describe("t-b") is not None
        ):
            await asyncio.sleep(0.05)
        assert b.transactions.describe("t-a") is None and b.transactions.describe("t-b") is None
        assert stored(b, IDS["t-a"]) == {"t-a": None} and stored(b, IDS["t-b"]) == {"t-b": None}
        records = sum(1 for _, raw in lg.batches() for _ in iter_records(raw))
        assert records < 10, records  # the closed segments compacted down to the newest record of the key


@pytest.mark.parametrize("partitions", [1, 50])
async def test_find_coordinator_answers_this_node_for_every_id(tmp_path, partitions):
    async with running(tmp_path, partitions=partitions) as (b, c):
        resp = await c.call(10, 4, {"key_type": 1, "coordinator_keys": tuple(IDS)})
        assert {(x.key, x.error_code, x.node_id) for x in resp.coordinators} == {(tid, 0, b.node_id) for tid in IDS}
        assert len((await all_topics(c))[TXN].partitions) == partitions
        assert b.transactions.partition_for("t-a") == partition_for("t-a", partitions)


async def test_reading_a_partition_past_the_count_is_unknown(tmp_path):
    async with running(tmp_path) as (_, c):
        await c.call(10, 4, {"key_type": 1, "coordinator_keys": ("t-a",)})
        resp = await c.call(1, 11, fetch_body(TXN, PARTS, 0))
        assert resp.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
        ok = await c.call(1, 11, fetch_body(TXN, PARTS - 1, 0))  # a partition never written reads empty
        assert (ok.responses[0].partitions[0].error_code, ok.responses[0].partitions[0].high_watermark) == (0, 0)


async def test_a_long_poll_on_a_partition_wakes_on_a_transition(tmp_path):
    async with running(tmp_path) as (b, c):
        await c.call(10, 4, {"key_type": 1, "coordinator_keys": ("t-a",)})
        fetcher = await WireClient.connect(b.port)
        try:
            started = time.monotonic()
            fetcher.send(1, 11, fetch_body(TXN, IDS["t-a"], 0, max_wait=5000))
            await asyncio.sleep(0.2)
            assert (await c.call(22, 4, init_body("t-a"))).error_code == 0
            resp = await asyncio.wait_for(fetcher.recv(), 5)
            assert resp.responses[0].partitions[0].records and time.monotonic() - started < 4
        finally:
            await fetcher.close()
