"""A partition's log in PostgreSQL (storage/engine.py PartitionLog): one ``groupd_batch`` row per batch.

Appends take their offsets in memory and wait in the log's tail until a durability round (durability.py)
commits them, many logs and batches in one transaction. The tail also caches the newest committed batches
(up to TAIL_CACHE_BYTES), so consumers at the end of the log are served from memory; reads further back
are range scans of the batch table. Operations that change what is stored (DeleteRecords, truncation,
snapshots, flags) write the waiting batches first and then commit their own change at once, on the
caller's thread.

A round that fails answers its waiters with the error and keeps its batches: they were given offsets, and
the producer state (idempotent sequences, open transactions) already counts them, so taking them back out
would let a producer's retry be answered from a batch that is gone. The durability retries them until the
database takes them, and meanwhile the log refuses new appends (StorageError: KAFKA_STORAGE_ERROR to a
producer, NOT_COORDINATOR to a coordinator's client), so what waits in memory stays bounded. A retry, or a
flush racing a round, may write a batch twice: inserts skip a row that is there (the same bytes).
"""

from __future__ import annotations

import collections
import json
import struct
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from groupd.storage.batch import (
    BATCH_OVERHEAD,
    LOG_OVERHEAD,
    BatchHeader,
    build_batch,
    iter_records,
    parse_header,
    set_base_offset,
)
from groupd.storage.engine import CompactionStats, LogConfig, SegmentInfo
from groupd.storage.errors import CorruptBatch, OffsetOutOfRange, RecordTooLarge, StorageError
from groupd.storage.postgresql.compaction import compact
from groupd.storage.postgresql.connection import Database
from groupd.storage.postgresql.opening import Stored
from groupd.storage.postgresql.schema import INSERT

TAIL_CACHE_BYTES = 256 << 10  # committed bytes kept in memory per partition for tail reads
SCAN_PAGE_BYTES = 4 << 20  # one range scan's worth of batches
SCAN_ROWS = 1000  # batches a range scan considers at most
REPLAY_ROWS = 20_000  # batches one run of a replay considers at most (commits are small: ~100 bytes each)
_SCAN = struct.Struct(">qiibIhiqq")  # through maxTimestamp
_LEADER_EPOCH = struct.Struct(">i")
_ENTRY_COLUMNS = "b.base_offset, b.last_offset, b.max_timestamp, b.data"


@dataclass(slots=True)
class Entry:
    """One batch in the tail: committed when ``base < log.durable_end``."""

    base: int
    last: int
    max_ts: int
    data: bytes | bytearray

    def row(self, pid: int) -> tuple[int, int, int, int, int, bytes]:
        return (pid, self.base, self.last, self.max_ts, len(self.data), bytes(self.data))


class PgPartitionLog:
    def __init__(self, db: Database, name: str, config: LogConfig, stored: Stored) -> None:
        self.db = db
        self.pid = stored.pid
        self.name = name
        self.config = config
        self._start = stored.log_start
        self._flags = stored.flags
        self._closed = False
        self.tail: deque[Entry] = deque()  # from the oldest cached batch to the log end
        self._tail_bytes = 0
        self._end = self._start
        self._size = stored.size
        self._modified_ms = int(time.time() * 1000)
        if stored.last_offset is not None:
            self._end = max(self._start, stored.last_offset + 1)
        for base, last, max_ts, data in stored.newest:  # newest first (opening.py)
            if self._tail_bytes >= TAIL_CACHE_BYTES:
                break
            self.tail.appendleft(Entry(base, last, max_ts, data))
            self._tail_bytes += len(data)
        self.durable_end = self.taken_end = self._end  # every offset below durable_end is committed
        self.generation = 0  # bumped by every change a round in flight must not write over (truncation)
        self.waiting_error: str | None = None  # why batches wait for a retry: appends are refused meanwhile

    # ------------------------------------------------------------ offsets

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._end

    @property
    def high_watermark(self) -> int:
        return self._end

    @property
    def size_bytes(self) -> int:
        return self._size

    @property
    def failed(self) -> bool:
        return self._closed

    def _usable(self) -> None:
        if self._closed:
            raise StorageError(f"{self.name} is closed")

    # ------------------------------------------------------------ appends

    def append(self, batch: bytes | bytearray, leader_epoch: int | None = None) -> tuple[int, int]:
        self._usable()
        if self.waiting_error is not None:
            raise StorageError(f"{self.name}: earlier batches wait for PostgreSQL ({self.waiting_error})")
        size = len(batch)
        if size > self.config.max_message_bytes:
            raise RecordTooLarge(f"batch of {size} bytes exceeds max.message.bytes {self.config.max_message_bytes}")
        if size < BATCH_OVERHEAD:
            raise CorruptBatch(f"{size} bytes is shorter than a record batch header")
        _b, length, _e, magic, _crc, _attrs, last_delta, _first_ts, max_ts = _SCAN.unpack_from(batch, 0)
        if magic != 2 or length + LOG_OVERHEAD != size:
            parse_header(batch, 0)  # raises, naming the problem
            raise CorruptBatch(f"batch length {length} does not match its {size} bytes")
        buf = batch if isinstance(batch, bytearray) else bytearray(batch)
        if leader_epoch is not None:
            _LEADER_EPOCH.pack_into(buf, 12, leader_epoch)
        base = self._end
        set_base_offset(buf, 0, base)
        self.tail.append(Entry(base, base + last_delta, max_ts, buf))
        self._tail_bytes += size
        self._end = base + last_delta + 1
        self._size += size
        self._modified_ms = int(time.time() * 1000)
        return base, base + last_delta

    def append_records(
        self,
        records: Sequence[tuple[bytes | None, bytes | None]],
        timestamp_ms: int | None = None,
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
        attributes: int = 0,
    ) -> tuple[int, int]:
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        buf = build_batch(
            records,
            timestamp_ms=ts,
            mutable=True,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            attributes=attributes,
        )
        return self.append(buf)

    # ------------------------------------------------------------ rounds (durability.py)

    def take(self) -> list[Entry]:
        """The batches not yet committed nor in a round, now in the caller's round."""
        if self.taken_end >= self._end:
            return []
        out = self._from(self.taken_end)
        self.taken_end = self._end
        return out

    def _holding(self, offset: int) -> list[Entry]:
        """The tail's batches from the one holding ``offset`` on (a copy: the tail changes meanwhile)."""
        out = []
        for e in reversed(self.tail):
            if e.last < offset:
                break
            out.append(e)
        out.reverse()
        return out

    def _from(self, offset: int) -> list[Entry]:
        """The tail's batches from ``offset`` on: walked from the end, as they are few (the uncommitted)."""
        out = []
        for e in reversed(self.tail):
            if e.base < offset:
                break
            out.append(e)
        out.reverse()
        return out

    def committed(self, end: int, generation: int) -> None:
        """A round that held this log's batches below ``end`` committed."""
        if generation == self.generation:
            self.durable_end = max(self.durable_end, min(end, self._end))
            self.waiting_error = None
            self._trim_cache()

    def unwritten(self, end: int, generation: int, error: StorageError) -> None:
        """A round that held this log's batches below ``end`` failed: they are taken again by the next."""
        if generation == self.generation and self.durable_end < end:
            self.taken_end = self.durable_end
            self.waiting_error = str(error)

    def write_rows(self, conn: psycopg.Connection, entries: list[Entry], generation: int) -> bool:
        """Insert a round's batches of this log (in the round's transaction, under the database's lock);
        False, writing nothing, when the log was truncated since they were taken."""
        if generation != self.generation:
            return False
        if entries:
            with conn.cursor() as cur:
                cur.executemany(INSERT, [e.row(self.pid) for e in entries])
        return True

    def _trim_cache(self) -> None:
        """Forget the oldest committed batches beyond TAIL_CACHE_BYTES (the newest one always stays)."""
        tail = self.tail
        while self._tail_bytes > TAIL_CACHE_BYTES and len(tail) > 1 and tail[0].base < self.durable_end:
            self._tail_bytes -= len(tail.popleft().data)

    def _keep_tail(self, keep: Callable[[Entry], bool]) -> None:
        """Keep only the cached batches ``keep`` accepts (after a change to the stored log)."""
        self.tail = deque(e for e in self.tail if keep(e))
        self._tail_bytes = sum(len(e.data) for e in self.tail)

    def flush(self) -> None:
        """Commit every batch not yet committed now, on the caller's thread: those a round in flight holds
        too, so the log is durable when this returns whatever that round's fate."""
        self._usable()
        if self.durable_end >= self._end:
            return
        entries = self._from(self.durable_end)
        end, generation = self._end, self.generation
        self.taken_end = end
        try:
            self.db.run(
                lambda conn: self.write_rows(conn, entries, generation), f"writing {self.name}", fenced=(self.pid,)
            )
        except StorageError as exc:
            self.unwritten(end, generation, exc)
            raise
        self.committed(end, generation)

    # ------------------------------------------------------------ reads

    def _cached_from(self) -> int:
        return self.tail[0].base if self.tail else self._end

    def _page(self, offset: int, max_bytes: int, rows: int, columns: str) -> list[tuple[Any, ...]]:
        """``columns`` of the committed batches from the one holding ``offset`` that fit in ``max_bytes`` (at
        least one), at most ``rows`` of them, in one statement (one round trip): the sizes' running sum picks
        the range of batches from the one holding ``offset``, and only their data is read (a range scan of
        the primary key), so a read moves no more than it returns."""
        return self.db.read(
            lambda conn: conn.execute(
                "WITH sizes AS (SELECT base_offset, sum(size) OVER (ORDER BY base_offset) AS upto, "
                "row_number() OVER (ORDER BY base_offset) AS n FROM groupd_batch "
                "WHERE pid = %(pid)s AND base_offset >= coalesce((SELECT max(base_offset) FROM groupd_batch "
                "WHERE pid = %(pid)s AND base_offset <= %(offset)s), 0) "
                "AND last_offset >= %(offset)s AND base_offset < %(end)s ORDER BY base_offset LIMIT %(rows)s) "
                ", pick AS (SELECT min(base_offset) AS lo, max(base_offset) AS hi FROM sizes "
                "WHERE n = 1 OR upto <= %(max)s) "
                f"SELECT {columns} FROM pick, groupd_batch b "
                "WHERE b.pid = %(pid)s AND b.base_offset BETWEEN pick.lo AND pick.hi ORDER BY b.base_offset",
                {"pid": self.pid, "offset": offset, "end": self.durable_end, "rows": rows, "max": max_bytes},
                binary=True,  # the batches' bytes as they are, not hex text
            ).fetchall(),
            f"reading {self.name}",
        )

    def _scan(self, offset: int, max_bytes: int) -> list[Entry]:
        """Committed batches from the one holding ``offset``, ``max_bytes`` of them (at least one)."""
        return [Entry(*row) for row in self._page(offset, max_bytes, SCAN_ROWS, _ENTRY_COLUMNS)]

    def _run(self, offset: int) -> tuple[int, bytes] | None:
        """For replay: the committed batches from the one holding ``offset``, SCAN_PAGE_BYTES of them in one
        run of bytes, and the offset after them; no object per batch (a store of small commits has many)."""
        rows = self._page(offset, SCAN_PAGE_BYTES, REPLAY_ROWS, "b.last_offset, b.data")
        if not rows:
            return None
        return rows[-1][0] + 1, b"".join([data for _last, data in rows])

    def _entries(self, offset: int, max_bytes: int = 1 << 62) -> Iterator[Entry]:
        """Every batch from the one holding ``offset`` to the log end: range scans, then the tail."""
        while offset < self._cached_from():
            page = self._scan(offset, min(max_bytes, SCAN_PAGE_BYTES))
            if not page:
                break
            for e in page:
                if e.base >= self._cached_from():
                    break
                yield e
                offset = e.last + 1
            else:
                continue
            break
        yield from self._holding(offset)

    def read(self, offset: int, max_bytes: int, upto: int | None = None) -> bytes:
        self._usable()
        if offset < self._start or offset > self._end:
            raise OffsetOutOfRange(f"{self.name}: offset {offset} outside [{self._start}, {self._end}]")
        out = bytearray()
        for e in self._entries(offset, max_bytes):
            if upto is not None and e.base >= upto:
                break
            if out and len(out) + len(e.data) > max_bytes:
                break
            out += e.data
        return bytes(out)

    def batches(self, start_offset: int | None = None) -> Iterator[tuple[BatchHeader, memoryview]]:
        start = self._start if start_offset is None else max(start_offset, self._start)
        for e in self._entries(start):
            if e.last >= self._start:
                view = memoryview(e.data)
                yield parse_header(view, 0), view

    def chunks(self) -> Iterator[memoryview]:
        """The log from its start in runs of whole batches (replay): committed runs straight from the table,
        then the tail's batches."""
        offset = self._start
        while offset < self._cached_from() and (run := self._run(offset)) is not None:
            offset, data = run
            yield memoryview(data)
        held = [e.data for e in self._holding(offset) if e.last >= self._start]
        if held:
            yield memoryview(b"".join(held))

    def headers(self, last_segments: int | None = None) -> Iterator[BatchHeader]:
        return self._headers(self._start)

    def last_header(self) -> BatchHeader | None:
        """The header of the log's last batch (None when it holds none): one row, not the log."""
        if self._end <= self._start:
            return None
        last = collections.deque(self._headers(self._end - 1), maxlen=1)  # the batch holding the last offset
        return last[0] if last else None

    def _headers(self, offset: int) -> Iterator[BatchHeader]:
        """The headers of the batches from the one holding ``offset`` on: of the committed ones only their first
        BATCH_OVERHEAD bytes leave the database (stored uncompressed, STORAGE EXTERNAL, so PostgreSQL reads just
        the TOAST chunk holding them), so retention and producer-state rebuilds do not move a topic's data."""

        def work(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
            return conn.execute(
                "SELECT substring(data FROM 1 FOR %s) FROM groupd_batch WHERE pid = %s AND base_offset >= coalesce(("
                "SELECT max(base_offset) FROM groupd_batch WHERE pid = %s AND base_offset <= %s), 0) "
                "AND last_offset >= %s AND base_offset < %s ORDER BY base_offset LIMIT %s",
                (BATCH_OVERHEAD, self.pid, self.pid, offset, offset, self._cached_from(), REPLAY_ROWS),
                binary=True,
            ).fetchall()

        while offset < self._cached_from():
            rows = self.db.read(work, f"reading {self.name}")
            if not rows:
                break
            for (head,) in rows:
                header = parse_header(head, 0)
                yield header
            offset = header.last_offset + 1
        for e in self._holding(offset):
            if e.last >= self._start:
                yield parse_header(e.data, 0)

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        for header, view in self.batches():
            if header.max_timestamp < ts_ms:
                continue
            for rec in iter_records(view, header):
                if rec.timestamp >= ts_ms and rec.offset >= self._start:
                    return rec.offset, rec.timestamp
            return max(header.base_offset, self._start), header.max_timestamp
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        best: tuple[int, int] | None = None
        for header, view in self.batches():
            if best is None or header.max_timestamp > best[0]:
                offset = header.last_offset
                for rec in iter_records(view, header):
                    if rec.timestamp == header.max_timestamp:
                        offset = rec.offset
                        break
                best = (header.max_timestamp, offset)
        return best

    # ------------------------------------------------------------ changes committed at once

    def delete_records_before(self, offset: int) -> int:
        self._usable()
        if offset > self._end:
            raise OffsetOutOfRange(f"{self.name}: offset {offset} past the log end {self._end}")
        if offset <= self._start:
            return self._start
        self.flush()
        self._set_start(offset)
        return self._start

    def _set_start(self, offset: int) -> None:
        def work(conn: psycopg.Connection) -> int:
            conn.execute("UPDATE groupd_partition SET log_start = %s WHERE id = %s", (offset, self.pid))
            row = conn.execute(
                "WITH gone AS (DELETE FROM groupd_batch WHERE pid = %s AND last_offset < %s RETURNING size) "
                "SELECT coalesce(sum(size), 0) FROM gone",
                (self.pid, offset),
            ).fetchone()
            return int(row[0]) if row else 0

        self._size -= self.db.run(work, f"deleting records of {self.name}", fenced=(self.pid,))
        self._start = offset
        self._keep_tail(lambda e: e.last >= offset)

    def truncate_to(self, offset: int) -> int:
        self._usable()
        if offset < self._start:
            raise OffsetOutOfRange(f"{self.name}: cannot truncate to {offset} below the log start {self._start}")
        if offset >= self._end:
            return self._end
        self.flush()
        self.generation += 1  # a round in flight (its batches written by the flush) must not write them again

        def work(conn: psycopg.Connection) -> tuple[int | None, int]:
            row = conn.execute(
                "WITH gone AS (DELETE FROM groupd_batch WHERE pid = %s AND last_offset >= %s "
                "RETURNING base_offset, size) SELECT min(base_offset), coalesce(sum(size), 0) FROM gone",
                (self.pid, offset),
            ).fetchone()
            assert row is not None
            return row[0], int(row[1])

        first, size = self.db.run(work, f"truncating {self.name}", fenced=(self.pid,))
        self._size -= size
        new_end = max(self._start, first) if first is not None else self._end
        self._keep_tail(lambda e: e.last < new_end)
        self._end = self.durable_end = self.taken_end = new_end
        return new_end

    def save_snapshot(self, name: str, state: Any) -> None:
        self.flush()
        document = json.dumps(state)
        self.db.run(
            lambda conn: conn.execute(
                "INSERT INTO groupd_snapshot (pid, name, log_end, state) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (pid, name) DO UPDATE SET log_end = excluded.log_end, state = excluded.state",
                (self.pid, name, self._end, document),
            ),
            f"saving the {name} snapshot of {self.name}",
            fenced=(self.pid,),
        )

    def load_snapshot(self, name: str) -> Any | None:
        row = self.db.read(
            lambda conn: conn.execute(
                "SELECT log_end, state FROM groupd_snapshot WHERE pid = %s AND name = %s", (self.pid, name)
            ).fetchone(),
            f"loading the {name} snapshot of {self.name}",
        )
        if row is None or row[0] != self._end:
            return None
        return row[1]

    def load_kept(self, name: str) -> Any | None:
        """The state last saved under ``name`` whatever the log end was then (``load_snapshot`` takes only one
        saved at the log end as it is now): for what stays true as the log grows, as a partition's leader epoch
        history (broker/clustering.py)."""
        row = self.db.read(
            lambda conn: conn.execute(
                "SELECT state FROM groupd_snapshot WHERE pid = %s AND name = %s", (self.pid, name)
            ).fetchone(),
            f"loading the {name} snapshot of {self.name}",
        )
        return None if row is None else row[0]

    def mark(self, name: str) -> None:
        if name in self._flags:
            return
        self.db.run(
            lambda conn: conn.execute(
                "UPDATE groupd_partition SET flags = array_append(flags, %s) WHERE id = %s", (name, self.pid)
            ),
            f"marking {self.name}",
            fenced=(self.pid,),
        )
        self._flags.add(name)

    def is_marked(self, name: str) -> bool:
        return name in self._flags

    # ------------------------------------------------------------ cleanup

    def apply_retention(self, now_ms: int) -> int:
        """Drop the oldest batches older than retention.ms or beyond retention.bytes; the batches dropped.
        The newest batch always stays (as Kafka keeps its active segment)."""
        cfg = self.config
        if not cfg.delete or (cfg.retention_ms < 0 and cfg.retention_bytes < 0):
            return 0
        self.flush()
        new_start, size, dropped = self._start, self._size, 0
        for header in self._headers(self._start):
            if header.last_offset + 1 >= self._end:
                break
            too_old = cfg.retention_ms >= 0 and now_ms - header.max_timestamp > cfg.retention_ms
            too_big = cfg.retention_bytes >= 0 and size - header.size >= cfg.retention_bytes
            if not (too_old or too_big):
                break
            new_start, size, dropped = header.last_offset + 1, size - header.size, dropped + 1
        if dropped:
            self._set_start(new_start)
        return dropped

    def compact(self, now_ms: int, min_age_ms: int = 0) -> CompactionStats:
        return compact(self, now_ms, min_age_ms)

    def compacted(self, below: int, freed: int) -> None:
        """Compaction rewrote the committed batches below ``below`` and freed ``freed`` bytes: the cache
        forgets them (the next read of them is a range scan)."""
        self._size -= freed
        self._keep_tail(lambda e: e.base >= below)

    def segments_info(self) -> list[SegmentInfo]:
        return [SegmentInfo(self._start, self._size, self._modified_ms)]

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
