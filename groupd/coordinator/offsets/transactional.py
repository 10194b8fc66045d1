"""Transactional offsets: TxnOffsetCommit (api 28) and the transaction markers that end them, following
Kafka 4.x's OffsetMetadataManager (commitTransactionalOffset, replay, replayEndTransactionMarker).

A TxnOffsetCommit writes the usual OffsetCommit records as one transactional batch of the producer.
Once durable they are held *pending* per producer (not visible to OffsetFetch) until that producer's
marker: COMMIT applies them, ABORT drops them. A pending offset loses to a non-transactional commit
(or another transaction's committed offset) of the same partition written after it: Kafka compares
the records' log offsets; here a record's place in the shard's write order (``seq``) stands for it,
and a later non-transactional write marks the pending offsets of its partition ``superseded``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groupd.coordinator import errors as E
from groupd.coordinator.api import (
    EndTxnMarker,
    GroupConfig,
    MarkerWrite,
    OffsetCommitResponse,
    OffsetsWrite,
    PartitionError,
    Result,
    Token,
    TxnOffsetCommit,
)
from groupd.coordinator.group import Group
from groupd.coordinator.offsets.commits import commit_records
from groupd.coordinator.records import OffsetCommitValue

if TYPE_CHECKING:
    from groupd.coordinator.shard import ShardState


class PendingOffset:
    """An offset of an open transaction; ``seq`` orders it among the shard's writes."""

    __slots__ = ("value", "seq", "superseded")

    def __init__(self, value: OffsetCommitValue, seq: int, superseded: bool = False) -> None:
        self.value, self.seq, self.superseded = value, seq, superseded

    def __repr__(self) -> str:
        return f"PendingOffset({self.value!r}, seq={self.seq}, superseded={self.superseded})"


# ---------------------------------------------------------------- TxnOffsetCommit


def _txn_commit_error(state: ShardState, req: TxnOffsetCommit, now: int) -> tuple[int, Group | None]:
    """Kafka 4.x's validateTransactionalOffsetCommit, then the owning type's (transactional) check.
    Returns the simple group made for the commit, if any."""
    if not req.group_id:
        return E.INVALID_GROUP_ID, None
    g = state.groups.get(req.group_id)
    if g is None:
        if req.generation_id < 0:
            g = Group(req.group_id, now)  # a simple group, as for OffsetCommit
            state.groups[req.group_id] = g
            return E.NONE, g
        return E.ILLEGAL_GENERATION, None  # whatever the version (no GROUP_ID_NOT_FOUND here)
    return state.type_of(g).validate_txn_offset_commit(state, g, req), None


def txn_offset_commit(state: ShardState, req: TxnOffsetCommit, token: Token, now: int, cfg: GroupConfig) -> Result:
    """The records of an OffsetCommit, without an expire timestamp, as the producer's batch; no member's
    session is touched (Kafka's commitTransactionalOffset does not reschedule heartbeats)."""
    existed = req.group_id in state.groups
    err, g = _txn_commit_error(state, req, now)
    if err:
        return _failed(req, token, err)
    records, parts = commit_records(req.group_id, req.partitions, now, -1, cfg)
    response = ((token, OffsetCommitResponse(parts)),)
    if not records:
        return Result(responses=response, replay=False)
    if _fenced(state, req.producer_id, req.producer_epoch):
        if not existed and g is not None:
            del state.groups[req.group_id]  # the append failed: no simple group either
        return _failed(req, token, E.INVALID_PRODUCER_EPOCH)
    state.offsets.start_writing(req.group_id, len(records))
    return Result(
        records=tuple(records), responses=response, write_ref=OffsetsWrite(token, parts),
        producer=(req.producer_id, req.producer_epoch),
    )


def _failed(req: TxnOffsetCommit, token: Token, error: int) -> Result:
    parts = tuple(PartitionError(p.topic, p.partition, error) for p in req.partitions)
    return Result(responses=((token, OffsetCommitResponse(parts)),), replay=False)


def _fenced(state: ShardState, producer_id: int, producer_epoch: int) -> bool:
    """Kafka's log refuses a producer's batch or marker whose epoch is below the last it appended for that
    producer (ProducerAppendInfo.checkProducerEpoch: INVALID_PRODUCER_EPOCH); otherwise the epoch is
    now the producer's."""
    known = state.producer_epochs.get(producer_id)
    if known is not None and producer_epoch < known:
        return True
    state.producer_epochs[producer_id] = producer_epoch
    return False


def end_transaction(state: ShardState, req: EndTxnMarker, token: Token, now: int, cfg: GroupConfig) -> Result:
    """Write the producer's marker; its offsets are applied or dropped when the marker is replayed. The
    payload is None, or INVALID_PRODUCER_EPOCH for a marker older than the producer's epoch (not written)."""
    if _fenced(state, req.producer_id, req.producer_epoch):
        return Result(responses=((token, E.INVALID_PRODUCER_EPOCH),), replay=False)
    return Result(
        responses=((token, None),), write_ref=MarkerWrite(token),
        marker=(req.producer_id, req.producer_epoch, req.commit),
    )


# ---------------------------------------------------------------- queries


def pending_offsets(state: ShardState, group_id: str) -> dict[int, dict[tuple[str, int], Any]]:
    """Producer id -> (topic, partition) -> PendingOffset of the group's open transactions (for tests, tools)."""
    return {
        pid: dict(state.offsets.pending_txn.get(pid, {}).get(group_id, {}))
        for pid in sorted(state.offsets.open_txns.get(group_id, ()))
    }
