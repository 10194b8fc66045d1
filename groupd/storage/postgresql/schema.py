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
- ``groupd_fence()``: a cluster write's lease check (fencing.py);
- ``groupd_metadata_changed``, ``groupd_lease_changed``: triggers notifying every metadata write's key and
  every lease that changed hands (groupd/cluster/changes.py).
"""

from __future__ import annotations

import psycopg

from groupd.storage.errors import StorageError
from groupd.storage.postgresql.binary_arrays import BYTEA_ARRAY_OID, INT4_ARRAY_OID, INT4_OID, INT8_ARRAY_OID
from groupd.storage.postgresql.connection import Database
from groupd.storage.postgresql.prepared import Prepared

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
    # 5: what other nodes want to know at once rather than at their next heartbeat (groupd/cluster/changes.py),
    # notified when the writing transaction commits: every metadata write (its key), and every lease that
    # changed hands or epoch (renewals, which change neither, notify nothing)
    """
    CREATE FUNCTION groupd_metadata_notify() RETURNS trigger
    LANGUAGE plpgsql AS $notify$
    BEGIN
        PERFORM pg_notify('groupd_metadata', CASE WHEN TG_OP = 'DELETE' THEN OLD.key ELSE NEW.key END);
        RETURN NULL;
    END
    $notify$;
    CREATE TRIGGER groupd_metadata_changed AFTER INSERT OR UPDATE OR DELETE ON groupd_metadata
        FOR EACH ROW EXECUTE FUNCTION groupd_metadata_notify();
    CREATE FUNCTION groupd_lease_notify() RETURNS trigger
    LANGUAGE plpgsql AS $notify$
    BEGIN
        PERFORM pg_notify('groupd_lease', '');  -- one a transaction: the same payload is folded
        RETURN NULL;
    END
    $notify$;
    CREATE TRIGGER groupd_lease_changed AFTER UPDATE OF owner, epoch ON groupd_lease
        FOR EACH ROW WHEN (OLD.owner IS DISTINCT FROM NEW.owner OR OLD.epoch IS DISTINCT FROM NEW.epoch)
        EXECUTE FUNCTION groupd_lease_notify();
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)

INSERT = (
    "INSERT INTO groupd_batch (pid, base_offset, last_offset, max_timestamp, size, data) "
    "VALUES (%s, %s, %s, %s, %s, %b) ON CONFLICT (pid, base_offset) DO NOTHING"
)
# a group-commit round's rows as six arrays in one statement, prepared once a connection and sent in binary
# (binary_arrays.py: psycopg's adaptation of lists cost the round more than the rest of it)
ROUND = Prepared(
    b"groupd_round",
    b"INSERT INTO groupd_batch (pid, base_offset, last_offset, max_timestamp, size, data) "
    b"SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::integer[], $6::bytea[]) "
    b"ON CONFLICT (pid, base_offset) DO NOTHING",
    (INT8_ARRAY_OID, INT8_ARRAY_OID, INT8_ARRAY_OID, INT8_ARRAY_OID, INT4_ARRAY_OID, BYTEA_ARRAY_OID),
)
# the same behind a cluster's lease check (fencing.py), in one statement: groupd_fence() raises before the
# commit unless every lease matches; its three arguments come first
ROUND_FENCED = Prepared(
    b"groupd_round_fenced",
    b"WITH fence AS MATERIALIZED (SELECT groupd_fence($1::bigint[], $2::bigint[], $3::integer)) "
    b"INSERT INTO groupd_batch (pid, base_offset, last_offset, max_timestamp, size, data) "
    b"SELECT u.* FROM fence, unnest($4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::integer[], "
    b"$9::bytea[]) AS u ON CONFLICT (pid, base_offset) DO NOTHING",
    (INT8_ARRAY_OID, INT8_ARRAY_OID, INT4_OID, *ROUND.types),
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
