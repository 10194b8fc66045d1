"""Contract: a coordinator's partition set and the start-up replay reader (storage/engine.py), for every
engine in conftest.py."""

from __future__ import annotations

import asyncio

from groupd.storage.batch import TxnWalk
from groupd.storage.engine import LogConfig

from .conftest import EngineFactory

CONFIG = LogConfig(cleanup_policy="compact", segment_bytes=4_000)


async def write_set(engines: EngineFactory, values: dict[int, list[tuple[bytes, bytes | None]]]) -> None:
    engine = engines()
    durability = engine.durability(shared=True)
    pset = engine.open_partition_set("__consumer_offsets", values, CONFIG, durability)
    await durability.start()
    assert sorted(pset.logs) == sorted(values)
    for p, records in values.items():
        for record in records:
            pset.logs[p].append_records([record], 1_000)
            await asyncio.wait_for(durability.durable(pset.logs[p]), 10)
    if pset.maintenance_interval is not None:
        for tick in range(20):
            pset.maintain(tick)
    await durability.close()
    pset.close()


async def test_a_set_keeps_every_durable_append_across_a_restart(engines: EngineFactory) -> None:
    values = {p: [(b"k%d" % (i % 7), b"v%d-%d" % (p, i)) for i in range(60)] for p in range(3)}
    await write_set(engines, values)
    engine = engines()
    durability = engine.durability(shared=True)
    pset = engine.open_partition_set("__consumer_offsets", range(3), CONFIG, durability)
    reader = engine.replay_reader(0, engine.stored_bytes("__consumer_offsets", range(3)))
    for p in range(3):
        latest: dict[bytes, bytes | None] = {}
        walked = await reader.collect("__consumer_offsets", p, pset.logs[p], latest, TxnWalk())
        assert walked == 60
        assert latest == {b"k%d" % k: b"v%d-%d" % (p, max(i for i in range(60) if i % 7 == k)) for k in range(7)}
    await reader.close()
    await durability.close()
    pset.close()


async def test_tombstones_are_last_values_too(engines: EngineFactory) -> None:
    await write_set(engines, {0: [(b"a", b"1"), (b"b", b"2"), (b"a", None)]})
    engine = engines()
    durability = engine.durability(shared=True)
    pset = engine.open_partition_set("__consumer_offsets", [0], CONFIG, durability)
    reader = engine.replay_reader(0, 0)
    latest: dict[bytes, bytes | None] = {}
    await reader.collect("__consumer_offsets", 0, pset.logs[0], latest, TxnWalk())
    assert latest == {b"a": None, b"b": b"2"}
    await reader.close()
    await durability.close()
    pset.close()
