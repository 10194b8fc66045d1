"""Loading the coordinator's partitions at start-up: the walk of each partition by the storage engine's
replay reader (storage/engine.py ReplayReader), replayed through the shard's rules.

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
import logging
import time
from collections.abc import Callable
from typing import Any

from groupd.coordinator.runtime.runtime import Shard
from groupd.storage.batch import TxnWalk
from groupd.storage.engine import ReplayReader

log = logging.getLogger("groupd.coordinator")

# (state, the last value of every key, the walk's transactions, now, partition) -> offsets left pending
Replay = Callable[[Any, dict[bytes, bytes | None], TxnWalk, int, int], int]


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
        self.reader: ReplayReader | None = None  # the storage engine's, set before load_all

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
                        "failed to load %s-%d (%s): its groups answer NOT_COORDINATOR until the store is repaired"
                        " and the broker restarted",
                        self.topic,
                        p,
                        shards[p].failed,
                    )
        finally:
            if self.reader is not None:
                await self.reader.close()
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
                self.topic,
                shard.partition,
                txn.batches,
                pending,
            )
        shard.loaded = True
        self.loaded(shard)

    async def _collect(self, shard: Shard, txn: TxnWalk) -> dict[bytes, bytes | None]:
        """The last value of every key in the partition, as the engine's reader walks it."""
        assert self.reader is not None
        latest: dict[bytes, bytes | None] = {}
        self.records += await self.reader.collect(self.topic, shard.partition, shard.log, latest, txn)
        return latest
