"""Offset records applied to a shard's state: plain commits and tombstones, transactional offsets
(pending until their producer's marker), and the markers that end them. Used by ``replay`` at runtime
and at load alike (coordinator/shard.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from groupd.coordinator.group import Group
from groupd.coordinator.offsets.transactional import PendingOffset
from groupd.coordinator.records import OffsetCommitValue

if TYPE_CHECKING:
    from groupd.coordinator.shard import ShardState


def replay_offset(
    state: ShardState, group_id: str, topic: str, partition: int, value: OffsetCommitValue | None, now: int
) -> None:
    """An offset commit record (``replay`` of an OffsetCommitKey; the load calls it without the key
    object): a value sets the partition's committed offset, creating the group if needed; a tombstone
    removes it."""
    store = state.offsets
    if store.open_txns and group_id in store.open_txns:
        on_plain_offset(state, group_id, topic, partition, value is None)
    if value is None:
        store.remove(group_id, topic, partition)
        return
    # the hot path of every commit: OffsetStore.set and done_writing, inlined
    if group_id not in state.groups:
        _group_for_offsets(state, group_id, now)
    by_topic = store.committed.get(group_id)
    if by_topic is None:
        by_topic = store.committed[group_id] = {}
    ps = by_topic.get(topic)
    if ps is None:
        ps = by_topic[topic] = {}
    ps[partition] = value
    pending = store.pending_commits
    if pending:
        left = pending.get(group_id, 0) - 1
        if left > 0:
            pending[group_id] = left
        else:
            pending.pop(group_id, None)


def _group_for_offsets(state: ShardState, group_id: str, now: int) -> None:
    """Offsets of an id no group holds make a simple classic group (Kafka's getOrMaybeCreateClassicGroup)."""
    if group_id not in state.groups:
        state.groups[group_id] = Group(group_id, now)


def replay_txn_offset(
    state: ShardState,
    producer_id: int,
    group_id: str,
    topic: str,
    partition: int,
    value: OffsetCommitValue | None,
    now: int,
    *,
    superseded: bool = False,
) -> None:
    """An offset record of a transactional batch. A tombstone acts at once, as any tombstone does."""
    if value is None:
        replay_offset(state, group_id, topic, partition, None, now)
        return
    _group_for_offsets(state, group_id, now)
    store = state.offsets
    if store.pending_commits:
        store.done_writing(group_id)
    state.offsets.txn_seq += 1
    by_group = state.offsets.pending_txn.get(producer_id)
    if by_group is None:
        by_group = state.offsets.pending_txn[producer_id] = {}
    offsets = by_group.get(group_id)
    if offsets is None:
        offsets = by_group[group_id] = {}
    offsets[(topic, partition)] = PendingOffset(value, state.offsets.txn_seq, superseded)
    open_ = state.offsets.open_txns.get(group_id)
    if open_ is None:
        open_ = state.offsets.open_txns[group_id] = set()
    open_.add(producer_id)


def on_plain_offset(state: ShardState, group_id: str, topic: str, partition: int, tombstone: bool) -> None:
    """A non-transactional write of a partition with open transactions: a tombstone removes their pending
    offsets of it (Kafka does so), a value outranks them (it is the later write)."""
    tp = (topic, partition)
    for pid in state.offsets.open_txns.get(group_id, ()):
        offsets = state.offsets.pending_txn.get(pid, {}).get(group_id)
        if offsets is None or tp not in offsets:
            continue
        if tombstone:
            del offsets[tp]
        else:
            offsets[tp].superseded = True


def replay_marker(state: ShardState, producer_id: int, commit: bool, now: int) -> None:
    """Kafka's replayEndTransactionMarker: the producer's pending offsets in this partition, every group's,
    are applied (unless outranked) or dropped. A marker with nothing pending changes nothing."""
    by_group = state.offsets.pending_txn.pop(producer_id, None)
    if by_group is None:
        return
    for gid in by_group:
        open_ = state.offsets.open_txns.get(gid)
        if open_ is not None:
            open_.discard(producer_id)
            if not open_:
                del state.offsets.open_txns[gid]
    if not commit:
        return
    for gid, offsets in by_group.items():
        for (topic, partition), pending in offsets.items():
            if pending.superseded:
                continue
            _group_for_offsets(state, gid, now)
            state.offsets.set(gid, topic, partition, pending.value)
            # other open transactions' earlier offsets of this partition now lose to this one
            tp = (topic, partition)
            for pid in state.offsets.open_txns.get(gid, ()):
                other = state.offsets.pending_txn.get(pid, {}).get(gid, {}).get(tp)
                if other is not None and other.seq < pending.seq:
                    other.superseded = True
