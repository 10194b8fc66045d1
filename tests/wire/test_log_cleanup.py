"""Retention and compaction as a running broker does them (its check every log.retention.check.interval.ms),
on both storage engines: what a consumer sees afterwards through ListOffsets and Fetch.

Kafka's semantics carried over: retention.ms drops batches whose largest timestamp is older than the limit,
never the active segment (so the newest batch stays), and the log start offset moves past what was dropped;
cleanup.policy=compact keeps the last value of every key at its original offset, never in the active
segment. segment.ms=1 rolls a segment for every batch here, so each batch is closed by the next one."""

from __future__ import annotations

import asyncio
import time

import pytest

from groupd.broker.app import Broker
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch, iter_records, split_batches
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.wire.test_data_plane import fetch_body, list_offsets_body, part, produce_body

pytestmark = pytest.mark.engines

HOUR_MS = 3_600_000
EARLIEST = -2


async def produce(wire: WireClient, topic: str, key: bytes, value: bytes, timestamp_ms: int) -> int:
    answer = part(await wire.call(0, 9, produce_body(topic, 0, build_batch([(key, value)], timestamp_ms=timestamp_ms))))
    assert answer.error_code == 0
    await asyncio.sleep(0.003)  # older than segment.ms: the next batch starts a segment
    return int(answer.base_offset)


async def earliest(wire: WireClient, topic: str) -> int:
    return int((await wire.call(2, 7, list_offsets_body(topic, 0, EARLIEST))).topics[0].partitions[0].offset)


async def records(wire: WireClient, topic: str) -> list[tuple[int, bytes, bytes]]:
    """Every record from the log start on, fetched as a consumer does (a fetch may stop at a segment's end,
    as Kafka's reads one segment); started again from the new start when retention moved it meanwhile
    (OFFSET_OUT_OF_RANGE, as a consumer with auto.offset.reset=earliest does)."""
    offset, found = await earliest(wire, topic), []
    while True:
        fetched = part(await wire.call(1, 11, fetch_body(topic, 0, offset)))
        if fetched.error_code == ErrorCode.offset_out_of_range:
            offset, found = await earliest(wire, topic), []
            continue
        assert fetched.error_code == 0
        batch = [
            (r.offset, bytes(r.key), bytes(r.value))
            for b in split_batches(fetched.records or b"")
            for r in iter_records(b)
        ]
        if not batch:
            return found
        found += batch
        offset = batch[-1][0] + 1


async def until(check, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, f"the broker's cleanup did not run in time: {check.__name__}"
        await asyncio.sleep(0.05)


async def test_retention_and_compaction_run_in_the_broker(tmp_path) -> None:
    b = Broker(broker_config(tmp_path, **{"log.retention.check.interval.ms": "50"}))
    await b.start()
    wire = await WireClient.connect(b.port)
    try:
        b.create_topic("aged", 1, {"retention.ms": str(HOUR_MS), "segment.ms": "1"})
        b.create_topic(
            "keyed", 1, {"cleanup.policy": "compact", "segment.ms": "1", "min.cleanable.dirty.ratio": "0.01"}
        )
        now = int(time.time() * 1000)
        for i in range(5):
            await produce(wire, "aged", b"a", b"old%d" % i, now - 2 * HOUR_MS)
        fresh = await produce(wire, "aged", b"a", b"fresh", now)
        for i in range(6):
            await produce(wire, "keyed", b"k%d" % (i % 2), b"v%d" % i, now)
        last = await produce(wire, "keyed", b"z", b"closes the segment of k1's last value", now)

        async def aged_dropped() -> bool:
            return await records(wire, "aged") == [(fresh, b"a", b"fresh")]

        async def keyed_compacted() -> bool:
            return await records(wire, "keyed") == [
                (4, b"k0", b"v4"),
                (5, b"k1", b"v5"),
                (last, b"z", b"closes the segment of k1's last value"),
            ]

        await until(aged_dropped)
        assert await earliest(wire, "aged") == fresh == 5
        await until(keyed_compacted)
        # a read below the new log start is out of range, as Kafka answers it
        assert part(await wire.call(1, 11, fetch_body("aged", 0, 0))).error_code == ErrorCode.offset_out_of_range
    finally:
        await wire.close()
        await b.stop()
