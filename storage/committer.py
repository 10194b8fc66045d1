"""Group commit: every writer waits for an fsync, but all writers waiting meanwhile share one.

With the default policy (log.flush.interval.messages=1) a write is acknowledged only after an fsync
that covers it; callers that arrive while an fsync runs share the next one, so 64 concurrent committers
cost a handful of fsyncs, not 64. Larger intervals trade durability for speed as in Kafka: callers
return at once and a flush runs when the message count or the time threshold is crossed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from storage.errors import StorageError
from storage.log import Log, flush_many, syncfs_errno
from storage.synchelper import SyncHelper

logger = logging.getLogger("groupd.storage")


@dataclass
class _Pending:
    # every caller waiting for the next round shares one future; it is shielded for coroutine callers,
    # so a cancelled caller never cancels it for the others
    next_round: asyncio.Future | None = None
    waiters: int = 0
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
        self.helper: SyncHelper | None = None

    @property
    def synchronous(self) -> bool:
        return self.flush_interval_messages <= 1

    async def durable(self, log: Log) -> None:
        """Return once everything appended to ``log`` before this call is durable under the policy."""
        fut = self.durable_future(log)
        if fut is not None:
            await asyncio.shield(fut)

    def durable_future(self, log: Log) -> asyncio.Future | None:
        """The future of the flush round that will cover ``log`` as it is now; None when the policy
        does not wait for a flush. Shared by every caller of the round: add callbacks, never cancel it."""
        self._logs[id(log)] = log
        if not self.synchronous:
            self._maybe_flush_later(log)
            return None
        pending = self._pending.get(0 if self.shared else id(log))
        if pending is None:
            pending = self._pending[0 if self.shared else id(log)] = _Pending()
        fut = pending.next_round
        if fut is None:
            fut = pending.next_round = asyncio.get_running_loop().create_future()
            fut.add_done_callback(_retrieved)
        pending.waiters += 1
        pending.logs[id(log)] = log
        self.waiters_total += 1
        if not pending.running:
            self._start_rounds(log, pending)
        return fut

    def _start_rounds(self, log: Log, pending: _Pending) -> None:
        pending.running = True
        task = asyncio.get_running_loop().create_task(self._flush_rounds(log, pending))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _flush_rounds(self, log: Log, pending: _Pending) -> None:
        loop = asyncio.get_running_loop()
        try:
            while pending.next_round is not None:
                fut, pending.next_round = pending.next_round, None
                waiters, pending.waiters = pending.waiters, 0
                logs, pending.logs = list(pending.logs.values()) or [log], {}
                started = time.perf_counter()
                try:
                    for lg in logs:
                        lg.write_pending()
                    if self.helper is not None and self.helper.alive:
                        await self._sync_by_helper(logs)
                    else:
                        await loop.run_in_executor(None, flush_many, logs)
                except Exception as exc:  # StorageError or anything the thread raised
                    if isinstance(exc, StorageError):
                        err = exc
                    else:
                        err = StorageError(f"flush failed: {exc}")
                        err.__cause__ = exc
                    if not fut.done():
                        fut.set_exception(err)
                    continue
                elapsed = time.perf_counter() - started
                self.fsyncs += 1
                self.last_batch_size = waiters
                self.last_fsync_seconds = elapsed
                for observer in self.observers:
                    observer(elapsed, waiters)
                if not fut.done():
                    fut.set_result(None)
        finally:
            pending.running = False

    async def _sync_by_helper(self, logs: list[Log]) -> None:
        taken = [(lg, t) for lg in logs if (t := lg.take_for_sync()) is not None]
        if not taken:
            return
        try:
            err = await self.helper.sync()
        except OSError:  # the helper died: its answer is unknown, so sync again from here
            directory = taken[0][0].directory.parent
            err = await asyncio.get_running_loop().run_in_executor(None, syncfs_errno, directory)
        if err:
            exc = OSError(err, os.strerror(err))
            for lg, t in taken:
                with contextlib.suppress(StorageError):
                    lg._flush_failed(t[2], exc)
            raise StorageError(f"syncfs failed: {exc}")

    async def start_helper(self, directory: Path) -> None:
        """Shared rounds sync through a helper process (see storage/synchelper.py) where it runs."""
        if self.shared and self.synchronous:
            self.helper = await SyncHelper.start(directory)

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
        pending.next_round = asyncio.get_running_loop().create_future()
        pending.next_round.add_done_callback(_retrieved)
        pending.waiters += 1
        self._start_rounds(log, pending)

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
        if self.helper is not None:
            self.helper.close()


def _retrieved(fut: asyncio.Future) -> None:
    """A failed round is reported to its waiters; asyncio need not log it as never retrieved."""
    if not fut.cancelled():
        fut.exception()
