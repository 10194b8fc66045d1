"""Group commit: many appenders share one fsync per log per round.

With the default policy (every message, no delay) each ``durable`` caller waits for an fsync that began
after its call; callers that arrive while an fsync runs share the next one. The fsync runs in a worker
thread so the event loop keeps accepting appends meanwhile. With larger intervals (Kafka's
``log.flush.interval.messages`` / ``log.flush.interval.ms``) callers return at once and a background
flush runs when a threshold is crossed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Protocol

from storage.errors import StorageError

log = logging.getLogger("groupd.storage")


class Flushable(Protocol):
    """What the committer needs of a log (``storage.log.Log`` or a test double)."""

    @property
    def unflushed_messages(self) -> int: ...

    def flush(self) -> None: ...


@dataclass
class _LogState:
    next_round: asyncio.Future[None] | None = None  # shared by every caller waiting for the next fsync
    next_waiters: int = 0
    task: asyncio.Task[None] | None = None
    timer: asyncio.TimerHandle | None = None


@dataclass
class CommitterStats:
    fsyncs: int = 0
    failures: int = 0
    waiters_total: int = 0
    last_batch_size: int = 0  # waiters released by the last round
    max_batch_size: int = 0
    rounds_by_log: dict[str, int] = field(default_factory=dict)


class GroupCommitter:
    """Batches fsyncs of logs across concurrent ``durable`` callers."""

    def __init__(self, *, flush_interval_messages: int = 1, flush_interval_ms: int = 0) -> None:
        self.flush_interval_messages = flush_interval_messages
        self.flush_interval_ms = flush_interval_ms
        self._states: dict[int, tuple[Flushable, _LogState]] = {}
        self._closed = False
        self.stats = CommitterStats()

    # counters for metrics
    @property
    def fsyncs(self) -> int:
        return self.stats.fsyncs

    @property
    def waiters_total(self) -> int:
        return self.stats.waiters_total

    @property
    def last_batch_size(self) -> int:
        return self.stats.last_batch_size

    @property
    def synchronous(self) -> bool:
        """Whether callers wait for their fsync (the default: every message is flushed)."""
        return self.flush_interval_messages <= 1

    def _state(self, target: Flushable) -> _LogState:
        entry = self._states.get(id(target))
        if entry is None or entry[0] is not target:
            entry = (target, _LogState())
            self._states[id(target)] = entry
        return entry[1]

    async def durable(self, target: Flushable) -> None:
        """Return once what was appended to ``target`` before this call is durable under the policy."""
        if self._closed:
            raise StorageError("group committer is closed")
        state = self._state(target)
        self.stats.waiters_total += 1
        if not self.synchronous:
            self._maybe_background(target, state)
            return
        if state.next_round is None:
            state.next_round = asyncio.get_running_loop().create_future()
        state.next_waiters += 1
        fut = state.next_round
        if state.task is None or state.task.done():
            state.task = asyncio.get_running_loop().create_task(self._rounds(target, state))
        # shield: one caller giving up must not cancel the round others share
        await asyncio.shield(fut)

    async def _rounds(self, target: Flushable, state: _LogState) -> None:
        loop = asyncio.get_running_loop()
        while state.next_round is not None:
            fut, waiters = state.next_round, state.next_waiters
            state.next_round, state.next_waiters = None, 0
            try:
                await loop.run_in_executor(None, target.flush)
            except BaseException as exc:  # noqa: BLE001 - every waiter of the round must hear of it
                self.stats.failures += 1
                if not fut.done():
                    fut.set_exception(exc if isinstance(exc, StorageError) else _wrap(exc))
                    fut.exception()  # mark retrieved: waiters may all have been cancelled
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            self.stats.fsyncs += 1
            self.stats.last_batch_size = waiters
            self.stats.max_batch_size = max(self.stats.max_batch_size, waiters)
            if not fut.done():
                fut.set_result(None)

    def _maybe_background(self, target: Flushable, state: _LogState) -> None:
        if target.unflushed_messages >= self.flush_interval_messages:
            self._start_background(target, state)
        elif self.flush_interval_ms > 0 and state.timer is None and target.unflushed_messages > 0:
            state.timer = asyncio.get_running_loop().call_later(
                self.flush_interval_ms / 1000, self._timer_fired, target, state
            )

    def _timer_fired(self, target: Flushable, state: _LogState) -> None:
        state.timer = None
        if not self._closed:
            self._start_background(target, state)

    def _start_background(self, target: Flushable, state: _LogState) -> None:
        if state.timer is not None:
            state.timer.cancel()
            state.timer = None
        if state.next_round is None:
            state.next_round = asyncio.get_running_loop().create_future()
            # nobody awaits background rounds; failures are logged and the log stays offline
            state.next_round.add_done_callback(_log_failure)
        if state.task is None or state.task.done():
            state.task = asyncio.get_running_loop().create_task(self._rounds(target, state))

    async def flush_all(self) -> None:
        """Flush every known log now and wait (raises the first failure after trying them all)."""
        logs = [entry[0] for entry in self._states.values()]
        results = await asyncio.gather(*(self._flush_now(t) for t in logs), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _flush_now(self, target: Flushable) -> None:
        state = self._state(target)
        if state.timer is not None:
            state.timer.cancel()
            state.timer = None
        if state.next_round is None:
            state.next_round = asyncio.get_running_loop().create_future()
        fut = state.next_round
        if state.task is None or state.task.done():
            state.task = asyncio.get_running_loop().create_task(self._rounds(target, state))
        await asyncio.shield(fut)

    def forget(self, target: Flushable) -> None:
        """Stop tracking a log (closed or deleted)."""
        entry = self._states.pop(id(target), None)
        if entry is not None and entry[1].timer is not None:
            entry[1].timer.cancel()

    async def close(self) -> None:
        """Flush everything still pending, then refuse new callers."""
        if self._closed:
            return
        try:
            await self.flush_all()
        finally:
            self._closed = True
            for _, state in self._states.values():
                if state.timer is not None:
                    state.timer.cancel()
                if state.task is not None and not state.task.done():
                    with contextlib.suppress(BaseException):
                        await state.task


def _wrap(exc: BaseException) -> StorageError:
    err = StorageError(f"flush failed: {exc}")
    err.__cause__ = exc
    return err


def _log_failure(fut: asyncio.Future[None]) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.error("background flush failed: %s", fut.exception())
