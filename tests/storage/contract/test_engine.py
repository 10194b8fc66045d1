"""Contract: partitions as a set, durability and metadata (storage/engine.py), for every engine."""

from __future__ import annotations

import asyncio

import pytest

from groupd.storage.batch import build_batch
from groupd.storage.engine import StorageEngine, check_key
from groupd.storage.errors import StorageError, UnknownPartition

from .conftest import EngineFactory


def one(i: int = 0) -> bytes:
    return build_batch([(b"k%d" % i, b"v")], timestamp_ms=1)


def test_create_list_delete_partitions(engine: StorageEngine) -> None:
    assert engine.partitions() == []
    logs = [engine.open_partition(t, p) for t, p in [("b", 1), ("a", 0), ("b", 0), ("a-b", 2)]]
    assert engine.partitions() == [("a", 0), ("a-b", 2), ("b", 0), ("b", 1)]
    assert engine.partitions("b") == [("b", 0), ("b", 1)]
    logs[0].append(one())
    logs[0].flush()
    assert engine.stored_bytes("b", [1]) > 0 and engine.stored_bytes("a", [0]) == 0
    logs[0].close()
    engine.delete_partition("b", 1)
    assert engine.partitions("b") == [("b", 0)]
    with pytest.raises(UnknownPartition):
        engine.delete_partition("b", 1)
    assert issubclass(UnknownPartition, StorageError)
    again = engine.open_partition("b", 1)  # a new, empty partition
    assert again.log_end_offset == 0
    for log in [again, *logs[1:]]:
        log.close()


async def test_durability_callbacks_in_order_after_the_append(engine: StorageEngine) -> None:
    durability = engine.durability(shared=True)
    await durability.start()
    logs = [engine.open_partition("t", p) for p in range(2)]
    told: list[tuple[int, StorageError | None]] = []
    for i in range(6):
        log = logs[i % 2]
        log.append(one(i))
        assert durability.when_durable(log, lambda err, i=i: told.append((i, err)))
    fut = durability.durable_future(logs[0])
    assert fut is not None
    await asyncio.wait_for(asyncio.shield(fut), 10)
    await asyncio.wait_for(durability.durable(logs[1]), 10)
    for _ in range(100):
        if len(told) == 6:
            break
        await asyncio.sleep(0.01)
    assert told == [(i, None) for i in range(6)]
    await durability.close()
    for log in logs:
        log.close()


async def test_durability_per_log_rounds(engine: StorageEngine) -> None:
    durability = engine.durability()
    log = engine.open_partition("t", 0)
    order: list[int] = []
    for i in range(3):
        log.append(one(i))
        durability.when_durable(log, lambda err, i=i: order.append(i))
    await asyncio.wait_for(durability.durable(log), 10)
    assert order == [0, 1, 2]
    await durability.close()
    log.close()


async def test_a_flush_interval_does_not_wait(engine: StorageEngine) -> None:
    durability = engine.durability(flush_interval_messages=1000)
    assert not durability.synchronous
    log = engine.open_partition("t", 0)
    log.append(one())
    assert durability.when_durable(log, lambda err: None) is False
    assert durability.durable_future(log) is None
    await durability.close()  # flushes what waits
    log.close()


async def test_acknowledged_survives_a_restart(engines: EngineFactory) -> None:
    engine = engines()
    durability = engine.durability(shared=True)
    await durability.start()
    log = engine.open_partition("t", 3)
    acked = []
    for i in range(50):
        base, _ = log.append(one(i))
        await durability.durable(log)
        acked.append(base)
    await durability.close()
    log.close()
    again = engines()
    assert again.partitions() == [("t", 3)]
    reopened = again.open_partition("t", 3)
    assert [h.base_offset for h, _ in reopened.batches()] == acked
    reopened.close()


def test_metadata_put_get_delete(engine: StorageEngine) -> None:
    meta = engine.metadata
    assert meta.get("configs.json") is None
    meta.put("configs.json", b"{}")
    meta.put("producer-id-block", b"1000")
    meta.put("configs.json", b'{"a": 1}')
    assert meta.get("configs.json") == b'{"a": 1}'
    assert meta.get("producer-id-block") == b"1000"
    meta.delete("configs.json")
    meta.delete("configs.json")
    assert meta.get("configs.json") is None


def test_metadata_keys_are_plain_names(engine: StorageEngine) -> None:
    for bad in ["", "../x", "a/b", ".hidden"]:
        with pytest.raises(ValueError):
            engine.metadata.put(bad, b"x")
    assert check_key("__scram_credentials.json") == "__scram_credentials.json"


def test_metadata_survives_a_restart(engines: EngineFactory) -> None:
    engines().metadata.put("client-quotas.json", b"[1]")
    assert engines().metadata.get("client-quotas.json") == b"[1]"
