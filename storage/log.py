"""An append-only segmented log: one partition in one directory, in Kafka's on-disk format.

Used by the offsets store (``__consumer_offsets-N``) and by topic partitions. Appends happen on the event
loop thread (``os.write``, no fsync); ``flush`` may run concurrently in a worker thread and fsyncs what
was dirty when it was called. Start-up recovery re-checks every batch after the recovery point (the
offset up to which the last flush made everything durable) and cuts a torn tail.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from storage.batch import (
    HEADER_STRUCT,
    LOG_OVERHEAD,
    BatchHeader,
    HeaderTwin,
    build_batch,
    parse_header,
    rebase_header,
    set_base_offset,
    set_leader_epoch,
    set_log_append_time,
)
from storage.errors import CorruptBatch, OffsetOutOfRange, RecordTooLarge, StorageError
from storage.segment import MAX_RELATIVE, Segment, read_chunks

if TYPE_CHECKING:
    from storage.compaction import CompactionStats

log = logging.getLogger("groupd.storage")

LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
RECOVERY_CHECKPOINT = "recovery-point-offset-checkpoint"
CLEAN_SHUTDOWN = ".clean-shutdown"
_CHECKPOINT_VERSION = "0"


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class LogConfig:
    """Per-log settings, named after Kafka's topic configs (segment.bytes, retention.ms, ...)."""

    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    retention_ms: int = 604_800_000  # -1: keep forever
    retention_bytes: int = -1
    cleanup_policy: str = "delete"  # "delete" | "compact" | "compact,delete"
    delete_retention_ms: int = 86_400_000
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1_048_588

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy


def _read_checkpoint(path: Path) -> int | None:
    try:
        lines = path.read_text().split()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    except OSError:
        log.warning("cannot read %s", path, exc_info=True)
        return None
    if len(lines) != 2 or lines[0] != _CHECKPOINT_VERSION or not lines[1].isdigit():
        log.warning("ignoring malformed checkpoint %s", path)
        return None
    return int(lines[1])


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Log:
    """One partition's log. Create with ``Log.open``."""

    def __init__(self, directory: Path, config: LogConfig, now_ms: Callable[[], int]) -> None:
        self._dir = directory
        self.config = config
        self._now_ms = now_ms
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._log_start = 0
        self._leo = 0
        self._lock = threading.RLock()  # state: segments, offsets, dirty set
        self._flush_lock = threading.Lock()  # one flush at a time; segment removal waits for it
        self._maint_lock = threading.Lock()  # retention, DeleteRecords and compaction, one at a time
        self._dirty: dict[int, Segment] = {}  # id(segment) -> segment with unflushed bytes
        self._dir_dirty = False
        self._unflushed = 0
        self._failed: BaseException | None = None
        self._closed = False
        self._recovery_fd = -1

    # ------------------------------------------------------------------ opening / recovery

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, now_ms: Callable[[], int] = wall_clock_ms) -> Log:
        """Create or open the log in ``directory`` and recover it."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self = cls(directory, config, now_ms)
        try:
            self._load()
        except OSError as exc:
            self._close_files()
            raise StorageError(f"cannot open log {directory}: {exc}") from exc
        return self

    def _load(self) -> None:
        bases: list[int] = []
        for entry in os.scandir(self._dir):
            name = entry.name
            if name.endswith((".cleaned", ".deleted", ".swap")):
                log.info("removing leftover %s", entry.path)
                os.unlink(entry.path)
            elif name.endswith(".log") and len(name) == 24 and name[:20].isdigit():
                bases.append(int(name[:20]))
        bases.sort()
        present = set(bases)
        for entry in os.scandir(self._dir):
            stem, _, ext = entry.name.partition(".")
            if ext in ("index", "timeindex") and stem.isdigit() and int(stem) not in present:
                os.unlink(entry.path)
        log_start = _read_checkpoint(self._dir / LOG_START_CHECKPOINT)
        recovery_point = _read_checkpoint(self._dir / RECOVERY_CHECKPOINT) or 0
        # every segment that may hold bytes at or past the recovery point is fully re-checked
        first_to_recover = max(0, bisect_right(bases, recovery_point) - 1)
        marker = self._dir / CLEAN_SHUTDOWN
        if marker.exists():
            # closed cleanly: everything was flushed, so no batch needs its CRC re-checked (Kafka's
            # .kafka_cleanshutdown). The marker goes (durably) before anything new can be appended.
            first_to_recover = len(bases)
            marker.unlink()
            _fsync_dir(self._dir)
        expected = 0
        for i, base in enumerate(bases):
            seg = Segment(self._dir, base, self.config.index_interval_bytes)
            seg.open_files()
            self._segments.append(seg)
            before = os.fstat(seg.fd).st_size
            if i >= first_to_recover:
                seg.recover(min_offset=expected)
            else:
                seg.load()  # falls back to recover() when its indexes or its tail look wrong
            if seg.size < before and i < len(bases) - 1:
                log.warning(
                    "log %s: segment %d was cut in the middle of the log; dropping %d later segments",
                    self._dir, base, len(bases) - 1 - i,
                )
                for later in bases[i + 1 :]:
                    Segment(self._dir, later, self.config.index_interval_bytes).delete_files()
                break
            expected = seg.next_offset
        self._bases = [s.base_offset for s in self._segments]
        # drop empty segments that are not the last (left behind by a crash during a roll)
        for seg in list(self._segments[:-1]):
            if seg.empty:
                seg.delete_files()
                self._segments.remove(seg)
        self._bases = [s.base_offset for s in self._segments]
        if not self._segments:
            self._new_segment(log_start or 0)
        self._leo = self._segments[-1].next_offset
        first_base = self._segments[0].base_offset
        if log_start is None or log_start < first_base:
            log_start = first_base
        if log_start > self._leo:
            log.warning("log %s: log start offset %d is past the end %d; starting empty there",
                        self._dir, log_start, self._leo)
            for seg in self._segments:
                seg.delete_files()
            self._segments, self._bases = [], []
            self._new_segment(log_start)
            self._leo = log_start
        self._log_start = log_start
        self._recovery_fd = os.open(self._dir / RECOVERY_CHECKPOINT, os.O_RDWR | os.O_CREAT, 0o644)
        self._write_recovery_point(self._leo)
        self._dir_dirty = True

    def _new_segment(self, base: int) -> Segment:
        seg = Segment(self._dir, base, self.config.index_interval_bytes)
        seg.open_files()
        seg.rolling_ts = self._now_ms()  # age is counted from creation (recovered: first batch's time)
        self._segments.append(seg)
        self._bases.append(base)
        self._dir_dirty = True
        return seg

    # ------------------------------------------------------------------ properties

    @property
    def directory(self) -> Path:
        return self._dir

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        return self._leo

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def dirty(self) -> bool:
        return bool(self._dirty) or self._dir_dirty

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed

    @property
    def failed(self) -> bool:
        return self._failed is not None

    def _check_usable(self) -> None:
        if self._closed:
            raise StorageError(f"log {self._dir} is closed")
        if self._failed is not None:
            raise StorageError(f"log {self._dir} is offline after an I/O error: {self._failed}")

    # ------------------------------------------------------------------ appending

    def append(
        self,
        batch: bytes | bytearray,
        *,
        leader_epoch: int | None = None,
        log_append_time_ms: int | None = None,
    ) -> tuple[int, int]:
        """Append one complete v2 batch at the log end offset; returns (base offset, last offset).

        ``leader_epoch`` stamps the partition leader epoch as Kafka's leader does;
        ``log_append_time_ms`` makes it a LogAppendTime batch (message.timestamp.type=LogAppendTime).
        """
        size = len(batch)
        if size > self.config.max_message_bytes:
            raise RecordTooLarge(f"batch of {size} bytes exceeds max.message.bytes {self.config.max_message_bytes}")
        if size > self.config.segment_bytes:
            raise RecordTooLarge(f"batch of {size} bytes exceeds segment.bytes {self.config.segment_bytes}")
        header = parse_header(batch)
        if header.batch_length + LOG_OVERHEAD != size:
            raise CorruptBatch(f"batch length {header.batch_length} disagrees with {size} bytes")
        buf = bytearray(batch)
        with self._lock:
            self._check_usable()
            base = self._leo
            set_base_offset(buf, 0, base)
            if leader_epoch is None and log_append_time_ms is None:
                header = rebase_header(header, base)
            else:
                if leader_epoch is not None:
                    set_leader_epoch(buf, 0, leader_epoch)
                if log_append_time_ms is not None:
                    set_log_append_time(buf, 0, log_append_time_ms)
                header = parse_header(buf)
            try:
                seg = self._maybe_roll(size, header)
                seg.append(buf, header)
            except OSError as exc:
                log.error("append to %s failed: %s", self._dir, exc)
                raise StorageError(f"append to {self._dir} failed: {exc}") from exc
            self._leo = header.last_offset + 1
            self._dirty[id(seg)] = seg
            self._unflushed += header.record_count
            return base, header.last_offset

    def append_records(
        self, records: Sequence[tuple[bytes | None, bytes | None]], timestamp_ms: int
    ) -> tuple[int, int]:
        """Build an uncompressed batch of ``records`` and append it."""
        return self.append(build_batch(records, timestamp_ms=timestamp_ms))

    def _maybe_roll(self, size: int, header: BatchHeader) -> Segment:
        active = self._segments[-1]
        if active.empty:
            return active
        reason = None
        if active.size + size > self.config.segment_bytes:
            reason = "size"
        elif active.rolling_ts is not None and self._now_ms() - active.rolling_ts > self.config.segment_ms:
            reason = "age"
        elif header.last_offset - active.base_offset > MAX_RELATIVE:
            reason = "offset range"
        if reason is None:
            return active
        log.debug("rolling %s at offset %d by %s", self._dir, self._leo, reason)
        return self.roll()

    def roll(self) -> Segment:
        """Start a new active segment at the log end offset (no-op when the active one is empty)."""
        with self._lock:
            active = self._segments[-1]
            if active.empty:
                return active
            active.finish_time_index()
            self._dirty[id(active)] = active
            return self._new_segment(self._leo)

    # ------------------------------------------------------------------ flushing

    def flush(self) -> None:
        """fsync everything appended before this call (thread-safe; may run in an executor)."""
        with self._flush_lock:
            with self._lock:
                if self._closed:
                    return  # close() flushed everything; nothing can have been appended since
                self._check_usable()
                segments = list(self._dirty.values())
                dir_dirty = self._dir_dirty
                upto = self._leo
                count = self._unflushed
                self._dirty.clear()
                self._dir_dirty = False
                self._unflushed = 0
                active = self._segments[-1]
            if not segments and not dir_dirty:
                return
            try:
                for seg in segments:
                    os.fsync(seg.fd)
                    if seg is not active:
                        # a closed segment's indexes are trusted at the next open: make them durable
                        os.fsync(seg.index_fd)
                        os.fsync(seg.time_fd)
                if dir_dirty:
                    _fsync_dir(self._dir)
            except OSError as exc:
                # after a failed fsync the page cache may have dropped the data: nothing here is durable
                # any more, so the log goes offline (Kafka marks the log dir offline) until reopened.
                with self._lock:
                    self._failed = exc
                    self._unflushed += count
                log.error("fsync of %s failed; log offline: %s", self._dir, exc)
                raise StorageError(f"fsync of {self._dir} failed: {exc}") from exc
            self._write_recovery_point(upto)

    def _write_recovery_point(self, offset: int) -> None:
        # fixed width so one pwrite replaces the whole content; written after the fsync it describes,
        # so a stale or lost value only makes the next recovery look at more data
        try:
            os.pwrite(self._recovery_fd, f"{_CHECKPOINT_VERSION}\n{offset:020d}\n".encode(), 0)
        except OSError:
            log.warning("cannot write recovery point of %s", self._dir, exc_info=True)

    # ------------------------------------------------------------------ reading

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect_right(self._bases, offset) - 1)

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole stored batches from the one holding ``offset``, up to ``max_bytes`` (at least one batch)."""
        with self._lock:
            self._check_open()
            if offset < self._log_start or offset > self._leo:
                raise OffsetOutOfRange(
                    f"offset {offset} outside [{self._log_start}, {self._leo}] of {self._dir}"
                )
            if offset == self._leo:
                return b""
            try:
                for seg in self._segments[self._segment_index(offset) :]:
                    found = seg.find_position(offset)
                    if found is not None:
                        return seg.read(found[0], max_bytes)
            except OSError as exc:
                raise StorageError(f"read of {self._dir} failed: {exc}") from exc
            return b""

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"log {self._dir} is closed")

    def batches(self, start_offset: int | None = None) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Every stored batch (from the one holding ``start_offset``), read in big chunks.

        Each segment is read through its own duplicate descriptor up to its size when the iteration
        reaches it, so appends, retention or compaction running meanwhile do not disturb the reader.
        """
        self._check_open()
        with self._lock:
            segments = list(self._segments)
            if start_offset is not None:
                segments = segments[self._segment_index(start_offset) :]
        unpack = HEADER_STRUCT.unpack_from
        twin, header_cls = HeaderTwin, BatchHeader
        for n, seg in enumerate(segments):
            with self._lock:
                if self._closed or seg not in self._segments:
                    continue
                fd = os.dup(seg.fd)
                end = seg.size
                start = 0
                if n == 0 and start_offset is not None:
                    found = seg.find_position(start_offset)
                    if found is None:
                        os.close(fd)
                        continue
                    start = found[0]
            try:
                for _, data in read_chunks(fd, start, end):
                    # read_chunks hands out whole batches only: walk them inline (this is the replay loop)
                    view = memoryview(data)
                    p, stop = 0, len(data)
                    while p < stop:
                        fields = unpack(data, p)
                        header = twin(*fields)
                        header.__class__ = header_cls
                        q = p + fields[1] + LOG_OVERHEAD
                        yield header, view[p:q]
                        p = q
            except OSError as exc:
                raise StorageError(f"read of {self._dir} failed: {exc}") from exc
            finally:
                os.close(fd)

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after the log start whose timestamp >= ``ts_ms``.

        Kafka's ListOffsets by timestamp; None when every record is older.
        """
        with self._lock:
            self._check_open()
            try:
                for seg in self._segments:
                    found = seg.search_timestamp(ts_ms, self._log_start)
                    if found is not None:
                        return found[1], found[0]
            except OSError as exc:
                raise StorageError(f"read of {self._dir} failed: {exc}") from exc
            return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the record with the largest timestamp (ListOffsets -3, MAX_TIMESTAMP)."""
        with self._lock:
            self._check_open()
            best: Segment | None = None
            for seg in self._segments:
                if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                    best = seg
            if best is None:
                return None
            try:
                offset = best.record_with_timestamp(best.max_timestamp, best.offset_of_max_ts)
            except OSError as exc:
                raise StorageError(f"read of {self._dir} failed: {exc}") from exc
            return best.max_timestamp, offset

    # ------------------------------------------------------------------ deleting

    def _write_log_start(self, offset: int) -> None:
        path = self._dir / LOG_START_CHECKPOINT
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w") as f:
            f.write(f"{_CHECKPOINT_VERSION}\n{offset}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(self._dir)

    def _set_log_start(self, offset: int) -> None:
        if offset <= self._log_start:
            return
        try:
            self._write_log_start(offset)
        except OSError as exc:
            raise StorageError(f"cannot persist log start offset of {self._dir}: {exc}") from exc
        self._log_start = offset

    def _remove_segments(self, doomed: list[Segment]) -> None:
        """Delete closed segments (caller holds both locks)."""
        for seg in doomed:
            seg.delete_files()
            self._dirty.pop(id(seg), None)
            self._segments.remove(seg)
        self._bases = [s.base_offset for s in self._segments]
        self._dir_dirty = True

    def _delete_below_start(self) -> int:
        doomed = [
            seg for seg, nxt in zip(self._segments, self._segments[1:], strict=False)
            if nxt.base_offset <= self._log_start
        ]
        self._remove_segments(doomed)
        return len(doomed)

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset to ``offset`` (DeleteRecords); returns the new log start offset."""
        with self._maint_lock, self._flush_lock, self._lock:
            self._check_usable()
            if offset > self._leo or offset < 0:
                raise OffsetOutOfRange(f"cannot delete before {offset}: log end offset is {self._leo}")
            self._set_log_start(offset)
            if offset == self._leo and not self._segments[-1].empty:
                try:
                    self.roll()  # as Kafka does, so the emptied active segment can go too
                except OSError as exc:
                    raise StorageError(f"roll of {self._dir} failed: {exc}") from exc
            self._delete_below_start()
            return self._log_start

    def apply_retention(self, now_ms: int) -> int:
        """Delete old closed segments by retention.ms / retention.bytes; returns how many went."""
        with self._maint_lock, self._flush_lock, self._lock:
            self._check_usable()
            deleted = self._delete_below_start()
            if not self.config.delete:
                return deleted
            closed = self._segments[:-1]
            doomed: list[Segment] = []
            if self.config.retention_ms >= 0:
                for seg in closed:
                    ts = seg.max_timestamp if seg.max_timestamp >= 0 else _mtime_ms(seg)
                    if now_ms - ts <= self.config.retention_ms:
                        break
                    doomed.append(seg)
            if self.config.retention_bytes >= 0:
                excess = sum(s.size for s in self._segments) - self.config.retention_bytes
                for seg in closed:
                    if excess - seg.size < 0:
                        break
                    excess -= seg.size
                    if seg not in doomed:
                        doomed.append(seg)
            if not doomed:
                return deleted
            doomed.sort(key=lambda s: s.base_offset)
            new_start = self._segments[len(doomed)].base_offset
            self._set_log_start(new_start)
            self._remove_segments(doomed)
            log.info("retention removed %d segments of %s; log start offset %d", len(doomed), self._dir, new_start)
            return deleted + len(doomed)

    # ------------------------------------------------------------------ compaction

    def compact(self, now_ms: int) -> CompactionStats:
        """Keep only the newest record per key in closed segments (see ``storage.compaction``)."""
        from storage.compaction import compact_log

        return compact_log(self, now_ms)

    def _replace_segment_file(self, seg: Segment, cleaned: Path) -> None:
        """Swap a compacted file in for ``seg`` (caller holds the flush and state locks).

        The index files go first: a crash after the rename finds no index and rebuilds it.
        """
        seg.close()
        try:
            seg.index_path.unlink(missing_ok=True)
            seg.time_index_path.unlink(missing_ok=True)
            os.replace(cleaned, seg.log_path)
            _fsync_dir(self._dir)
        finally:
            # whichever file is in place now (new or, after a failure, old) is reopened and indexed
            try:
                seg.open_files()
                seg.recover(min_offset=seg.base_offset)
                # the segment is below the recovery point, so its indexes are trusted at the next open
                os.fsync(seg.index_fd)
                os.fsync(seg.time_fd)
            except OSError as exc:
                self._failed = exc
                log.error("cannot reopen segment %s after compaction; log offline: %s", seg.log_path, exc)
                raise

    # ------------------------------------------------------------------ closing

    def _close_files(self) -> None:
        for seg in self._segments:
            seg.close()
        if self._recovery_fd >= 0:
            os.close(self._recovery_fd)
            self._recovery_fd = -1

    def close(self) -> None:
        """Flush (when healthy), close every file and leave a clean-shutdown marker."""
        if self._closed:
            return
        clean = False
        try:
            if self._failed is None:
                self.flush()
                clean = True
        finally:
            with self._flush_lock, self._lock:
                self._closed = True
                self._close_files()
        if clean:
            try:
                fd = os.open(self._dir / CLEAN_SHUTDOWN, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                _fsync_dir(self._dir)
            except OSError as exc:  # only costs a full recovery next time
                log.warning("cannot write clean-shutdown marker of %s: %s", self._dir, exc)

    def delete(self) -> None:
        """Close and remove the whole directory (topic deletion)."""
        with self._flush_lock, self._lock:
            self._closed = True
            self._close_files()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __repr__(self) -> str:
        return f"Log({self._dir}, start={self._log_start}, end={self._leo}, segments={len(self._segments)})"


def _mtime_ms(seg: Segment) -> int:
    try:
        return int(os.fstat(seg.fd).st_mtime * 1000)
    except OSError:
        return 0
