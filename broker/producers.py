"""Idempotent producers: producer ids and per-partition sequence checks (KIP-98, without transactions).

Producer ids come from a counter persisted under log.dirs (a restarted broker never reissues one).
Sequence state lives in memory: the last five batches per (producer, partition), which is what Kafka
keeps to answer a retried batch with its original offset instead of writing it twice.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import ErrorCode

RETAINED_BATCHES = 5
BLOCK = 1000


@dataclass(frozen=True, slots=True)
class SequencedBatch:
    epoch: int
    first_seq: int
    last_seq: int
    base_offset: int


class ProducerIds:
    def __init__(self, log_dir: str | Path) -> None:
        self._path = Path(log_dir) / "producer-id-block"
        self._next = 0
        self._limit = 0
        self._state: dict[tuple[int, str, int], deque[SequencedBatch]] = {}

    def allocate(self) -> int:
        """A fresh producer id; blocks of ids are reserved durably before any is handed out."""
        if self._next >= self._limit:
            start = max(self._next, int(self._path.read_text()) if self._path.exists() else 0)
            self._path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._path.with_suffix(".tmp")
            tmp.write_text(str(start + BLOCK))
            with open(tmp) as f:
                os.fsync(f.fileno())
            os.replace(tmp, self._path)
            self._next, self._limit = start, start + BLOCK
        pid = self._next
        self._next += 1
        return pid

    def check(self, pid: int, epoch: int, topic: str, partition: int, first_seq: int, count: int) -> tuple[ErrorCode, int | None]:
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

    def record(self, pid: int, epoch: int, topic: str, partition: int, first_seq: int, count: int, base_offset: int) -> None:
        if pid < 0:
            return
        batches = self._state.setdefault((pid, topic, partition), deque(maxlen=RETAINED_BATCHES))
        if batches and batches[-1].epoch != epoch:
            batches.clear()
        batches.append(SequencedBatch(epoch, first_seq, first_seq + count - 1, base_offset))
