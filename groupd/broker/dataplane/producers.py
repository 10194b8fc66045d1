"""Idempotent producers: producer ids and per-partition sequence checks (KIP-98).

Producer ids come from a counter persisted under log.dirs (a restarted broker never reissues one).
Sequence state is the last five batches per (producer, partition), which is what Kafka keeps to answer a
retried batch with its original offset instead of writing it twice. It lives in memory and outlives a
restart as Kafka's does: a clean stop writes each partition's state beside its log (a snapshot valid
for the log end it names), and a start without a valid snapshot rebuilds it from the batch headers of
the partition's newest segment.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import BatchHeader
from groupd.storage.engine import MetadataStore, PartitionLog

RETAINED_BATCHES = 5
BLOCK = 1000
BLOCK_KEY = "producer-id-block"  # the end of the last block of ids reserved
SNAPSHOT = "producer-state"  # in a partition's directory


@dataclass(frozen=True, slots=True)
class SequencedBatch:
    epoch: int
    first_seq: int
    last_seq: int
    base_offset: int
    max_timestamp: int = -1  # DescribeProducers' last timestamp


# reserve(key, size, at_least) -> the first id of a block of ``size`` reserved atomically (several nodes)
Reserve = Callable[[str, int, int], int]


class ProducerIds:
    def __init__(self, metadata: MetadataStore) -> None:
        self._metadata = metadata
        self.reserve: Reserve | None = None  # set by a cluster node (docs/cluster.md): one atomic update
        self._next = 0
        self._limit = 0
        self._state: dict[tuple[int, str, int], deque[SequencedBatch]] = {}

    def allocate(self) -> int:
        """A fresh producer id; blocks of ids are reserved durably before any is handed out."""
        if self._next >= self._limit and self.reserve is not None:
            start = self.reserve(BLOCK_KEY, BLOCK, self._next)
            self._next, self._limit = start, start + BLOCK
        elif self._next >= self._limit:
            stored = self._metadata.get(BLOCK_KEY)
            start = max(self._next, int(stored) if stored is not None else 0)
            self._metadata.put(BLOCK_KEY, str(start + BLOCK).encode())
            self._next, self._limit = start, start + BLOCK
        pid = self._next
        self._next += 1
        return pid

    def check(
        self, pid: int, epoch: int, topic: str, partition: int, first_seq: int, count: int
    ) -> tuple[ErrorCode, int | None]:
        """(error, offset of an identical earlier batch) for an incoming batch."""
        if pid < 0:
            return ErrorCode.none, None
        batches = self._state.get((pid, topic, partition))
        if not batches:
            return ErrorCode.none, None
        last = batches[-1]
        if epoch < last.epoch:
            return ErrorCode.invalid_producer_epoch, None
        if epoch > last.epoch:
            return (ErrorCode.none, None) if first_seq == 0 else (ErrorCode.out_of_order_sequence_number, None)
        for b in batches:
            if b.first_seq == first_seq and b.last_seq == first_seq + count - 1:
                return ErrorCode.none, b.base_offset
        if first_seq != (last.last_seq + 1) % (2**31):
            return ErrorCode.out_of_order_sequence_number, None
        return ErrorCode.none, None

    def record(
        self,
        pid: int,
        epoch: int,
        topic: str,
        partition: int,
        first_seq: int,
        count: int,
        base_offset: int,
        max_timestamp: int = -1,
    ) -> None:
        if pid < 0:
            return
        batches = self._state.setdefault((pid, topic, partition), deque(maxlen=RETAINED_BATCHES))
        if batches and batches[-1].epoch != epoch:
            batches.clear()
        batches.append(SequencedBatch(epoch, first_seq, first_seq + count - 1, base_offset, max_timestamp))

    # ------------------------------------------------------------ across restarts

    def rebuild(self, topic: str, partition: int, headers: Iterable[BatchHeader]) -> None:
        """Sequence state from stored batches (control batches carry no sequence)."""
        for h in headers:
            if h.producer_id >= 0 and h.base_sequence >= 0 and not h.is_control:
                self.record(
                    h.producer_id,
                    h.producer_epoch,
                    topic,
                    partition,
                    h.base_sequence,
                    h.record_count,
                    h.base_offset,
                    h.max_timestamp,
                )

    def save(self, topic: str, partition: int, log: PartitionLog) -> None:
        """Snapshot the partition's sequence state beside its log (a clean stop); written even when
        empty, so the next start knows there is nothing to rebuild."""
        log.save_snapshot(
            SNAPSHOT,
            [
                [pid, [[b.epoch, b.first_seq, b.last_seq, b.base_offset, b.max_timestamp] for b in batches]]
                for (pid, t, p), batches in self._state.items()
                if t == topic and p == partition and batches
            ],
        )

    def restore(self, topic: str, partition: int, log: PartitionLog) -> bool:
        """Load the snapshot if it describes the log as it is; False when there is none that does."""
        producers = log.load_snapshot(SNAPSHOT)
        if producers is None:
            return False
        try:
            for pid, batches in producers:
                self._state[(pid, topic, partition)] = deque(
                    (SequencedBatch(*b) for b in batches), maxlen=RETAINED_BATCHES
                )
        except (ValueError, TypeError):
            return False
        return True

    def active(self, topic: str, partition: int) -> list[tuple[int, SequencedBatch]]:
        """(producer id, its last batch) of every producer with state in the partition."""
        return [
            (pid, batches[-1])
            for (pid, t, p), batches in self._state.items()
            if t == topic and p == partition and batches
        ]

    def forget(self, topic: str) -> None:
        for key in [k for k in self._state if k[1] == topic]:
            del self._state[key]
