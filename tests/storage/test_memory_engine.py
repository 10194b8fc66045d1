"""The memory engine (groupd/storage/memory.py) beyond the seam's contract: nothing on disk, stores named
by log.dirs and forgotten on request, durability told on the next loop turn, and a whole broker on it
(transactions, offsets and a restart within the process)."""

from __future__ import annotations

import asyncio

from groupd.broker.app import Broker
from groupd.storage import engines, memory
from groupd.storage.batch import build_batch
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
