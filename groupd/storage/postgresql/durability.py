"""Group commit in PostgreSQL (storage/engine.py Durability): one transaction per round.

Writers append to their logs on the event loop and ask to be told when the append is durable. A round
takes every waiting batch of the logs its waiters wrote, inserts them all in one transaction (psycopg's
``executemany`` pipelines the inserts: one round trip) in a worker thread, and answers every waiter
when the commit returns. Writers arriving meanwhile wait for the next round, so 64 committers cost a
handful of transactions, not 64. A failed round answers its waiters and the next round's with the
StorageError, and takes the uncommitted batches back out of their logs (log.py): nothing unacknowledged
stays, and the next round starts over against what the database holds.

With a flush interval above one message nothing waits (``synchronous`` False, as Kafka acknowledges
before its periodic flush): the waiting batches are committed every ``flush_interval_ms`` (one second
when it is 0) and at ``close``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psycopg

from groupd.storage.engine import DurableCallback, PartitionLog
from groupd.storage.errors import StorageError
from groupd.storage.postgresql.connection import Database
from groupd.storage.postgresql.log import Entry, PgPartitionLog

logger = logging.getLogger("groupd.storage")


@dataclass
class _Pending:
    future: asyncio.Future[None] | None = None
    callbacks: list[DurableCallback] = field(default_factory=list)
    logs: dict[int, PgPartitionLog] = field(default_factory=dict)
    waiters: int = 0


class PgDurability:
    def __init__(
        self, db: Database, *, flush_interval_messages: int = 1, flush_interval_ms: int = 0, shared: bool = False
    ) -> None:
        self.db = db
        self.shared = shared
        self.flush_interval_messages = flush_interval_messages
        self.flush_interval_ms = flush_interval_ms
        self.observers: list[Callable[[float, int], None]] = []
        self._pending: dict[int, _Pending] = {}
        self._running: dict[int, asyncio.Task[None]] = {}
        self._logs: dict[int, PgPartitionLog] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self.rounds = 0

    @property
    def synchronous(self) -> bool:
        return self.flush_interval_messages <= 1

    def _log(self, log: PartitionLog) -> PgPartitionLog:
        if not isinstance(log, PgPartitionLog):
            raise TypeError("the PostgreSQL engine's durability takes its own logs")
        self._logs[id(log)] = log
        return log

    def _waiter(self, log: PartitionLog) -> _Pending | None:
        lg = self._log(log)
        if not self.synchronous:
            self._flush_later()
            return None
        key = 0 if self.shared else id(lg)
        pending = self._pending.setdefault(key, _Pending())
        pending.logs[id(lg)] = lg
        pending.waiters += 1
        if key not in self._running:
            self._running[key] = asyncio.get_running_loop().create_task(self._rounds(key))
        return pending

    def when_durable(self, log: PartitionLog, callback: DurableCallback) -> bool:
        pending = self._waiter(log)
        if pending is None:
            return False
        pending.callbacks.append(callback)
        return True

    def durable_future(self, log: PartitionLog) -> asyncio.Future[None] | None:
        pending = self._waiter(log)
        if pending is None:
            return None
        if pending.future is None:
            pending.future = asyncio.get_running_loop().create_future()
            pending.future.add_done_callback(_retrieved)
        return pending.future

    async def durable(self, log: PartitionLog) -> None:
        future = self.durable_future(log)
        if future is not None:
            await asyncio.shield(future)

    async def _rounds(self, key: int) -> None:
        """Run rounds for ``key`` while writers wait for one."""
        try:
            while (pending := self._pending.pop(key, None)) is not None:
                await self._round(key, pending)
        finally:
            self._running.pop(key, None)

    async def _round(self, key: int, pending: _Pending) -> None:
        logs = list(pending.logs.values())
        work = [(lg, *_taken(lg)) for lg in logs]
        started = time.perf_counter()
        error: StorageError | None = None
        if any(entries or repair is not None for _lg, entries, _end, _gen, repair in work):
            try:
                await asyncio.to_thread(self.db.run, lambda conn: _write(conn, work), "a group commit")
            except StorageError as exc:
                error = exc
        else:  # what they wait for is in a round under way (a flush's): it commits before the lock is ours
            with contextlib.suppress(StorageError):
                await asyncio.to_thread(self.db.run, lambda conn: None, "a group commit")
        self.rounds += 1
        if error is None:
            for lg, _entries, end, generation, _repair in work:
                lg.committed(end, generation)
        else:
            logger.error("a PostgreSQL group commit failed: %s", error)
            # whoever waits for the next round waits for batches that leave the log now: tell them too
            following = self._pending.pop(key, None)
            for lg, _entries, _end, generation, _repair in work:
                lg.lost(generation)
            if following is not None:
                for lg in following.logs.values():
                    lg.lost(lg.generation)
                _answer(following, error)
        _answer(pending, error)
        seconds = time.perf_counter() - started
        for observe in self.observers:
            observe(seconds, pending.waiters)

    def _flush_later(self) -> None:
        if self._timer is None and not self._closed:
            delay = (self.flush_interval_ms or 1000) / 1000
            self._timer = asyncio.get_running_loop().call_later(delay, self._periodic)

    def _periodic(self) -> None:
        self._timer = None
        asyncio.get_running_loop().create_task(self._flush_all())

    async def _flush_all(self) -> None:
        """One round over every log seen (the periodic flush and ``close``)."""
        logs = {key: lg for key, lg in self._logs.items() if not lg.failed}
        if logs:
            await self._round(-1, _Pending(logs=logs))

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)
        await self._flush_all()


_Work = tuple[PgPartitionLog, list[Entry], int, int, int | None]


def _taken(lg: PgPartitionLog) -> tuple[list[Entry], int, int, int | None]:
    """A log's part of a round: its waiting batches, the end and generation they reach, where to repair."""
    repair = lg.repair_from()
    return lg.take(), lg.log_end_offset, lg.generation, repair


def _write(conn: psycopg.Connection, work: list[_Work]) -> None:
    for lg, entries, _end, _generation, repair in work:
        lg.write_rows(conn, entries, repair)


def _answer(pending: _Pending, error: StorageError | None) -> None:
    for callback in pending.callbacks:
        try:
            callback(error)
        except Exception:  # noqa: BLE001 - one waiter's bug must not keep the others waiting
            logger.exception("a durability callback failed")
    if pending.future is not None and not pending.future.done():
        if error is None:
            pending.future.set_result(None)
        else:
            pending.future.set_exception(error)


def _retrieved(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()  # marks it retrieved: a failed round with no awaiting caller is not an error
