"""The memory engine's partition log (storage/engine.py PartitionLog): batches held in process memory.

Laid out as the local engine lays its files, in segments rolled at ``segment.bytes`` and ``segment.ms``,
so retention and compaction take the same closed stretches and a test sees what the local engine would
do. Every append is durable the moment it returns: there is nothing to flush. The stored state
(``StoredPartition``) outlives the log that a caller opened over it: closing the log only stops that
handle, and the engine's next ``open_partition`` finds the same batches (a restart within the process).
"""

from __future__ import annotations

import bisect
import json
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from groupd.clock import wall_ms
from groupd.storage.batch import BatchHeader, build_batch, parse_header, set_base_offset
from groupd.storage.cleaning import Cleaner, cleanable, iter_records_safe
from groupd.storage.engine import CompactionStats, LogConfig, SegmentInfo
from groupd.storage.errors import OffsetOutOfRange, RecordTooLarge, StorageError

_LEADER_EPOCH = struct.Struct(">i")  # partitionLeaderEpoch, at position 12, outside the CRC


@dataclass
class _Segment:
    base_offset: int
    created_ms: int
    batches: list[bytes | bytearray] = field(default_factory=list)
    headers: list[BatchHeader] = field(default_factory=list)
    bases: list[int] = field(default_factory=list)  # each batch's base offset, for bisect
    size: int = 0
    next_offset: int = 0
    modified_ms: int = 0

    def add(self, header: BatchHeader, batch: bytes | bytearray, now_ms: int) -> None:
        self.batches.append(batch)
        self.headers.append(header)
        self.bases.append(header.base_offset)
        self.size += len(batch)
        self.next_offset = header.last_offset + 1
        self.modified_ms = now_ms

    @property
    def max_timestamp(self) -> int:
        return max((h.max_timestamp for h in self.headers), default=-1)

    def first_holding(self, offset: int) -> int:
        """The index of the first batch whose last offset is >= ``offset`` (len when none)."""
        i = max(bisect.bisect_right(self.bases, offset) - 1, 0)
        while i < len(self.headers) and self.headers[i].last_offset < offset:
            i += 1
        return i


@dataclass
class StoredPartition:
    """What a partition holds across opens: its segments, start offset, flags and snapshots."""

    segments: list[_Segment] = field(default_factory=lambda: [_Segment(0, wall_ms())])
    log_start_offset: int = 0
    marks: set[str] = field(default_factory=set)
    snapshots: dict[str, tuple[int, str]] = field(default_factory=dict)  # name -> (log end, JSON)


class MemoryLog:
    """A handle over a ``StoredPartition``; see the module's text."""

    def __init__(
        self, name: str, stored: StoredPartition, config: LogConfig | None = None, now_ms: Callable[[], int] = wall_ms
    ) -> None:
        self.name = name
        self.stored = stored
        self.config = config or LogConfig()
        self.now_ms = now_ms
        self._closed = False

    # ------------------------------------------------------------ offsets

    @property
    def _segments(self) -> list[_Segment]:
        return self.stored.segments

    @property
    def log_start_offset(self) -> int:
        return self.stored.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def failed(self) -> bool:
        return False  # memory does not fail a write

    def _check_usable(self) -> None:
        if self._closed:
            raise StorageError(f"log {self.name} is closed")

    # ------------------------------------------------------------ writes

    def append(self, batch: bytes | bytearray, leader_epoch: int | None = None) -> tuple[int, int]:
        size = len(batch)
        if size > self.config.max_message_bytes or size > self.config.segment_bytes:
            raise RecordTooLarge(
                f"batch of {size} bytes exceeds max.message.bytes {self.config.max_message_bytes} "
                f"or segment.bytes {self.config.segment_bytes}"
            )
        parse_header(batch, 0)  # CorruptBatch or UnsupportedMagic for what is not a v2 batch
        buf = bytearray(batch)  # the caller's bytes are never changed, nor kept
        if leader_epoch is not None:
            _LEADER_EPOCH.pack_into(buf, 12, leader_epoch)
        return self._place(buf)

    def _place(self, buf: bytearray) -> tuple[int, int]:
        self._check_usable()
        now = self.now_ms()
        seg = self._segments[-1]
        if seg.size > 0 and (
            seg.size + len(buf) > self.config.segment_bytes or now - seg.created_ms >= self.config.segment_ms
        ):
            seg = self._roll(now)
        set_base_offset(buf, 0, seg.next_offset)
        header = parse_header(buf, 0)
        seg.add(header, buf, now)
        return header.base_offset, header.last_offset

    def _roll(self, now: int) -> _Segment:
        seg = _Segment(self.log_end_offset, now, next_offset=self.log_end_offset, modified_ms=now)
        self._segments.append(seg)
        return seg

    def append_records(
        self, records: Sequence[tuple[bytes | None, bytes | None]], timestamp_ms: int | None = None,
        *, producer_id: int = -1, producer_epoch: int = -1, attributes: int = 0,
    ) -> tuple[int, int]:  # fmt: skip
        ts = self.now_ms() if timestamp_ms is None else timestamp_ms
        buf = build_batch(
            records,
            timestamp_ms=ts,
            mutable=True,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            attributes=attributes,
        )
        return self.append(buf)

    # ------------------------------------------------------------ reads

    def _stored(self, start_offset: int | None = None) -> Iterator[tuple[BatchHeader, bytes | bytearray]]:
        """Every batch still readable (holding an offset >= the log start, and >= ``start_offset``)."""
        first = max(self.log_start_offset, start_offset or 0)
        for seg in self._segments:
            if seg.next_offset <= first:
                continue
            for i in range(seg.first_holding(first), len(seg.batches)):
                yield seg.headers[i], seg.batches[i]

    def read(self, offset: int, max_bytes: int, upto: int | None = None) -> bytes:
        """Whole batches of one segment, as the local engine reads them (Kafka reads one segment at a time)."""
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}]")
        for seg in self._segments:
            if seg.next_offset <= offset:
                continue
            i = seg.first_holding(offset)
            if i == len(seg.batches):
                continue
            taken: list[bytes | bytearray] = []
            size = 0
            for header, batch in zip(seg.headers[i:], seg.batches[i:], strict=True):
                if upto is not None and header.base_offset >= upto:
                    break
                if taken and size + len(batch) > max_bytes:
                    break
                taken.append(batch)
                size += len(batch)
            return b"".join(taken)
        return b""

    def batches(self, start_offset: int | None = None) -> Iterator[tuple[BatchHeader, memoryview]]:
        for header, batch in self._stored(start_offset):
            yield header, memoryview(batch)

    def chunks(self) -> Iterator[memoryview]:
        for _header, batch in self._stored():
            yield memoryview(batch)

    def headers(self, last_segments: int | None = None) -> Iterator[BatchHeader]:
        for seg in self._segments[-last_segments:] if last_segments else self._segments:
            for header in seg.headers:
                if header.last_offset >= self.log_start_offset:
                    yield header

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        for header, batch in self._stored():
            if header.max_timestamp < ts_ms:
                continue
            for rec in iter_records_safe(batch):
                if rec.timestamp >= ts_ms and rec.offset >= self.log_start_offset:
                    return rec.offset, rec.timestamp
            return max(header.base_offset, self.log_start_offset), header.max_timestamp
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        best: tuple[int, int] | None = None
        for seg in self._segments:
            for header, batch in zip(seg.headers, seg.batches, strict=True):
                ts = header.max_timestamp
                if best is None or ts > best[0]:
                    offset = next((r.offset for r in iter_records_safe(batch) if r.timestamp == ts), header.last_offset)
                    best = (ts, offset)
        return best

    def segments_info(self) -> list[SegmentInfo]:
        return [SegmentInfo(s.base_offset, s.size, s.modified_ms or s.created_ms) for s in self._segments]

    # ------------------------------------------------------------ cleanup

    def delete_records_before(self, offset: int) -> int:
        self._check_usable()
        if offset > self.log_end_offset:
            raise OffsetOutOfRange(f"offset {offset} is past the log end {self.log_end_offset}")
        if offset > self.log_start_offset:
            self.stored.log_start_offset = offset
            if offset == self.log_end_offset and self._segments[-1].size > 0:
                self._roll(self.now_ms())  # as Kafka does, so the emptied active segment can go too
            self._drop_segments_below(offset)
        return self.log_start_offset

    def _drop_segments_below(self, offset: int) -> None:
        segments = self._segments
        while len(segments) > 1 and segments[1].base_offset <= offset:
            segments.pop(0)

    def truncate_to(self, offset: int) -> int:
        self._check_usable()
        if offset < self.log_start_offset:
            raise OffsetOutOfRange(f"offset {offset} is below the log start {self.log_start_offset}")
        if offset >= self.log_end_offset:
            return self.log_end_offset
        segments = self._segments
        while len(segments) > 1 and segments[-1].base_offset >= offset:
            segments.pop()
        seg = segments[-1]
        i = seg.first_holding(offset)
        if i < len(seg.batches):
            seg.next_offset = seg.bases[i]
            del seg.batches[i:], seg.headers[i:], seg.bases[i:]
            seg.size = sum(len(b) for b in seg.batches)
        return self.log_end_offset

    def apply_retention(self, now_ms: int) -> int:
        if not self.config.delete:
            return 0  # cleanup.policy=compact: only the cleaner removes data
        self._check_usable()
        cfg, segments, deleted = self.config, self._segments, 0
        while len(segments) > 1:
            seg = segments[0]
            too_old = cfg.retention_ms >= 0 and seg.headers and now_ms - seg.max_timestamp > cfg.retention_ms
            too_big = cfg.retention_bytes >= 0 and self.size_bytes - seg.size >= cfg.retention_bytes
            if not (too_old or too_big):
                break
            self.stored.log_start_offset = max(self.log_start_offset, segments[1].base_offset)
            self._drop_segments_below(segments[1].base_offset)
            deleted += 1
        return deleted

    def compact(self, now_ms: int, min_age_ms: int = 0) -> CompactionStats:
        segments = self._segments
        cleaner = Cleaner(self.batches(), now_ms, self.config.delete_retention_ms)
        closed = segments[:-1]
        bases = [s.base_offset for s in segments[1:]]
        closed = closed[
            : cleanable([s.max_timestamp for s in closed], bases, now_ms, min_age_ms, cleaner.first_unstable)
        ]
        if not closed:
            return cleaner.stats
        cleaner.index(self.batches())
        for idx, seg in enumerate(closed):
            kept = cleaner.clean((h, memoryview(b)) for h, b in zip(seg.headers, seg.batches, strict=True))
            new = _Segment(seg.base_offset, seg.created_ms, next_offset=seg.base_offset)
            for batch in kept:
                new.add(parse_header(batch, 0), bytes(batch), seg.modified_ms)
            new.next_offset = segments[idx + 1].base_offset
            segments[idx] = new
        return cleaner.stats

    # ------------------------------------------------------------ beside the log

    def save_snapshot(self, name: str, state: Any) -> None:
        self.stored.snapshots[name] = (self.log_end_offset, json.dumps(state))  # a copy, as a file would be

    def load_snapshot(self, name: str) -> Any | None:
        saved = self.stored.snapshots.get(name)
        if saved is None or saved[0] != self.log_end_offset:
            return None
        return json.loads(saved[1])

    def mark(self, name: str) -> None:
        self.stored.marks.add(name)

    def is_marked(self, name: str) -> bool:
        return name in self.stored.marks

    def flush(self) -> None:
        """Nothing to do: every append is durable once it returns."""

    def close(self) -> None:
        self._closed = True
