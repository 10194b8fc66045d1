"""Crashes under load on the PostgreSQL engine: the broker SIGKILLed while producers and committers wait
for their answers, and the database stopped with ``pg_ctl stop -m immediate`` (no checkpoint, the
connection cut mid-commit) and started again. Nothing acknowledged is lost, and while the database is down
the clients hear only errors Kafka's clients retry: KAFKA_STORAGE_ERROR for a produce (Kafka's
KafkaStorageException is an InvalidMetadataException, retriable) and NOT_COORDINATOR for a commit (Kafka's
group coordinator maps a failed coordinator write to it so the client finds its coordinator again).

Each load worker has one request in flight on its own connection, so after a crash a partition's stored
records are every acknowledged one plus at most the one in flight, and a group's committed offset is its
last acknowledged commit or the one sent after it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from groupd.broker.app import Broker
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch, iter_records
from tests.conftest import broker_config
from tests.harness import BrokerProcess, WireClient
from tests.postgresql_server import PostgresServer
from tests.wire.test_data_plane import produce_body
from tests.wire.test_groups import commit_body, fetch_body
from tests.wire.test_quotas import create_topics_body

PARTITIONS = 4
RETRIABLE = {ErrorCode.kafka_storage_error, ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress}
LOST = (ConnectionError, OSError, asyncio.IncompleteReadError, TimeoutError)  # the broker was killed


@dataclass
class Load:
    """What the workers were told: acknowledged records and commits, the commits sent, the errors heard."""

    records: dict[tuple[int, int], bytes] = field(default_factory=dict)  # (partition, offset) -> value
    commits: dict[str, int] = field(default_factory=dict)  # group -> last acknowledged offset
    sent: dict[str, int] = field(default_factory=dict)  # group -> last offset sent
    errors: list[int] = field(default_factory=list)
    after_error: set[str] = field(default_factory=set)  # workers answered with success after an error


async def producer(port: int, p: int, load: Load, until: Callable[[], bool]) -> None:
    client = await WireClient.connect(port)
    i = 0
    try:
        while not until():
            value = b"p%d-%d" % (p, i)
            batch = build_batch([(b"k", value)], timestamp_ms=int(time.time() * 1000))
            answer = (await client.call(0, 9, produce_body("load", p, batch))).responses[0].partition_responses[0]
            if answer.error_code == 0:
                load.records[(p, answer.base_offset)] = value
                if load.errors:
                    load.after_error.add(f"producer {p}")
                i += 1
            else:
                load.errors.append(answer.error_code)
                await asyncio.sleep(0.05)
    except LOST:
        return
    finally:
        await client.close()


async def committer(port: int, group: str, load: Load, until: Callable[[], bool]) -> None:
    client = await WireClient.connect(port)
    offset = 0
    try:
        while not until():
            offset += 1
            load.sent[group] = offset
            answer = await client.call(8, 8, commit_body(group, "load", 0, offset, ""))
            code = answer.topics[0].partitions[0].error_code
            if code == 0:
                load.commits[group] = offset
                if load.errors:
                    load.after_error.add(group)
            else:
                load.errors.append(code)
                await asyncio.sleep(0.05)
    except LOST:
        return
    finally:
        await client.close()


def workers(port: int, load: Load, until: Callable[[], bool]) -> list[asyncio.Task[None]]:
    return [asyncio.create_task(producer(port, p, load, until)) for p in range(PARTITIONS)] + [
        asyncio.create_task(committer(port, f"g{g}", load, until)) for g in range(8)
    ]


async def check_stored(port: int, load: Load, stored: dict[tuple[int, int], bytes]) -> None:
    """Every acknowledged record at its offset, at most one more per partition (the one in flight); every
    group's committed offset its last acknowledged commit or the one in flight."""
    assert {key: stored.get(key) for key in load.records} == load.records
    extra = [key for key in stored if key not in load.records]
    assert len(extra) <= PARTITIONS
    client = await WireClient.connect(port)
    try:
        for group, acked in load.commits.items():
            answer = await client.call(9, 7, fetch_body(group, "load", [0]))
            assert answer.topics[0].partitions[0].committed_offset in {acked, load.sent[group]}, group
    finally:
        await client.close()


def stored_records(broker: Broker) -> dict[tuple[int, int], bytes]:
    return {
        (p, r.offset): bytes(r.value)
        for p in range(PARTITIONS)
        for _h, view in broker.partitions.logs[("load", p)].batches()
        for r in iter_records(view)
    }


async def a_broker_over(tmp_path: Path, url: str) -> Broker:
    b = Broker(broker_config(tmp_path, **{"storage.engine": "postgresql", "storage.postgresql.url": url}))
    await b.start()
    return b


async def test_sigkill_under_produce_and_commit_load_loses_nothing_acknowledged(
    tmp_path: Path, postgresql_url: str
) -> None:
    settings = {"storage.engine": "postgresql", "storage.postgresql.url": postgresql_url}
    first = BrokerProcess(tmp_path / "first", settings).start()
    load = Load()
    try:
        setup = await WireClient.connect(first.port)
        create = await setup.call(19, 7, create_topics_body(7, [("load", PARTITIONS)]))
        assert create.topics[0].error_code == 0
        await setup.close()
        stop_at = time.monotonic() + 1.5
        tasks = workers(first.port, load, lambda: time.monotonic() > stop_at + 10)
        await asyncio.sleep(1.5)
    finally:
        first.kill()  # SIGKILL, every worker waiting for an answer
    await asyncio.wait_for(asyncio.gather(*tasks), 15)
    assert len(load.records) > 20 and len(load.commits) == 8 and not load.errors
    second = await a_broker_over(tmp_path / "second", postgresql_url)
    try:
        await check_stored(second.port, load, stored_records(second))
    finally:
        await second.stop()


async def test_an_immediate_database_stop_under_load_answers_retriable_errors_and_loses_nothing(
    tmp_path: Path, outage: PostgresServer, postgresql_url: str
) -> None:
    b = await a_broker_over(tmp_path / "1", postgresql_url)
    load = Load()
    try:
        b.create_topic("load", PARTITIONS, {})
        restarted_at: list[float] = []

        def done() -> bool:  # every worker served again after the outage, or a deadline
            return len(load.after_error) == PARTITIONS + 8 or (
                bool(restarted_at) and time.monotonic() > restarted_at[0] + 20
            )

        tasks = workers(b.port, load, done)
        await asyncio.sleep(0.7)
        await asyncio.to_thread(outage.stop, "immediate")
        await asyncio.sleep(0.7)
        await asyncio.to_thread(outage.start)
        restarted_at.append(time.monotonic())
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
        assert load.errors and set(load.errors) <= RETRIABLE  # the outage was felt, only as retriable errors
        assert len(load.after_error) == PARTITIONS + 8  # every producer and committer served again, no restart
    finally:
        await b.stop()
    again = await a_broker_over(tmp_path / "2", postgresql_url)  # a fresh broker: what is in the database
    try:
        await check_stored(again.port, load, stored_records(again))
    finally:
        await again.stop()
