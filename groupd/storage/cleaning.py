"""Kafka's log cleaner as pure functions over batches, shared by every engine's ``compact``
(storage/engine.py PartitionLog): which transactions ended how, the newest offset of each key, and the
batches a closed stretch of the log keeps. Where the batches live (segment files, memory) is the
engine's business; what is kept is decided here once.

Transactions as Kafka's cleaner treats them: nothing from the first batch of a transaction without its
marker yet (the first unstable offset) on is cleaned; records of aborted transactions go, those of open
ones never outrank an older record of their key; a marker stays while records of its transaction remain,
and goes after ``delete.retention.ms`` like a tombstone once none do."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from groupd.storage.batch import (
    COMMIT_MARKER,
    CONTROL,
    TRANSACTIONAL,
    BatchHeader,
    Record,
    build_batch,
    control_marker,
    iter_records,
)
from groupd.storage.engine import CompactionStats
from groupd.storage.errors import UnsupportedCompression

Batches = Iterable[tuple[BatchHeader, memoryview]]
_TXN_OR_CONTROL = TRANSACTIONAL | CONTROL


def iter_records_safe(batch: bytes | bytearray | memoryview) -> Iterator[Record]:
    """Records of a batch, or nothing for a batch whose compression cannot be decoded here."""
    try:
        yield from iter_records(batch)  # type: ignore[arg-type]  # bytearray reads as bytes
    except UnsupportedCompression:
        return


def transactions(batches: Batches) -> tuple[dict[int, bool], int | None]:
    """Which transactional data batches (by base offset) were committed (True) or aborted (False) by
    their producer's next marker, and the first unstable offset: where the first transaction without
    a marker yet begins (None when every one has ended)."""
    fate: dict[int, bool] = {}
    open_: dict[int, list[int]] = {}  # producer -> its data batches since its last marker
    for header, batch in batches:
        if not header.attributes & TRANSACTIONAL:
            continue
        if header.is_control:
            kind = control_marker(batch, header)
            if kind is not None:
                for base in open_.pop(header.producer_id, ()):
                    fate[base] = kind == COMMIT_MARKER
        else:
            open_.setdefault(header.producer_id, []).append(header.base_offset)
    first_unstable = min((bases[0] for bases in open_.values()), default=None)
    return fate, first_unstable


def latest_offsets(batches: Batches, committed: dict[int, bool]) -> dict[bytes, int]:
    """The offset of each key's newest record that counts: markers hold no data, and aborted and open
    transactions outrank nothing."""
    latest: dict[bytes, int] = {}
    for header, batch in batches:
        if header.attributes & _TXN_OR_CONTROL and (header.is_control or not committed.get(header.base_offset, False)):
            continue
        for rec in iter_records_safe(batch):
            if rec.key is not None:
                latest[bytes(rec.key)] = rec.offset
    return latest


def cleanable(
    max_timestamps: list[int], next_bases: list[int], now_ms: int, min_age_ms: int, first_unstable: int | None
) -> int:
    """How many of the oldest closed stretches (each's newest timestamp, and the base offset of the stretch
    after each) one pass may clean: none younger than ``min_age_ms`` (the offsets store's
    ``offsets.retain.uncompacted.hours`` keeps their history) and none reaching the first unstable offset."""
    n = 0
    while n < len(max_timestamps) and (min_age_ms <= 0 or now_ms - max_timestamps[n] >= min_age_ms):
        n += 1  # stretches are in time order: stop at the first young one
    if first_unstable is not None:
        n = min(n, sum(1 for base in next_bases[:n] if base <= first_unstable))
    return n


class Cleaner:
    """One compaction pass over the closed stretches of a log, oldest first: ``clean`` each one's batches
    in turn (a marker's fate depends on the stretches before it) and store what it returns."""

    def __init__(self, batches: Batches, now_ms: int, delete_retention_ms: int) -> None:
        self.committed, self.first_unstable = transactions(batches)
        self.now_ms = now_ms
        self.delete_retention_ms = delete_retention_ms
        self.latest: dict[bytes, int] = {}
        self.retained: set[int] = set()  # producers whose current transaction keeps records
        self.stats = CompactionStats()

    def index(self, batches: Batches) -> None:
        """Find each key's newest record in the whole log (call once, before ``clean``)."""
        self.latest = latest_offsets(batches, self.committed)

    def _expired(self, header: BatchHeader) -> bool:
        return self.now_ms - header.max_timestamp > self.delete_retention_ms

    def clean(self, batches: Batches) -> list[bytes | bytearray | memoryview]:
        """The batches one closed stretch keeps, in order: markers whole, data batches rebuilt with only
        their keys' newest records (offsets, timestamps and headers kept)."""
        self.stats.segments += 1
        out: list[bytes | bytearray | memoryview] = []
        for header, batch in batches:
            kept = self.clean_batch(header, batch)
            if kept is not None:
                out.append(kept)
        return out

    def clean_batch(
        self, header: BatchHeader, batch: bytes | bytearray | memoryview
    ) -> bytes | bytearray | memoryview | None:
        """What stays of one batch, taken in log order: itself (a marker still needed), a batch rebuilt with
        the records that stay at their offsets, or None. An engine that rewrites rows (the PostgreSQL
        one) calls it batch by batch; ``clean`` does for a segment file."""
        stats = self.stats
        if header.is_control:
            stats.records_before += header.record_count
            if header.is_transactional:
                needed = header.producer_id in self.retained
                self.retained.discard(header.producer_id)
                if not needed and self._expired(header):
                    return None
            stats.records_after += header.record_count
            return batch
        recs = list(iter_records_safe(batch))
        stats.records_before += len(recs)
        if header.is_transactional and not self.committed.get(header.base_offset, False):
            return None  # aborted (an open one is never in a cleaned stretch)
        keep = [
            r
            for r in recs
            if r.key is not None
            and self.latest.get(bytes(r.key)) == r.offset
            and not (r.value is None and self._expired(header))
        ]
        stats.records_after += len(keep)
        if not keep:
            return None
        if header.is_transactional:
            self.retained.add(header.producer_id)
        first = keep[0].offset
        return build_batch(
            [(r.key, r.value) for r in keep],
            base_offset=first,
            timestamp_ms=keep[0].timestamp,
            headers=[r.headers for r in keep],
            offset_deltas=[r.offset - first for r in keep],
            timestamps=[r.timestamp for r in keep],
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            attributes=header.attributes & TRANSACTIONAL,
        )
