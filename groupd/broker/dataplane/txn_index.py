"""Per-partition transaction bookkeeping: which producers have a transaction open here (from which
offset), and which transactions were aborted (Kafka's producer state and .txnindex, in one place).

From it come the last stable offset (LSO: no READ_COMMITTED reader goes past the first offset of an
open transaction) and the aborted transactions a READ_COMMITTED fetch must name so the client drops
their records. A partition that has ever held a transactional batch is flagged on disk; opening it restores the
state a clean stop saved beside the log (valid for the log end it names), or else rebuilds it by
reading the log.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from groupd.storage.batch import ABORT_MARKER, BatchHeader, control_marker
from groupd.storage.engine import PartitionLog

FLAG = "transactional"  # a partition that has held transactional batches: rebuilt at open
SNAPSHOT = "transactions"  # its state at a clean stop


class PartitionTxns:
    __slots__ = ("ongoing", "aborted", "_aborted_last")

    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.aborted: list[tuple[int, int, int]] = []  # (producer id, first offset, last offset), by last offset
        self._aborted_last: list[int] = []

    def data(self, producer_id: int, base_offset: int) -> None:
        """A transactional data batch was appended at ``base_offset``."""
        self.ongoing.setdefault(producer_id, base_offset)

    def marker(self, producer_id: int, commit: bool, offset: int) -> None:
        """A COMMIT or ABORT marker was appended at ``offset``: the producer's transaction here ends."""
        first = self.ongoing.pop(producer_id, None)
        if first is not None and not commit:
            self.aborted.append((producer_id, first, offset))
            self._aborted_last.append(offset)

    def has_open(self, producer_id: int) -> bool:
        return producer_id in self.ongoing

    def last_stable_offset(self, high_watermark: int) -> int:
        if not self.ongoing:
            return high_watermark
        return min(min(self.ongoing.values()), high_watermark)

    def aborted_between(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping [start, end): Kafka's
        collectAbortedTransactions for a fetch from ``start`` whose data ends before ``end``."""
        i = bisect.bisect_left(self._aborted_last, start)
        return [(pid, first) for pid, first, _last in self.aborted[i:] if first < end]

    def forget_before(self, log_start_offset: int) -> None:
        """Retention removed the log below ``log_start_offset``: aborted transactions ending there go."""
        i = bisect.bisect_left(self._aborted_last, log_start_offset)
        if i:
            del self.aborted[:i]
            del self._aborted_last[:i]

    def save(self, log: PartitionLog) -> None:
        """Snapshot the state beside the partition's log (a clean stop), so the next open reads no log."""
        log.save_snapshot(SNAPSHOT, {"ongoing": list(self.ongoing.items()), "aborted": self.aborted})

    @classmethod
    def restore(cls, log: PartitionLog) -> PartitionTxns | None:
        """The saved state if it describes the log as it is; None when there is none that does."""
        snap = log.load_snapshot(SNAPSHOT)
        if snap is None:
            return None
        state = cls()
        try:
            state.ongoing = {int(pid): int(first) for pid, first in snap["ongoing"]}
            for pid, first, last in snap["aborted"]:
                state.aborted.append((int(pid), int(first), int(last)))
                state._aborted_last.append(int(last))
        except (ValueError, KeyError, TypeError):
            return None
        return state

    @classmethod
    def rebuild(cls, batches: Iterable[tuple[BatchHeader, memoryview]]) -> PartitionTxns:
        """Replay a partition's batches: transactional data opens a transaction, markers end it."""
        state = cls()
        for header, raw in batches:
            if not header.is_transactional or header.producer_id < 0:
                continue
            if header.is_control:
                kind = control_marker(raw, header)
                if kind is not None:
                    state.marker(header.producer_id, kind != ABORT_MARKER, header.base_offset)
            else:
                state.data(header.producer_id, header.base_offset)
        return state


def mark_transactional(log: PartitionLog) -> None:
    """Flag the partition as holding transactional batches, durably, before the first one is written."""
    log.mark(FLAG)


def is_transactional(log: PartitionLog) -> bool:
    return log.is_marked(FLAG)
