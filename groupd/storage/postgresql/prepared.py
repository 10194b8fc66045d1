"""Statements prepared once a connection and run through libpq itself, for the group-commit round.

A round is the hot path of every acknowledged write. psycopg's ``execute`` cost about three times what the
statement costs libpq (parameter adaptation, its prepared-statement bookkeeping, its generators and
waits), and sent the integer arrays as text the server parsed again. The round's statement is always the
same, with binary parameters built by binary_arrays.py: it is prepared on a connection the first time it
runs there, then each round is one ``PQsendQueryPrepared`` (Bind, Execute, Sync: one round trip) whose
answer connection.py reads when the event loop sees it (``collect``). A failure is psycopg's error (the
error class of the server's SQLSTATE, its diagnostics intact), so the callers' handling is the same.
"""

from __future__ import annotations

import select
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg
from psycopg import errors, pq


@dataclass(frozen=True)
class Prepared:
    """A statement (``$n`` parameters) and the type oid of each parameter, sent in binary."""

    name: bytes
    sql: bytes
    types: tuple[int, ...]


def run_prepared(conn: psycopg.Connection, statement: Prepared, params: Sequence[bytes], ready: set[bytes]) -> None:
    """Run ``statement`` with ``params`` on ``conn`` (autocommit: its own transaction, committed when this
    returns), preparing it first unless its name is in ``ready`` (the statements prepared on ``conn``; the
    caller keeps one set a connection). psycopg.Error when it failed."""
    pgconn = conn.pgconn
    formats = [1] * len(params)
    _prepare(conn, statement, ready)
    result = pgconn.exec_prepared(statement.name, list(params), param_formats=formats)
    if result.status != pq.ExecStatus.COMMAND_OK and result.error_field(_SQLSTATE) == NO_SUCH_STATEMENT.encode():
        # deallocated meanwhile: psycopg deallocates every prepared statement of its connection after a
        # ROLLBACK (its own cache may be stale then). Refused at the Bind, nothing ran: prepare and run again
        ready.discard(statement.name)
        _prepare(conn, statement, ready)
        result = pgconn.exec_prepared(statement.name, list(params), param_formats=formats)
    _check(conn, result)


_SQLSTATE = pq.DiagnosticField.SQLSTATE
NO_SUCH_STATEMENT = "26000"  # invalid_sql_statement_name


def _prepare(conn: psycopg.Connection, statement: Prepared, ready: set[bytes]) -> None:
    """Prepare ``statement`` on ``conn`` unless its name is in ``ready`` (and add it there)."""
    if statement.name not in ready:
        _check(conn, conn.pgconn.prepare(statement.name, statement.sql, list(statement.types)))
        ready.add(statement.name)


def send_prepared(conn: psycopg.Connection, statement: Prepared, params: Sequence[bytes], ready: set[bytes]) -> None:
    """Send ``statement`` with ``params`` without waiting for its answer (``collect`` reads it once the
    connection is no longer busy), preparing it first (and waiting for that) unless its name is in
    ``ready``. The whole message is flushed before this returns."""
    pgconn = conn.pgconn
    _prepare(conn, statement, ready)
    pgconn.send_query_prepared(statement.name, list(params), param_formats=[1] * len(params))
    while pgconn.flush():  # the socket's buffer was full (a large round): wait until the server reads
        select.select([], [pgconn.socket], [])


def collect(conn: psycopg.Connection) -> psycopg.Error | None:
    """Read every result of the statement sent (the connection is not busy): its error, or None."""
    pgconn = conn.pgconn
    error: psycopg.Error | None = None
    while (result := pgconn.get_result()) is not None:
        if result.status != pq.ExecStatus.COMMAND_OK and error is None:
            error = errors.error_from_result(result, encoding=conn.info.encoding)
    return error


def _check(conn: psycopg.Connection, result: pq.abc.PGresult) -> None:
    if result.status != pq.ExecStatus.COMMAND_OK:
        raise errors.error_from_result(result, encoding=conn.info.encoding)
