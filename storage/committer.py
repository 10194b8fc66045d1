"""Group commit: every writer waits for an fsync, but all writers waiting meanwhile share one.

With the default policy (log.flush.interval.messages=1) a write is acknowledged only after an fsync
that covers it; callers that arrive while an fsync runs share the next one, so 64 concurrent committers
cost a handful of fsyncs, not 64. Larger intervals trade durability for speed as in Kafka: callers
return at once and a flush runs when the message count or the time threshold is crossed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from storage.errors import StorageError
from storage.log import Log, flush_many

logger = logging.getLogger("groupd.storage")


@dataclass
class _Pending:
    waiters: list[asyncio.Future] = field(default_factory=list)
    running: bool = False
    logs: dict[int, Log] = field(default_factory=dict)  # logs written by this round's waiters


class GroupCommitter:
    def __init__(self, *, flush_interval_messages: int = 1, flush_interval_ms: int = 0, shared: bool = False) -> None:
        # shared: one round for every log (one syncfs for all of them where the OS has it), for callers
        # that spread writes over many logs, like the 50 offsets partitions
        self.shared = shared
        self.flush_interval_messages = flush_interval_messages
        self.flush_interval_ms = flush_interval_ms
        self._pending: dict[int, _Pending] = {}
        self._last_flush: dict[int, float] = {}
        self._background: set[asyncio.Task] = set()
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self._logs: dict[int, Log] = {}  # every log seen, so close() can flush what is pending
        self.fsyncs = 0
        self.waiters_total = 0
        self.last_batch_size = 0
        self.last_fsync_seconds = 0.0
        self.observers: list = []  # callables (seconds, waiters) for metrics

    @property
    def synchronous(self) -> bool:
        return self.flush_interval_messages <= 1

    async def durable(self, log: Log) -> None:
        """Return once everything appended to ``log`` before this call is durable under the policy."""
        self._logs[id(log)] = log
        if not self.synchronous:
            self._maybe_flush_later(log)
            return
        loop = asyncio.get_running_loop()
        pending = self._pending.setdefault(0 if self.shared else id(log), _Pending())
        fut = loop.create_future()
        pending.waiters.append(fut)
        pending.logs[id(log)] = log
        self.waiters_total += 1
        if not pending.running:
            pending.running = True
            task = loop.create_task(self._flush_rounds(log, pending))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        await fut

    async def _flush_rounds(self, log: Log, pending: _Pending) -> None:
        loop = asyncio.get_running_loop()
        try:
            while pending.waiters:
                waiters, pending.waiters = pending.waiters, []
                logs, pending.logs = list(pending.logs.values()) or [log], {}
                started = time.perf_counter()
                try:
                    await loop.run_in_executor(None, flush_many, logs)
                except Exception as exc:  # StorageError or anything the thread raised
                    if isinstance(exc, StorageError):
                        err = exc
                    else:
                        err = StorageError(f"flush failed: {exc}")
                        err.__cause__ = exc
                    for w in waiters:
                        if not w.done():
                            w.set_exception(err)
                    continue
                elapsed = time.perf_counter() - started
                self.fsyncs += 1
                self.last_batch_size = len(waiters)
                self.last_fsync_seconds = elapsed
                for observer in self.observers:
                    observer(elapsed, len(waiters))
                for w in waiters:
                    if not w.done():
                        w.set_result(None)
        finally:
            pending.running = False

    def _maybe_flush_later(self, log: Log) -> None:
        now = time.monotonic()
        last = self._last_flush.setdefault(id(log), now)
        due_count = log.unflushed_messages >= self.flush_interval_messages
        due_time = self.flush_interval_ms > 0 and (now - last) * 1000 >= self.flush_interval_ms
        if due_count or due_time:
            self._flush_in_background(log)
        elif self.flush_interval_ms > 0 and id(log) not in self._timers:
            # log.flush.interval.ms bounds how long an append stays unflushed even if no call follows
            delay = max(0.0, self.flush_interval_ms / 1000 - (now - last))
            self._timers[id(log)] = asyncio.get_running_loop().call_later(delay, self._timer_fired, log)

    def _timer_fired(self, log: Log) -> None:
        self._timers.pop(id(log), None)
        if log.unflushed_messages > 0:
            self._flush_in_background(log)

    def _flush_in_background(self, log: Log) -> None:
        timer = self._timers.pop(id(log), None)
        if timer is not None:
            timer.cancel()
        pending = self._pending.setdefault(id(log), _Pending())
        if pending.running:
            return
        self._last_flush[id(log)] = time.monotonic()
        pending.running = True
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())
        pending.waiters.append(fut)
        task = loop.create_task(self._flush_rounds(log, pending))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        # with a flush interval above one message, appends may still be waiting for their fsync
        loop = asyncio.get_running_loop()
        for lg in list(self._logs.values()):
            if lg.dirty:
                try:
                    await loop.run_in_executor(None, lg.flush)
                except StorageError as exc:
                    logger.error("final flush of %s failed: %s", getattr(lg, "directory", lg), exc)
        self._logs.clear()
