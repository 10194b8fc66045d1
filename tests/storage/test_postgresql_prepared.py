"""The group-commit round's binary arrays and prepared statement (binary_arrays.py, prepared.py), checked
against PostgreSQL itself: what the server decodes is what was encoded, and a statement deallocated
behind the round's back is prepared again without running twice."""

from __future__ import annotations

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.storage.postgresql.binary_arrays import (
    BYTEA_ARRAY_OID,
    INT4_ARRAY_OID,
    INT8_ARRAY_OID,
    bytea_array,
    int4_array,
    int8_array,
)
from groupd.storage.postgresql.connection import Database
from groupd.storage.postgresql.prepared import Prepared, run_prepared
from groupd.storage.postgresql.schema import ROUND, migrate

INT8 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
INT4 = st.integers(min_value=-(2**31), max_value=2**31 - 1)


def decoded(conn: psycopg.Connection, sql: bytes, encoded: bytes, oid: int) -> list[object]:
    """What the server makes of ``encoded`` sent in binary as a parameter of type ``oid``."""
    result = conn.pgconn.exec_params(sql, [encoded], param_types=[oid], param_formats=[1])
    assert result.status == psycopg.pq.ExecStatus.TUPLES_OK, result.error_message
    # the server answers in text: unnest's rows, one value each (bytea as \x hex)
    return [result.get_value(row, 0) for row in range(result.ntuples)]


@settings(max_examples=40, deadline=None)
@given(
    big=st.lists(INT8, max_size=20),
    small=st.lists(INT4, max_size=20),
    blobs=st.lists(st.binary(max_size=300), max_size=12),
)
def test_the_server_decodes_each_array_as_it_was_built(
    postgresql_server: object, big: list[int], small: list[int], blobs: list[bytes]
) -> None:
    url = postgresql_server.database()  # type: ignore[attr-defined]
    with psycopg.connect(url, autocommit=True) as conn:
        assert decoded(conn, b"SELECT unnest($1::bigint[])", int8_array(big), INT8_ARRAY_OID) == [
            str(v).encode() for v in big
        ]
        assert decoded(conn, b"SELECT unnest($1::integer[])", int4_array(small), INT4_ARRAY_OID) == [
            str(v).encode() for v in small
        ]
        assert decoded(conn, b"SELECT unnest($1::bytea[])", bytea_array(blobs), BYTEA_ARRAY_OID) == [
            b"\\x" + v.hex().encode() for v in blobs
        ]
        # the array's length and bounds as PostgreSQL counts them
        counted = conn.pgconn.exec_params(
            b"SELECT cardinality($1::bigint[]), coalesce(array_lower($1::bigint[], 1), 1)",
            [int8_array(big)],
            param_types=[INT8_ARRAY_OID],
            param_formats=[1],
        )
        assert (counted.get_value(0, 0), counted.get_value(0, 1)) == (str(len(big)).encode(), b"1")


def test_a_round_statement_deallocated_meanwhile_is_prepared_again_and_runs_once(postgresql_url: str) -> None:
    db = Database(postgresql_url)
    migrate(db)
    with psycopg.connect(postgresql_url, autocommit=True) as conn:
        pid = conn.execute(
            "INSERT INTO groupd_partition (kind, topic, partition) VALUES (0, 't', 0) RETURNING id"
        ).fetchone()[0]  # type: ignore[index]
        ready: set[bytes] = set()

        def row(offset: int) -> list[bytes]:
            return [
                int8_array([pid]),
                int8_array([offset]),
                int8_array([offset]),
                int8_array([7]),
                int4_array([3]),
                bytea_array([b"abc"]),
            ]

        run_prepared(conn, ROUND, row(0), ready)
        assert ready == {ROUND.name}
        conn.execute("DEALLOCATE ALL")  # what psycopg sends after a ROLLBACK on its connection
        run_prepared(conn, ROUND, row(1), ready)
        rows = conn.execute("SELECT base_offset, max_timestamp, size, data FROM groupd_batch ORDER BY 1").fetchall()
        assert rows == [(0, 7, 3, b"abc"), (1, 7, 3, b"abc")]
        # a failure is raised as psycopg raises it: the error class of the server's SQLSTATE
        with pytest.raises(psycopg.errors.DivisionByZero):
            run_prepared(conn, Prepared(b"t_fails", b"SELECT 1/0", ()), [], ready)
