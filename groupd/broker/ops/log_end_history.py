"""Log-end history: every ``log.end.history.interval.ms`` the broker appends the log start and end
offsets of each data partition that moved to ``<log.dirs>/log-end-history``, a log in Kafka's batch format
written with groupd/storage/ as it is.

Why: consumer lag over time (and Burrow's WARN, "lag never decreased") needs the log end as it was when
each offset was committed; the offsets store holds committed offsets only. With this log the pipeline
reads both from log.dirs alone, no broker needed.

The directory name has no ``-<partition>`` suffix, so neither the broker's topic registry nor the
pipeline's data-partition scan takes it for a topic. One batch per tick, its timestamp the tick's wall
time; one record per partition whose offsets changed since the last tick (all of them at the first tick
after a start). Records are a small versioned format owned by this module (Kafka has no such record):
key = int16 version 0, int16-length UTF-8 topic, int32 partition; value = int16 version 0, int64 log
start offset, int64 log end offset (the high watermark: what a consumer can reach). Old segments go by
time retention (``log.end.history.retention.ms``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from groupd.clock import wall_ms
from groupd.storage.engine import LogConfig, PartitionLog, StorageEngine
from groupd.storage.errors import DiskFull, StorageError

if TYPE_CHECKING:
    from groupd.broker.app import Broker

log = logging.getLogger("groupd.log_end_history")

DIRECTORY = "log-end-history"
_KEY_HEAD = struct.Struct(">hh")
_PARTITION = struct.Struct(">i")
_VALUE = struct.Struct(">hqq")
SEGMENT_MS = 3_600_000


def encode(topic: str, partition: int, log_start: int, log_end: int) -> tuple[bytes, bytes]:
    name = topic.encode()
    return _KEY_HEAD.pack(0, len(name)) + name + _PARTITION.pack(partition), _VALUE.pack(0, log_start, log_end)


def decode(key: bytes, value: bytes) -> tuple[str, int, int, int] | None:
    """(topic, partition, log start, log end), or None for a version this reader does not know."""
    if len(key) < _KEY_HEAD.size or len(value) != _VALUE.size:
        return None
    version, n = _KEY_HEAD.unpack_from(key, 0)
    if version != 0 or len(key) != _KEY_HEAD.size + n + _PARTITION.size:
        return None
    value_version, start, end = _VALUE.unpack(value)
    if value_version != 0:
        return None
    topic = bytes(key[_KEY_HEAD.size : _KEY_HEAD.size + n]).decode()
    return topic, _PARTITION.unpack_from(key, _KEY_HEAD.size + n)[0], start, end


class LogEndRecorder:
    """The broker service: samples ``rows()`` (topic, partition, log start, log end) at each tick and
    appends what changed. ``tick`` is also called directly by tests with a manual clock."""

    def __init__(self, storage: StorageEngine, interval_ms: int, retention_ms: int,
                 rows: Callable[[], list[tuple[str, int, int, int]]]) -> None:
        self.storage = storage
        self.interval_ms = interval_ms
        self.config = LogConfig(segment_ms=SEGMENT_MS, retention_ms=retention_ms)
        self.rows = rows
        self.log: PartitionLog | None = None
        self.last: dict[tuple[str, int], tuple[int, int]] = {}
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        if self.interval_ms <= 0:
            return
        self.log = self.storage.open_broker_log(DIRECTORY, self.config)
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.log is not None:
            with contextlib.suppress(StorageError, OSError):
                self.tick(wall_ms())
                self.log.flush()
            self.log.close()
            self.log = None

    async def _loop(self) -> None:
        log_ = self.log  # start() opened it before it started this task; stop() cancels the task first
        assert log_ is not None
        while True:
            await asyncio.sleep(self.interval_ms / 1000)
            try:
                self.tick(wall_ms())
                await asyncio.to_thread(log_.flush)
            except DiskFull:
                pass  # the log said so (one line per 10 s); the next tick tries again
            except Exception:
                log.exception("recording log-end history failed")

    def tick(self, now_ms: int) -> int:
        """Append one batch with every partition whose offsets changed; returns how many records."""
        if self.log is None:
            self.log = self.storage.open_broker_log(DIRECTORY, self.config)
        records = []
        seen = set()
        for topic, partition, start, end in self.rows():
            key = (topic, partition)
            seen.add(key)
            if self.last.get(key) != (start, end):
                self.last[key] = (start, end)
                records.append(encode(topic, partition, start, end))
        for gone in self.last.keys() - seen:  # a deleted topic's partitions
            del self.last[gone]
        if records:
            self.log.append_records(records, now_ms)
        self.log.apply_retention(now_ms)
        return len(records)


def for_broker(broker: Broker) -> LogEndRecorder:
    """The recorder of a Broker, sampling its PartitionManager (log start and high watermark)."""
    cfg = broker.config
    return LogEndRecorder(
        broker.storage, cfg["log.end.history.interval.ms"], cfg["log.end.history.retention.ms"],
        lambda: [(t, p, start, hw) for t, p, start, hw, _size in broker.partitions.metrics_rows()],
    )

