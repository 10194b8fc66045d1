"""The share coordinator's rules (Kafka's ``ShareCoordinatorShard``): one shard per ``__share_group_state``
partition, the state of each share-partition it holds, and the five RPCs over it.

Pure: handlers take ``(state, request, token, now, cfg)`` and return a ``Result`` (records, the answer
addressed to ``token``); ``replay`` is the only code that changes the persisted state, at start-up and at
runtime alike. As in Kafka, a handler's records are replayed at once (Kafka's runtime replays at write
time, under a snapshot registry it reverts if the write fails): the next request on the shard, which
may come before the records are durable, must see them, or a snapshot built then would lose an update
still being written. A failed write puts the touched key back as it was (``on_write_failed``); its
answer still leaves only after the records are durable, through the runtime.

Kafka's checks, in its order (ShareCoordinatorShard.maybeGet*Error): a negative partition is
INVALID_REQUEST; Read and Write of a share-partition never initialized are INVALID_REQUEST; a leader
epoch below the stored one is FENCED_LEADER_EPOCH (Read, Write), a state epoch below the stored one
FENCED_STATE_EPOCH (Write, Initialize), -1 skipping either check; then a topic id unknown to the
broker, or a partition past its count, is UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from groupd.coordinator import errors as E
from groupd.coordinator.api import EMPTY, Result, Token
from groupd.coordinator.runtime.runtime import SnapshotTaker
from groupd.coordinator.share_state import records as R
from groupd.coordinator.share_state.combiner import combine
from groupd.coordinator.share_state.persister import (
    ReadStateResult,
    ReadSummaryResult,
    SharePartitionKey,
    StateBatch,
)
from groupd.coordinator.values import value

FENCED_LEADER_EPOCH = 74
FENCED_STATE_EPOCH = 124

# Kafka's messages (ShareCoordinatorShard's exceptions)
NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
MESSAGES = {
    E.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    FENCED_LEADER_EPOCH: "The leader epoch in the request is older than the epoch on the broker.",
    FENCED_STATE_EPOCH: "The state epoch in the request is older than the current state epoch.",
    E.NOT_COORDINATOR: "This is not the correct coordinator.",
    E.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    E.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading and hence can't process requests.",
    E.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
}


@dataclass(slots=True)
class ShareStateConfig:
    """Kafka's share.coordinator.* keys (ShareCoordinatorConfig) and what the rules ask of the broker."""

    snapshot_update_records_per_snapshot: int = 500
    cold_partition_snapshot_interval_ms: int = 300_000
    # a topic's partition count by topic id (None: no such topic): Kafka's metadata image check
    partitions_of: Callable[[uuid.UUID], int | None] = field(default=lambda _topic_id: None)


# ---------------------------------------------------------------- requests and answers


@value
class InitializeState:
    key: SharePartitionKey
    state_epoch: int
    start_offset: int


@value
class ReadState:
    key: SharePartitionKey
    leader_epoch: int


@value
class WriteState:
    key: SharePartitionKey
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    batches: tuple[StateBatch, ...]


@value
class DeleteState:
    key: SharePartitionKey


@value
class ReadStateSummary:
    key: SharePartitionKey
    leader_epoch: int


@value
class Answer:
    """What Initialize, Write and Delete answer for their one partition."""

    error_code: int
    error_message: str | None = None


OK = Answer(E.NONE)

Record = tuple[R.ShareStateKey, R.ShareStateValue | None]


# ---------------------------------------------------------------- state


@value
class ShareGroupOffset:
    """A share-partition's state as the last snapshot and the updates after it make it."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    batches: tuple[StateBatch, ...]
    create_timestamp: int
    write_timestamp: int


@dataclass(slots=True)
class ShareShard:
    """One ``__share_group_state`` partition's share-partitions (Kafka's shard maps)."""

    partition: int
    offsets: dict[SharePartitionKey, ShareGroupOffset] = field(default_factory=dict)
    leader_epochs: dict[SharePartitionKey, int] = field(default_factory=dict)
    state_epochs: dict[SharePartitionKey, int] = field(default_factory=dict)
    update_counts: dict[SharePartitionKey, int] = field(default_factory=dict)  # ShareUpdates since the snapshot
    # Kafka's ShareCoordinatorOffsetsManager: each key's last snapshot offset; below their minimum every
    # record is redundant (pruned)
    snapshot_offsets: dict[SharePartitionKey, int] = field(default_factory=dict)
    # the same offsets as a heap, entries of older snapshots left in it until they reach the top: the
    # oldest in O(log n) where a scan of every key made a start-up with n keys O(n^2)
    snapshot_heap: list[tuple[int, SharePartitionKey]] = field(default_factory=list)
    redundant_below: int = 2**63 - 1


@value
class ShareStateWrite:
    """One share-partition's record: on a failed write the request (a ReadState when ``read``) hears the
    mapped error (the runtime has put the partition's state back)."""

    token: Token
    read: bool


class PartitionsSnapshot:
    """What a share-state operation can change before its records are durable: the tables' entries of
    the share-partitions it names (``keys``), or of every one (None), for the runtime's rollback."""

    __slots__ = ("state", "subject", "saved")

    def __init__(self, state: ShareShard, keys: Iterable[SharePartitionKey] | None) -> None:
        self.state, self.subject = state, None
        tables = _tables(state)
        if keys is None:
            self.saved: list[tuple[Any, ...]] | tuple[dict[Any, Any], ...] = tuple(dict(t) for t in tables)
        else:
            self.saved = [(k, *(t.get(k) for t in tables)) for k in keys]

    def restore(self) -> None:
        tables = _tables(self.state)
        if isinstance(self.saved, tuple):
            for table, old in zip(tables, self.saved, strict=True):
                table.clear()
                table.update(old)
            return
        for key, *olds in self.saved:
            for table, old in zip(tables, olds, strict=True):
                if old is None:
                    table.pop(key, None)
                else:
                    table[key] = old


def _tables(state: ShareShard) -> tuple[dict[SharePartitionKey, Any], ...]:
    return (state.offsets, state.leader_epochs, state.state_epochs, state.update_counts)


# ---------------------------------------------------------------- replay


def replay(
    state: ShareShard,
    key: R.ShareStateKey,
    v: R.ShareStateValue | None,
    cfg: ShareStateConfig,
    offset: int | None = None,
) -> None:
    """Apply one record (``offset``: its place in the log, when known, for pruning)."""
    k = key.share_partition
    if key.kind == R.SHARE_SNAPSHOT:
        if v is None:  # the tombstone of a deleted share-partition
            for table in (state.offsets, state.leader_epochs, state.state_epochs, state.update_counts):
                table.pop(k, None)
        else:
            assert isinstance(v, R.ShareSnapshotValue)
            _raise_epoch(state.leader_epochs, k, v.leader_epoch)
            _raise_epoch(state.state_epochs, k, v.state_epoch)
            state.offsets[k] = ShareGroupOffset(
                v.snapshot_epoch,
                v.state_epoch,
                v.leader_epoch,
                v.start_offset,
                v.delivery_complete_count,
                v.state_batches,
                v.create_timestamp,
                v.write_timestamp,
            )
            if state.update_counts.get(k, 0) >= cfg.snapshot_update_records_per_snapshot and k in state.update_counts:
                state.update_counts[k] = 0
        if offset is not None:
            track_snapshot(state, k, offset, deleted=v is None)
        return
    if v is None:
        return  # an update is never tombstoned
    assert isinstance(v, R.ShareUpdateValue)
    _raise_epoch(state.leader_epochs, k, v.leader_epoch)
    old = state.offsets.get(k)
    if old is None:  # an update without its snapshot (pruned away): Kafka keeps what it says
        state.offsets[k] = ShareGroupOffset(
            v.snapshot_epoch, 0, v.leader_epoch, v.start_offset, v.delivery_complete_count, v.state_batches, 0, 0
        )
    else:
        start = v.start_offset if v.start_offset != -1 else old.start_offset
        state.offsets[k] = ShareGroupOffset(
            old.snapshot_epoch,
            old.state_epoch,
            v.leader_epoch if v.leader_epoch != -1 else old.leader_epoch,
            start,
            v.delivery_complete_count,
            combine(old.batches, v.state_batches, start),
            old.create_timestamp,
            old.write_timestamp,
        )
    state.update_counts[k] = state.update_counts.get(k, 0) + 1


def _raise_epoch(table: dict[SharePartitionKey, int], k: SharePartitionKey, epoch: int) -> None:
    if table.get(k, epoch) <= epoch:
        table[k] = epoch


def track_snapshot(state: ShareShard, k: SharePartitionKey, offset: int, deleted: bool) -> None:
    """Kafka's ShareCoordinatorOffsetsManager.updateState: the first offset still needed moves to the
    oldest of the keys' last snapshots (this one's included); a deleted key then stops holding it back.
    Offsets only grow (records are appended), so each record's offset is new to the heap."""
    latest, heap = state.snapshot_offsets, state.snapshot_heap
    latest[k] = offset
    heapq.heappush(heap, (offset, k))
    while latest.get(heap[0][1]) != heap[0][0]:
        heapq.heappop(heap)  # a key's older snapshot, or a deleted key's
    state.redundant_below = heap[0][0]
    if deleted:
        del latest[k]
    if len(heap) > 2 * len(latest) + 1024:  # mostly stale: rebuilt from the live offsets
        state.snapshot_heap = [(off, key) for key, off in latest.items()]
        heapq.heapify(state.snapshot_heap)


def redundant_below(state: ShareShard) -> int | None:
    """Records below this offset are overridden by later snapshots (Kafka's lastRedundantOffset)."""
    below = state.redundant_below
    return None if below <= 0 or below == 2**63 - 1 else below


def track_appended(state: ShareShard, records: tuple[Record, ...], base_offset: int) -> None:
    """The shell tells where a Result's records landed: snapshots and tombstones move the pruning point."""
    for i, (key, v) in enumerate(records):
        if key.kind == R.SHARE_SNAPSHOT:
            track_snapshot(state, key.share_partition, base_offset + i, deleted=v is None)


# ---------------------------------------------------------------- checks


def _topic_error(key: SharePartitionKey, cfg: ShareStateConfig) -> int:
    count = cfg.partitions_of(key.topic_id)
    return E.UNKNOWN_TOPIC_OR_PARTITION if count is None or count <= key.partition else E.NONE


def _fenced_leader(state: ShareShard, key: SharePartitionKey, leader_epoch: int) -> bool:
    return leader_epoch != -1 and state.leader_epochs.get(key, leader_epoch) > leader_epoch


def _fenced_state(state: ShareShard, key: SharePartitionKey, state_epoch: int) -> bool:
    return state_epoch != -1 and state.state_epochs.get(key, state_epoch) > state_epoch


def _error(code: int, message: str | None = None) -> Answer:
    return Answer(code, message if message is not None else MESSAGES.get(code))


def _read_error(code: int, message: str | None = None) -> ReadStateResult:
    return ReadStateResult(code, message if message is not None else MESSAGES.get(code), 0, -1, ())


# ---------------------------------------------------------------- handlers


def _applied(
    records: tuple[Record, ...], token: Token, payload: Any, write_ref: ShareStateWrite | None = None
) -> Result:
    """A Result whose records are already replayed (the runtime must not replay them again). Result's
    records are typed for ``__consumer_offsets``; the runtime carries any record its port writes."""
    return Result(records=cast(Any, records), responses=((token, payload),), write_ref=write_ref, replay=False)


def result_records(result: Result) -> tuple[Record, ...]:
    return cast(Any, result.records)


def _written(
    state: ShareShard,
    token: Token,
    kind: str,
    key: SharePartitionKey,
    record: Record,
    payload: Any,
    cfg: ShareStateConfig,
) -> Result:
    replay(state, record[0], record[1], cfg)
    return _applied((record,), token, payload, ShareStateWrite(token, kind == "read"))


def initialize(state: ShareShard, req: InitializeState, token: Token, now: int, cfg: ShareStateConfig) -> Result:
    key = req.key
    if key.partition < 0:
        return Result(responses=((token, _error(E.INVALID_REQUEST, NEGATIVE_PARTITION_ID)),))
    if _fenced_state(state, key, req.state_epoch):
        return Result(responses=((token, _error(FENCED_STATE_EPOCH)),))
    if error := _topic_error(key, cfg):
        return Result(responses=((token, _error(error)),))
    old = state.offsets.get(key)
    snapshot = R.ShareSnapshotValue(
        snapshot_epoch=old.snapshot_epoch + 1 if old is not None else 0,
        state_epoch=req.state_epoch,
        leader_epoch=0,
        start_offset=req.start_offset,
        # lag is unknown until consumption starts, known (0 delivered) from an explicit start offset
        delivery_complete_count=-1 if req.start_offset == -1 else 0,
        create_timestamp=now,
        write_timestamp=now,
        state_batches=(),
    )
    return _written(state, token, "initialize", key, (R.snapshot_key(key), snapshot), OK, cfg)


def write(state: ShareShard, req: WriteState, token: Token, now: int, cfg: ShareStateConfig) -> Result:
    key = req.key
    if key.partition < 0:
        return Result(responses=((token, _error(E.INVALID_REQUEST, NEGATIVE_PARTITION_ID)),))
    if key not in state.offsets:
        return Result(responses=((token, _error(E.INVALID_REQUEST, WRITE_UNINITIALIZED)),))
    if _fenced_leader(state, key, req.leader_epoch):
        return Result(responses=((token, _error(FENCED_LEADER_EPOCH)),))
    if _fenced_state(state, key, req.state_epoch):
        return Result(responses=((token, _error(FENCED_STATE_EPOCH)),))
    if error := _topic_error(key, cfg):
        return Result(responses=((token, _error(error)),))
    record = _state_record(state, req, now, cfg, update_leader_epoch=False)
    return _written(state, token, "write", key, record, OK, cfg)


def _state_record(
    state: ShareShard, req: WriteState, now: int, cfg: ShareStateConfig, update_leader_epoch: bool
) -> tuple[R.ShareStateKey, R.ShareStateValue]:
    """A ShareUpdate, or a ShareSnapshot once the key has had ``snapshot.update.records.per.snapshot``
    updates since its last snapshot (Kafka's generateShareStateRecord). A Write never changes the stored
    leader epoch; a Read with a new one does."""
    key = req.key
    current = state.offsets[key]
    leader_epoch = current.leader_epoch
    if update_leader_epoch and req.leader_epoch != -1:
        leader_epoch = req.leader_epoch
    if state.update_counts.get(key, 0) >= cfg.snapshot_update_records_per_snapshot:
        start = req.start_offset if req.start_offset != -1 else current.start_offset
        return R.snapshot_key(key), R.ShareSnapshotValue(
            snapshot_epoch=current.snapshot_epoch + 1,
            state_epoch=current.state_epoch,
            leader_epoch=leader_epoch,
            start_offset=start,
            delivery_complete_count=req.delivery_complete_count,
            create_timestamp=now,
            write_timestamp=now,
            state_batches=combine(current.batches, req.batches, start),
        )
    return R.update_key(key), R.ShareUpdateValue(
        snapshot_epoch=current.snapshot_epoch,
        leader_epoch=leader_epoch,
        start_offset=req.start_offset,
        delivery_complete_count=req.delivery_complete_count,
        state_batches=combine((), req.batches, req.start_offset),
    )


def read(state: ShareShard, req: ReadState, token: Token, now: int, cfg: ShareStateConfig) -> Result:
    key = req.key
    if key.partition < 0:
        return Result(responses=((token, _read_error(E.INVALID_REQUEST, NEGATIVE_PARTITION_ID)),))
    current = state.offsets.get(key)
    if current is None:
        return Result(responses=((token, _read_error(E.INVALID_REQUEST, READ_UNINITIALIZED)),))
    if _fenced_leader(state, key, req.leader_epoch):
        return Result(responses=((token, _read_error(FENCED_LEADER_EPOCH)),))
    if error := _topic_error(key, cfg):
        return Result(responses=((token, _read_error(error)),))
    answer = ReadStateResult(E.NONE, None, current.state_epoch, current.start_offset, current.batches)
    if req.leader_epoch == -1 or state.leader_epochs.get(key) == req.leader_epoch:
        return Result(responses=((token, answer),))
    # a new leader epoch is persisted: the next Read or Write with an older one is fenced
    persist = WriteState(
        key, current.state_epoch, req.leader_epoch, current.start_offset, current.delivery_complete_count, ()
    )
    record = _state_record(state, persist, now, cfg, update_leader_epoch=True)
    return _written(state, token, "read", key, record, answer, cfg)


def delete(state: ShareShard, req: DeleteState, token: Token, now: int, cfg: ShareStateConfig) -> Result:
    key = req.key
    if key.partition < 0:
        return Result(responses=((token, _error(E.INVALID_REQUEST, NEGATIVE_PARTITION_ID)),))
    if error := _topic_error(key, cfg):
        return Result(responses=((token, _error(error)),))
    if key not in state.offsets:
        return Result(responses=((token, OK),))  # nothing to delete: success, no record
    return _written(state, token, "delete", key, (R.snapshot_key(key), None), OK, cfg)


def read_summary(state: ShareShard, req: ReadStateSummary, token: Token, now: int, cfg: ShareStateConfig) -> Result:
    key = req.key
    if key.partition < 0:
        return Result(responses=((token, ReadSummaryResult(E.INVALID_REQUEST, NEGATIVE_PARTITION_ID, 0, 0, -1, -1)),))
    if error := _topic_error(key, cfg):
        return Result(responses=((token, ReadSummaryResult(error, MESSAGES[error], 0, 0, -1, -1)),))
    current = state.offsets.get(key)
    if current is None:  # never initialized: no start offset, no lag, and no error
        return Result(responses=((token, ReadSummaryResult(E.NONE, None, 0, 0, -1, -1)),))
    return Result(
        responses=(
            (
                token,
                ReadSummaryResult(
                    E.NONE,
                    None,
                    current.state_epoch,
                    current.leader_epoch,
                    current.start_offset,
                    current.delivery_complete_count,
                ),
            ),
        )
    )


def snapshot_cold_partitions(state: ShareShard, _req: Any, token: Token, now: int, cfg: ShareStateConfig) -> Result:
    """Kafka's snapshotColdPartitions (every ``share.coordinator.cold.partition.snapshot.interval.ms``):
    a share-partition whose last snapshot is that old is snapshotted again, so that it stops holding
    back the pruning of the partition; nothing when every one was already re-snapshotted so."""
    if all(o.create_timestamp != o.write_timestamp for o in state.offsets.values()):
        return Result(responses=((token, None),))
    out: list[Record] = []
    for k, o in state.offsets.items():
        if now - o.write_timestamp >= cfg.cold_partition_snapshot_interval_ms:
            out.append(
                (
                    R.snapshot_key(k),
                    R.ShareSnapshotValue(
                        o.snapshot_epoch + 1,
                        o.state_epoch,
                        o.leader_epoch,
                        o.start_offset,
                        o.delivery_complete_count,
                        o.create_timestamp,
                        now,
                        o.batches,
                    ),
                )
            )
    for key, v in out:
        replay(state, key, v, cfg)
    return _applied(tuple(out), token, None)


def topics_deleted(
    state: ShareShard, topic_ids: frozenset[uuid.UUID], token: Token, now: int, cfg: ShareStateConfig
) -> Result:
    """Kafka's maybeCleanupShareState: the state of every share-partition of a deleted topic is tombstoned."""
    out: tuple[Record, ...] = tuple((R.snapshot_key(k), None) for k in state.offsets if k.topic_id in topic_ids)
    for key, v in out:
        replay(state, key, v, cfg)
    return _applied(out, token, None)


# ---------------------------------------------------------------- the runtime's ShardRules


def write_error(code: int) -> int:
    """Kafka's CoordinatorOperationExceptionHelper mapping of a failed append, as the group coordinator's."""
    return E.group_write_error(code)


class ShareShardRules:
    """What the coordinator runtime calls besides the handlers."""

    def __init__(self, cfg: ShareStateConfig) -> None:
        self.cfg = cfg
        self.snapshots: Mapping[type, SnapshotTaker | None] = {}  # every request goes to ``snapshot``

    def new_state(self, partition: int) -> ShareShard:
        return ShareShard(partition)

    def on_timer(self, state: ShareShard, key: tuple[Any, ...], now: int) -> Result:
        return EMPTY  # the share coordinator's periodic jobs are the shell's

    def snapshot(self, state: ShareShard, subject: str, request: object) -> PartitionsSnapshot:
        """A request names one share-partition; a deleted topic's tombstones touch its partitions; the
        periodic re-snapshot may touch any."""
        key = getattr(request, "key", None)
        if isinstance(key, SharePartitionKey):
            return PartitionsSnapshot(state, (key,))
        if isinstance(request, frozenset):
            return PartitionsSnapshot(state, [k for k in state.offsets if k.topic_id in request])
        return PartitionsSnapshot(state, None)

    def on_write_failed(self, state: ShareShard, write_ref: object, error: int, now: int) -> Result:
        """The records were not written: the request hears why (the runtime has restored the state)."""
        if not isinstance(write_ref, ShareStateWrite):
            return EMPTY
        code = write_error(error)
        payload: Any = _read_error(code) if write_ref.read else _error(code)
        return Result(responses=((write_ref.token, payload),), replay=False)

    def replay(self, state: ShareShard, result: Result, now: int) -> None:
        for key, v in result_records(result):
            replay(state, key, v, self.cfg)

    def timer_subject(self, key: tuple[Any, ...]) -> str | None:
        return None
