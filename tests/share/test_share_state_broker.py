"""The share coordinator in a running broker: ``broker.share_persister`` answers once durable, writes
``__share_group_state`` in Kafka's records, and a restart replays every state."""

from __future__ import annotations

import asyncio
import contextlib

from groupd.broker.app import Broker
from groupd.coordinator.share_state import records as R
from groupd.coordinator.share_state.persister import (
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    SharePartitionKey,
    StateBatch,
)
from groupd.storage.batch import iter_records
from tests.conftest import broker_config


@contextlib.asynccontextmanager
async def running(tmp_path, **overrides):
    b = Broker(broker_config(tmp_path, **overrides))
    await b.start()
    try:
        yield b
    finally:
        await b.stop()


def stored_records(b, partition):
    out = []
    for _, raw in b.share_coordinator.logs[partition].batches():
        for rec in iter_records(raw):
            key = R.decode_key(bytes(rec.key))
            out.append((key, R.decode_value(key.kind, None if rec.value is None else bytes(rec.value))))
    return out


async def test_a_restart_keeps_every_state(tmp_path):
    async with running(tmp_path) as b:
        topic = b.create_topic("t", 3, {})
        p = b.share_persister
        keys = [SharePartitionKey(f"g{i}", topic.topic_id, i % 3) for i in range(6)]
        for k in keys:
            assert await p.initialize(k, 0, -1) == 0
        for i, k in enumerate(keys):
            batches = (StateBatch(i, i + 4, ACKNOWLEDGED, 1), StateBatch(i + 5, i + 6, AVAILABLE, 2))
            assert await p.write(k, 0, 0, i, 3, batches) == 0
        assert await p.write(keys[0], 0, 0, -1, 4, (StateBatch(5, 5, ARCHIVED, 2),)) == 0
        assert await p.delete(keys[5]) == 0
        before = [await p.read(k, -1) for k in keys]
        summaries = [await p.read_summary(k, -1) for k in keys]
        part = b.share_coordinator.partition_for(keys[0])
        kinds = [k.kind for k, _v in stored_records(b, part) if k.group_id == "g0"]
        assert kinds == [R.SHARE_SNAPSHOT, R.SHARE_UPDATE, R.SHARE_UPDATE]
    async with running(tmp_path) as b:
        p = b.share_persister
        after = [await p.read(k, -1) for k in keys]
        assert after == before
        assert [await p.read_summary(k, -1) for k in keys] == summaries
    assert before[0].batches == (
        StateBatch(0, 4, ACKNOWLEDGED, 1),
        StateBatch(5, 5, ARCHIVED, 2),
        StateBatch(6, 6, AVAILABLE, 2),
    )
    assert before[0].start_offset == 0
    assert summaries[0].delivery_complete_count == 4
    assert before[5].error_code == 42  # deleted: never initialized as far as Read is concerned
    assert summaries[5].start_offset == -1 and summaries[5].error_code == 0


async def test_the_state_topic_is_internal_with_kafkas_configs(tmp_path):
    async with running(tmp_path, **{"share.coordinator.state.topic.num.partitions": "4"}) as b:
        topic = b.create_topic("t", 1, {})
        assert b.listed_topic("__share_group_state") is None  # until it holds a record
        assert await b.share_persister.initialize(SharePartitionKey("g", topic.topic_id, 0), 0, -1) == 0
        listed = b.listed_topic("__share_group_state")
        assert listed is not None and listed.partitions == 4
        assert listed.configs["cleanup.policy"] == "delete" and listed.configs["retention.ms"] == "-1"


async def test_pruning_deletes_what_later_snapshots_override(tmp_path):
    overrides = {
        "share.coordinator.snapshot.update.records.per.snapshot": "2",
        "share.coordinator.state.topic.num.partitions": "1",
    }
    async with running(tmp_path, **overrides) as b:
        topic = b.create_topic("t", 1, {})
        p = b.share_persister
        keys = [SharePartitionKey(g, topic.topic_id, 0) for g in ("a", "b")]
        for k in keys:
            await p.initialize(k, 0, 0)
        for i in range(7):
            await p.write(keys[0], 0, 0, -1, i + 1, (StateBatch(i, i, ACKNOWLEDGED, 1),))
        lg = b.share_coordinator.logs[0]
        assert lg.log_end_offset == 9
        b.share_coordinator.cfg.cold_partition_snapshot_interval_ms = 0  # every share-partition counts as cold now
        await b.share_coordinator.snapshot_cold()  # both re-snapshotted: every record before is redundant
        deleted = await b.share_coordinator.prune()
        assert deleted > 0 and lg.log_start_offset > 0
        before = [await p.read(k, -1) for k in keys]
    async with running(tmp_path, **overrides) as b:
        assert [await b.share_persister.read(k, -1) for k in keys] == before
    assert before[0].batches == (StateBatch(0, 6, ACKNOWLEDGED, 1),)


async def test_share_coordinator_metrics(tmp_path):
    """Kafka's share-coordinator-metrics as groupd's: writes and their latency, states held, and the
    offset each partition was pruned below."""
    from prometheus_client import generate_latest

    from tests.wire.test_metrics import value

    overrides = {"share.coordinator.state.topic.num.partitions": "1"}
    async with running(tmp_path, **overrides) as b:
        topic = b.create_topic("t", 1, {})
        key = SharePartitionKey("g", topic.topic_id, 0)
        await b.share_persister.initialize(key, 0, 0)
        for i in range(3):
            assert await b.share_persister.write(key, 0, 0, -1, -1, (StateBatch(i, i, ACKNOWLEDGED, 1),)) == 0
        assert (
            await b.share_persister.write(SharePartitionKey("h", topic.topic_id, 0), 0, 0, -1, -1, ()) == 42
        )  # not counted
        b.share_coordinator.cfg.cold_partition_snapshot_interval_ms = 0
        await b.share_coordinator.snapshot_cold()
        await b.share_coordinator.prune()
        text = generate_latest(b.metrics.registry).decode()
    assert value(text, "groupd_share_coordinator_write_seconds_count") == 3
    assert value(text, "groupd_share_partition_states") == 1
    assert value(text, "groupd_share_coordinator_last_pruned_offset", partition="0") == 4  # the cold snapshot's


async def test_a_deleted_topic_takes_its_share_partition_states(tmp_path):
    async with running(tmp_path) as b:
        gone, kept = b.create_topic("gone", 2, {}), b.create_topic("kept", 1, {})
        keys = [SharePartitionKey("g", gone.topic_id, p) for p in (0, 1)] + [SharePartitionKey("g", kept.topic_id, 0)]
        for k in keys:
            assert await b.share_persister.initialize(k, 0, 0) == 0
        b.delete_topic("gone")
        for _ in range(100):
            if b.share_coordinator.states() == 1:
                break
            await asyncio.sleep(0.01)
        assert b.share_coordinator.states() == 1
    async with running(tmp_path) as b:  # tombstoned durably
        assert b.share_coordinator.states() == 1
        assert (await b.share_persister.read(keys[2], -1)).error_code == 0


async def test_a_damaged_record_makes_its_partition_unavailable_not_partial(tmp_path):
    overrides = {"share.coordinator.state.topic.num.partitions": "2"}
    async with running(tmp_path, **overrides) as b:
        topic = b.create_topic("t", 1, {})
        keys = {}
        for g in ("a", "b", "c", "d"):
            k = SharePartitionKey(g, topic.topic_id, 0)
            keys.setdefault(b.share_coordinator.partition_for(k), k)
            assert await b.share_persister.initialize(k, 0, 0) == 0
        assert set(keys) == {0, 1}
        bad = keys[0]
        lg = b.share_coordinator.logs[0]
        lg.append_records([(R.encode_key(R.update_key(bad)), b"\x00\x00\x01")])  # a value cut short
        lg.flush()
    async with running(tmp_path, **overrides) as b:
        assert await b.share_persister.write(keys[0], 0, 0, 1, -1, ()) == 16  # NOT_COORDINATOR
        assert (await b.share_persister.read(keys[0], -1)).error_code == 16
        assert (await b.share_persister.read(keys[1], -1)).error_code == 0


async def test_concurrent_writes_across_snapshots_replay_to_what_was_answered(tmp_path):
    """Writes arriving before earlier ones are durable build on them (a snapshot taken meanwhile holds
    every earlier update): what a restart replays is what the last answers reflected."""
    overrides = {
        "share.coordinator.snapshot.update.records.per.snapshot": "3",
        "share.coordinator.state.topic.num.partitions": "1",
    }
    async with running(tmp_path, **overrides) as b:
        topic = b.create_topic("t", 2, {})
        keys = [SharePartitionKey("g", topic.topic_id, p) for p in (0, 1)]
        for k in keys:
            await b.share_persister.initialize(k, 0, 0)

        async def writes(k, n):
            codes = []
            for i in range(n):
                codes.append(
                    await b.share_persister.write(
                        k, 0, 0, -1, i + 1, (StateBatch(i, i, ACKNOWLEDGED, 1), StateBatch(i + 1, i + 1, AVAILABLE, 1))
                    )
                )
            return codes

        # two writers per key, interleaved over the same offsets, none waiting for the other's durability
        results = await asyncio.gather(
            writes(keys[0], 40), writes(keys[0], 40), writes(keys[1], 40), writes(keys[1], 25)
        )
        assert {c for codes in results for c in codes} == {0}
        before = [await b.share_persister.read(k, -1) for k in keys]
        kinds = {k.kind for k, _v in stored_records(b, 0)}
        assert kinds == {R.SHARE_SNAPSHOT, R.SHARE_UPDATE}
    async with running(tmp_path, **overrides) as b:
        assert [await b.share_persister.read(k, -1) for k in keys] == before
    assert before[0].batches == (StateBatch(0, 39, ACKNOWLEDGED, 1), StateBatch(40, 40, AVAILABLE, 1))


async def test_pruning_runs_every_prune_interval(tmp_path):
    overrides = {
        "share.coordinator.snapshot.update.records.per.snapshot": "1",
        "share.coordinator.state.topic.num.partitions": "1",
        "share.coordinator.state.topic.prune.interval.ms": "20",
    }
    async with running(tmp_path, **overrides) as b:
        topic = b.create_topic("t", 1, {})
        key = SharePartitionKey("g", topic.topic_id, 0)
        await b.share_persister.initialize(key, 0, 0)
        for i in range(6):  # update, snapshot, update, snapshot, ...: the last snapshot is at offset 6
            await b.share_persister.write(key, 0, 0, -1, -1, (StateBatch(i, i, ACKNOWLEDGED, 1),))
        lg = b.share_coordinator.logs[0]
        for _ in range(300):  # the job may have run meanwhile, pruning less: it catches up on its next run
            if lg.log_start_offset == 6:
                break
            await asyncio.sleep(0.01)
        assert lg.log_start_offset == 6 and b.share_coordinator.last_pruned == {0: 6}
        assert (await b.share_persister.read(key, -1)).batches == (StateBatch(0, 5, ACKNOWLEDGED, 1),)


async def test_a_failing_rule_fails_its_request_only(tmp_path, monkeypatch, caplog):
    from groupd.coordinator.share_state import rules

    async with running(tmp_path) as b:
        topic = b.create_topic("t", 1, {})
        key = SharePartitionKey("g", topic.topic_id, 0)
        assert await b.share_persister.initialize(key, 0, 0) == 0

        def broken(*_args):
            raise RuntimeError("boom")

        monkeypatch.setattr(rules, "write", broken)
        assert await b.share_persister.write(key, 0, 0, -1, -1, ()) == -1  # UNKNOWN_SERVER_ERROR
        assert "share-state broken of g:" in caplog.text
        monkeypatch.undo()
        assert await b.share_persister.write(key, 0, 0, 5, -1, ()) == 0
        assert (await b.share_persister.read(key, -1)).start_offset == 5


async def test_a_full_disk_refuses_share_state_writes_with_not_coordinator_and_reads_go_on(tmp_path, monkeypatch):
    """A ``__share_group_state`` append the disk has no room for (storage/log.py raises DiskFull) is
    answered as Kafka's share coordinator answers a failed append (CoordinatorOperationExceptionHelper:
    KAFKA_STORAGE_ERROR -> NOT_COORDINATOR), the state stays as it was and is read meanwhile; once there
    is room the next write is taken, and a restart finds exactly the accepted writes."""
    import errno
    import os

    import groupd.storage.log as log_module

    class NoRoom:
        def __getattr__(self, name):
            return getattr(os, name)

        def pwrite(self, fd, data, offset):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    async with running(tmp_path) as b:
        topic = b.create_topic("t", 1, {})
        p = b.share_persister
        key = SharePartitionKey("g", topic.topic_id, 0)
        assert await p.initialize(key, 0, -1) == 0
        assert await p.write(key, 0, 0, 0, 3, (StateBatch(0, 4, ACKNOWLEDGED, 1),)) == 0
        before = await p.read(key, -1)
        with monkeypatch.context() as full:
            full.setattr(log_module, "os", NoRoom())
            assert await p.write(key, 0, 0, -1, 4, (StateBatch(5, 5, ARCHIVED, 2),)) == 16  # NOT_COORDINATOR
            assert await p.read(key, -1) == before
        assert await p.write(key, 0, 0, -1, 4, (StateBatch(6, 6, ARCHIVED, 2),)) == 0
        accepted = await p.read(key, -1)
    assert accepted.batches == (StateBatch(0, 4, ACKNOWLEDGED, 1), StateBatch(6, 6, ARCHIVED, 2))
    async with running(tmp_path) as b:
        assert await b.share_persister.read(key, -1) == accepted
