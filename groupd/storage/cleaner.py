"""Kafka's log cleaner's rules for one pass over a compacted log's batches, whatever engine stores them
(storage/log.py's segments, storage/postgresql/compaction.py's rows): the engine says which batches are
old enough to clean and stores what ``clean`` leaves of each; offsets never change.

Transactions as Kafka's cleaner treats them: nothing from the first batch of a transaction without its
marker yet (the first unstable offset) on is cleaned; records of aborted transactions go, those of open
ones never outrank an older record of their key; a marker stays while records of its transaction remain,
and goes after ``delete.retention.ms`` like a tombstone once none do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from groupd.storage.batch import (
    COMMIT_MARKER,
    CONTROL,
    TRANSACTIONAL,
    BatchHeader,
    build_batch,
    control_marker,
    iter_records,
)
from groupd.storage.engine import CompactionStats
from groupd.storage.errors import UnsupportedCompression

TXN_OR_CONTROL = TRANSACTIONAL | CONTROL

Batches = Callable[[], Iterator[tuple[BatchHeader, memoryview]]]


def transactions(batches: Iterator[tuple[BatchHeader, memoryview]]) -> tuple[dict[int, bool], int | None]:
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


def iter_records_safe(batch: bytes | memoryview):
    """Records of a batch, or nothing for a batch whose compression cannot be decoded here."""
    try:
        yield from iter_records(batch)
    except UnsupportedCompression:
        return


class Cleaner:
    """One cleaning pass: ``batches`` (called twice: it gives the whole log from its start each time) is
    read for the transactions' fates and every key's newest offset; then ``clean`` takes the batches to
    clean in log order and counts them in ``stats``."""

    def __init__(self, batches: Batches, now_ms: int, delete_retention_ms: int) -> None:
        self.now_ms = now_ms
        self.delete_retention_ms = delete_retention_ms
        self.batches = batches
        self.committed, self.first_unstable = transactions(batches())
        self._latest: dict[bytes, int] | None = None  # read at the first clean: a pass may clean nothing
        self.retained: set[int] = set()  # producers whose current transaction keeps records
        self.stats = CompactionStats()

    @property
    def latest(self) -> dict[bytes, int]:
        """Every key's newest offset, outside aborted and open transactions."""
        if self._latest is not None:
            return self._latest
        latest = self._latest = {}
        for header, batch in self.batches():
            if header.attributes & TXN_OR_CONTROL and (
                header.is_control or not self.committed.get(header.base_offset, False)
            ):
                continue  # markers hold no data; aborted and open transactions outrank nothing
            for rec in iter_records_safe(batch):
                if rec.key is not None:
                    latest[bytes(rec.key)] = rec.offset
        return latest

    def _expired(self, header: BatchHeader) -> bool:
        return self.now_ms - header.max_timestamp > self.delete_retention_ms

    def clean(self, header: BatchHeader, batch: memoryview) -> bytes | memoryview | None:
        """What stays of this batch: itself (a marker still needed), a batch rebuilt with the records that
        stay at their offsets, or None."""
        if header.is_control:
            self.stats.records_before += header.record_count
            if header.is_transactional:
                needed = header.producer_id in self.retained
                self.retained.discard(header.producer_id)
                if not needed and self._expired(header):
                    return None
            self.stats.records_after += header.record_count
            return batch
        recs = list(iter_records_safe(batch))
        self.stats.records_before += len(recs)
        if header.is_transactional and not self.committed.get(header.base_offset, False):
            return None  # aborted (an open one is never cleaned)
        keep = [
            r
            for r in recs
            if r.key is not None
            and self.latest.get(bytes(r.key)) == r.offset
            and not (r.value is None and self._expired(header))
        ]
        self.stats.records_after += len(keep)
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
