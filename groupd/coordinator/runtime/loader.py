"""Loading the coordinator's partitions at start-up: the offsets journal first, then the walk of each
partition (shared with walk helper processes for a big store), replayed through the shard's rules.

Like Kafka's loader, only the last record of each key matters: keys are collected as raw bytes first (a
later record supersedes an earlier one), and only the survivors are decoded and replayed. Their order
does not matter (an offset creates its group if needed, group metadata keeps the offsets of the group
it replaces, a group tombstone leaves live offsets their group): tests/unit/coordinator/test_replay.py
checks it over random histories. Transactional batches and markers are followed in log order by a
TxnWalk (storage/batch.py), which leaves in ``latest`` what readers see; the offsets of transactions
still open are replayed last, as pending (tests/unit/coordinator/test_txn_replay.py checks load against
runtime).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from groupd.coordinator.runtime.runtime import Shard
from groupd.protocol.topic_names import OFFSETS_TOPIC
from groupd.storage.batch import TxnWalk, collect_latest
from groupd.storage.committer import GroupCommitter
from groupd.storage.errors import StorageError
from groupd.storage.journal import Journal
from groupd.storage.log import Log, Segment, syncfs_errno
from groupd.storage.walkhelper import WalkHelpers, split_by_bytes

log = logging.getLogger("groupd.coordinator")

# Start-up walk helpers are started when the store holds at least this much (below it, a helper's
# start, ~0.2 s, costs more than it saves), and share a partition's walk from this size.
WALK_HELPERS_FROM_BYTES = 32 << 20
SHARE_WALK_FROM_BYTES = 4 << 20

# (state, the last value of every key, the walk's transactions, now, partition) -> offsets left pending
Replay = Callable[[Any, dict[bytes, bytes | None], TxnWalk, int, int], int]


def _reads(ranges: Iterable[tuple[Segment, int, int]]) -> Iterator[memoryview]:
    """The bytes of ``Log.chunk_ranges`` ranges, read one at a time as the walk needs them."""
    for seg, start, end in ranges:
        yield memoryview(seg.pread(start, end))


def open_journal(log_dir: Path, logs: dict[int, Log], committer: GroupCommitter) -> None:
    """Restore what the journal holds and the partitions lack, make it durable in them, and start the
    journal over; the committer's rounds use it only under the fsync-per-message policy."""
    journal = Journal(log_dir)
    if any(path.stat().st_size for path in journal.paths):
        restored = journal.recover(logs)
        for lg in logs.values():
            lg.write_pending()
        err = syncfs_errno(log_dir)
        if err:
            journal.close()
            raise StorageError(f"syncfs of {log_dir} failed after reading the offsets journal: {os.strerror(err)}")
        if journal.damaged:  # the lines above say what and how much; start-up goes on (docs/operations.md)
            log.error("offsets journal read: %d batches restored, but it was damaged where it had been synced: "
                      "acknowledged commits are lost, and their groups go back to older offsets", restored)
        else:
            log.info("offsets journal read: %d batches restored", restored)
    journal.reset(prefill=committer.synchronous)
    if not committer.synchronous:
        journal.close()
        return
    for p, lg in logs.items():
        lg.journal_partition = p
    committer.journal = journal


class Loader:
    """Walks and replays every shard once; ``loaded()`` is called for each shard that loaded."""

    def __init__(self, topic: str, replay: Replay, loaded: Callable[[Shard], None], now: Callable[[], int]) -> None:
        self.topic = topic
        self.replay = replay
        self.loaded = loaded
        self.now = now
        self.gate: asyncio.Event | None = None  # tests hold loading here
        self.seconds: float | None = None
        self.records = 0
        self._walk_helpers: asyncio.Future[WalkHelpers | None] | None = None

    def start_helpers(self, loop: asyncio.AbstractEventLoop, count: int, stored_bytes: int) -> None:
        """Start walk helper processes (while the segments are scanned) if the store is big enough."""
        if count > 0 and stored_bytes >= WALK_HELPERS_FROM_BYTES:
            self._walk_helpers = loop.run_in_executor(None, WalkHelpers.spawn, count)

    async def load_all(self, shards: dict[int, Shard]) -> None:
        started = time.perf_counter()
        try:
            if self.gate is not None:
                await self.gate.wait()
            for p in sorted(shards):
                try:
                    await self.load(shards[p])
                except Exception as exc:  # noqa: BLE001 - one partition's damage must not stop the others
                    shards[p].failed = f"{type(exc).__name__}: {exc}"
                    log.error(
                        "failed to load %s-%d (%s): its groups answer NOT_COORDINATOR until the store is repaired and the broker restarted",
                        self.topic, p, shards[p].failed,
                    )
        finally:
            await self.close_helpers()
        self.seconds = time.perf_counter() - started
        log.info("loaded %d offsets partitions (%d records) in %.0f ms", len(shards), self.records, self.seconds * 1000)

    async def load(self, shard: Shard) -> None:
        """Replay the partition through the same rules the runtime applies (see the module's text)."""
        txn = TxnWalk()
        latest = await self._collect(shard, txn)
        pending = self.replay(shard.state, latest, txn, self.now(), shard.partition)
        if txn.batches:
            log.info(
                "%s-%d: %d transactional batches replayed, %d offsets of open transactions pending",
                self.topic, shard.partition, txn.batches, pending,
            )
        shard.loaded = True
        self.loaded(shard)

    async def _collect(self, shard: Shard, txn: TxnWalk) -> dict[bytes, bytes | None]:
        """The last value of every key in the partition. A big partition's later chunks go to the
        walk helpers (storage/walkhelper.py) while this process walks the first; their answers are
        laid over its own in order, as one walk would have. A helper that fails is given up for the
        rest of the load, and its part is walked here; so is a part holding transactional batches
        (``txn`` follows transactions across the whole walk)."""
        latest: dict[bytes, bytes | None] = {}
        helpers = await self._ready_helpers()
        ranges = shard.log.chunk_ranges() if helpers is not None else None
        if ranges is None:
            await self._walk_here(shard.log.chunks(), latest, txn)
            return latest
        if helpers is None or sum(e - s for _, s, e in ranges) < SHARE_WALK_FROM_BYTES:
            await self._walk_here(_reads(ranges), latest, txn)
            return latest
        mine, *theirs = split_by_bytes(ranges, helpers.count + 1)
        try:
            helpers.send([[(str(seg.path), s, e) for seg, s, e in part] for part in theirs])
        except OSError as exc:
            await self._give_up_helpers(shard, exc)
            mine, theirs = ranges, []
        await self._walk_here(_reads(mine), latest, txn)
        if not theirs:
            return latest
        try:
            answers = await asyncio.to_thread(helpers.receive)
        except OSError as exc:
            await self._give_up_helpers(shard, exc)
            await self._walk_here(_reads([r for part in theirs for r in part]), latest, txn)
            return latest
        for part, answer in zip(theirs, answers, strict=True):
            if answer is None:  # transactional batches: walked here, in order
                await self._walk_here(_reads(part), latest, txn)
                continue
            seen, found = answer
            latest.update(found)
            self.records += seen
        return latest

    async def _ready_helpers(self) -> WalkHelpers | None:
        if self._walk_helpers is None:
            return None
        try:
            return await self._walk_helpers
        except Exception as exc:  # noqa: BLE001 - the broker walks alone then
            log.warning("no start-up walk helpers (%s): the broker walks alone", exc)
            self._walk_helpers = None
            return None

    async def _give_up_helpers(self, shard: Shard, exc: OSError) -> None:
        log.warning("%s-%d: %s; walking the rest of the store in the broker", self.topic, shard.partition, exc)
        await self.close_helpers()

    async def close_helpers(self) -> None:
        if self._walk_helpers is None:
            return
        helpers, self._walk_helpers = self._walk_helpers, None
        with contextlib.suppress(Exception):
            if (ready := await helpers) is not None:
                await asyncio.to_thread(ready.close)

    async def _walk_here(self, chunks: Iterable[memoryview], latest: dict[bytes, bytes | None], txn: TxnWalk) -> None:
        count = 0
        for chunk in chunks:
            count += collect_latest(chunk, latest, txn)
            if count >= 200_000:
                self.records += count
                count = 0
                await asyncio.sleep(0)  # let other partitions' clients be answered meanwhile
        self.records += count


# The once-a-second write-out runs in slices: every 1/_WRITE_OUT_SLICES s, the partitions whose number
# is that slice's modulo. All of them at once, under load, held the event loop 4-8 ms (44 pwritevs).
_WRITE_OUT_SLICES = 10


def write_out_slice(shards: Iterable[Shard], tick: int, topic: str = OFFSETS_TOPIC) -> None:
    """Write out what waits in this tick's slice of the journaled partitions: each partition's file is
    current within a second, and no loop turn writes more than a tenth of them."""
    turn = tick % _WRITE_OUT_SLICES
    for shard in shards:
        if shard.partition % _WRITE_OUT_SLICES == turn and shard.log.unwritten_batches:
            try:
                shard.log.write_pending()
            except StorageError as exc:
                log.error("writing %s-%d out failed: %s", topic, shard.partition, exc)
