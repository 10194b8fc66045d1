"""One partition's append-only log: a directory of segment files in Kafka's layout.

Segments are named by their 20-digit base offset (``00000000000000000000.log``) and hold record batches
v2 byte for byte. A segment's file is opened at its first use and may be closed while idle, within the
engine's bound on open files (storage/open_files.py). Each segment keeps a sparse index, as Kafka's
offset and time indexes are sparse: one entry per ``index.interval.bytes`` (4096 by default) of batches,
holding the base offset and file position of the run's first batch and the largest timestamp in the
run. Its entries live in blocks in a side file beside the segment, with only a coarse level resident
(storage/segment_index.py), so memory follows the number of segments, not the bytes stored. A lookup
takes the nearest entry at or below its target and walks the batch headers forward from there, within
one run. The index is rebuilt from the batch headers at open (or read from the file a clean close
left); at open the last segment is also CRC-checked and a torn or corrupt tail is truncated and logged.
Nothing here fsyncs on append: ``flush()`` does, and the GroupCommitter decides when.
"""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import errno
import json
import logging
import os
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crc32c import crc32c

from groupd.clock import wall_ms
from groupd.storage import open_files
from groupd.storage.batch import (
    BATCH_OVERHEAD,
    CRC_START,
    LOG_OVERHEAD,
    BatchHeader,
    build_batch,
    iter_batches,
    parse_header,
    set_base_offset,
)
from groupd.storage.cleaning import Cleaner, cleanable, iter_records_safe
from groupd.storage.engine import CompactionStats, LogConfig, SegmentInfo
from groupd.storage.errors import DiskFull, OffsetOutOfRange, RecordTooLarge, StorageError
from groupd.storage.logdirfailure import channel as log_dir_failures
from groupd.storage.open_files import UNBOUNDED, OpenFiles, close_handle
from groupd.storage.segment_index import SegmentIndex

log = logging.getLogger("groupd.storage")
START_CHECKPOINT = "log-start-offset"
READ_CHUNK = 8 << 20
# A segment's sparse index, its blocks and the trailer a clean close appends (storage/segment_index.py)
INDEX_SUFFIX = ".batches"
_SCAN_HEADER = struct.Struct(">qiibIhiqq")  # a batch header up to maxTimestamp
_RECORD_COUNT = struct.Struct(">i")  # at position 57
_LEADER_EPOCH = struct.Struct(">i")  # partitionLeaderEpoch, at position 12
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_NO_ROOM_EVERY_S = 10.0
_no_room = {"last": -_NO_ROOM_EVERY_S, "missed": 0}


def no_room_line(message: str, *args: object) -> None:
    """One ERROR line per 10 s while the disk stays full, counting the ones held back."""
    now = time.monotonic()
    if now - _no_room["last"] < _NO_ROOM_EVERY_S:
        _no_room["missed"] += 1
        return
    missed, _no_room["last"], _no_room["missed"] = _no_room["missed"], now, 0
    log.error(message + (f" ({missed:.0f} more since the last such line)" if missed else ""), *args)


_FIND = struct.Struct(">qi11xi")  # baseOffset, batchLength, and lastOffsetDelta (at position 23)
_REACH = struct.Struct(">qi11xi8xq")  # the same and maxTimestamp (at position 35)
WALK_READ = 16 << 10  # bytes read at a time while walking batch headers forward from an index entry


@dataclass(slots=True)
class Segment:
    base_offset: int
    path: Path
    handle: int  # the open descriptor, or -1: opened at the next use (storage/open_files.py)
    size: int = 0
    created_ms: int = 0
    interval: int = 4096  # index.interval.bytes: a new index entry once a run holds this many bytes
    # the sparse index, one entry per run of batches: the run's first batch's base offset and file
    # position, and the largest batch max timestamp in the run (the time index); in the side file
    # beside the segment but for a coarse level (storage/segment_index.py)
    index: SegmentIndex = field(init=False)
    next_offset: int = 0
    max_timestamp: int = -1
    indexed: tuple[int, int, int] | None = None  # (inode, size, mtime) the index file on disk describes
    used: int = 0  # when the descriptor was last asked for (open_files' clock): the oldest close first
    owner: Log | None = None  # the log whose locks say whether the file is idle
    files: OpenFiles = UNBOUNDED  # the bound this file counts against

    def __post_init__(self) -> None:
        self.index = SegmentIndex(self.interval, self.path.with_suffix(INDEX_SUFFIX), self)

    @property
    def fd(self) -> int:
        """The segment file's descriptor, opened again if it was closed while idle; StorageError (one
        line per 10 s when descriptors ran out) if it cannot be."""
        self.used = next(open_files.tick)
        fd = self.handle
        return fd if fd >= 0 else self._reopen()

    def _reopen(self) -> int:
        with open_files.lock:
            if self.handle >= 0:  # another thread opened it meanwhile
                return self.handle
            try:
                fd = os.open(self.path, os.O_RDWR)
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    no_room_line("opening %s failed: %s (ulimit -n, or log.max.open.files)", self.path, exc)
                raise StorageError(f"opening {self.path.name} of {self.path.parent.name} failed: {exc}") from exc
            self.handle = fd
            if self.files.limit is not None:  # unbounded: nothing to count, nothing held
                self.files.files[id(self)] = self
        self.files.opened(self)
        return fd

    def attach(self, fd: int, owner: Log) -> None:
        """A descriptor just opened for this segment, counted against the bound."""
        self.owner, self.files = owner, owner.files
        self.used = next(open_files.tick)
        with open_files.lock:
            self.handle = fd
            if self.files.limit is not None:
                self.files.files[id(self)] = self
        self.files.opened(self)

    def evict(self) -> bool:
        """Close the file if it is idle (see storage/open_files.py); True when it was closed."""
        return self.owner is not None and self.owner.close_idle(self)

    def close_file(self) -> None:
        """Close the segment file's descriptor and its index's, where they are open."""
        close_handle(self)
        self.index.close_reader()

    def reader_opened(self, index: SegmentIndex) -> None:
        """The index's side file holds a descriptor now: counted against the bound as a file of its own,
        closed with the segment's (``evict``)."""
        self.used = next(open_files.tick)
        with open_files.lock:
            if self.files.limit is not None:
                self.files.files[id(index)] = self
        self.files.opened(self)

    def reader_closed(self, index: SegmentIndex) -> None:
        with open_files.lock:
            self.files.files.pop(id(index), None)

    def add(self, base: int, last: int, position: int, max_ts: int) -> None:
        """Index a batch appended at ``position`` (see SegmentIndex.add)."""
        self.index.add(base, position, max_ts)
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
        self.next_offset = last + 1

    def add_header(self, header: BatchHeader, position: int) -> None:
        self.add(header.base_offset, header.last_offset, position, header.max_timestamp)

    def walk(self, start: int, stop: int | None = None) -> Iterator[tuple[int, int, int, int, int]]:
        """(position, base offset, last offset, max timestamp, size) of each batch from ``start`` (a batch
        boundary) to ``stop`` (the segment's end by default), read from the headers a block at a time."""
        end = self.size if stop is None else stop
        unpack = _SCAN_HEADER.unpack_from
        head = _SCAN_HEADER.size
        pos, buf, at = start, b"", start
        while pos < end:
            rel = pos - at
            if rel + head > len(buf):  # the rest of the range and the header after it, at most WALK_READ
                want = min(WALK_READ, self.size - pos, max(end - pos, 0) + head)
                buf, at, rel = os.pread(self.fd, want, pos), pos, 0
                if len(buf) < head:
                    return
            base, length, _epoch, _magic, _crc, _attrs, last_delta, _base_ts, max_ts = unpack(buf, rel)
            size = length + LOG_OVERHEAD
            yield pos, base, base + last_delta, max_ts, size
            pos += size

    def read_run(self, pos: int, end: int) -> tuple[bytes, int, int]:
        """The run from ``pos`` to ``end`` (-1: the segment's end) read whole with the header after it, in
        one pread: (the bytes, ``pos``, the run's end)."""
        if end < 0:
            end = self.size
        return os.pread(self.fd, min(end - pos + _SCAN_HEADER.size, self.size - pos), pos), pos, end

    def locate(self, offset: int) -> tuple[bytes, int, int, int] | None:
        """The first batch whose last offset is >= ``offset`` (compaction leaves holes), or None: (buf, at,
        start, size), ``buf`` read from file position ``at``, holding the batch's header whole (its records
        too when the batch ends inside the run), the batch at ``start``, ``size`` bytes.

        A Fetch's path: the run is read once and its headers walked in a tight loop (one small unpack per
        batch), not through ``walk``, and the batch's size taken from that same read, so a read of a
        batch inside its run is one pread of the log (three before: the run, the headers from the batch
        on, the batch)."""
        if not self.index.count:
            return None
        buf, pos, end = self.read_run(*self.index.run_of(offset))
        rel, stop, have = 0, end - pos, len(buf) - _SCAN_HEADER.size
        find = _FIND.unpack_from
        while rel < stop and rel <= have:
            base, length, delta = find(buf, rel)
            if base + delta >= offset:
                return buf, pos, pos + rel, length + LOG_OVERHEAD
            rel += length + LOG_OVERHEAD
        # none in the run: the next run's first batch starts past ``offset``
        if end >= self.size:
            return None
        buf = os.pread(self.fd, min(WALK_READ, self.size - end), end)
        if len(buf) < _SCAN_HEADER.size:
            return None
        return buf, end, end, _FIND.unpack_from(buf)[1] + LOG_OVERHEAD

    def holding(self, offset: int) -> tuple[int, int] | None:
        """The position and base offset of the first batch whose last offset is >= ``offset``, or None."""
        found = self.locate(offset)
        if found is None:
            return None
        buf, at, start, _size = found
        return start, _FIND.unpack_from(buf, start - at)[0]

    def reaching(self, ts: int, floor: int) -> bytes | None:
        """The first batch with a timestamp >= ``ts`` whose last offset is >= ``floor`` (the log start), or
        None: the run the time index names read once and its headers walked in it (one unpack per
        batch), the batch cut from that read; on past the run only when its batches reaching ``ts`` all
        lie below ``floor``."""
        run = self.index.run_reaching(ts)
        if run is None:
            return None
        buf, pos, end = self.read_run(*run)
        rel, stop, have = 0, end - pos, len(buf) - _SCAN_HEADER.size
        reach = _REACH.unpack_from
        while rel < stop and rel <= have:
            base, length, delta, max_ts = reach(buf, rel)
            size = length + LOG_OVERHEAD
            if max_ts >= ts and base + delta >= floor:
                return buf[rel : rel + size]
            rel += size
        for at, _base, last, max_ts, size in self.walk(end) if end < self.size else ():
            if max_ts >= ts and last >= floor:
                return self.pread(at, at + size)
        return None

    def first_from(self, offset: int) -> int:
        """The position of the first batch whose base offset is >= ``offset`` (the end when none is)."""
        if offset >= self.next_offset:  # past the segment (a READ_COMMITTED fetch of an older one)
            return self.size
        if not self.index.count:
            return self.size
        # the run of the last entry below ``offset`` (the first run when none is: its first batch is the
        # answer then), its block looked at once
        start, end = self.index.run_of(offset - 1)
        if end < 0:
            end = self.size
        for pos, base, _last, _ts, _size in self.walk(start, end):
            if base >= offset:
                return pos
        return end

    def whole_batches_end(self, start: int, first_size: int, limit: int) -> int:
        """The end of the last whole batch from ``start`` that ends at or below ``limit``; at least the
        first batch's end."""
        if start + first_size >= limit:
            return start + first_size
        if self.size <= limit:  # the rest of the segment fits: no index block to read
            return self.size
        from_ = max(self.index.floor_start(limit), start)
        end = max(start + first_size, from_)
        for pos, _base, _last, _ts, size in self.walk(from_, limit):  # the headers up to it, not 16 KiB
            if pos + size > limit:
                break
            end = pos + size
        return end

    def pread(self, start: int, end: int) -> bytes:
        return os.pread(self.fd, end - start, start)


@dataclass(frozen=True, slots=True)
class _EndMark:
    """A journaled log's end at one moment: its active segment and that segment's size, index length,
    last run's timestamp, largest timestamp and next offset, so batches placed after it can be taken
    back exactly (``Log.retract_taken``)."""

    segment: Segment
    size: int
    runs: int
    run_ts: int
    max_timestamp: int
    next_offset: int

    @classmethod
    def of(cls, seg: Segment) -> _EndMark:
        return cls(seg, seg.size, len(seg.index), seg.index.last_ts(), seg.max_timestamp, seg.next_offset)


def no_room(exc: OSError) -> bool:
    """The file system had no room for a write (a full disk, a quota, the file size limit): nothing
    earlier was touched, so the write can be refused and tried again, unlike a failed fsync."""
    return exc.errno in _NO_ROOM


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


class Log:
    def __init__(self, directory: Path, config: LogConfig, now_ms: Callable[[], int]) -> None:
        self.directory = directory
        self.config = config
        self.now_ms = now_ms
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        # _lock: one flush at a time, and segment files are not closed or swapped while one runs.
        # _state: the bookkeeping appends and flushes share (held briefly, never across an fsync), so a
        # flush's snapshot of what is dirty is atomic with respect to appends and rolls.
        self._lock = threading.Lock()
        self._state = threading.Lock()
        self._failed: BaseException | None = None
        self._closed = False
        self._dirty: set[int] = set()  # fds written since the last flush
        self._dir_dirty = False
        self.unflushed_messages = 0
        # write_behind: appends stay in memory and the next flush writes them just before its fsync, in
        # the flush thread. Only for logs that are read rarely and flushed after every append (the
        # offsets store): the event loop then never blocks in write(2) behind a running journal commit.
        self.write_behind = False
        self._unwritten: list[tuple[int, int, bytes | bytearray]] = []  # (fd, position, batch)
        self._writing = False  # a flush has taken unwritten batches and not written them yet
        # journaled (write_behind logs of the offsets store, see storage/journal.py): each batch also
        # goes to the shared journal, whose fdatasync makes it durable; the log's own file is written
        # later and made durable by a checkpoint's syncfs
        self.journal_partition: int | None = None
        self.files: OpenFiles = UNBOUNDED
        self._unjournaled: list[bytes | bytearray] = []
        # the log's end before its first batch not yet taken for the journal, and before the batches the
        # last take handed out: what ``retract_taken`` goes back to when the journal had no room for them
        self._journal_mark: _EndMark | None = None
        self._taken_mark: _EndMark | None = None

    # ------------------------------------------------------------ open / recover

    @classmethod
    def open(
        cls, directory: Path, config: LogConfig | None = None, *, now_ms: Callable[[], int] = wall_ms,
        files: OpenFiles = UNBOUNDED,
    ) -> Log:
        """``files``: the bound on open segment files this log's count against (its engine's)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self = cls(directory, config or LogConfig(), now_ms)
        self.files = files
        for tmp in directory.glob("*.cleaned"):
            tmp.unlink()  # an interrupted compaction: the original segment is still in place
        for tmp in directory.glob(f"*{INDEX_SUFFIX}-tmp"):
            tmp.unlink()  # an index an earlier version was writing when it was interrupted
        for index in directory.glob(f"*{INDEX_SUFFIX}"):
            if not index.with_suffix(".log").exists():
                index.unlink()  # its segment was deleted after the close that wrote it
        paths = sorted(directory.glob("*.log"))
        # held while loading: the thread that closes idle files (storage/open_files.py) closes none of
        # these meanwhile, whichever thread opens the log
        with self._lock:
            try:
                for i, path in enumerate(paths):
                    self._load_segment(path, last=i == len(paths) - 1)
                if not self.segments:
                    self._new_segment(0)
            except BaseException:
                for seg in self.segments:  # no descriptor outlives a log that could not be opened
                    seg.close_file()
                raise
        checkpoint = directory / START_CHECKPOINT
        if checkpoint.exists():
            try:
                self.log_start_offset = int(checkpoint.read_text().strip() or 0)
            except ValueError:
                log.warning("ignoring unreadable %s", checkpoint)
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        if self.files.over and threading.get_ident() != self.files.owner:
            for seg in self.segments:  # opened on a worker thread: nobody else can be using them yet
                seg.close_file()
        return self

    def close_idle(self, seg: Segment) -> bool:
        """Close ``seg``'s file if nothing can be using it: no flush or write-out holds the log's locks
        (taken without waiting), and the file has nothing unwritten or unsynced (storage/open_files.py)."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if not self._state.acquire(blocking=False):
                return False
            try:
                if seg.handle < 0 and seg.index.reader < 0:
                    return False
                if seg.handle in self._dirty or self._unwritten or self._writing:
                    return False
                seg.close_file()
                return True
            finally:
                self._state.release()
        finally:
            self._lock.release()

    def _load_segment(self, path: Path, last: bool) -> None:
        base = int(path.stem)
        fd = os.open(path, os.O_RDWR)
        st = os.fstat(fd)
        seg = Segment(
            base, path, -1, created_ms=st.st_mtime_ns // 1_000_000, next_offset=base,
            interval=self.config.index_interval_bytes,
        )
        seg.attach(fd, self)
        file_size = st.st_size
        if self._read_index(seg, st):
            # the file is exactly as a clean close left it: no scan, and (as Kafka after a clean
            # shutdown) no recovery of the last segment
            seg.size = file_size
            self.segments.append(seg)
            self._bases.append(base)
            return
        seg.index.forget_file()  # missing, stale or torn: the scan writes it again
        end, reason = self._scan(seg, file_size, verify=last)
        if end < file_size:
            log.warning(
                "recovery of %s: truncated %d bytes at position %d (%s); log end offset %d",
                path, file_size - end, end, reason, seg.next_offset,
            )
            os.ftruncate(fd, end)
            os.fsync(fd)
        seg.size = end
        if not last:
            seg.index.seal()  # a rolled segment keeps only its coarse index in memory
        self.segments.append(seg)
        self._bases.append(base)

    @staticmethod
    def _read_index(seg: Segment, st: os.stat_result) -> bool:
        """Fill ``seg``'s coarse index from the side file a clean close left, if it describes this very
        file (same inode, size and mtime, intact): a start after a clean shutdown then reads no segment
        data."""
        next_offset = seg.index.load(st)
        if next_offset is None:
            return False
        if len(seg.index) and seg.index.first_offsets[0] < seg.base_offset:
            seg.index.forget_file()
            return False
        seg.next_offset = next_offset
        seg.max_timestamp = seg.index.max_timestamp()
        seg.indexed = (st.st_ino, st.st_size, st.st_mtime_ns)
        return True

    def _write_indexes(self) -> None:
        """At a clean close (everything appended is fsynced, nothing failed): each segment's index side
        file sealed with its trailer, so the next open need not scan the segments (Kafka keeps index
        files and skips recovery after a clean shutdown for the same reason). Not fsynced: a lost or torn
        index only means a scan. Any later change of the segment file changes its size or mtime, which
        voids the trailer; a segment unchanged since its index was read or written keeps the file it has."""
        if self._failed is not None or self._dirty or self._unwritten or self._writing:
            return
        for seg in self.segments:
            try:
                if seg.size == 0:
                    continue  # nothing to scan at the next open
                st = os.fstat(seg.handle) if seg.handle >= 0 else os.stat(seg.path)
                if st.st_size != seg.size or seg.indexed == (st.st_ino, st.st_size, st.st_mtime_ns):
                    continue  # changed under us; or unchanged since its index was read or written
                seg.index.write_trailer(st, seg.next_offset)
                seg.indexed = (st.st_ino, st.st_size, st.st_mtime_ns)
            except OSError as exc:
                log.warning("no batch index for %s: %s", seg.path, exc)

    @staticmethod
    def _scan(seg: Segment, file_size: int, verify: bool) -> tuple[int, str]:
        """Index every whole batch (sparsely); returns where the valid data ends and why it ends there.

        Runs at every start over every segment, so it reads header fields with one struct and no
        header objects."""
        pos = 0
        unpack = _SCAN_HEADER.unpack_from
        add = seg.add
        seen = False
        while pos < file_size:
            chunk = os.pread(seg.fd, min(READ_CHUNK, file_size - pos), pos)
            view = memoryview(chunk)
            rel = 0
            while True:
                if len(chunk) - rel < BATCH_OVERHEAD:
                    if pos + rel + BATCH_OVERHEAD > file_size:
                        return pos + rel, "incomplete batch header" if pos + rel < file_size else ""
                    break
                base, length, _epoch, magic, crc, _attrs, last_delta, _base_ts, batch_max_ts = unpack(chunk, rel)
                size = length + LOG_OVERHEAD
                if magic != 2 or length < BATCH_OVERHEAD - LOG_OVERHEAD:
                    try:
                        parse_header(chunk, rel)  # names the problem
                    except StorageError as exc:
                        return pos + rel, str(exc)
                if pos + rel + size > file_size:
                    return pos + rel, f"batch at offset {base} runs past the end of the file"
                if rel + size > len(chunk):
                    if rel == 0:
                        chunk = os.pread(seg.fd, size, pos)
                        view = memoryview(chunk)
                        continue
                    break
                if verify and crc32c(view[rel + CRC_START : rel + size]) != crc:
                    return pos + rel, f"CRC mismatch in batch at offset {base}"
                if seen and base < seg.next_offset:
                    return pos + rel, f"batch at offset {base} goes backwards"
                add(base, base + last_delta, pos + rel, batch_max_ts)
                seen = True
                rel += size
            pos += rel
        return pos, ""

    def _new_segment(self, base: int) -> Segment:
        path = self.directory / segment_name(base)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        seg = Segment(
            base, path, -1, created_ms=self.now_ms(), next_offset=base, interval=self.config.index_interval_bytes
        )
        seg.attach(fd, self)
        self.segments.append(seg)
        self._bases.append(base)
        self._dir_dirty = True
        return seg

    # ------------------------------------------------------------ properties

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.active.next_offset

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def dirty(self) -> bool:
        return bool(self._dirty) or self._dir_dirty

    @property
    def failed(self) -> bool:
        """True after a failed fsync: the log refuses appends and flushes until reopened."""
        return self._failed is not None

    def _check_usable(self) -> None:
        if self._closed:
            raise StorageError(f"log {self.directory.name} is closed")
        if self._failed is not None:
            raise StorageError(f"log {self.directory.name} is offline after a failed fsync: {self._failed}")

    # ------------------------------------------------------------ writes

    def append(self, batch: bytes | bytearray, leader_epoch: int | None = None) -> tuple[int, int]:
        """Store one v2 batch at the log end (its base offset is rewritten, and its partitionLeaderEpoch
        when ``leader_epoch`` is given: a leader stamps a producer's batch with its own); not yet durable."""
        size = len(batch)
        if size > self.config.max_message_bytes or size > self.config.segment_bytes:
            raise RecordTooLarge(
                f"batch of {size} bytes exceeds max.message.bytes {self.config.max_message_bytes} "
                f"or segment.bytes {self.config.segment_bytes}"
            )
        buf = batch if isinstance(batch, bytearray) else bytearray(batch)
        if size < BATCH_OVERHEAD:
            parse_header(buf, 0)  # raises, naming the problem
        _base, length, _epoch, magic, _crc, _attrs, last_delta, _base_ts, max_ts = _SCAN_HEADER.unpack_from(buf, 0)
        if magic != 2 or length < BATCH_OVERHEAD - LOG_OVERHEAD:
            parse_header(buf, 0)  # raises, naming the problem
        (record_count,) = _RECORD_COUNT.unpack_from(buf, 57)
        if leader_epoch is not None:
            _LEADER_EPOCH.pack_into(buf, 12, leader_epoch)  # outside the CRC, like the base offset
        return self._place(buf, size, last_delta, max_ts, record_count)

    def _place(self, buf: bytearray, size: int, last_delta: int, max_ts: int, record_count: int) -> tuple[int, int]:
        """Give a checked batch its base offset and its place at the log end."""
        with self._state:
            self._check_usable()
            seg = self.segments[-1]
            if seg.size > 0 and (
                seg.size + size > self.config.segment_bytes or self.now_ms() - seg.created_ms >= self.config.segment_ms
            ):
                if self.journal_partition is not None:
                    self._seal(seg)
                try:
                    seg = self._roll()
                except OSError as exc:  # no room (or no inode) for the next segment's file
                    no_room_line("rolling %s failed: %s", self.directory, exc)
                    raise DiskFull(f"rolling {self.directory.name} failed: {exc}") from exc
            base = seg.next_offset
            set_base_offset(buf, 0, base)
            if self.write_behind:
                self._unwritten.append((seg.fd, seg.size, buf))
                if self.journal_partition is not None:
                    if not self._unjournaled:
                        self._journal_mark = _EndMark.of(seg)
                    self._unjournaled.append(buf)
            else:
                try:
                    written = os.pwrite(seg.fd, buf, seg.size)
                    if written != size:  # a regular file's write comes up short only when space runs out
                        raise OSError(errno.ENOSPC, f"short write: {written} of {size} bytes")
                except OSError as exc:
                    with contextlib.suppress(OSError):
                        os.ftruncate(seg.fd, seg.size)
                    if no_room(exc):
                        # nothing of it stays and nothing earlier was touched: refused, not a failed directory
                        no_room_line("append to %s refused, no room: %s", seg.path, exc)
                        raise DiskFull(f"append to {self.directory.name} refused: {exc}") from exc
                    # the log is whole again (truncated back), but the directory is offline as in Kafka
                    log.error("write to %s failed: %s", seg.path, exc)
                    log_dir_failures.report(f"write to {seg.path}", exc)
                    raise StorageError(f"append to {self.directory.name} failed: {exc}") from exc
            seg.add(base, base + last_delta, seg.size, max_ts)
            seg.size += size
            self._dirty.add(seg.fd)
            self.unflushed_messages += record_count
            return base, base + last_delta

    def append_records(
        self, records: Sequence[tuple[bytes | None, bytes | None]], timestamp_ms: int | None = None,
        *, producer_id: int = -1, producer_epoch: int = -1, attributes: int = 0,
    ) -> tuple[int, int]:
        """A batch of these records, built here: it needs none of ``append``'s checks of a stranger's.
        A producer id and the TRANSACTIONAL attribute make it a transaction's batch."""
        ts = self.now_ms() if timestamp_ms is None else timestamp_ms
        buf = build_batch(
            records,
            timestamp_ms=ts,
            mutable=True,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            attributes=attributes,
        )
        size = len(buf)
        if size > self.config.max_message_bytes or size > self.config.segment_bytes:
            return self.append(buf)  # raises RecordTooLarge, naming the limits
        return self._place(buf, size, len(records) - 1, ts, len(records))

    def _roll(self) -> Segment:
        old = self.active
        self._dirty.add(old.fd)
        old.index.seal()  # a rolled segment keeps only its coarse index in memory
        return self._new_segment(old.next_offset)

    def flush(self) -> None:
        """fsync everything appended before the call (and the directory after a roll). Thread-safe:
        runs in a worker thread while the event loop keeps appending.

        A failed fsync takes the log offline (Kafka marks the log dir offline): after an fsync error the
        kernel may have dropped the dirty pages, so a retry could report durability falsely.
        """
        with self._lock:
            taken = self._take_dirty()
            if taken is None:
                return
            fds, dir_dirty, pending, writes = taken
            try:
                self._write_out(writes)
            except OSError as exc:
                if not no_room(exc):
                    self._flush_failed(pending, exc)
                self._refused_write(taken, exc)
            try:
                for fd in fds:
                    os.fsync(fd)
                if dir_dirty:
                    fsync_directory(self.directory)
            except OSError as exc:
                self._flush_failed(pending, exc)

    def _take_dirty(self) -> tuple[set[int], bool, int, list] | None:
        """What the next flush must write and make durable (None: closed); the caller holds ``_lock``."""
        with self._state:
            if self._closed:
                return None  # close() comes after the last flush; nothing can be appended since
            self._check_usable()
            fds, self._dirty = self._dirty, set()
            dir_dirty, self._dir_dirty = self._dir_dirty, False
            pending, self.unflushed_messages = self.unflushed_messages, 0
            writes, self._unwritten = self._unwritten, []
            self._writing = bool(writes)
            return fds, dir_dirty, pending, writes

    def _refused_write(self, taken: tuple[set[int], bool, int, list], exc: OSError) -> None:
        """A flush's writes found no room: what it took is pending again, as if it had never been taken
        (writing the same bytes at the same places again is harmless), and the caller learns DiskFull."""
        fds, dir_dirty, pending, writes = taken
        with self._state:
            self._dirty |= fds
            self._dir_dirty |= dir_dirty
            self.unflushed_messages += pending
            self._unwritten[:0] = writes
        no_room_line("writing %s out refused, no room: %s", self.directory, exc)
        raise DiskFull(f"writing {self.directory.name} out refused: {exc}") from exc

    def _write_out(self, writes: list[tuple[int, int, bytes | bytearray]]) -> None:
        """Write taken batches; the caller holds ``_lock``."""
        try:
            _write_runs(writes)
        finally:
            self._writing = False

    def _seal(self, seg: Segment) -> None:
        """A journaled log's segment made durable before the next one is made (the caller holds
        ``_state``): after a power loss only the last segment is recovered by truncation, and the
        journal can restore batches at the log's end only, so no earlier segment may lack any."""
        writes, self._unwritten = self._unwritten, []
        try:
            _write_runs(writes)
        except OSError as exc:
            self._unwritten[:0] = writes
            if no_room(exc):  # nothing is lost: no roll, and the append that wanted one is refused
                no_room_line("sealing %s refused, no room: %s", seg.path, exc)
                raise DiskFull(f"sealing a segment of {self.directory.name} refused: {exc}") from exc
            self._failed = exc
            log.error("sealing %s failed; log offline until reopened: %s", seg.path, exc)
            log_dir_failures.report(f"write of {seg.path}", exc)
            raise StorageError(f"sealing a segment of {self.directory.name} failed: {exc}") from exc
        try:
            os.fsync(seg.fd)
            fsync_directory(self.directory)  # and its name, made at the roll before
        except OSError as exc:
            self._failed = exc
            log.error("sealing %s failed; log offline until reopened: %s", seg.path, exc)
            log_dir_failures.report(f"fsync of {seg.path}", exc)
            raise StorageError(f"sealing a segment of {self.directory.name} failed: {exc}") from exc

    def _settle(self) -> None:
        """Before reading files or swapping segments: every appended batch is in its file (not fsynced)."""
        self.write_pending()

    def write_pending(self) -> None:
        """Write the unwritten batches now, on the caller's thread; the next flush then only syncs.

        The offsets store calls this on the event loop just before handing a round to the flush
        thread: a few small writes there cost less than the flush thread taking the GIL back from a
        busy event loop after each of its write(2) calls."""
        if not (self._unwritten or self._writing):
            return
        with self._lock:  # waits for a flush that is writing what it took
            with self._state:
                writes, self._unwritten = self._unwritten, []
            try:
                self._write_out(writes)
            except OSError as exc:
                if no_room(exc):  # still pending (in the journal, or not yet acknowledged): tried again later
                    with self._state:
                        self._unwritten[:0] = writes
                    no_room_line("writing %s out refused, no room: %s", self.directory, exc)
                    raise DiskFull(f"writing {self.directory.name} out refused: {exc}") from exc
                with self._state:
                    self._failed = exc
                log.error("write to %s failed; log offline until reopened: %s", self.directory, exc)
                log_dir_failures.report(f"write to {self.directory}", exc)
                raise StorageError(f"write to {self.directory.name} failed: {exc}") from exc

    def take_for_sync(self) -> tuple[set[int], bool, int, list] | None:
        """Everything appended so far, written out, as one flush's share; the caller then syncs the
        whole filesystem (a syncfs) and reports a failure with ``_flush_failed``."""
        with self._lock:
            taken = self._take_dirty()
            if taken is not None and taken[3]:
                try:
                    self._write_out(taken[3])
                except OSError as exc:
                    if not no_room(exc):
                        self._flush_failed(taken[2], exc)
                    self._refused_write(taken, exc)
            return taken

    def give_back(self, taken: tuple[set[int], bool, int, list]) -> None:
        """A share ``take_for_sync`` handed out that will not be synced after all (a checkpoint that
        found no room elsewhere): it is pending again, for the next flush."""
        fds, dir_dirty, pending, _writes = taken
        with self._state:
            self._dirty |= fds
            self._dir_dirty |= dir_dirty
            self.unflushed_messages += pending

    def take_for_journal(self) -> tuple[list[bytes | bytearray], int]:
        """The batches appended since the last call, for the journal (they stay unwritten here until
        ``write_pending`` or a checkpoint's ``take_for_sync``), and the count of their messages."""
        with self._state:
            self._check_usable()
            bufs, self._unjournaled = self._unjournaled, []
            self._taken_mark, self._journal_mark = self._journal_mark, None
            pending, self.unflushed_messages = self.unflushed_messages, 0
            return bufs, pending

    def retract_taken(self) -> None:
        """The journal had no room for the batches the last ``take_for_journal`` handed out: none of them
        was acknowledged, and they are the log's tail (the journal is appended to right after the take,
        on the same thread), so the log goes back to its end before them: index, sizes, unwritten
        batches, segments rolled since, and any of their bytes already in a file. Their offsets are
        given again to the next appends, as Kafka's log end stays where it was after a failed append."""
        mark, self._taken_mark = self._taken_mark, None
        if mark is None:
            return
        with self._lock, self._state:
            i = next((i for i, s in enumerate(self.segments) if s is mark.segment), None)
            if i is None:  # the segment was compacted away meanwhile: the tail is unknown, take the log offline
                exc = OSError(errno.EIO, "the segment a refused append started in is gone")
                self._failed = exc
                log_dir_failures.report(f"retracting refused appends to {self.directory}", exc)
                raise StorageError(f"retracting refused appends to {self.directory.name} failed: {exc}")
            seg = mark.segment
            dropped = {s.handle for s in self.segments[i + 1 :]}
            for later in self.segments[i + 1 :]:
                self._dirty.discard(later.handle)
                later.close_file()
                later.path.unlink(missing_ok=True)
                later.index.forget_file()
                self._dir_dirty = True
            del self.segments[i + 1 :], self._bases[i + 1 :]
            kept = [w for w in self._unwritten if w[0] not in dropped and (w[0] != seg.handle or w[1] < mark.size)]
            self._unwritten = kept
            with contextlib.suppress(OSError):  # a shrink needs no room; bytes past the end are unread anyway
                if os.fstat(seg.fd).st_size > mark.size:
                    os.ftruncate(seg.fd, mark.size)
                    self._dirty.add(seg.fd)
            seg.index.cut(mark.runs)
            if mark.runs:
                seg.index.set_last_ts(mark.run_ts)
            seg.size, seg.next_offset, seg.max_timestamp = mark.size, mark.next_offset, mark.max_timestamp

    @property
    def unwritten_batches(self) -> int:
        return len(self._unwritten)

    def _flush_failed(self, pending: int, exc: OSError) -> None:
        with self._state:
            self._failed = exc
            self.unflushed_messages += pending
        log.error("fsync of %s failed; log offline until reopened: %s", self.directory, exc)
        log_dir_failures.report(f"write or fsync of {self.directory}", exc)
        raise StorageError(f"fsync of {self.directory.name} failed: {exc}") from exc

    def any_fd(self) -> int | None:
        return self.segments[-1].fd if self.segments else None

    # ------------------------------------------------------------ reads

    def read(self, offset: int, max_bytes: int, upto: int | None = None) -> bytes:
        """Whole stored batches from the one holding ``offset``; at least one batch when any exists.
        ``upto``: only batches that start below it (a READ_COMMITTED fetch stops at the stable offset)."""
        self._settle()
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}]")
        if offset == self.log_end_offset:
            return b""
        si = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        for seg in self.segments[si:]:
            # the first batch whose last offset is >= offset: compaction can leave holes, even whole
            # empty segments, and a fetch must then move on to the next batch rather than stall
            found = seg.locate(offset)
            if found is None:
                continue
            buf, at, start, first_size = found
            stop = seg.size
            if upto is not None:
                stop = seg.first_from(upto)
                if stop <= start:
                    return b""
            # the end of the last whole batch that fits, but always at least the first batch
            end = min(seg.whole_batches_end(start, first_size, start + max(max_bytes, 0)), stop)
            if end <= at + len(buf):  # all in the run just read
                return buf[start - at : end - at]
            return seg.pread(start, end)
        return b""

    def headers(self, last_segments: int | None = None) -> Iterator[BatchHeader]:
        """Every stored batch's header, in order, walked from the segments' starts (small reads, no record
        data); ``last_segments``: only the newest few."""
        self._settle()
        for seg in self.segments[-last_segments:] if last_segments else self.segments:
            for pos, _base, _last, _ts, _size in seg.walk(0):
                header = parse_header(seg.pread(pos, pos + BATCH_OVERHEAD), 0)
                if header.last_offset >= self.log_start_offset:
                    yield header

    def segments_info(self) -> list[SegmentInfo]:
        """Each segment's base offset, size and file modification time (ms; 0 when it cannot be read)."""
        infos = []
        for seg in self.segments:
            try:
                modified = os.stat(seg.path).st_mtime_ns // 1_000_000
            except OSError:
                modified = 0
            infos.append(SegmentInfo(seg.base_offset, seg.size, modified))
        return infos

    def save_snapshot(self, name: str, state: Any) -> None:
        """Write ``state`` (JSON-able) beside the log as file ``name``, valid for the log end as it is now:
        what a clean stop leaves so the next open need not rebuild it by reading the log."""
        path = self.directory / name
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump({"end": self.log_end_offset, "state": state}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def load_snapshot(self, name: str) -> Any | None:
        """The state saved as ``name`` if it describes this very log end; None when there is none that
        does (none saved, unreadable, or the log moved on since: a crash)."""
        try:
            snap = json.loads((self.directory / name).read_text())
            return snap["state"] if snap["end"] == self.log_end_offset else None
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def batches(self, start_offset: int | None = None) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Every stored batch in order, read in big chunks (replay at start-up)."""
        self._settle()
        for seg in self.segments:
            if start_offset is not None and seg.next_offset <= start_offset:
                continue
            pos = 0
            while pos < seg.size:
                chunk = seg.pread(pos, min(seg.size, pos + READ_CHUNK))
                view = memoryview(chunk)
                consumed = 0
                for rel, header in iter_batches(view, 0):
                    consumed = rel + header.size
                    if start_offset is not None and header.last_offset < start_offset:
                        continue
                    if header.last_offset < self.log_start_offset:
                        continue
                    yield header, view[rel : rel + header.size]
                if consumed == 0:  # a batch larger than the chunk
                    size = parse_header(chunk, 0).size
                    chunk = seg.pread(pos, pos + size)
                    header = parse_header(chunk, 0)
                    if header.last_offset >= self.log_start_offset:
                        yield header, memoryview(chunk)
                    consumed = size
                pos += consumed

    def chunks(self) -> Iterator[memoryview]:
        """The whole log in big reads of whole batches (start-up replay), cut at batch boundaries with
        the in-memory index. Segments reaching below the log start offset go batch by batch."""
        self._settle()
        for seg in self.segments:
            if seg.base_offset < self.log_start_offset:
                for _header, batch in self._segment_batches_from(seg):
                    yield batch
                continue
            for start, end in self._chunk_bounds(seg):
                yield memoryview(seg.pread(start, end))

    def chunk_ranges(self) -> list[tuple[Segment, int, int]] | None:
        """What ``chunks`` reads, as (segment, start, end) file ranges another process can read; None
        when a segment reaches below the log start offset (its first batches are filtered one by one)."""
        self._settle()
        if self.segments and self.segments[0].base_offset < self.log_start_offset:
            return None
        return [(seg, start, end) for seg in self.segments for start, end in self._chunk_bounds(seg)]

    @staticmethod
    def _chunk_bounds(seg: Segment) -> Iterator[tuple[int, int]]:
        """Ranges of whole runs, each reaching READ_CHUNK bytes past its start by at most one run."""
        start = None
        for pos in seg.index.iter_positions():
            if start is None:
                start = pos
            elif pos > start + READ_CHUNK:
                yield start, pos
                start = pos
        if start is not None:
            yield start, seg.size

    def _segment_batches_from(self, seg: Segment) -> Iterator[tuple[BatchHeader, memoryview]]:
        for header, batch in self._segment_batches(seg):
            if header.last_offset >= self.log_start_offset:
                yield header, batch

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        """The first offset whose timestamp is >= ts_ms, with that timestamp (ListOffsets)."""
        self._settle()
        for seg in self.segments:
            if not len(seg.index) or seg.max_timestamp < ts_ms:
                continue
            batch = seg.reaching(ts_ms, self.log_start_offset)
            if batch is not None:
                for rec in iter_records_safe(batch):
                    if rec.timestamp >= ts_ms and rec.offset >= self.log_start_offset:
                        return rec.offset, rec.timestamp
                header = parse_header(batch, 0)
                return max(header.base_offset, self.log_start_offset), header.max_timestamp
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        self._settle()
        top: tuple[int, Segment] | None = None  # the first segment holding the largest timestamp
        for seg in self.segments:
            if len(seg.index) and (top is None or seg.index.max_timestamp() > top[0]):
                top = (seg.index.max_timestamp(), seg)
        if top is None:
            return None
        ts, seg = top
        run = seg.index.run_reaching(ts, exactly=True)
        if run is None:
            return None
        for pos, _base, last, batch_ts, size in seg.walk(run[0], seg.size if run[1] < 0 else run[1]):
            if batch_ts == ts:
                for rec in iter_records_safe(seg.pread(pos, pos + size)):
                    if rec.timestamp == ts:
                        return ts, rec.offset
                return ts, last
        return None

    # ------------------------------------------------------------ cleanup

    def _persist_start(self) -> None:
        path = self.directory / START_CHECKPOINT
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(str(self.log_start_offset))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def delete_records_before(self, offset: int) -> int:
        self._settle()
        with self._lock, self._state:
            return self._delete_records_before(offset)

    def _delete_records_before(self, offset: int) -> int:
        self._check_usable()
        if offset > self.log_end_offset:
            raise OffsetOutOfRange(f"offset {offset} is past the log end {self.log_end_offset}")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self._persist_start()
            if offset == self.log_end_offset and self.active.size > 0:
                self._roll()  # as Kafka does, so the emptied active segment can go too
            self._drop_segments_below(offset)
        return self.log_start_offset

    def _drop_segments_below(self, offset: int) -> int:
        dropped = 0
        while len(self.segments) > 1 and self.segments[1].base_offset <= offset:
            seg = self.segments.pop(0)
            self._bases.pop(0)
            self._dirty.discard(seg.handle)
            seg.close_file()
            seg.path.unlink(missing_ok=True)
            seg.path.with_suffix(INDEX_SUFFIX).unlink(missing_ok=True)
            dropped += 1
        return dropped

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= ``offset``: whole segments from the end, then the
        tail of the last one kept, cut at a batch boundary (as Kafka's truncateTo). Durable at the next
        flush, like an append."""
        self._settle()
        with self._lock, self._state:
            self._check_usable()
            if offset < self.log_start_offset:
                raise OffsetOutOfRange(f"offset {offset} is below the log start {self.log_start_offset}")
            if offset >= self.log_end_offset:
                return self.log_end_offset
            while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
                seg = self.segments.pop()
                self._bases.pop()
                self._dirty.discard(seg.handle)
                seg.close_file()
                seg.path.unlink(missing_ok=True)
                seg.path.with_suffix(INDEX_SUFFIX).unlink(missing_ok=True)
                self._dir_dirty = True
            seg = self.segments[-1]
            found = seg.holding(offset)
            if found is not None:
                cut, end = found[0], found[1]
                try:
                    os.ftruncate(seg.fd, cut)
                except OSError as exc:
                    raise StorageError(f"truncating {seg.path} failed: {exc}") from exc
                kept = seg.index.lower_position(cut)
                seg.index.cut(kept)
                seg.size = cut
                seg.next_offset = end
                if kept:  # the last run kept may have counted a timestamp cut off with its batches
                    seg.index.set_last_ts(max(b[3] for b in seg.walk(seg.index.position(kept - 1))))
                seg.max_timestamp = seg.index.max_timestamp()
                self._dirty.add(seg.fd)
            return self.log_end_offset

    def mark(self, name: str) -> None:
        """A durable flag: an empty file ``name`` in the partition's directory, synced with its name."""
        flag = self.directory / name
        if flag.exists():
            return
        fd = os.open(flag, os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_directory(self.directory)

    def is_marked(self, name: str) -> bool:
        return (self.directory / name).exists()

    def apply_retention(self, now_ms: int) -> int:
        """Delete closed segments older than retention.ms or beyond retention.bytes."""
        if not self.config.delete:
            return 0  # cleanup.policy=compact: only the cleaner removes data
        self._settle()
        with self._lock, self._state:
            self._check_usable()
            return self._apply_retention(now_ms)

    def _apply_retention(self, now_ms: int) -> int:
        deleted = 0
        cfg = self.config
        while len(self.segments) > 1:
            seg = self.segments[0]
            too_old = cfg.retention_ms >= 0 and seg.size > 0 and now_ms - seg.max_timestamp > cfg.retention_ms
            too_big = cfg.retention_bytes >= 0 and self.size_bytes - seg.size >= cfg.retention_bytes
            if not (too_old or too_big):
                break
            self.log_start_offset = max(self.log_start_offset, self.segments[1].base_offset)
            self._drop_segments_below(self.segments[1].base_offset)
            deleted += 1
        if deleted:
            self._persist_start()
        return deleted

    def compact(self, now_ms: int, min_age_ms: int = 0) -> CompactionStats:
        """Keep the newest record per key in closed segments; drop old tombstones; offsets stay
        (storage/cleaning.py decides what stays, transactions included).

        ``min_age_ms`` leaves alone closed segments whose newest record is younger than that, so their
        full history stays readable (the offsets store's ``offsets.retain.uncompacted.hours``)."""
        self._settle()
        cleaner = Cleaner(self.batches(), now_ms, self.config.delete_retention_ms)
        closed = self.segments[:-1]
        ages = [s.max_timestamp for s in closed]
        closed = closed[: cleanable(ages, self._bases[1:], now_ms, min_age_ms, cleaner.first_unstable)]
        if not closed:
            return cleaner.stats
        cleaner.index(self.batches())
        for idx, seg in enumerate(closed):
            out = bytearray()
            new = Segment(
                seg.base_offset, seg.path, -1, created_ms=seg.created_ms, next_offset=seg.base_offset,
                interval=seg.interval,
            )  # fmt: skip
            new.index.path = None  # kept in memory until it replaces the segment's own side file
            for kept in cleaner.clean(self._segment_batches(seg)):
                new.add_header(parse_header(kept, 0), len(out))
                out += kept
            tmp = seg.path.with_suffix(".cleaned")
            try:
                with open(tmp, "wb") as f:
                    f.write(out)
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as exc:  # a full disk: the segment stays as it was, and so does the space
                tmp.unlink(missing_ok=True)
                raise StorageError(f"compacting {seg.path} failed: {exc}") from exc
            with self._lock, self._state:  # no flush is fsyncing the fd being replaced
                seg.index.forget_file()
                seg.indexed = None
                os.replace(tmp, seg.path)
                self._dirty.discard(seg.handle)
                seg.close_file()
                new.owner, new.files = self, self.files  # opened at its first use
                new.size = len(out)
                new.next_offset = self.segments[idx + 1].base_offset
                new.index.attach(seg.path.with_suffix(INDEX_SUFFIX))
                self.segments[idx] = new
        fsync_directory(self.directory)
        return cleaner.stats

    def _segment_batches(self, seg: Segment) -> Iterator[tuple[BatchHeader, memoryview]]:
        data = memoryview(seg.pread(0, seg.size))
        for rel, header in iter_batches(data, 0):
            yield header, data[rel : rel + header.size]

    def close(self) -> None:
        self._settle()
        with self._lock, self._state:
            if not self._closed:
                self._write_indexes()
            self._closed = True
            for seg in self.segments:
                seg.close_file()
            self.segments = []
            self._bases = []

    def delete(self) -> None:
        self.close()
        for path in self.directory.iterdir():
            path.unlink()
        self.directory.rmdir()


def fsync_directory(path: Path | str) -> None:
    """Make the names in a directory durable (a file made, renamed or removed there)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_runs(writes: list[tuple[int, int, bytes | bytearray]]) -> None:
    """(fd, position, batch) writes, each run of adjacent ones in one pwritev."""
    i, n = 0, len(writes)
    while i < n:
        fd, start, first = writes[i]
        bufs, end, j = [first], start + len(first), i + 1
        while j < n and writes[j][0] == fd and writes[j][1] == end and len(bufs) < 512:
            bufs.append(writes[j][2])
            end += len(writes[j][2])
            j += 1
        written = os.pwritev(fd, bufs, start) if len(bufs) > 1 else os.pwrite(fd, first, start)
        if written != end - start:  # a regular file's write comes up short only when space runs out
            raise OSError(errno.ENOSPC, f"short write: {written} of {end - start} bytes")
        i = j


def flush_many(logs: list[Log]) -> None:
    """Make several logs durable at once. On Linux one syncfs(2) commits every dirty file of the
    filesystem in a single journal commit, instead of one fsync per log: with commits spread over 50
    offsets partitions that is the difference between one disk flush per round and fifty.

    The logs' locks are taken in one fixed order and held across the syncfs, so no segment file (whose
    descriptor names the filesystem) is closed or swapped meanwhile."""
    if len(logs) < 2 or _syncfs is None or len({lg.directory.parent for lg in logs}) != 1:
        for lg in logs:
            lg.flush()
        return
    logs = sorted(logs, key=lambda lg: str(lg.directory))
    for lg in logs:
        lg._lock.acquire()
    try:
        for lg in logs:  # an offline log fails the round before anything is taken from the others
            with lg._state:
                if not lg._closed:
                    lg._check_usable()
        taken = [(lg, lg._take_dirty()) for lg in logs]
        fd = next((lg.any_fd() for lg, t in taken if t is not None and lg.any_fd() is not None), None)
        if fd is None:
            return
        exc: OSError | None = None
        for lg, t in taken:
            if t is not None and t[3]:
                try:
                    lg._write_out(t[3])
                except OSError as write_exc:
                    exc = exc or write_exc
        if exc is not None and no_room(exc):  # nothing synced: every log's share is pending again
            for lg, t in taken:
                if t is not None:
                    with contextlib.suppress(DiskFull):
                        lg._refused_write(t, exc)
            raise DiskFull(f"writing out refused: {exc}") from exc
        if exc is None and _syncfs(fd) != 0:
            err = ctypes.get_errno()
            exc = OSError(err, os.strerror(err))
        if exc is not None:
            for lg, t in taken:
                if t is not None:
                    with contextlib.suppress(StorageError):
                        lg._flush_failed(t[2], exc)
            raise StorageError(f"syncfs failed: {exc}") from exc
    finally:
        for lg in logs:
            lg._lock.release()


def syncfs_errno(directory: Path) -> int:
    """syncfs(2) of the filesystem holding ``directory``: 0, or the errno."""
    if _syncfs is None:
        os.sync()
        return 0
    fd = os.open(directory, os.O_RDONLY)
    try:
        return 0 if _syncfs(fd) == 0 else (ctypes.get_errno() or 5)
    finally:
        os.close(fd)


def _load_syncfs():
    if sys.platform != "linux":
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_syncfs = _load_syncfs()
