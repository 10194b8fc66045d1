"""The PostgreSQL engine: the storage seam (storage/engine.py) over one PostgreSQL database.

Everything durable is in the database (schema.py): ``log.dirs`` holds nothing. A partition is a row of
``groupd_partition`` and its batches rows of ``groupd_batch`` (log.py); durability is one transaction per
group-commit round (durability.py); metadata one row per key (metadata.py). The connection and its lock
are connection.py's. Why psycopg 3 and not asyncpg: the seam's partition methods are synchronous and
called on the event loop, so the engine needs a synchronous client for them and one that runs in a worker
thread for its rounds; psycopg gives both over one connection, and its pipeline mode sends a round's
BEGIN, INSERT and COMMIT in one round trip.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from groupd.storage.engine import Durability, LogConfig, MetadataStore, PartitionSet, ReplayReader, check_key
from groupd.storage.errors import UnknownPartition
from groupd.storage.postgresql.connection import Database, describe
from groupd.storage.postgresql.durability import PgDurability
from groupd.storage.postgresql.log import PgPartitionLog
from groupd.storage.postgresql.metadata import PgMetadata
from groupd.storage.postgresql.opening import read_stored
from groupd.storage.postgresql.schema import migrate
from groupd.storage.postgresql.sets import PgPartitionSet, PgReplayReader

TOPIC, BROKER_LOG = 0, 1  # groupd_partition.kind


class PostgresEngine:
    def __init__(self, url: str) -> None:
        self.db = Database(url)
        self.metadata: MetadataStore = PgMetadata(self.db, self._ready)
        self._migrated = False
        self._shared: dict[tuple[int, int], PgDurability] = {}

    def open(self) -> None:
        if not self._migrated:
            migrate(self.db)
            self._migrated = True

    def _ready(self) -> None:
        self.open()

    def _open(
        self, kind: int, topic: str, partitions: Sequence[int], config: LogConfig | None
    ) -> dict[int, PgPartitionLog]:
        """The logs of ``partitions`` of ``topic`` (made when missing), opened in one transaction (opening.py)."""
        self._ready()
        out = {}
        for partition, stored in read_stored(self.db, kind, topic, partitions).items():
            if self.db.fence is not None and kind == TOPIC:
                self.db.fence.opened(stored.pid, (topic, partition))
            name = f"{topic}-{partition}" if kind == TOPIC else topic
            out[partition] = PgPartitionLog(self.db, name, config or LogConfig(), stored)
        return out

    def open_partition(self, topic: str, partition: int, config: LogConfig | None = None) -> PgPartitionLog:
        return self._open(TOPIC, topic, [partition], config)[partition]

    def open_broker_log(self, name: str, config: LogConfig | None = None) -> PgPartitionLog:
        return self._open(BROKER_LOG, check_key(name), [-1], config)[-1]

    def partitions(self, topic: str | None = None) -> list[tuple[str, int]]:
        self._ready()
        rows = self.db.read(
            lambda conn: conn.execute(
                "SELECT topic, partition FROM groupd_partition WHERE kind = %s AND (%s::text IS NULL OR topic = %s) "
                "ORDER BY topic, partition",
                (TOPIC, topic, topic),
            ).fetchall(),
            "listing partitions",
        )
        return [(t, p) for t, p in rows]

    def stored_bytes(self, topic: str, partitions: Iterable[int]) -> int:
        self._ready()
        row = self.db.read(
            lambda conn: conn.execute(
                "SELECT coalesce(sum(b.size), 0) FROM groupd_batch b JOIN groupd_partition p ON p.id = b.pid "
                "WHERE p.kind = %s AND p.topic = %s AND p.partition = ANY(%s)",
                (TOPIC, topic, list(partitions)),
            ).fetchone(),
            f"sizing {topic}",
        )
        return int(row[0]) if row else 0

    def delete_partition(self, topic: str, partition: int) -> None:
        self._ready()
        row = self.db.run(
            lambda conn: conn.execute(
                "DELETE FROM groupd_partition WHERE kind = %s AND topic = %s AND partition = %s RETURNING id",
                (TOPIC, topic, partition),
            ).fetchone(),
            f"deleting {topic}-{partition}",
        )
        if row is None:
            raise UnknownPartition(f"no partition {topic}-{partition}")

    def open_partition_set(
        self, topic: str, partitions: Iterable[int], config: LogConfig, durability: Durability
    ) -> PartitionSet:
        if not isinstance(durability, PgDurability):
            raise TypeError("the PostgreSQL engine's partition sets are written through its own durability")
        numbers = sorted(partitions)
        logs = self._open(TOPIC, topic, numbers, config) if numbers else {}
        return PgPartitionSet({p: logs[p] for p in numbers})

    def replay_reader(self, helpers: int, stored_bytes: int) -> ReplayReader:
        return PgReplayReader()

    def durability(
        self, *, flush_interval_messages: int = 1, flush_interval_ms: int = 0, shared: bool = False
    ) -> Durability:
        """A shared durability is one per engine and settings: the data plane's and the coordinators' writes
        then go in the same rounds, one transaction for both, instead of two transactions taking turns on the
        one connection (half the rounds, each as costly, when few writers wait)."""
        messages, ms = key = (flush_interval_messages, flush_interval_ms)
        if not shared:
            return PgDurability(self.db, flush_interval_messages=messages, flush_interval_ms=ms)
        if key not in self._shared:
            made = PgDurability(self.db, flush_interval_messages=messages, flush_interval_ms=ms, shared=True)
            self._shared[key] = made
        return self._shared[key]

    def close(self) -> None:
        self.db.close()

    def __repr__(self) -> str:
        return f"PostgresEngine({describe(self.db.url)})"
