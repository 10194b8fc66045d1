"""One log segment: a ``.log`` file of v2 batches plus its sparse ``.index`` and ``.timeindex``.

File names and index entry formats are Kafka's: ``<20-digit base offset>.log``; ``.index`` entries are
(relative last offset int32, position int32) written every ``index.interval.bytes``; ``.timeindex``
entries are (max timestamp so far int64, relative offset of that timestamp int32).
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path

from storage.batch import (
    BATCH_OVERHEAD,
    MAGIC,
    BatchHeader,
    complete_prefix,
    crc_ok,
    iter_batches,
    iter_records,
    parse_header,
)
from storage.errors import CorruptBatch, UnsupportedCompression

log = logging.getLogger("groupd.storage")

INDEX_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")
SCAN_CHUNK = 16 * 1024 * 1024
LOOKUP_CHUNK = 64 * 1024
MAX_RELATIVE = 2**31 - 1


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


def read_chunks(fd: int, start: int, end: int, chunk: int = SCAN_CHUNK) -> Iterator[tuple[int, bytes]]:
    """(file position, bytes) windows over [start, end) that each begin at a batch boundary.

    A batch cut by a window's end is read again at the start of the next window; a batch larger than
    ``chunk`` gets a window of its own size. Stops at an incomplete tail (the caller checks the end).
    """
    pos = start
    while pos < end:
        data = os.pread(fd, min(chunk, end - pos), pos)
        if not data:
            return
        consumed = complete_prefix(data)
        if consumed == 0:
            if len(data) < BATCH_OVERHEAD:
                return
            size = parse_header(data).size
            if size <= len(data) or pos + size > end:
                return
            data = os.pread(fd, size, pos)
            if len(data) < size:
                return
            consumed = size
            yield pos, data
        else:
            yield pos, data[:consumed] if consumed < len(data) else data
        pos += consumed


class Segment:
    """An open segment. Mutated only under the owning ``Log``'s lock."""

    __slots__ = (
        "base_offset", "directory", "fd", "size", "next_offset", "rolling_ts", "max_timestamp",
        "offset_of_max_ts", "idx_last", "idx_pos", "time_ts", "time_off", "bytes_since_index",
        "index_fd", "time_fd", "index_interval",
    )

    def __init__(self, directory: Path, base_offset: int, index_interval: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval = index_interval
        self.fd = -1
        self.index_fd = -1
        self.time_fd = -1
        self.size = 0
        self.next_offset = base_offset
        self.rolling_ts: int | None = None
        self.max_timestamp = -1
        self.offset_of_max_ts = -1
        self.idx_last: list[int] = []  # absolute last offset of the indexed batch
        self.idx_pos: list[int] = []
        self.time_ts: list[int] = []
        self.time_off: list[int] = []  # absolute offsets
        self.bytes_since_index = 0

    # ------------------------------------------------------------------ paths / files

    @property
    def log_path(self) -> Path:
        return self.directory / (segment_name(self.base_offset) + ".log")

    @property
    def index_path(self) -> Path:
        return self.directory / (segment_name(self.base_offset) + ".index")

    @property
    def time_index_path(self) -> Path:
        return self.directory / (segment_name(self.base_offset) + ".timeindex")

    def open_files(self) -> None:
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.index_fd = os.open(self.index_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.time_fd = os.open(self.time_index_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)

    def close(self) -> None:
        for name in ("fd", "index_fd", "time_fd"):
            fd = getattr(self, name)
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    log.warning("closing %s of segment %d failed", name, self.base_offset, exc_info=True)
                setattr(self, name, -1)

    def delete_files(self) -> None:
        """Close and unlink (log first, so an orphaned index is recognisable and removed at open)."""
        self.close()
        for path in (self.log_path, self.index_path, self.time_index_path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    @property
    def empty(self) -> bool:
        return self.size == 0

    # ------------------------------------------------------------------ indexing

    def _note_batch(self, pos: int, header: BatchHeader) -> tuple[bytes, bytes]:
        """Update in-memory state for a batch at ``pos``; returns index/timeindex bytes to persist."""
        index_bytes = b""
        time_bytes = b""
        if self.rolling_ts is None:
            self.rolling_ts = header.max_timestamp
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_ts = header.last_offset
        if self.bytes_since_index > self.index_interval:
            index_bytes = self._add_index_entry(header.last_offset, pos)
            time_bytes = self._maybe_time_entry()
            self.bytes_since_index = 0
        self.bytes_since_index += header.size
        self.next_offset = header.last_offset + 1
        return index_bytes, time_bytes

    def _add_index_entry(self, last_offset: int, pos: int) -> bytes:
        self.idx_last.append(last_offset)
        self.idx_pos.append(pos)
        return INDEX_ENTRY.pack(last_offset - self.base_offset, pos)

    def _maybe_time_entry(self) -> bytes:
        if self.max_timestamp < 0 or (self.time_ts and self.max_timestamp <= self.time_ts[-1]):
            return b""
        self.time_ts.append(self.max_timestamp)
        self.time_off.append(self.offset_of_max_ts)
        return TIME_ENTRY.pack(self.max_timestamp, self.offset_of_max_ts - self.base_offset)

    def finish_time_index(self) -> None:
        """On becoming inactive: record the segment's max timestamp so a reload knows it cheaply."""
        entry = self._maybe_time_entry()
        if entry:
            os.write(self.time_fd, entry)

    def append(self, data: bytes | bytearray, header: BatchHeader) -> None:
        """Write one batch at the end; on failure the files are cut back and state is untouched."""
        pos = self.size
        view = memoryview(data)
        saved = (self.next_offset, self.rolling_ts, self.max_timestamp, self.offset_of_max_ts,
                 self.bytes_since_index, len(self.idx_last), len(self.time_ts))
        try:
            written = 0
            while written < len(view):
                written += os.write(self.fd, view[written:])
            index_bytes, time_bytes = self._note_batch(pos, header)
            if index_bytes:
                os.write(self.index_fd, index_bytes)
            if time_bytes:
                os.write(self.time_fd, time_bytes)
        except BaseException:
            (self.next_offset, self.rolling_ts, self.max_timestamp, self.offset_of_max_ts,
             self.bytes_since_index, n_idx, n_time) = saved
            if len(self.idx_last) > n_idx:
                del self.idx_last[n_idx:], self.idx_pos[n_idx:]
                os.ftruncate(self.index_fd, n_idx * INDEX_ENTRY.size)
            if len(self.time_ts) > n_time:
                del self.time_ts[n_time:], self.time_off[n_time:]
                os.ftruncate(self.time_fd, n_time * TIME_ENTRY.size)
            os.ftruncate(self.fd, pos)
            raise
        self.size = pos + len(view)

    # ------------------------------------------------------------------ loading / recovery

    def reset_indexes(self) -> None:
        self.idx_last, self.idx_pos, self.time_ts, self.time_off = [], [], [], []
        self.bytes_since_index = 0
        self.next_offset = self.base_offset
        self.rolling_ts = None
        self.max_timestamp = -1
        self.offset_of_max_ts = -1

    def recover(self, *, min_offset: int) -> tuple[int, int]:
        """Scan every batch with its CRC, cut the file at the first bad one and rebuild the indexes.

        Returns (bytes truncated, next offset at the cut).
        """
        self.reset_indexes()
        file_size = os.fstat(self.fd).st_size
        index_out = bytearray()
        time_out = bytearray()
        good = 0
        expected = max(min_offset, self.base_offset)
        reason = "incomplete batch"
        done = False
        for chunk_pos, data in read_chunks(self.fd, 0, file_size):
            for p, header in iter_batches(data):
                problem = None
                if header.magic != MAGIC:
                    problem = f"magic {header.magic}"
                elif header.base_offset < expected:
                    problem = f"base offset {header.base_offset} below {expected}"
                elif header.last_offset_delta < 0 or header.last_offset - self.base_offset > MAX_RELATIVE:
                    problem = f"bad last offset delta {header.last_offset_delta}"
                elif not crc_ok(data, p, header):
                    problem = "CRC mismatch"
                if problem:
                    reason = problem
                    done = True
                    break
                index_bytes, time_bytes = self._note_batch(chunk_pos + p, header)
                index_out += index_bytes
                time_out += time_bytes
                good = chunk_pos + p + header.size
                expected = header.last_offset + 1
            if done:
                break
        truncated = file_size - good
        if truncated:
            log.warning(
                "log %s: truncating %d bytes at position %d (next offset %d): %s",
                self.log_path, truncated, good, self.next_offset, reason,
            )
            os.ftruncate(self.fd, good)
        self.size = good
        if self.max_timestamp >= 0 and (not self.time_ts or self.max_timestamp > self.time_ts[-1]):
            # like a segment that was closed normally: the time index ends with the largest timestamp
            time_out += self._maybe_time_entry()
        self._rewrite_indexes(bytes(index_out), bytes(time_out))
        return truncated, self.next_offset

    def _rewrite_indexes(self, index_bytes: bytes, time_bytes: bytes) -> None:
        os.ftruncate(self.index_fd, 0)
        os.ftruncate(self.time_fd, 0)
        if index_bytes:
            os.write(self.index_fd, index_bytes)
        if time_bytes:
            os.write(self.time_fd, time_bytes)

    def load(self) -> None:
        """Open a segment trusted to be intact (below the recovery point): read the indexes, scan the tail.

        Falls back to ``recover`` when the index files look wrong.
        """
        self.reset_indexes()
        self.size = os.fstat(self.fd).st_size
        if not self._load_indexes():
            log.info("rebuilding indexes of %s", self.log_path)
            self.recover(min_offset=self.base_offset)
            return
        start = self.idx_pos[-1] if self.idx_pos else 0
        tail_end = start
        for chunk_pos, data in read_chunks(self.fd, start, self.size):
            for p, header in iter_batches(data):
                if header.max_timestamp > self.max_timestamp:
                    self.max_timestamp = header.max_timestamp
                    self.offset_of_max_ts = header.last_offset
                self.next_offset = header.last_offset + 1
                tail_end = chunk_pos + p + header.size
        if tail_end != self.size:
            log.warning("segment %s has a bad tail below the recovery point; recovering", self.log_path)
            self.recover(min_offset=self.base_offset)
            return
        self.bytes_since_index = self.size - start
        if self.size:
            self.rolling_ts = parse_header(os.pread(self.fd, BATCH_OVERHEAD, 0)).max_timestamp

    def _load_indexes(self) -> bool:
        raw = os.pread(self.index_fd, os.fstat(self.index_fd).st_size, 0)
        traw = os.pread(self.time_fd, os.fstat(self.time_fd).st_size, 0)
        if len(raw) % INDEX_ENTRY.size or len(traw) % TIME_ENTRY.size:
            return False
        if self.size > self.index_interval and not raw:
            return False  # entries were due (or the index was removed): rebuild
        prev_off, prev_pos = -1, -1
        for rel, pos in INDEX_ENTRY.iter_unpack(raw):
            if rel <= prev_off or pos <= prev_pos or rel < 0 or pos >= self.size:
                return False
            self.idx_last.append(self.base_offset + rel)
            self.idx_pos.append(pos)
            prev_off, prev_pos = rel, pos
        if self.idx_pos:
            try:
                header = parse_header(os.pread(self.fd, BATCH_OVERHEAD, self.idx_pos[-1]))
            except CorruptBatch:
                return False
            if header.last_offset != self.idx_last[-1] or self.idx_pos[-1] + header.size > self.size:
                return False
        prev_ts = -1
        for ts, rel in TIME_ENTRY.iter_unpack(traw):
            if ts <= prev_ts or rel < 0:
                return False
            self.time_ts.append(ts)
            self.time_off.append(self.base_offset + rel)
            prev_ts = ts
        if self.time_ts:
            self.max_timestamp = self.time_ts[-1]
            self.offset_of_max_ts = self.time_off[-1]
        return True

    # ------------------------------------------------------------------ lookups

    def find_position(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        i = bisect_right(self.idx_last, offset) - 1
        start = self.idx_pos[i] if i >= 0 else 0
        return self._scan_from(start, lambda h: h.last_offset >= offset)

    def _scan_from(self, start: int, accept) -> tuple[int, BatchHeader] | None:
        for chunk_pos, data in read_chunks(self.fd, start, self.size, LOOKUP_CHUNK):
            for p, header in iter_batches(data):
                if accept(header):
                    return chunk_pos + p, header
        return None

    def search_timestamp(self, ts: int, starting_offset: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record with timestamp >= ``ts`` and offset >= ``starting_offset``.

        Kafka's ListOffsets by timestamp: the time index narrows the scan, batches with a smaller max
        timestamp are skipped whole, then the records of the first candidate batch are looked at.
        """
        if self.max_timestamp < ts:
            return None
        i = bisect_right(self.time_ts, ts) - 1
        found = self.find_position(max(self.time_off[i] if i >= 0 else self.base_offset, starting_offset))
        if found is None:
            return None
        for _, data in read_chunks(self.fd, found[0], self.size, LOOKUP_CHUNK):
            for p, header in iter_batches(data):
                if header.max_timestamp < ts or header.last_offset < starting_offset:
                    continue
                try:
                    for record in iter_records(memoryview(data)[p : p + header.size], header):
                        if record.timestamp >= ts and record.offset >= starting_offset:
                            return record.timestamp, record.offset
                except UnsupportedCompression:
                    return header.max_timestamp, max(header.base_offset, starting_offset)
        return None

    def record_with_timestamp(self, ts: int, last_offset: int) -> int:
        """Offset of the first record stamped ``ts`` in the batch ending at ``last_offset``."""
        found = self.find_position(last_offset)
        if found is None:
            return last_offset
        pos, header = found
        try:
            for record in iter_records(os.pread(self.fd, header.size, pos), header):
                if record.timestamp == ts:
                    return record.offset
        except (UnsupportedCompression, CorruptBatch):
            pass
        return last_offset

    def read(self, pos: int, max_bytes: int) -> bytes:
        """Whole batches from ``pos`` up to ``max_bytes`` (at least the first batch)."""
        want = min(max(max_bytes, BATCH_OVERHEAD), self.size - pos)
        data = os.pread(self.fd, want, pos)
        end = 0
        for p, header in iter_batches(data):
            end = p + header.size
        if end == 0:
            size = parse_header(data).size
            return os.pread(self.fd, size, pos)
        return data[:end] if end < len(data) else data

