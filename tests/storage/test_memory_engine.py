"""The memory engine (groupd/storage/memory.py) beyond the seam's contract: nothing on disk, stores named
by log.dirs and forgotten on request, durability told on the next loop turn, and a whole broker on it
(transactions, offsets and a restart within the process)."""

from __future__ import annotations

import asyncio

import pytest

from groupd.broker.app import Broker
from groupd.storage import engines, memory
from groupd.storage.batch import build_batch, build_control_batch, iter_records
from groupd.storage.engine import LogConfig
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.wire.test_transactions import begin, committed_fetch, end_body, produce, txn_batch


def engine_at(name: str) -> memory.MemoryEngine:
    built = engines.build({"log.dirs": name, "storage.engine": "memory"})
    assert isinstance(built, memory.MemoryEngine)
    return built


async def test_nothing_is_written_under_log_dirs(tmp_path):
    place = tmp_path / "data"
    engine = engine_at(str(place))
    engine.open()
    log = engine.open_partition("t", 0)
    log.append(build_batch([(b"k", b"v")], timestamp_ms=1))
    log.mark("transactional")
    log.save_snapshot("producer-state", {"a": 1})
    log.flush()
    engine.open_broker_log("log-end-history").append_records([(b"k", b"v")], 1)
    engine.metadata.put("configs.json", b"{}")
    durability = engine.durability(shared=True)
    await durability.start()
    await durability.durable(log)
    await durability.close()
    assert not place.exists() and list(tmp_path.iterdir()) == []
    memory.discard(str(place))


def test_stores_are_named_apart_and_discarded():
    a, b = engine_at("mem-a"), engine_at("mem-b")
    a.open_partition("t", 0).append_records([(b"k", b"v")], 1)
    a.metadata.put("configs.json", b"{}")
    assert b.partitions() == [] and b.metadata.get("configs.json") is None
    assert engine_at("mem-a").partitions() == [("t", 0)]
    assert {"mem-a", "mem-b"} <= set(memory.stored_names())
    memory.discard("mem-a")
    memory.discard("mem-b")
    assert "mem-a" not in memory.stored_names()
    assert engine_at("mem-a").partitions() == []  # a new, empty store under the old name
    memory.discard("mem-a")


def test_an_append_keeps_a_copy_of_the_callers_bytes():
    engine = engine_at("mem-copy")
    log = engine.open_partition("t", 0)
    sent = bytearray(build_batch([(b"k", b"v")], timestamp_ms=1))
    before = bytes(sent)
    log.append(sent)
    sent[-1] ^= 0xFF
    assert log.read(0, 1 << 20) == before
    memory.discard("mem-copy")


async def test_durability_answers_on_the_next_loop_turn_not_inside_the_call():
    engine = engine_at("mem-durable")
    durability = engine.durability()
    log = engine.open_partition("t", 0)
    log.append_records([(b"k", b"v")], 1)
    told: list[object] = []
    assert durability.when_durable(log, told.append)
    assert told == []  # the caller queues its waiter after when_durable returns
    await asyncio.sleep(0)
    assert told == [None]
    memory.discard("mem-durable")


async def test_a_broker_on_memory_keeps_transactions_and_offsets_across_a_restart_in_the_process(tmp_path):
    config = broker_config(tmp_path, **{"storage.engine": "memory"})
    b = Broker(config)
    await b.start()
    wire = await WireClient.connect(b.port)
    try:
        b.create_topic("r", 1, {})
        pid, epoch = await begin(wire, "t7", {"r": [0]})
        assert await produce(wire, "r", 0, txn_batch(pid, epoch, 0, [b"a", b"b"])) == (0, 0)
        assert (await wire.call(26, 3, end_body("t7", pid, epoch, True))).error_code == 0
    finally:
        await wire.close()
        await b.stop()
    assert not (tmp_path / "data").exists()

    b = Broker(config)
    await b.start()
    wire = await WireClient.connect(b.port)
    try:
        assert b.topics.get("r") is not None
        p = (await wire.call(1, 11, committed_fetch("r", 0, 0))).responses[0].partitions[0]
        assert (p.high_watermark, p.last_stable_offset) == (3, 3)  # two records and the COMMIT marker
    finally:
        await wire.close()
        await b.stop()
        memory.discard(config["log.dirs"])
    assert not (tmp_path / "data").exists()


def history() -> list[bytes]:
    """Keys overwritten, a tombstone, an aborted and a committed transaction: what compaction decides on."""
    out: list[bytes] = []
    for i in range(40):
        out.append(build_batch([(b"k%d" % (i % 5), b"v%d" % i)], timestamp_ms=1_000 + i))
    out.append(build_batch([(b"k1", None)], timestamp_ms=1_100))
    for pid, commit in ((7, False), (8, True)):
        out.append(
            build_batch(
                [(b"k2", b"txn-%d" % pid)], timestamp_ms=1_200, producer_id=pid, producer_epoch=0, attributes=0x10
            )
        )
        out.append(build_control_batch(pid, 0, commit, timestamp_ms=1_201))
    for i in range(20):
        out.append(build_batch([(b"k%d" % (i % 3), b"w%d" % i)], timestamp_ms=2_000 + i))
    return out


def contents(log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for _h, b in log.batches() for r in iter_records(bytes(b))]


@pytest.fixture
def local_and_memory(tmp_path):
    """A factory of two logs, one per engine, over the same config and the same ``history()``."""
    opened: list = []

    def open_both(config: LogConfig) -> list:
        local = engines.build({"log.dirs": str(tmp_path / "local"), "storage.engine": "local"})
        logs = [local.open_partition("t", 0, config), engine_at(str(tmp_path / "mem")).open_partition("t", 0, config)]
        for log in logs:
            for batch in history():
                log.append(batch)
            log.flush()
        opened.extend(logs)
        return logs

    yield open_both
    for log in opened:
        log.close()
    memory.discard(str(tmp_path / "mem"))


@pytest.mark.parametrize("now, min_age", [(1_500, 0), (10**9, 0), (2_010, 500)])
def test_compaction_keeps_what_the_local_engine_keeps(local_and_memory, now, min_age):
    """The same history compacted by both engines (storage/cleaning.py decides for both; segments roll at
    the same sizes) reads back the same, offsets, keys and values."""
    logs = local_and_memory(LogConfig(segment_bytes=600, cleanup_policy="compact", delete_retention_ms=1_000))
    stats = [log.compact(now, min_age) for log in logs]
    assert stats[0] == stats[1] and stats[0].records_after < stats[0].records_before
    assert contents(logs[0]) == contents(logs[1])
    assert [s.base_offset for s in logs[0].segments_info()] == [s.base_offset for s in logs[1].segments_info()]


def test_retention_drops_what_the_local_engine_drops(local_and_memory):
    logs = local_and_memory(LogConfig(segment_bytes=600, retention_ms=500, retention_bytes=-1))
    dropped = [log.apply_retention(1_800) for log in logs]
    assert dropped[0] == dropped[1] > 0
    assert logs[0].log_start_offset == logs[1].log_start_offset > 0
    assert contents(logs[0]) == contents(logs[1])
