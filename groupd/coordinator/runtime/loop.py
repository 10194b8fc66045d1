"""The runtime's ports on the event loop: wake-ups are loop timers, the log is the offsets partitions in
the storage engine, and durability is the engine's group-commit rounds (storage/engine.py Durability)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from groupd.coordinator import errors as E
from groupd.coordinator.records import encode_key, encode_value
from groupd.coordinator.runtime.runtime import CoordinatorRuntime, Shard, WriteFailed
from groupd.protocol.topic_names import OFFSETS_TOPIC
from groupd.storage.batch import TRANSACTIONAL, build_control_batch
from groupd.storage.engine import Durability
from groupd.storage.errors import RecordTooLarge, StorageError

log = logging.getLogger("groupd.coordinator")


class LoopWakeups:
    """One event-loop timer per shard for its earliest deadline; a due one takes a ``call_soon``."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.runtime: CoordinatorRuntime | None = None  # set once the runtime exists

    def soon(self, shard: Shard) -> None:
        assert self.runtime is not None
        self.loop.call_soon(self.runtime.wake_soon, shard)

    def at(self, shard: Shard, delay_ms: int) -> None:
        assert self.runtime is not None
        if shard.wakeup is not None:
            shard.wakeup.cancel()
        shard.wakeup = self.loop.call_later(delay_ms / 1000, self.runtime.wake, shard)

    def cancel(self, shard: Shard) -> None:
        if shard.wakeup is not None:
            shard.wakeup.cancel()


def write_failed(exc: StorageError, topic: str, partition: int, what: str, logger: logging.Logger = log) -> WriteFailed:
    """A coordinator log's append failure as the runtime's WriteFailed, with its one log line: a record too
    large is the request's own doing (Kafka: RecordTooLargeException, answered -1) and the log is fine;
    any other storage error is the log's. Called from an except clause, so an append that succeeds pays
    nothing."""
    if isinstance(exc, RecordTooLarge):
        logger.warning("%s-%d: a %s record was refused: %s", topic, partition, what, exc)
        return WriteFailed(str(exc), E.MESSAGE_TOO_LARGE)
    logger.error("append to %s-%d failed: %s", topic, partition, exc)
    return WriteFailed(str(exc))


class OffsetsLog:
    """Appends a Result to its shard's ``__consumer_offsets`` partition as Kafka's records: plain
    batches, a producer's transactional batch, or a COMMIT/ABORT marker; the engine's Durability says when
    the appends are durable (the local engine: one shared fsync for every partition's appends of a round)."""

    def __init__(self, committer: Durability, now: Callable[[], int], metrics: Any = None) -> None:
        self.committer = committer
        self.now = now
        self.metrics = metrics
        self.on_append: Callable[[int], None] | None = None  # told each offsets partition appended to

    def append(self, shard: Shard, result: Any) -> None:
        try:
            started = time.perf_counter()
            shard_log = shard.log
            if result.marker is not None:
                producer_id, producer_epoch, commit = result.marker
                shard_log.append(build_control_batch(producer_id, producer_epoch, commit, timestamp_ms=self.now()))
            elif result.producer is not None:
                shard_log.append_records(
                    [(encode_key(k), encode_value(v)) for k, v in result.records], self.now(),
                    producer_id=result.producer[0], producer_epoch=result.producer[1], attributes=TRANSACTIONAL,
                )
            else:
                shard_log.append_records([(encode_key(k), encode_value(v)) for k, v in result.records], self.now())
            if self.metrics is not None:
                self.metrics.store_append(time.perf_counter() - started, len(result.records) or 1)
            if self.on_append is not None:
                self.on_append(shard.partition)
        except StorageError as exc:  # RecordTooLarge is one
            raise write_failed(exc, OFFSETS_TOPIC, shard.partition, "group") from exc

    def when_durable(self, shard: Shard, done: Callable[[BaseException | None], None]) -> bool:
        return self.committer.when_durable(shard.log, done)
