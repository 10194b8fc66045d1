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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from groupd.storage.errors import DiskFull, StorageError
from groupd.storage.journal import Journal
from groupd.storage.log import Log, flush_many, syncfs_errno
from groupd.storage.synchelper import SyncHelper

logger = logging.getLogger("groupd.storage")
# a journaled log's own file is written once this many batches wait (one pwritev each run)
_WRITE_OUT_FROM = 256
# ... by at most this many logs a round: logs filled at one rate come due together, and 44 written out
# at once held the event loop 4-8 ms, and every commit in flight with it; the rest wait a round or two
_WRITE_OUTS_PER_ROUND = 4


@dataclass
class _Pending:
    # every caller waiting for the next round shares one future; it is shielded for coroutine callers,
    # so a cancelled caller never cancels it for the others
    next_round: asyncio.Future | None = None
    # plain callbacks (see when_durable), called with None or the round's StorageError
    callbacks: list[Callable[[StorageError | None], None]] = field(default_factory=list)
    waiters: int = 0
    running: bool = False
    logs: dict[int, Log] = field(default_factory=dict)  # logs written by this round's waiters

    @property
    def wanted(self) -> bool:
        return self.next_round is not None or bool(self.callbacks)


@dataclass
class _Round:
    """One flush round taken from a _Pending: who waits for it and what it covers."""

    log: Log
    fut: asyncio.Future | None
    callbacks: list[Callable[[StorageError | None], None]]
    waiters: int
    logs: list[Log]
    started: float


class GroupCommitter:
    def __init__(
        self, *, flush_interval_messages: int = 1, flush_interval_ms: int = 0, shared: bool = False,
        directory: Path | None = None,
    ) -> None:
        # directory: the file system ``start`` starts the syncfs helper on (the local engine's data dir)
        self.directory = directory
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
        # the offsets store's journal (storage/journal.py): helper rounds fdatasync it instead of a
        # syncfs, and a checkpoint now and then makes the logs' own files durable
        self.journal: Journal | None = None
        self.checkpointing: asyncio.Task | None = None  # the journal's checkpoint syncfs, while it runs

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
        pending = self._waiter(log)
        if pending is None:
            return None
        fut = pending.next_round
        if fut is None:
            fut = pending.next_round = asyncio.get_running_loop().create_future()
            fut.add_done_callback(_retrieved)
        self._enlist(log, pending)
        return fut

    def when_durable(self, log: Log, callback: Callable[[StorageError | None], None]) -> bool:
        """Have ``callback(None)`` called once everything appended to ``log`` before this call is
        durable, or ``callback(error)`` if its round failed; False (and no call) when the policy does
        not wait for a flush.

        Unlike a future's, the callback runs as soon as the round is known to be over, from the code
        that learns it (the syncfs helper's reader): no loop turn between the answer and the caller,
        and under load a turn is long, since it handles every connection's requests."""
        pending = self._waiter(log)
        if pending is None:
            return False
        pending.callbacks.append(callback)
        self._enlist(log, pending)
        return True

    def _waiter(self, log: Log) -> _Pending | None:
        self._logs[id(log)] = log
        if not self.synchronous:
            self._maybe_flush_later(log)
            return None
        key = 0 if self.shared else id(log)
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = _Pending()
        return pending

    def _enlist(self, log: Log, pending: _Pending) -> None:
        pending.waiters += 1
        pending.logs[id(log)] = log
        self.waiters_total += 1
        if not pending.running:
            self._start_rounds(log, pending)

    def _start_rounds(self, log: Log, pending: _Pending) -> None:
        pending.running = True
        if self._helper_alive():
            # on the next loop turn, once this turn's writers are all in: they share the round
            asyncio.get_running_loop().call_soon(self._launch, log, pending)
            return
        task = asyncio.get_running_loop().create_task(self._flush_rounds(log, pending))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _helper_alive(self) -> bool:
        return self.helper is not None and self.helper.alive

    @staticmethod
    def _take(log: Log, pending: _Pending) -> _Round:
        r = _Round(
            log,
            pending.next_round,
            pending.callbacks,
            pending.waiters,
            list(pending.logs.values()) or [log],
            time.perf_counter(),
        )
        pending.next_round, pending.callbacks, pending.waiters, pending.logs = None, [], 0, {}
        return r

    # ------------------------------------------------------------ rounds through the syncfs helper

    def _launch(self, log: Log, pending: _Pending) -> None:
        """Write out the round's logs and ask the helper for a syncfs; ``_landed`` finishes it."""
        if not pending.wanted:
            pending.running = False
            return
        if not self._helper_alive():  # gone since: the flush thread takes over
            pending.running = False
            self._start_rounds(log, pending)
            return
        r = self._take(log, pending)
        if self.journal is not None:
            self._launch_journaled(pending, r, self.journal)
            return
        try:
            # each log's share is written out as it is taken (one pwritev for adjacent batches)
            taken = [(lg, t) for lg in r.logs if (t := lg.take_for_sync()) is not None]
        except Exception as exc:  # noqa: BLE001 - StorageError, or anything a write raised
            self._finish(pending, r, _storage_error(exc))
            return
        if not taken:
            self._finish(pending, r, None)
            return
        self.helper.sync_then(lambda outcome: self._landed(pending, r, taken, outcome))  # type: ignore[union-attr]

    def _launch_journaled(self, pending: _Pending, r: _Round, journal: Journal) -> None:
        """Append the round's batches to the journal and have the helper fdatasync it; start a
        checkpoint first when one is due (see storage/journal.py)."""
        entries: list[tuple[int, bytes | bytearray]] = []
        counts: list[tuple[Log, int]] = []
        write_outs = _WRITE_OUTS_PER_ROUND
        try:
            for lg in r.logs:
                bufs, count = lg.take_for_journal()
                counts.append((lg, count))
                part = lg.journal_partition
                entries += [(part, b) for b in bufs]  # type: ignore[misc]
                if write_outs and lg.unwritten_batches >= _WRITE_OUT_FROM:
                    with contextlib.suppress(DiskFull):  # they stay pending, and the journal holds them
                        lg.write_pending()  # the log's own file is written in runs, not per round
                    write_outs -= 1
            if journal.due and self.checkpointing is None:
                self._start_checkpoint(journal)
            journal.append(entries)
        except DiskFull as exc:  # no room for the round: refused, not a failed directory
            self._finish(pending, r, _retracted(r.logs, exc))
            return
        except Exception as exc:  # noqa: BLE001 - StorageError, or anything a write raised
            error = _storage_error(exc)
            journal.sync_failed(error)  # what was taken is in no journal: nothing after it may be acknowledged
            self._finish(pending, r, error)
            return
        if not entries:
            self._finish(pending, r, None)
            return
        self.helper.sync_then(  # type: ignore[union-attr]
            lambda outcome: self._journal_landed(pending, r, counts, outcome),
            journal.current,
        )

    def _start_checkpoint(self, journal: Journal) -> None:
        """Write every journaled log out, switch the journal to its other file, and syncfs from a
        thread while rounds go on in the new file. Until the syncfs is over the old file still holds
        the only durable copy of its batches, so no checkpoint starts before it ends (the new file
        grows past the checkpoint size meanwhile)."""
        taken: list[tuple[Log, tuple]] = []
        try:
            for lg in self._logs.values():
                if lg.journal_partition is not None and (t := lg.take_for_sync()) is not None:
                    taken.append((lg, t))
        except DiskFull:  # no room to write the logs out: no checkpoint yet, the journal grows meanwhile
            for lg, t in taken:
                lg.give_back(t)
            return
        journal.switch()
        task = asyncio.get_running_loop().create_task(self._checkpoint(journal, taken))
        self.checkpointing = task
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _checkpoint(self, journal: Journal, taken: list) -> None:
        try:
            err = await asyncio.get_running_loop().run_in_executor(None, syncfs_errno, journal.directory)
        except Exception as exc:  # noqa: BLE001
            err = getattr(exc, "errno", None) or 5
        if err:
            error = _synced(taken, err) or StorageError(f"syncfs failed: {os.strerror(err)}")
            journal.sync_failed(error)  # rounds fail from now on, as after a failed fsync
            logger.error("offsets journal checkpoint failed: %s", error)
        self.checkpointing = None

    def _journal_landed(self, pending: _Pending, r: _Round, counts: list, outcome: int | OSError) -> None:
        if isinstance(outcome, OSError):  # the helper died: its answer is unknown, so sync from a thread
            task = asyncio.get_running_loop().create_task(self._sync_from_thread(pending, r, []))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            return
        error = None
        if outcome:
            exc = OSError(outcome, os.strerror(outcome))
            self.journal.sync_failed(exc)  # type: ignore[union-attr]
            for lg, count in counts:
                with contextlib.suppress(StorageError):
                    lg._flush_failed(count, exc)
            error = StorageError(f"fdatasync of the offsets journal failed: {exc}")
            error.__cause__ = exc
        self._finish(pending, r, error)

    def _landed(self, pending: _Pending, r: _Round, taken: list, outcome: int | OSError) -> None:
        if isinstance(outcome, OSError):  # the helper died: its answer is unknown, so sync from a thread
            task = asyncio.get_running_loop().create_task(self._sync_from_thread(pending, r, taken))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            return
        self._finish(pending, r, self._synced(taken, outcome))

    def _synced(self, taken: list, err: int) -> StorageError | None:
        error = _synced(taken, err)
        if error is not None and self.journal is not None:
            self.journal.sync_failed(error)  # a failed checkpoint: nothing journaled since is safe either
        return error

    async def _sync_from_thread(self, pending: _Pending, r: _Round, taken: list) -> None:
        directory = self.journal.directory if self.journal is not None else taken[0][0].directory.parent
        try:
            err = await asyncio.get_running_loop().run_in_executor(None, syncfs_errno, directory)
        except Exception as exc:  # noqa: BLE001
            self._finish(pending, r, _storage_error(exc))
            return
        self._finish(pending, r, self._synced(taken, err))

    def _finish(self, pending: _Pending, r: _Round, error: StorageError | None) -> None:
        """Tell the round's waiters; the next round starts on the next loop turn if anyone waits."""
        if error is None:
            self._count(r)
        _tell(r, error)
        if pending.wanted:
            asyncio.get_running_loop().call_soon(self._launch, r.log, pending)
        else:
            pending.running = False

    def _count(self, r: _Round) -> None:
        elapsed = time.perf_counter() - r.started
        self.fsyncs += 1
        self.last_batch_size = r.waiters
        self.last_fsync_seconds = elapsed
        for observer in self.observers:
            observer(elapsed, r.waiters)

    # ------------------------------------------------------------ rounds through the flush thread

    async def _flush_rounds(self, log: Log, pending: _Pending) -> None:
        loop = asyncio.get_running_loop()
        try:
            while pending.wanted:
                r = self._take(log, pending)
                try:
                    for lg in r.logs:
                        if self.journal is not None and lg.journal_partition is not None:
                            lg.take_for_journal()  # synced in the log itself: no journal entry needed
                        lg.write_pending()
                    await loop.run_in_executor(None, flush_many, r.logs)
                except DiskFull as exc:  # no room: the round is refused and its batches leave the logs
                    _tell(r, _retracted(r.logs, exc))
                    continue
                except Exception as exc:  # noqa: BLE001 - StorageError or anything the thread raised
                    _tell(r, _storage_error(exc))
                    continue
                self._count(r)
                _tell(r, None)
        finally:
            pending.running = False

    async def start(self) -> None:
        """The storage seam's start (storage/engine.py Durability): the helper on ``directory``."""
        if self.directory is not None:
            await self.start_helper(self.directory)

    async def start_helper(self, directory: Path) -> None:
        """Shared rounds sync through a helper process (see storage/synchelper.py) where it runs."""
        if self.shared and self.synchronous:
            files = self.journal.paths if self.journal is not None else ()
            self.helper = await SyncHelper.start(directory, files)

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
        for _ in range(500):  # rounds in the syncfs helper's hands are no task: wait for them too
            if not any(p.running for p in self._pending.values()):
                break
            await asyncio.sleep(0.01)
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


def _retracted(logs: list[Log], exc: DiskFull) -> StorageError:
    """A round the disk had no room for: each journaled log takes back the batches the round took (none
    was acknowledged), so that a refused write never turns up later; the waiters learn ``exc``."""
    for lg in logs:
        try:
            lg.retract_taken()
        except StorageError as failed:  # the log went offline instead (and said so)
            return failed
    return exc


def _storage_error(exc: BaseException) -> StorageError:
    if isinstance(exc, StorageError):
        return exc
    err = StorageError(f"flush failed: {exc}")
    err.__cause__ = exc
    return err


def _synced(taken: list, err: int) -> StorageError | None:
    """A syncfs answer for the logs a round took: an errno takes each of them offline."""
    if not err:
        return None
    exc = OSError(err, os.strerror(err))
    for lg, t in taken:
        with contextlib.suppress(StorageError):
            lg._flush_failed(t[2], exc)
    failed = StorageError(f"syncfs failed: {exc}")
    failed.__cause__ = exc
    return failed


def _tell(r: _Round, error: StorageError | None) -> None:
    if r.fut is not None and not r.fut.done():
        if error is None:
            r.fut.set_result(None)
        else:
            r.fut.set_exception(error)
    for callback in r.callbacks:
        try:
            callback(error)
        except Exception:  # one waiter's failure must not keep the answer from the others
            logger.exception("a flush round's waiter failed")


def _retrieved(fut: asyncio.Future) -> None:
    """A failed round is reported to its waiters; asyncio need not log it as never retrieved."""
    if not fut.cancelled():
        fut.exception()
