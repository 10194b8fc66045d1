"""The PostgreSQL engine's schema: numbered migrations applied at start-up, in one transaction.

``groupd_schema`` holds the version the database is at. A database at a version this binary does not know
(written by a newer groupd) is refused before anything is touched: an older binary must not write a
schema it does not understand. Migrations only ever append to MIGRATIONS; a released one never changes.

Tables (see docs/storage.md):

- ``groupd_partition``: one row per partition (``kind`` 0) or broker log (``kind`` 1): its log start
  offset and durable flags;
- ``groupd_batch``: every record batch, byte for byte as produced (with the offsets the log gave it), keyed
  by (partition, base offset), with its last offset, largest timestamp and size for range scans;
- ``groupd_snapshot``: a partition's JSON snapshots, each valid for the log end it names;
- ``groupd_metadata``: the metadata store's documents;
- ``groupd_node``, ``groupd_lease``: the nodes of a cluster (with every advertised listener) and who owns
  what (groupd/cluster/);
- ``groupd_fence()``: a cluster write's lease check (fencing.py).
"""

from __future__ import annotations

import psycopg

from groupd.storage.errors import StorageError
from groupd.storage.postgresql.connection import Database

MIGRATIONS: list[str] = [
    # 1: the first schema
    """
    CREATE TABLE groupd_partition (
        id bigserial PRIMARY KEY,
        kind smallint NOT NULL,
        topic text NOT NULL,
        partition integer NOT NULL,
        log_start bigint NOT NULL DEFAULT 0,
        flags text[] NOT NULL DEFAULT '{}',
        UNIQUE (kind, topic, partition)
    );
    CREATE TABLE groupd_batch (
        pid bigint NOT NULL REFERENCES groupd_partition (id) ON DELETE CASCADE,
        base_offset bigint NOT NULL,
        last_offset bigint NOT NULL,
        max_timestamp bigint NOT NULL,
        size integer NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (pid, base_offset)
    );
    -- batches are often compressed by their producers already: do not try again
    ALTER TABLE groupd_batch ALTER COLUMN data SET STORAGE EXTERNAL;
    CREATE TABLE groupd_snapshot (
        pid bigint NOT NULL REFERENCES groupd_partition (id) ON DELETE CASCADE,
        name text NOT NULL,
        log_end bigint NOT NULL,
        state jsonb NOT NULL,
        PRIMARY KEY (pid, name)
    );
    CREATE TABLE groupd_metadata (
        key text PRIMARY KEY,
        value bytea NOT NULL
    );
    """,
    # 2: several nodes over one database (groupd/cluster/, docs/cluster.md): every node's registration and
    # heartbeat, and one lease with an epoch per partition (data or internal), checked by every write
    """
    CREATE TABLE groupd_node (
        node_id integer PRIMARY KEY,
        incarnation text NOT NULL,
        host text NOT NULL,
        port integer NOT NULL,
        rack text,
        expires_at timestamptz NOT NULL
    );
    CREATE TABLE groupd_lease (
        topic text NOT NULL,
        partition integer NOT NULL,
        owner integer,
        epoch bigint NOT NULL DEFAULT 0,
        expires_at timestamptz NOT NULL DEFAULT 'epoch',
        PRIMARY KEY (topic, partition)
    );
    """,
    # 3: the lease check of a cluster write as one statement that raises (fencing.py), so a round sends it
    # with its INSERT and COMMIT in one round trip instead of reading the check's rows first
    """
    CREATE FUNCTION groupd_fence(pids bigint[], epochs bigint[], writer integer) RETURNS void
    LANGUAGE plpgsql AS $fence$
    DECLARE
        held bigint[];
        lost text;
    BEGIN
        held := ARRAY(
            SELECT w.pid FROM unnest(pids, epochs) AS w(pid, epoch)
            JOIN groupd_partition p ON p.id = w.pid
            JOIN groupd_lease l ON l.topic = p.topic AND l.partition = p.partition
            WHERE l.owner = writer AND l.epoch = w.epoch FOR SHARE OF l
        );
        IF cardinality(held) <> cardinality(pids) THEN
            SELECT string_agg(p.topic || '-' || p.partition, ', ' ORDER BY p.topic, p.partition) INTO lost
            FROM groupd_partition p WHERE p.id = ANY(pids) AND NOT p.id = ANY(held);
            -- the detail: the refused partitions' ids, so that a round can commit the others without them
            RAISE EXCEPTION 'lost the lease of %', coalesce(lost, 'a deleted partition') USING ERRCODE = 'GD001',
                DETAIL = array_to_string(ARRAY(SELECT x FROM unnest(pids) AS x WHERE NOT x = ANY(held)), ' ');
        END IF;
    END
    $fence$;
    """,
    # 4: a node registers every advertised listener (name, host, port, in the order of `listeners`), so that
    # Metadata and FindCoordinator answer each client with the other nodes' endpoints on its own listener and
    # peers reach each other on the inter-broker listener; the single host and port it replaces are dropped
    """
    ALTER TABLE groupd_node ADD COLUMN endpoints jsonb NOT NULL DEFAULT '[]';
    ALTER TABLE groupd_node DROP COLUMN host, DROP COLUMN port;
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)

INSERT = (
    "INSERT INTO groupd_batch (pid, base_offset, last_offset, max_timestamp, size, data) "
    "VALUES (%s, %s, %s, %s, %s, %b) ON CONFLICT (pid, base_offset) DO NOTHING"
)
# a round's rows as six arrays in one statement: psycopg adapts arrays in C, rows one by one in Python; the
# batches in binary (%b), not hex text, which doubled their bytes and cost both sides a conversion
INSERT_MANY = (
    "INSERT INTO groupd_batch (pid, base_offset, last_offset, max_timestamp, size, data) "
    "SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[], %s::integer[], %b::bytea[]) "
    "ON CONFLICT (pid, base_offset) DO NOTHING"
)
# the same behind a cluster's lease check (fencing.py), in one statement: groupd_fence() raises before the
# commit unless every lease matches; its three arguments come first
INSERT_MANY_FENCED = (
    "WITH fence AS MATERIALIZED (SELECT groupd_fence(%s::bigint[], %s::bigint[], %s)) "
    "INSERT INTO groupd_batch (pid, base_offset, last_offset, max_timestamp, size, data) "
    "SELECT u.* FROM fence, unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[], %s::integer[], "
    "%b::bytea[]) AS u ON CONFLICT (pid, base_offset) DO NOTHING"
)


def migrate(db: Database) -> int:
    """Bring the database to SCHEMA_VERSION; the version it was at. StorageError when it is newer than this
    binary, or the user may not create the tables."""

    def work(conn: psycopg.Connection) -> int:
        # one migrator at a time, if several brokers start over one database
        conn.execute("SELECT pg_advisory_xact_lock(7304251117)")
        conn.execute("CREATE TABLE IF NOT EXISTS groupd_schema (version integer NOT NULL)")
        row = conn.execute("SELECT version FROM groupd_schema").fetchone()
        found = 0 if row is None else int(row[0])
        if found > SCHEMA_VERSION:
            raise _Newer(found)
        for sql in MIGRATIONS[found:]:
            conn.execute(sql)
        if row is None:
            conn.execute("INSERT INTO groupd_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
        elif found != SCHEMA_VERSION:
            conn.execute("UPDATE groupd_schema SET version = %s", (SCHEMA_VERSION,))
        return found

    try:
        return db.run(work, "applying the schema migrations", pipelined=False)
    except _Newer as exc:
        raise StorageError(
            f"the PostgreSQL database is at groupd schema version {exc.version}, newer than this groupd's "
            f"{SCHEMA_VERSION}: run a groupd at least as new as the one that wrote it"
        ) from None


class _Newer(Exception):
    def __init__(self, version: int) -> None:
        super().__init__(version)
        self.version = version
