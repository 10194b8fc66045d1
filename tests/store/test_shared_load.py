"""Loading the offsets store with walk helpers (num.recovery.threads.per.data.dir > 1) builds exactly the
state the broker builds alone, including when a helper fails part-way."""

import asyncio
import random

import pytest

import groupd.coordinator.service as service
import groupd.storage.local_replay as local_replay
import groupd.storage.log as storage_log
from groupd.broker.config import default_config
from groupd.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
)
from groupd.protocol.topic_names import OFFSETS_TOPIC
from groupd.storage.local import LocalEngine
from groupd.storage.log import Log, LogConfig
from groupd.storage.walkhelper import WalkHelpers


def write_store(root, partitions=2, records=4_000, seed=3):
    """Offsets, offset tombstones, group metadata and group tombstones, in several segments."""
    rng = random.Random(seed)
    for p in range(partitions):
        log = Log.open(root / f"{OFFSETS_TOPIC}-{p}", LogConfig(segment_bytes=30_000))
        for i in range(0, records, 4):
            batch = []
            for _ in range(4):
                group = f"g{rng.randrange(60)}"
                roll = rng.random()
                if roll < 0.05:
                    batch.append((encode_key(GroupMetadataKey(group)), None))
                elif roll < 0.15:
                    value = GroupMetadataValue("consumer", rng.randrange(9), "range", "", i, ())
                    batch.append((encode_key(GroupMetadataKey(group)), encode_value(value)))
                else:
                    key = encode_key(OffsetCommitKey(group, f"t{rng.randrange(3)}", rng.randrange(4)))
                    value = None if roll > 0.95 else encode_value(OffsetCommitValue(i, "m", 1_700_000_000_000 + i))
                    batch.append((key, value))
            log.append_records(batch, 1_700_000_000_000)
        log.flush()
        log.close()


async def loaded_state(root, walkers):
    c = service.GroupCoordinator(default_config(**{
        "log.dirs": str(root), "offsets.topic.num.partitions": "2", "num.recovery.threads.per.data.dir": str(walkers),
    }), LocalEngine(root), now=lambda: 1_700_000_000_000)
    await c.start()
    task = next(iter(c._tasks))
    while not c.is_loaded():
        await asyncio.sleep(0.01)
    await c.stop()
    assert task.done()
    state = {
        (p, gid): (g.state, g.generation, {t: dict(ps) for t, ps in shard.state.offsets.of(gid).items()})
        for p, shard in c.shards.items() for gid, g in shard.state.groups.items()
    }
    return state, c.loaded_records


@pytest.fixture
def small_thresholds(monkeypatch):
    monkeypatch.setattr(local_replay, "WALK_HELPERS_FROM_BYTES", 1)
    monkeypatch.setattr(local_replay, "SHARE_WALK_FROM_BYTES", 1)
    monkeypatch.setattr(storage_log, "READ_CHUNK", 4_000)


async def test_helpers_build_the_state_the_broker_builds_alone(tmp_path, small_thresholds, monkeypatch):
    write_store(tmp_path)
    alone = await loaded_state(tmp_path, 1)
    asked = []
    send = WalkHelpers.send
    monkeypatch.setattr(WalkHelpers, "send", lambda self, parts: (asked.append(len(parts)), send(self, parts)))
    shared = await loaded_state(tmp_path, 3)
    assert asked == [2, 2]  # both partitions were shared with two helpers
    assert shared == alone and alone[1] == 8_000 and len(alone[0]) > 60


async def test_a_failing_helper_leaves_its_part_to_the_broker(tmp_path, small_thresholds, monkeypatch, caplog):
    write_store(tmp_path)
    alone = await loaded_state(tmp_path, 1)

    def broken(self):
        self._asked = []
        raise OSError("helper gone")

    monkeypatch.setattr(WalkHelpers, "receive", broken)
    assert await loaded_state(tmp_path, 2) == alone
    assert "helper gone; walking the rest of the store in the broker" in caplog.text


async def test_helpers_that_cannot_start_leave_the_walk_to_the_broker(tmp_path, small_thresholds, monkeypatch, caplog):
    write_store(tmp_path, partitions=2, records=400)
    alone = await loaded_state(tmp_path, 1)

    def no_processes(count):
        raise RuntimeError("no processes here")

    monkeypatch.setattr(WalkHelpers, "spawn", staticmethod(no_processes))
    assert await loaded_state(tmp_path, 2) == alone
    assert "no start-up walk helpers (no processes here)" in caplog.text


async def test_a_damaged_partition_fails_alone(tmp_path, caplog):
    from groupd.coordinator import errors as E
    from groupd.coordinator.partitioning import partition_for
    from groupd.coordinator.service import CoordinatorError
    from groupd.storage.batch import BATCH_OVERHEAD

    write_store(tmp_path, partitions=2)
    segments = sorted((tmp_path / f"{OFFSETS_TOPIC}-0").glob("*.log"))
    assert len(segments) > 1
    first = segments[0]  # an older segment: no CRC check at open
    with open(first, "r+b") as f:
        f.seek(BATCH_OVERHEAD)
        f.write(b"\x01")  # the first record's length is now negative
    c = service.GroupCoordinator(
        default_config(**{"log.dirs": str(tmp_path), "offsets.topic.num.partitions": "2"}), LocalEngine(tmp_path)
    )
    await c.start()
    while not c.is_loaded():
        await asyncio.sleep(0.01)
    try:
        assert list(c.load_failures()) == [0] and "negative record length" in c.load_failures()[0]
        assert c.shards[1].loaded and c.shards[1].state.groups  # the other partition loaded
        in_0 = next(g for g in (f"g{i}" for i in range(100)) if partition_for(g, 2) == 0)
        in_1 = next(g for g in (f"g{i}" for i in range(100)) if partition_for(g, 2) == 1)
        with pytest.raises(CoordinatorError) as raised:
            c.shard_for(in_0)
        assert raised.value.code == E.NOT_COORDINATOR
        assert c.shard_for(in_1) is c.shards[1]
        assert f"failed to load {OFFSETS_TOPIC}-0" in caplog.text
    finally:
        await c.stop()


def write_txn_store(root, records=3_000, seed=5):
    """Plain commits, transactional batches of four producers and their markers, spread over segments
    (so helpers get ranges with and without transactions); some transactions stay open."""
    from groupd.storage.batch import TRANSACTIONAL, build_batch, build_control_batch

    rng = random.Random(seed)
    for p in range(2):
        log = Log.open(root / f"{OFFSETS_TOPIC}-{p}", LogConfig(segment_bytes=30_000))
        for i in range(0, records, 4):
            batch = [
                (
                    encode_key(OffsetCommitKey(f"g{rng.randrange(20)}", "t", rng.randrange(4))),
                    encode_value(OffsetCommitValue(i + j, "", 1_700_000_000_000)),
                )
                for j in range(4)
            ]
            roll = rng.random()
            pid = rng.randrange(4)
            in_txns = records // 4 < i < records * 6 // 10  # the broker's part and the first helper's
            if in_txns and roll < 0.1:
                log.append(
                    build_batch(
                        batch,
                        timestamp_ms=1_700_000_000_000,
                        producer_id=pid,
                        producer_epoch=0,
                        attributes=TRANSACTIONAL,
                    )
                )
            elif in_txns and roll < 0.15:
                log.append(build_control_batch(pid, 0, rng.random() < 0.7, timestamp_ms=1_700_000_000_000))
            else:
                log.append_records(batch, 1_700_000_000_000)
        log.flush()
        log.close()


async def test_helpers_hand_transactional_ranges_back_and_the_state_is_the_same(
    tmp_path, small_thresholds, monkeypatch
):
    write_txn_store(tmp_path)

    async def state_with_pending(walkers):
        c = service.GroupCoordinator(
            default_config(
                **{
                    "log.dirs": str(tmp_path),
                    "offsets.topic.num.partitions": "2",
                    "num.recovery.threads.per.data.dir": str(walkers),
                }
            ),
            LocalEngine(tmp_path),
            now=lambda: 1_700_000_000_000,
        )
        await c.start()
        while not c.is_loaded():
            await asyncio.sleep(0.01)
        await c.stop()
        offsets = {
            (p, gid): {t: dict(ps) for t, ps in shard.state.offsets.of(gid).items()}
            for p, shard in c.shards.items()
            for gid in shard.state.groups
        }
        pending = {
            (p, pid, gid, tp): (po.value, po.superseded)
            for p, shard in c.shards.items()
            for pid, by_group in shard.state.offsets.pending_txn.items()
            for gid, offs in by_group.items()
            for tp, po in offs.items()
        }
        return offsets, pending, c.loaded_records

    alone = await state_with_pending(1)
    receive = WalkHelpers.receive
    handed_back = []

    def watched(self):
        answers = receive(self)
        handed_back.extend(a is None for a in answers)
        return answers

    monkeypatch.setattr(WalkHelpers, "receive", watched)
    shared = await state_with_pending(3)
    assert True in handed_back and False in handed_back  # some ranges held transactions, some did not
    assert shared == alone
    assert alone[1] and alone[2] > 5_000
