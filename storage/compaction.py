"""Log compaction: keep the newest record per key in closed segments (cleanup.policy=compact).

Each closed segment is rewritten on its own (same base offset, batches keep their base offset and last
offset delta, records keep their offsets), so offsets stay truthful. The rewrite goes to
``<base>.log.cleaned``, is fsynced, then replaces the segment with a rename; a crash before the rename
leaves the old segment and a ``.cleaned`` file that the next open removes. Kafka also merges small
cleaned segments; groupd does not (yet).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from storage.batch import BatchHeader, Record, iter_batches, iter_records, rebuild_batch
from storage.errors import StorageError, UnsupportedCompression
from storage.segment import Segment, read_chunks

if TYPE_CHECKING:
    from storage.log import Log

log = logging.getLogger("groupd.storage")


@dataclass
class CompactionStats:
    segments_scanned: int = 0
    segments_rewritten: int = 0
    segments_removed: int = 0
    records_before: int = 0
    records_after: int = 0
    tombstones_dropped: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    batches_kept_opaque: int = 0  # batches that could not be decoded (codec) or are control batches


def _latest_offsets(log_: Log) -> dict[bytes, int]:
    latest: dict[bytes, int] = {}
    for header, view in log_.batches():
        if header.is_control:
            continue
        try:
            for record in iter_records(view):
                if record.key is not None:
                    latest[record.key] = record.offset
        except UnsupportedCompression:
            continue
    return latest


def _filter_segment(
    seg: Segment, end: int, fd: int, latest: dict[bytes, int], horizon_ms: int, stats: CompactionStats
) -> list[bytes] | None:
    """The segment's new batches, or None when nothing would change."""
    out: list[bytes] = []
    changed = False
    for _, data in read_chunks(fd, 0, end):
        view = memoryview(data)
        for p, header in iter_batches(data):
            raw = view[p : p + header.size]
            kept = _filter_batch(header, raw, latest, horizon_ms, stats)
            if kept is None:  # keep as stored
                out.append(bytes(raw))
                continue
            changed = True
            if kept:
                out.append(rebuild_batch(header, kept))
    return out if changed else None


def _filter_batch(
    header: BatchHeader, raw: memoryview, latest: dict[bytes, int], horizon_ms: int, stats: CompactionStats
) -> list[Record] | None:
    if header.is_control:
        stats.batches_kept_opaque += 1
        return None
    try:
        records = list(iter_records(raw))
    except UnsupportedCompression:
        stats.batches_kept_opaque += 1
        return None
    stats.records_before += len(records)
    kept = []
    for r in records:
        if r.key is None or latest.get(r.key) != r.offset:
            continue
        if r.value is None and r.timestamp < horizon_ms:
            stats.tombstones_dropped += 1
            continue
        kept.append(r)
    stats.records_after += len(kept)
    return None if len(kept) == len(records) else kept


def compact_log(log_: Log, now_ms: int) -> CompactionStats:
    """Compact every closed segment of ``log_``; safe to run in a worker thread while appends go on."""
    stats = CompactionStats()
    with log_._maint_lock:
        with log_._lock:
            log_._check_usable()
            closed = list(log_._segments[:-1])
        if not closed:
            return stats
        latest = _latest_offsets(log_)
        horizon = now_ms - log_.config.delete_retention_ms
        for seg in closed:
            stats.segments_scanned += 1
            try:
                _compact_segment(log_, seg, latest, horizon, stats)
            except OSError as exc:
                raise StorageError(f"compaction of {seg.log_path} failed: {exc}") from exc
    if stats.segments_rewritten or stats.segments_removed:
        log.info(
            "compacted %s: %d segments rewritten, %d removed, records %d -> %d, bytes %d -> %d",
            log_.directory, stats.segments_rewritten, stats.segments_removed, stats.records_before,
            stats.records_after, stats.bytes_before, stats.bytes_after,
        )
    return stats


def _compact_segment(
    log_: Log, seg: Segment, latest: dict[bytes, int], horizon: int, stats: CompactionStats
) -> None:
    with log_._lock:
        if seg not in log_._segments:
            return
        fd = os.dup(seg.fd)
        end = seg.size
    try:
        batches = _filter_segment(seg, end, fd, latest, horizon, stats)
    finally:
        os.close(fd)
    if batches is None:
        return
    stats.bytes_before += end
    new_size = sum(len(b) for b in batches)
    stats.bytes_after += new_size
    if not batches:
        with log_._flush_lock, log_._lock:
            log_._remove_segments([seg])
        stats.segments_removed += 1
        return
    cleaned = seg.log_path.with_name(seg.log_path.name + ".cleaned")
    out = os.open(cleaned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = b"".join(batches)
        view = memoryview(data)
        written = 0
        while written < len(view):
            written += os.write(out, view[written:])
        os.fsync(out)
    except BaseException:
        os.close(out)
        cleaned.unlink(missing_ok=True)
        raise
    os.close(out)
    with log_._flush_lock, log_._lock:
        log_._replace_segment_file(seg, cleaned)
    stats.segments_rewritten += 1
