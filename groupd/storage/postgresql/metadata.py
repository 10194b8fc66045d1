"""The PostgreSQL engine's metadata store (storage/engine.py MetadataStore): one ``groupd_metadata`` row per
key, each put committed before it returns (a row is replaced whole: never torn). The broker reads some
documents before it opens its engine (its stores load as they are made), so the first use migrates."""

from __future__ import annotations

from collections.abc import Callable

from groupd.storage.engine import check_key
from groupd.storage.postgresql.connection import Database

TOPIC_KIND = 0  # groupd_partition.kind of a data topic's partition (engine.py's TOPIC)


class PgMetadata:
    def __init__(self, db: Database, ready: Callable[[], None]) -> None:
        self.db = db
        self.ready = ready  # the engine's: migrates the schema once

    def get(self, key: str) -> bytes | None:
        check_key(key)
        self.ready()
        row = self.db.read(
            lambda conn: conn.execute("SELECT value FROM groupd_metadata WHERE key = %s", (key,)).fetchone(),
            f"reading {key}",
        )
        return None if row is None else bytes(row[0])

    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        """The values of those ``keys`` that exist, in one statement (a cluster node follows its shared
        documents this way at every heartbeat: one round trip, not one per document)."""
        for key in keys:
            check_key(key)
        self.ready()
        rows = self.db.read(
            lambda conn: conn.execute("SELECT key, value FROM groupd_metadata WHERE key = ANY(%s)", (keys,)).fetchall(),
            "reading the shared documents",
        )
        return {str(key): bytes(value) for key, value in rows}

    def put(self, key: str, value: bytes) -> None:
        check_key(key)
        self.ready()
        self.db.run(
            lambda conn: conn.execute(
                "INSERT INTO groupd_metadata (key, value) VALUES (%s, %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            ),
            f"writing {key}",
        )

    def delete(self, key: str) -> None:
        check_key(key)
        self.ready()
        self.db.run(lambda conn: conn.execute("DELETE FROM groupd_metadata WHERE key = %s", (key,)), f"deleting {key}")

    def compare_and_put(self, key: str, expected: bytes | None, value: bytes) -> bool:
        """Store ``value`` only if ``key`` still holds ``expected`` (None: absent), in one statement; False
        when another writer changed it first (nothing stored): two nodes rewriting one document cannot
        lose each other's change."""
        check_key(key)
        self.ready()
        sql, params = (
            ("INSERT INTO groupd_metadata (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING RETURNING key",
             (key, value))
            if expected is None
            else ("UPDATE groupd_metadata SET value = %s WHERE key = %s AND value = %s RETURNING key",
                  (value, key, expected))
        )  # fmt: skip
        row = self.db.run(lambda conn: conn.execute(sql, params).fetchone(), f"writing {key}")
        return row is not None

    def claim_topic(self, key: str, expected: bytes | None, value: bytes, *, topic: str) -> bool:
        """``compare_and_put`` of the topics document that creates ``topic``, removing in the same statement
        every partition row left under its name (a deletion a crash interrupted, or a creation another node
        prepared and lost): the rows are cleared only by the creation that wins the name, at the instant it
        wins it, so two nodes creating one name at once cannot remove each other's partitions."""
        check_key(key)
        self.ready()
        claimed = (
            "INSERT INTO groupd_metadata (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING RETURNING key"
            if expected is None
            else "UPDATE groupd_metadata SET value = %s WHERE key = %s AND value = %s RETURNING key"
        )
        params = (key, value) if expected is None else (value, key, expected)
        sql = (
            f"WITH claimed AS ({claimed}), cleared AS (DELETE FROM groupd_partition WHERE kind = %s AND topic = %s "
            "AND EXISTS (SELECT 1 FROM claimed)) SELECT key FROM claimed"
        )
        row = self.db.run(lambda conn: conn.execute(sql, (*params, TOPIC_KIND, topic)).fetchone(), f"creating {topic}")
        return row is not None

    def reserve(self, key: str, size: int, at_least: int = 0) -> int:
        """Reserve the next ``size`` numbers of the counter kept under ``key`` (its value the end of the last
        reservation, decimal ASCII, as ``put`` writes it) and return the first, in one statement: the row is
        locked by its update, so nodes reserving at the same instant get disjoint blocks (a get then a put
        could hand two nodes the same one). ``at_least`` is where the block may start at the earliest."""
        check_key(key)
        self.ready()
        row = self.db.run(
            lambda conn: conn.execute(
                "INSERT INTO groupd_metadata (key, value) VALUES (%s, convert_to((%s::bigint + %s)::text, 'UTF8')) "
                "ON CONFLICT (key) DO UPDATE SET value = convert_to((greatest("
                "convert_from(groupd_metadata.value, 'UTF8')::bigint, %s::bigint) + %s)::text, 'UTF8') "
                "RETURNING convert_from(value, 'UTF8')::bigint",
                (key, at_least, size, at_least, size),
            ).fetchone(),
            f"reserving a block of {key}",
        )
        assert row is not None
        return int(row[0]) - size
