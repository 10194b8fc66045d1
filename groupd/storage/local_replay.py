"""The local engine's start-up replay reader (storage/engine.py ReplayReader): a partition's segment
files walked in big chunks, a big store's later chunks shared with walk helper processes
(storage/walkhelper.py) while this process walks the first.

Their answers are laid over this process's own in order, as one walk would have. A helper that fails is
given up for the rest of the load, and its part is walked here; so is a part holding transactional
batches (``txn`` follows transactions across the whole walk)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Iterator

from groupd.storage.batch import TxnWalk, collect_latest
from groupd.storage.engine import LatestValues, PartitionLog
from groupd.storage.log import Log, Segment
from groupd.storage.walkhelper import WalkHelpers, split_by_bytes

log = logging.getLogger("groupd.coordinator")

# Start-up walk helpers are started when the store holds at least this much (below it, a helper's
# start, ~0.2 s, costs more than it saves), and share a partition's walk from this size.
WALK_HELPERS_FROM_BYTES = 32 << 20
SHARE_WALK_FROM_BYTES = 4 << 20


def _reads(ranges: Iterable[tuple[Segment, int, int]]) -> Iterator[memoryview]:
    """The bytes of ``Log.chunk_ranges`` ranges, read one at a time as the walk needs them."""
    for seg, start, end in ranges:
        yield memoryview(seg.pread(start, end))


async def walk(chunks: Iterable[memoryview], latest: LatestValues, txn: TxnWalk) -> int:
    """Collect the last value of every key from ``chunks``; the records walked. Yields to the loop now
    and then, so other partitions' clients are answered meanwhile."""
    count = total = 0
    for chunk in chunks:
        count += collect_latest(chunk, latest, txn)
        if count >= 200_000:
            total += count
            count = 0
            await asyncio.sleep(0)
    return total + count


class LocalReplayReader:
    def __init__(self, helpers: int, stored_bytes: int) -> None:
        self._walk_helpers: asyncio.Future[WalkHelpers | None] | None = None
        if helpers > 0 and stored_bytes >= WALK_HELPERS_FROM_BYTES:
            # started while the segments are scanned
            self._walk_helpers = asyncio.get_running_loop().run_in_executor(None, WalkHelpers.spawn, helpers)

    async def collect(self, topic: str, partition: int, log: PartitionLog, latest: LatestValues, txn: TxnWalk) -> int:
        helpers = await self._ready_helpers()
        ranges = log.chunk_ranges() if helpers is not None and isinstance(log, Log) else None
        if ranges is None:
            return await walk(log.chunks(), latest, txn)
        if helpers is None or sum(e - s for _, s, e in ranges) < SHARE_WALK_FROM_BYTES:
            return await walk(_reads(ranges), latest, txn)
        mine, *theirs = split_by_bytes(ranges, helpers.count + 1)
        try:
            helpers.send([[(str(seg.path), s, e) for seg, s, e in part] for part in theirs])
        except OSError as exc:
            await self._give_up_helpers(topic, partition, exc)
            mine, theirs = ranges, []
        records = await walk(_reads(mine), latest, txn)
        if not theirs:
            return records
        try:
            answers = await asyncio.to_thread(helpers.receive)
        except OSError as exc:
            await self._give_up_helpers(topic, partition, exc)
            return records + await walk(_reads([r for part in theirs for r in part]), latest, txn)
        for part, answer in zip(theirs, answers, strict=True):
            if answer is None:  # transactional batches: walked here, in order
                records += await walk(_reads(part), latest, txn)
                continue
            seen, found = answer
            latest.update(found)
            records += seen
        return records

    async def _ready_helpers(self) -> WalkHelpers | None:
        if self._walk_helpers is None:
            return None
        try:
            return await self._walk_helpers
        except Exception as exc:  # noqa: BLE001 - the broker walks alone then
            log.warning("no start-up walk helpers (%s): the broker walks alone", exc)
            self._walk_helpers = None
            return None

    async def _give_up_helpers(self, topic: str, partition: int, exc: OSError) -> None:
        log.warning("%s-%d: %s; walking the rest of the store in the broker", topic, partition, exc)
        await self.close()

    async def close(self) -> None:
        if self._walk_helpers is None:
            return
        helpers, self._walk_helpers = self._walk_helpers, None
        with contextlib.suppress(Exception):
            if (ready := await helpers) is not None:
                await asyncio.to_thread(ready.close)
