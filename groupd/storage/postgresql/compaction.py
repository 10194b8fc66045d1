"""Compaction of a PostgreSQL partition (cleanup.policy=compact): Kafka's cleaner's rules
(storage/cleaning.py) over the batch rows, in one transaction.

What is cleaned: every committed batch but the newest (as Kafka never cleans the active segment), up to
the first that is younger than ``min_age_ms`` and up to the first unstable offset. A batch that loses
records is replaced by one rebuilt with those that stay, at their offsets; one that loses all is deleted;
one that loses none is left as it is, so a second pass rewrites nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import psycopg

from groupd.storage.batch import BatchHeader, parse_header
from groupd.storage.cleaning import Cleaner
from groupd.storage.engine import CompactionStats, LogConfig
from groupd.storage.postgresql.connection import Database
from groupd.storage.postgresql.schema import INSERT


class Compacted(Protocol):
    """What compaction needs of a partition's log (log.py's PgPartitionLog)."""

    db: Database
    pid: int
    name: str
    config: LogConfig

    def flush(self) -> None: ...

    def batches(self, start_offset: int | None = None) -> Iterator[tuple[BatchHeader, memoryview]]: ...

    def headers(self, last_segments: int | None = None) -> Iterator[BatchHeader]: ...

    def compacted(self, below: int, freed: int) -> None: ...


def compact(log: Compacted, now_ms: int, min_age_ms: int = 0) -> CompactionStats:
    log.flush()
    headers = list(log.headers())  # headers only: a log with nothing old or stable enough is not read
    if len(headers) < 2:
        return CompactionStats()
    bound = headers[-1].base_offset  # the newest batch stays as it is
    if min_age_ms > 0:
        young = next((h.base_offset for h in headers if now_ms - h.max_timestamp < min_age_ms), None)
        bound = min(bound, young) if young is not None else bound
    cleaner = Cleaner(log.batches(), now_ms, log.config.delete_retention_ms)
    if cleaner.first_unstable is not None:
        bound = min(bound, cleaner.first_unstable)
    if headers[0].base_offset >= bound:
        return cleaner.stats  # nothing old enough or stable: the whole log is not read again
    cleaner.index(log.batches())
    removed: list[int] = []
    added: list[tuple[int, int, int, int, int, bytes]] = []
    freed = cleaned = 0
    for header, batch in log.batches():
        if header.base_offset >= bound:
            break
        cleaned += 1
        kept = cleaner.clean_batch(header, batch)
        if kept is batch:
            continue
        if kept is not None:
            new = parse_header(kept, 0)
            if new.record_count == header.record_count:
                continue  # nothing went: leave the row alone
            added.append((log.pid, new.base_offset, new.last_offset, new.max_timestamp, new.size, bytes(kept)))
            freed -= new.size
        removed.append(header.base_offset)
        freed += header.size
    stats = cleaner.stats
    stats.segments = 1 if cleaned else 0
    if not removed:
        return stats

    def work(conn: psycopg.Connection) -> None:
        conn.execute("DELETE FROM groupd_batch WHERE pid = %s AND base_offset = ANY(%s)", (log.pid, removed))
        if added:
            with conn.cursor() as cur:
                cur.executemany(INSERT, added)

    log.db.run(work, f"compacting {log.name}", fenced=(log.pid,))
    log.compacted(bound, freed)
    return stats
