"""Opening partitions: many of one topic (a coordinator's set: 50 ``__consumer_offsets`` partitions) in one
transaction of three statements, so a start-up pays two round trips for the set, not five per partition.

For each partition: its row (made when missing; the insert skips every partition that exists, so a restart
writes nothing and its commit waits for no WAL flush), its stored size and last offset (one index scan of
its batches), and its newest batches for the tail cache (log.py). The three statements go out together and
their rows come back together (connection.py's pipeline)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import psycopg

from groupd.storage.errors import StorageError
from groupd.storage.postgresql.connection import Database

TAIL_ROWS = 256  # newest batches read for a partition's tail cache (log.py keeps TAIL_CACHE_BYTES of them)

_ROWS = (
    "WITH wanted AS (SELECT unnest(%(partitions)s::integer[]) AS partition), "
    "made AS (INSERT INTO groupd_partition (kind, topic, partition) "
    "SELECT %(kind)s, %(topic)s, w.partition FROM wanted w WHERE NOT EXISTS (SELECT 1 FROM groupd_partition p "
    "WHERE p.kind = %(kind)s AND p.topic = %(topic)s AND p.partition = w.partition) "
    "ON CONFLICT (kind, topic, partition) DO NOTHING RETURNING id, partition, log_start, flags) "
    "SELECT id, partition, log_start, flags FROM groupd_partition "
    "WHERE kind = %(kind)s AND topic = %(topic)s AND partition = ANY(%(partitions)s) "
    "UNION ALL SELECT id, partition, log_start, flags FROM made"
)
_OF_THE_SET = (
    "SELECT id FROM groupd_partition WHERE kind = %(kind)s AND topic = %(topic)s AND partition = ANY(%(partitions)s)"
)
_SIZES = (
    f"SELECT b.pid, sum(b.size), max(b.last_offset) FROM groupd_batch b WHERE b.pid IN ({_OF_THE_SET}) GROUP BY b.pid"
)
_TAILS = (
    f"SELECT s.id, t.base_offset, t.last_offset, t.max_timestamp, t.data FROM ({_OF_THE_SET}) s "
    "CROSS JOIN LATERAL (SELECT base_offset, last_offset, max_timestamp, data FROM groupd_batch b "
    "WHERE b.pid = s.id ORDER BY base_offset DESC LIMIT %(rows)s) t"
)


@dataclass(slots=True)
class Stored:
    """What the database holds of one partition when it is opened."""

    pid: int
    log_start: int
    flags: set[str]
    size: int = 0
    last_offset: int | None = None
    newest: list[tuple[int, int, int, bytes]] = field(default_factory=list)  # (base, last, max ts, data), newest first


def read_stored(db: Database, kind: int, topic: str, partitions: Sequence[int]) -> dict[int, Stored]:
    """Every partition of ``partitions`` of ``topic`` by number, made when missing, with what it holds."""
    params = {"kind": kind, "topic": topic, "partitions": list(partitions), "rows": TAIL_ROWS}

    def work(conn: psycopg.Connection) -> dict[int, Stored]:
        rows = conn.execute(_ROWS, params)
        sizes = conn.execute(_SIZES, params)
        tails = conn.execute(_TAILS, params, binary=True)  # the batches' bytes as they are, not hex text
        numbers: dict[int, int] = {}
        out: dict[int, Stored] = {}
        for pid, partition, start, flags in rows.fetchall():
            numbers[pid] = partition
            out[partition] = Stored(pid, start, set(flags))
        for pid, size, last in sizes.fetchall():
            stored = out[numbers[pid]]
            stored.size, stored.last_offset = int(size), int(last)
        for pid, base, last, max_ts, data in tails.fetchall():
            out[numbers[pid]].newest.append((base, last, max_ts, data))
        for stored in out.values():
            stored.newest.sort(key=lambda row: -row[0])
        return out

    what = f"opening {topic}-{partitions[0]}" if len(partitions) == 1 else f"opening {len(partitions)} of {topic}"
    out = db.run(work, what)
    if len(out) < len(set(partitions)):
        # another node made the missing rows after this statement's snapshot was taken: its INSERT ... ON
        # CONFLICT DO NOTHING then returns nothing for them, and the SELECT does not see them yet; once
        # that node has committed, a second run reads them (several nodes start at once: their broker logs)
        out = db.run(work, what)
    missing = set(partitions) - set(out)
    if missing:
        raise StorageError(f"{what}: partitions {sorted(missing)} neither found nor made")
    return out
