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

from coordinator import errors as E
from coordinator.api import (
    EndTxnMarker,
    GroupConfig,
    OffsetCommitResponse,
    PartitionError,
    Result,
    Token,
    TxnOffsetCommit,
)
from coordinator.consumer import offsets as consumer_offsets
from coordinator.group import Group
from coordinator.offsets import commit_records, validate_offset_commit
from coordinator.records import OffsetCommitValue

if TYPE_CHECKING:
    from coordinator.shard import ShardState


class PendingOffset:
    """An offset of an open transaction; ``seq`` orders it among the shard's writes."""

    __slots__ = ("value", "seq", "superseded")

    def __init__(self, value: OffsetCommitValue, seq: int, superseded: bool = False) -> None:
        self.value, self.seq, self.superseded = value, seq, superseded

    def __repr__(self) -> str:
        return f"PendingOffset({self.value!r}, seq={self.seq}, superseded={self.superseded})"


# ---------------------------------------------------------------- TxnOffsetCommit


def _txn_commit_error(state: ShardState, req: TxnOffsetCommit, now: int) -> tuple[int, Group | None]:
    """Kafka 4.x's validateTransactionalOffsetCommit + ClassicGroup.validateOffsetCommit(isTransactional)."""
    if not req.group_id:
        return E.INVALID_GROUP_ID, None
    g = state.groups.get(req.group_id)
    cg = state.consumer_groups.get(req.group_id)
    if cg is not None and (g is None or not g.members):
        # a consumer-protocol group: the member epoch is checked unless no member is named at all;
        # STALE_MEMBER_EPOCH is answered as ILLEGAL_GENERATION, as Kafka maps it for this API
        if req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
            err = consumer_offsets.commit_error(
                cg, req.member_id, req.generation_id, req.version, ((p.topic, p.partition) for p in req.partitions),
                state.topics, transactional=True,
            )
            if err:
                return (E.ILLEGAL_GENERATION if err == E.STALE_MEMBER_EPOCH else err), None
        if g is None:
            g = state.groups[req.group_id] = Group(req.group_id, now)
        return E.NONE, g
    if g is None:
        if req.generation_id < 0:
            g = Group(req.group_id, now)  # a simple group, as for OffsetCommit
            state.groups[req.group_id] = g
            return E.NONE, g
        return E.ILLEGAL_GENERATION, None  # whatever the version (no GROUP_ID_NOT_FOUND here)
    err = validate_offset_commit(g, req.member_id, req.group_instance_id, req.generation_id, transactional=True)
    return (err, None) if err else (E.NONE, g)


def txn_offset_commit(state: ShardState, req: TxnOffsetCommit, token: Token, now: int, cfg: GroupConfig) -> Result:
    """The records of an OffsetCommit, without an expire timestamp, as the producer's batch; no member's
    session is touched (Kafka's commitTransactionalOffset does not reschedule heartbeats)."""
    existed = req.group_id in state.groups
    err, g = _txn_commit_error(state, req, now)
    if err or g is None:
        return _failed(req, token, err)
    records, parts = commit_records(req.group_id, req.partitions, now, -1, cfg)
    response = ((token, OffsetCommitResponse(parts)),)
    if not records:
        return Result(responses=response, replay=False)
    if _fenced(state, req.producer_id, req.producer_epoch):
        if not existed:
            del state.groups[req.group_id]  # the append failed: no simple group either
        return _failed(req, token, E.INVALID_PRODUCER_EPOCH)
    g.pending_commits += len(records)
    return Result(
        tuple(records), response, (), ("commit", req.group_id, token, parts, len(records)), True,
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
        responses=((token, None),), write_ref=("marker", token),
        marker=(req.producer_id, req.producer_epoch, req.commit),
    )


# ---------------------------------------------------------------- replay


def replay_txn_offset(state: ShardState, producer_id: int, group_id: str, topic: str, partition: int, value: OffsetCommitValue | None, now: int, *, superseded: bool = False) -> None:
    """An offset record of a transactional batch. A tombstone acts at once, as any tombstone does."""
    from coordinator.shard import replay_offset

    if value is None:
        replay_offset(state, group_id, topic, partition, None, now)
        return
    g = state.groups.get(group_id)
    if g is None:
        g = state.groups[group_id] = Group(group_id, now)
    elif g.pending_commits:
        g.pending_commits -= 1
    state.txn_seq += 1
    by_group = state.pending_txn.get(producer_id)
    if by_group is None:
        by_group = state.pending_txn[producer_id] = {}
    offsets = by_group.get(group_id)
    if offsets is None:
        offsets = by_group[group_id] = {}
    offsets[(topic, partition)] = PendingOffset(value, state.txn_seq, superseded)
    open_ = state.open_txns.get(group_id)
    if open_ is None:
        open_ = state.open_txns[group_id] = set()
    open_.add(producer_id)


def on_plain_offset(state: ShardState, group_id: str, topic: str, partition: int, tombstone: bool) -> None:
    """A non-transactional write of a partition with open transactions: a tombstone removes their pending
    offsets of it (Kafka does so), a value outranks them (it is the later write)."""
    tp = (topic, partition)
    for pid in state.open_txns.get(group_id, ()):
        offsets = state.pending_txn.get(pid, {}).get(group_id)
        if offsets is None or tp not in offsets:
            continue
        if tombstone:
            del offsets[tp]
        else:
            offsets[tp].superseded = True


def replay_marker(state: ShardState, producer_id: int, commit: bool, now: int) -> None:
    """Kafka's replayEndTransactionMarker: the producer's pending offsets in this partition, every group's,
    are applied (unless outranked) or dropped. A marker with nothing pending changes nothing."""
    by_group = state.pending_txn.pop(producer_id, None)
    if by_group is None:
        return
    for gid in by_group:
        open_ = state.open_txns.get(gid)
        if open_ is not None:
            open_.discard(producer_id)
            if not open_:
                del state.open_txns[gid]
    if not commit:
        return
    for gid, offsets in by_group.items():
        for (topic, partition), pending in offsets.items():
            if pending.superseded:
                continue
            g = state.groups.get(gid)
            if g is None:
                g = state.groups[gid] = Group(gid, now)
            ps = g.offsets.get(topic)
            if ps is None:
                ps = g.offsets[topic] = {}
            ps[partition] = pending.value
            # other open transactions' earlier offsets of this partition now lose to this one
            tp = (topic, partition)
            for pid in state.open_txns.get(gid, ()):
                other = state.pending_txn.get(pid, {}).get(gid, {}).get(tp)
                if other is not None and other.seq < pending.seq:
                    other.superseded = True


# ---------------------------------------------------------------- queries


def pending_offsets(state: ShardState, group_id: str) -> dict[int, dict[tuple[str, int], Any]]:
    """Producer id -> (topic, partition) -> PendingOffset of the group's open transactions (for tests, tools)."""
    return {
        pid: dict(state.pending_txn.get(pid, {}).get(group_id, {}))
        for pid in sorted(state.open_txns.get(group_id, ()))
    }
