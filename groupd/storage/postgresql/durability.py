"""Group commit in PostgreSQL (storage/engine.py Durability): one statement per round.

Writers append to their logs on the event loop and ask to be told when the append is durable. A round
takes every waiting batch of the logs its waiters wrote, inserts them all in one statement (one INSERT of
every log's rows, its own transaction: one round trip, connection.py's ``round``), sent from the event loop
and awaited there, and answers every waiter when the commit returns. Writers arriving meanwhile wait
for the next round, so 64 committers cost a handful of transactions, not 64. Rounds run one at a time: a
round that finds nothing of a log to write knows every earlier one has settled.

A failed round answers its waiters with the StorageError (never an acknowledgement) and leaves its batches
in their logs, which refuse appends until a retry, every RETRY_S, commits them (log.py says why): once the
database is back, the broker serves again by itself. In a cluster, a round the lease check refused for
some partitions (fencing.py names them) is written again at once without them: each log's waiters are
answered with their own log's outcome.

With a flush interval above one message nothing waits (``synchronous`` False, as Kafka acknowledges
before its periodic flush): the waiting batches are committed every ``flush_interval_ms`` (one second
when it is 0) and at ``close``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from groupd.storage.engine import DurableCallback, PartitionLog
from groupd.storage.errors import StorageError
from groupd.storage.postgresql.binary_arrays import bytea_array, int4_array, int8_array
from groupd.storage.postgresql.connection import Database
from groupd.storage.postgresql.fencing import Fenced
from groupd.storage.postgresql.log import Entry, PgPartitionLog
from groupd.storage.postgresql.schema import ROUND, ROUND_FENCED

logger = logging.getLogger("groupd.storage")

RETRY_S = 0.5


@dataclass
class _Pending:
    # by log (id): its waiters' future and callbacks, answered each with its own log's outcome
    futures: dict[int, asyncio.Future[None]] = field(default_factory=dict)
    callbacks: list[tuple[int, DurableCallback]] = field(default_factory=list)
    logs: dict[int, PgPartitionLog] = field(default_factory=dict)
    waiters: int = 0


# a log's part of a round: its batches, the end and generation they reach
_Work = tuple[PgPartitionLog, list[Entry], int, int]


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
        self._serial = asyncio.Lock()
        self._logs: dict[int, PgPartitionLog] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False
        self.rounds = 0
        self.failed_rounds = 0

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
            self._arm(self.flush_interval_ms / 1000 if self.flush_interval_ms > 0 else 1.0)
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
        pending.callbacks.append((id(log), callback))
        return True

    def durable_future(self, log: PartitionLog) -> asyncio.Future[None] | None:
        pending = self._waiter(log)
        if pending is None:
            return None
        future = pending.futures.get(id(log))
        if future is None:
            future = pending.futures[id(log)] = asyncio.get_running_loop().create_future()
            future.add_done_callback(_retrieved)
        return future

    async def durable(self, log: PartitionLog) -> None:
        future = self.durable_future(log)
        if future is not None:
            await asyncio.shield(future)

    async def _rounds(self, key: int) -> None:
        """Run rounds for ``key`` while writers wait for one."""
        try:
            while (pending := self._pending.pop(key, None)) is not None:
                await self._round(pending)
        finally:
            self._running.pop(key, None)

    async def _round(self, pending: _Pending) -> None:
        async with self._serial:
            started = time.perf_counter()
            work: list[_Work] = [(lg, lg.take(), lg.log_end_offset, lg.generation) for lg in pending.logs.values()]
            errors: dict[int, StorageError] = {}  # by log (id): what its waiters are answered with
            if any(entries for _lg, entries, _end, _gen in work):
                errors = await self._write(work)
            self.rounds += 1
            for lg, _entries, end, generation in work:
                error = errors.get(id(lg))
                if error is None:
                    lg.committed(end, generation)
                else:
                    lg.unwritten(end, generation, error)
            if errors:
                self.failed_rounds += 1
                failed = {str(e) for e in errors.values()}
                logger.error(
                    "a PostgreSQL group commit failed for %d of its %d partitions (%d waiters in the round): %s",
                    len(errors),
                    len(work),
                    pending.waiters,
                    "; ".join(sorted(failed)),
                )
                self._arm(RETRY_S)
        _answer(pending, errors)
        seconds = time.perf_counter() - started
        for observe in self.observers:
            observe(seconds, pending.waiters)

    async def _write(self, work: list[_Work]) -> dict[int, StorageError]:
        """Insert the round's batches; the error of each log (id) whose batches are not committed. When the
        lease check refused some partitions (Fenced, naming them), the others' batches are written again at
        once without them: a lost lease fails its own partition's writes, not the whole node's."""
        try:
            await self._insert(work)
            return {}
        except Fenced as exc:
            refused: dict[int, StorageError] = {id(lg): exc for lg, _e, _end, _gen in work if lg.pid in exc.pids}
            if not refused:
                return {id(w[0]): exc for w in work}
            try:
                await self._insert([w for w in work if id(w[0]) not in refused])
            except StorageError as again:
                return {id(lg): refused.get(id(lg), again) for lg, _entries, _end, _gen in work}
            return refused
        except StorageError as exc:
            return {id(w[0]): exc for w in work}

    async def _insert(self, work: list[_Work]) -> None:
        # in a cluster, the partitions whose lease epochs the statement checks (fencing.py)
        fenced = self.db.fence is not None
        pids = [lg.pid for lg, entries, _end, gen in work if entries and gen == lg.generation] if fenced else []
        params = _parameters(work)
        if params:
            await self.db.round(ROUND, params, "a group commit", pids, ROUND_FENCED)

    def _arm(self, delay: float) -> None:
        """A round of every log with unwritten batches in ``delay`` seconds (retries, periodic flushes)."""
        if self._timer is None and not self._closed:
            self._timer = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        task = asyncio.get_running_loop().create_task(self._flush_all())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _flush_all(self) -> None:
        """One round over every log with batches not yet committed (retries, periodic flushes, close)."""
        logs = {key: lg for key, lg in self._logs.items() if not lg.failed and lg.durable_end < lg.log_end_offset}
        if logs:
            await self._round(_Pending(logs=logs))

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._running or self._background:
            await asyncio.gather(*self._running.values(), *self._background, return_exceptions=True)
        await self._flush_all()


def _parameters(work: list[_Work]) -> list[bytes]:
    """Every log's batches of the round as the six arrays of one INSERT (schema.py's ROUND), in binary,
    whatever the number of logs (a log truncated since its batches were taken writes none: log.py's
    write_rows); empty when none is left."""
    pids: list[int] = []
    bases: list[int] = []
    lasts: list[int] = []
    stamps: list[int] = []
    sizes: list[int] = []
    data: list[bytes | bytearray] = []
    for lg, entries, _end, generation in work:
        if generation != lg.generation:
            continue
        for e in entries:
            pids.append(lg.pid)
            bases.append(e.base)
            lasts.append(e.last)
            stamps.append(e.max_ts)
            sizes.append(len(e.data))
            data.append(e.data)
    if not pids:
        return []
    return [
        int8_array(pids),
        int8_array(bases),
        int8_array(lasts),
        int8_array(stamps),
        int4_array(sizes),
        bytea_array(data),
    ]


def _answer(pending: _Pending, errors: dict[int, StorageError]) -> None:
    for log_id, callback in pending.callbacks:
        try:
            callback(errors.get(log_id))
        except Exception:  # noqa: BLE001 - one waiter's bug must not keep the others waiting
            logger.exception("a durability callback failed")
    for log_id, future in pending.futures.items():
        if future.done():
            continue
        error = errors.get(log_id)
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)


def _retrieved(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()  # marks it retrieved: a failed round with no awaiting caller is not an error
