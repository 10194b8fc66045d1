"""The PostgreSQL engine's one database connection and its lock.

psycopg 3's synchronous API: the seam's partition methods are synchronous and called on the event loop, so
the few that must reach the database at once (a cold read, DeleteRecords, a metadata put) call it directly
(some from worker threads), and the group-commit rounds (durability.py) are sent on the same connection
from the event loop and awaited there (``round``: one prepared statement through libpq, prepared.py). One
lock orders them: a synchronous call first waits for a round in flight to commit, so no write ever
overtakes another.

Every other call is one transaction sent in psycopg's pipeline mode: ``BEGIN``, the statements, ``COMMIT``
and one Sync go out together, so a transaction whose statements need no answer before the commit is one
round trip instead of three; a statement whose rows the work reads (``fetchone``) costs one more, as it
must. The connection is in autocommit mode so that psycopg does not open the
transaction on its own (it would wait for the BEGIN's answer); the BEGIN and COMMIT are ours. A failure
anywhere rolls the whole transaction back: PostgreSQL skips the statements after an error up to the Sync,
and the transaction left failed is ended with a ROLLBACK before the connection is used again. Migrations
(several statements in one string, which only the simple protocol takes) run outside the pipeline.

A lost connection is reopened by the next call; while the database is unreachable, calls within a second
of the last failure fail at once (StorageError) instead of each waiting for a connect timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import struct
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import psycopg
from psycopg import conninfo, pq

from groupd.storage.errors import StorageError
from groupd.storage.postgresql.binary_arrays import int8_array
from groupd.storage.postgresql.fencing import Fence
from groupd.storage.postgresql.prepared import NO_SUCH_STATEMENT, Prepared, collect, run_prepared, send_prepared

T = TypeVar("T")

PASSWORD_ENV = "GROUPD_POSTGRESQL_PASSWORD"
RETRY_AFTER_FAILURE_S = 1.0
_INT4 = struct.Struct(">i")
CONNECT_TIMEOUT_S = 5


def resolve_url(url: str, password_file: str | None = None) -> str:
    """The libpq URL with its password from ``password_file`` or the GROUPD_POSTGRESQL_PASSWORD environment
    variable when the URL has none, so the password stays out of ``ps`` and configuration files.
    StorageError for a URL libpq cannot parse."""
    if not url:
        raise StorageError("storage.postgresql.url is empty: give a libpq URL, postgresql://user@host:port/db")
    try:
        params = conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise StorageError(f"storage.postgresql.url is not a libpq URL: {exc}".strip()) from None
    if "password" not in params:
        if password_file:
            try:
                params["password"] = Path(password_file).read_text().strip()
            except OSError as exc:
                raise StorageError(f"storage.postgresql.password.file {password_file}: {exc.strerror}") from None
        elif os.environ.get(PASSWORD_ENV):
            params["password"] = os.environ[PASSWORD_ENV]
    params.setdefault("connect_timeout", str(CONNECT_TIMEOUT_S))
    params.setdefault("application_name", "groupd")
    return conninfo.make_conninfo("", **params)


def describe(url: str) -> str:
    """Where the URL points, without its password (for messages)."""
    try:
        params = conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "?"
    host = params.get("host", "localhost")
    return f"{params.get('user', '')}@{host}:{params.get('port', 5432)}/{params.get('dbname', '')}"


class Database:
    """One connection, reopened after a failure, used under ``lock`` (see the module's text)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.lock = threading.Lock()
        self._conn: psycopg.Connection | None = None
        self._failed_at = 0.0
        self.fence: Fence | None = None  # in a cluster only (fencing.py): every write checks its lease epoch
        # the statements prepared on the connection (prepared.py), which a new connection has not
        self._prepared_on: psycopg.Connection | None = None
        self._prepared: set[bytes] = set()
        self._inflight: _InFlight | None = None  # the group-commit round sent and not yet answered (round)

    def connection(self) -> psycopg.Connection:
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        if time.monotonic() - self._failed_at < RETRY_AFTER_FAILURE_S:
            raise StorageError(f"PostgreSQL at {describe(self.url)} is unreachable (retrying)")
        try:
            self._conn = psycopg.connect(self.url, autocommit=True)
        except psycopg.Error as exc:
            self._failed_at = time.monotonic()
            raise StorageError(f"cannot connect to PostgreSQL at {describe(self.url)}: {_first_line(exc)}") from None
        return self._conn

    def run(
        self,
        work: Callable[[psycopg.Connection], T],
        what: str,
        fenced: Iterable[int] = (),
        *,
        pipelined: bool = True,
    ) -> T:
        """``work`` in one transaction, committed before this returns (synchronous_commit as configured in
        the database: on, by default); StorageError naming ``what`` when it failed, rolled back. A write
        names the partitions it writes in ``fenced``: in a cluster their lease epochs are checked first, in
        the same transaction (fencing.py). ``pipelined`` False sends each statement on its own, for SQL the
        pipeline refuses (several statements in one string)."""
        with self.lock:
            self._settle()
            conn = self.connection()
            try:
                return self._transaction(conn, work, list(fenced), pipelined)
            except psycopg.Error as exc:
                raise self._failure(conn, exc, what) from None

    async def round(
        self,
        statement: Prepared,
        params: Sequence[bytes],
        what: str,
        fenced: Iterable[int] = (),
        fenced_statement: Prepared | None = None,
    ) -> None:
        """One prepared write statement with binary parameters (prepared.py), its own transaction
        (autocommit: no BEGIN, COMMIT nor pipeline), committed when this returns: one round trip and the
        least work on this side, for a group-commit round. In a cluster, with partitions in ``fenced``,
        ``fenced_statement`` runs instead: the same behind groupd_fence() (fencing.py), whose three
        arguments come before ``params``.

        Sent from the event loop and awaited there (the socket watched by the loop, no thread): a hand-off
        to a thread per round cost more than the statement, and on busy cores its wake-up could leave the
        loop's thread descheduled holding the GIL. Any other use of the connection, from any thread, first
        waits for the round in flight to finish (``_settle``), so no write overtakes another."""
        while self._inflight is not None:  # another durability's round (they share the connection)
            with contextlib.suppress(BaseException):
                await asyncio.shield(self._inflight.done)
        loop = asyncio.get_running_loop()
        with self.lock:
            self._settle()
            conn = self.connection()
            check = self.fence.arguments(list(fenced)) if self.fence is not None else None
            if check is not None and fenced_statement is not None:
                pids, epochs, writer = check
                statement = fenced_statement
                params = (int8_array(pids), int8_array(epochs), _INT4.pack(writer), *params)
            if self._prepared_on is not conn:
                self._prepared_on, self._prepared = conn, set()
            try:
                send_prepared(conn, statement, params, self._prepared)
            except psycopg.Error as exc:
                raise self._failure(conn, exc, what) from None
            flight = _InFlight(
                conn, statement, params, what, loop, loop.create_future(), conn.pgconn.socket, threading.get_ident()
            )
            self._inflight = flight
        loop.add_reader(flight.fd, self._readable, flight)
        await flight.done

    def _readable(self, flight: _InFlight) -> None:
        """The round's socket is readable (on the loop): its answer is whole, or more is to come."""
        with self.lock:
            if self._inflight is flight:  # else a synchronous caller finished it meanwhile (_settle)
                self._answered(flight)

    def _settle(self) -> None:
        """With ``lock`` held, before any other use of the connection: wait for the round in flight, if any,
        to be answered (blocking), and hand its outcome to its loop."""
        flight = self._inflight
        if flight is None:
            return
        while not self._answered(flight):
            try:
                select.select([flight.fd], [], [])
            except OSError as exc:
                self._finished(flight, self._failure(flight.conn, psycopg.OperationalError(str(exc)), flight.what))
                return

    def _answered(self, flight: _InFlight) -> bool:
        """With ``lock`` held: read what arrived of the round's answer; once it is whole (or the connection
        failed) the round is finished with its outcome and True returned."""
        try:
            flight.conn.pgconn.consume_input()
            if flight.conn.pgconn.is_busy():
                return False
            error = collect(flight.conn)
            if error is not None and error.sqlstate == NO_SUCH_STATEMENT:
                # deallocated meanwhile (psycopg deallocates every prepared statement after a ROLLBACK):
                # refused before it ran; run_prepared prepares it again and runs it, here and now
                run_prepared(flight.conn, flight.statement, flight.params, self._prepared)
                error = None
        except psycopg.Error as exc:
            error = exc
        self._finished(flight, None if error is None else self._failure(flight.conn, error, flight.what))
        return True

    def _finished(self, flight: _InFlight, outcome: StorageError | None) -> None:
        """With ``lock`` held: the round is over; its waiter and the loop's watch of the socket are told on
        the loop: at once when this is the loop's thread (the usual case, ``_readable``), else through
        call_soon_threadsafe (a synchronous caller settled it), whose wake-up of the loop costs a write, a
        read and one more turn of the loop."""
        self._inflight = None
        if threading.get_ident() == flight.thread:
            _deliver(flight, outcome)
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            flight.loop.call_soon_threadsafe(_deliver, flight, outcome)

    def _failure(self, conn: psycopg.Connection, exc: psycopg.Error, what: str) -> StorageError:
        """The StorageError (Fenced for groupd_fence()'s refusal) that ``exc``, ending ``what``, stands for; a
        connection it broke is reopened by a later call."""
        if self.fence is not None and (refused := self.fence.refused(exc)) is not None:
            return refused
        if conn.broken or conn.closed:
            self._failed_at = time.monotonic()
        return StorageError(f"{what} failed in PostgreSQL: {_first_line(exc)}")

    def read(self, work: Callable[[psycopg.Connection], T], what: str) -> T:
        """``work``, reads only, each statement on its own (autocommit: its own implicit transaction) without
        BEGIN or COMMIT, so a read of one statement is one round trip, not two; not pipelined either (the
        pipeline's end is one more Sync, a round trip of its own, after the rows were read). StorageError
        naming ``what`` when it failed."""
        with self.lock:
            self._settle()
            conn = self.connection()
            try:
                return self._transaction(conn, work, [], False, explicit=False)
            except psycopg.Error as exc:
                raise self._failure(conn, exc, what) from None

    def _transaction(
        self,
        conn: psycopg.Connection,
        work: Callable[[psycopg.Connection], T],
        fenced: list[int],
        pipelined: bool,
        explicit: bool = True,
    ) -> T:
        try:
            with conn.pipeline() if pipelined else contextlib.nullcontext():
                if explicit:
                    conn.execute("BEGIN")
                if self.fence is not None and explicit:
                    self.fence.check(conn, fenced)
                result = work(conn)
                if explicit:
                    conn.execute("COMMIT")
            return result
        except BaseException:
            _roll_back(conn)
            raise

    def close(self) -> None:
        with self.lock:
            self._settle()
            if self._conn is not None:
                self._conn.close()
                self._conn = None


@dataclass
class _InFlight:
    """A round sent from ``loop``, whose answer is awaited on ``done``."""

    conn: psycopg.Connection
    statement: Prepared
    params: Sequence[bytes]
    what: str
    loop: asyncio.AbstractEventLoop
    done: asyncio.Future[None]
    fd: int  # the connection's socket, kept: a broken connection no longer names it
    thread: int  # the loop's thread (threading.get_ident)


def _deliver(flight: _InFlight, outcome: StorageError | None) -> None:
    """On the round's loop: stop watching its socket, answer its waiter."""
    with contextlib.suppress(OSError, ValueError):  # the connection's socket is gone already
        flight.loop.remove_reader(flight.fd)
    if flight.done.done():
        return
    if outcome is None:
        flight.done.set_result(None)
    else:
        flight.done.set_exception(outcome)


def _roll_back(conn: psycopg.Connection) -> None:
    """End the transaction a failure left open or failed (nothing of it is kept); a connection that cannot
    is broken and reopened by the next call."""
    if conn.broken or conn.closed or conn.info.transaction_status == pq.TransactionStatus.IDLE:
        return
    with contextlib.suppress(psycopg.Error):
        conn.execute("ROLLBACK")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
