"""The PostgreSQL engine while its database is down (``pg_ctl stop -m immediate``) and after it returns.

A write that does not commit is answered with the error and never acknowledged: the engine's
Durability reports the StorageError, the Produce answer is KAFKA_STORAGE_ERROR and an OffsetCommit's
NOT_COORDINATOR (Kafka's GroupCoordinatorService maps a coordinator write's KAFKA_STORAGE_ERROR to
NOT_COORDINATOR, so the client looks its coordinator up again and retries). When the database is back
the same broker serves again by itself, and nothing acknowledged is lost."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from groupd.broker.app import Broker
from groupd.protocol.errors import ErrorCode
from groupd.storage import engines
from groupd.storage.batch import build_batch
from groupd.storage.errors import StorageError
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.postgresql_server import PostgresServer
from tests.wire.test_data_plane import produce_body
from tests.wire.test_groups import commit_body, fetch_body


def one(i: int) -> bytes:
    return build_batch([(b"k", b"v%d" % i)], timestamp_ms=1_000)


async def test_a_failed_round_is_reported_retried_and_nothing_acknowledged_is_lost(
    outage: PostgresServer, postgresql_url: str
) -> None:
    config = {"storage.engine": "postgresql", "storage.postgresql.url": postgresql_url}
    engine = engines.build(config)
    engine.open()
    durability = engine.durability(shared=True)
    log = engine.open_partition("t", 0)
    for i in range(3):
        log.append(one(i))
        await durability.durable(log)
    outage.stop("immediate")
    log.append(one(3))
    with pytest.raises(StorageError):
        await asyncio.wait_for(durability.durable(log), 10)
    with pytest.raises(StorageError, match="wait for PostgreSQL"):
        log.append(one(4))  # refused while batch 3 waits: what waits in memory stays bounded
    outage.start()
    deadline = time.monotonic() + 10
    while True:  # the retries commit batch 3, then appends are taken again
        try:
            base, _ = log.append(one(4))
            break
        except StorageError:
            assert time.monotonic() < deadline, "the engine did not recover"
            await asyncio.sleep(0.1)
    assert base == 4
    await asyncio.wait_for(durability.durable(log), 10)
    await durability.close()
    log.close()
    again = engines.build(config).open_partition("t", 0)
    assert [h.base_offset for h, _ in again.batches()] == [0, 1, 2, 3, 4]
    again.close()


async def test_the_broker_answers_kafkas_errors_while_the_database_is_down_and_serves_again(
    tmp_path: Path, outage: PostgresServer, postgresql_url: str
) -> None:
    b = Broker(broker_config(tmp_path, **{"storage.engine": "postgresql", "storage.postgresql.url": postgresql_url}))
    await b.start()
    wire = await WireClient.connect(b.port)
    try:
        b.create_topic("t", 1, {})

        async def produce(i: int) -> tuple[int, int]:
            p = (await wire.call(0, 9, produce_body("t", 0, one(i)))).responses[0].partition_responses[0]
            return p.error_code, p.base_offset

        async def commit(offset: int) -> int:
            answer = await wire.call(8, 8, commit_body("g", "t", 0, offset, ""))
            return int(answer.topics[0].partitions[0].error_code)

        assert await produce(0) == (0, 0)
        assert await commit(1) == 0
        outage.stop("immediate")
        assert await produce(1) == (ErrorCode.kafka_storage_error, -1)
        assert await commit(2) == ErrorCode.not_coordinator
        outage.start()
        deadline = time.monotonic() + 15
        while (answer := await produce(2))[0] != 0:  # no restart: the broker serves again by itself
            assert answer[0] == ErrorCode.kafka_storage_error and time.monotonic() < deadline
            await asyncio.sleep(0.2)
        while (code := await commit(3)) != 0:
            assert code == ErrorCode.not_coordinator and time.monotonic() < deadline
            await asyncio.sleep(0.2)
        fetched = await wire.call(9, 7, fetch_body("g", "t", [0]))
        assert fetched.topics[0].partitions[0].committed_offset == 3
    finally:
        await wire.close()
        await b.stop()
    # a broker started afresh over the database finds what was acknowledged
    b2 = Broker(
        broker_config(tmp_path / "2", **{"storage.engine": "postgresql", "storage.postgresql.url": postgresql_url})
    )
    await b2.start()
    wire2 = await WireClient.connect(b2.port)
    try:
        fetched = await wire2.call(9, 7, fetch_body("g", "t", [0]))
        assert fetched.topics[0].partitions[0].committed_offset == 3
        assert b2.partitions.logs[("t", 0)].log_end_offset >= 3  # 0, the retried 1 (not acknowledged), 2
    finally:
        await wire2.close()
        await b2.stop()


async def test_an_immediate_stop_under_load_loses_nothing_acknowledged(
    outage: PostgresServer, postgresql_url: str
) -> None:
    """Eight writers on four partitions append and wait for their rounds while the database is stopped
    (``-m immediate``: no checkpoint, commits in flight cut) and started again; every acknowledged batch
    is there afterwards, byte for byte at its offset."""
    config = {"storage.engine": "postgresql", "storage.postgresql.url": postgresql_url}
    engine = engines.build(config)
    engine.open()
    durability = engine.durability(shared=True)
    logs = [engine.open_partition("load", p) for p in range(4)]
    acked: dict[tuple[int, int], bytes] = {}
    errors = 0
    stop_at = time.monotonic() + 3

    async def writer(w: int) -> None:
        nonlocal errors
        i = 0
        while time.monotonic() < stop_at:
            lg = logs[w % 4]
            value = build_batch([(b"w%d" % w, b"%d" % i)], timestamp_ms=1_000)
            try:
                base, _ = lg.append(value)
                await durability.durable(lg)
            except StorageError:
                errors += 1
                await asyncio.sleep(0.05)
                continue
            acked[(w % 4, base)] = value
            i += 1

    async def outage_midway() -> None:
        await asyncio.sleep(0.7)
        await asyncio.to_thread(outage.stop, "immediate")
        await asyncio.sleep(0.5)
        await asyncio.to_thread(outage.start)

    await asyncio.gather(*(writer(w) for w in range(8)), outage_midway())
    await durability.close()
    for lg in logs:
        lg.close()
    assert errors > 0 and len(acked) > 100  # the outage was felt, and the load ran on both sides of it
    again = engines.build(config)
    stored = {}
    for p in range(4):
        lg = again.open_partition("load", p)
        stored.update({(p, h.base_offset): bytes(view[8:]) for h, view in lg.batches()})
        lg.close()
    assert {key: value[8:] for key, value in acked.items()} == {key: stored[key] for key in acked}
