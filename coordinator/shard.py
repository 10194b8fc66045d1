"""One ``__consumer_offsets`` partition's coordinator state and the entry points the shell calls.

``replay`` is the only code that applies persisted records, at load and at runtime alike (for Results
with ``replay=True``). Classic group metadata is applied by the handlers themselves (Kafka 4.x does the
same: its group records are not replayed at runtime), so a GroupMetadata record is replayed only at load.
"""

from __future__ import annotations

from typing import Any

from coordinator import errors as E
from coordinator.api import (
    EMPTY,
    GroupConfig,
    JoinGroupResponse,
    OffsetDeleteResponse,
    Protocol,
    Result,
    SyncGroupResponse,
    TimerOp,
)
from coordinator.classic.rules import (
    Out,
    _undo_static,
    _undo_sync,
    describe_group,
    heartbeat,
    join_group,
    leave_group,
    list_groups,
    on_group_timer,
    prepare_rebalance,
    sync_group,
)
from coordinator.group import EMPTY as S_EMPTY
from coordinator.group import STABLE, Group, Member
from coordinator.offsets.commits import (
    commit_failed,
    delete_failed,
    delete_group,
    expire_failed,
    expire_offsets,
    has_pending,
    offset_commit,
    offset_delete,
    offset_fetch,
    remove_topic_offsets,
    undrop,
)
from coordinator.offsets.replay import replay_marker, replay_offset, replay_txn_offset
from coordinator.offsets.transactional import PendingOffset, end_transaction, txn_offset_commit
from coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    Key,
    OffsetCommitKey,
    Value,
)

__all__ = [
    "ShardState",
    "delete_group",
    "end_transaction",
    "has_pending",
    "describe_group",
    "expire_offsets",
    "heartbeat",
    "join_group",
    "leave_group",
    "list_groups",
    "offset_commit",
    "offset_delete",
    "offset_fetch",
    "on_loaded",
    "on_timer",
    "on_write_failed",
    "remove_topic_offsets",
    "replay",
    "replay_marker",
    "replay_offset",
    "replay_result",
    "replay_txn_offset",
    "sync_group",
    "txn_offset_commit",
    "unload",
]


class ShardState:
    """Groups (with their committed offsets) of one offsets partition."""

    __slots__ = ("partition", "groups", "dropping", "pending_txn", "open_txns", "txn_seq", "producer_epochs")

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.groups: dict[str, Group] = {}
        # Groups deleted in memory whose GroupMetadata tombstone is being written: its runtime replay is
        # then a no-op (at load this is empty and the tombstone removes the group).
        self.dropping: dict[str, int] = {}
        # Transactional offsets not yet ended by a marker (coordinator/offsets/transactional.py): producer id ->
        # group -> (topic, partition) -> PendingOffset, and group -> producer ids with such offsets
        # (Kafka's pendingTransactionalOffsets and openTransactionsByGroup).
        self.pending_txn: dict[int, dict[str, dict[tuple[str, int], PendingOffset]]] = {}
        self.open_txns: dict[str, set[int]] = {}
        self.txn_seq = 0  # write order of transactional offsets
        self.producer_epochs: dict[int, int] = {}  # the last epoch of each producer written here


def replay_result(state: ShardState, result: Result, now: int) -> None:
    """A durable Result's records: plain ones, a producer's transactional batch, or a marker."""
    if result.marker is not None:
        pid, epoch, commit = result.marker
        _note_epoch(state, pid, epoch)
        replay_marker(state, pid, commit, now)
    producer = result.producer
    if producer is not None:
        _note_epoch(state, *producer)
    for key, value in result.records:
        if producer is not None and isinstance(key, OffsetCommitKey):
            replay_txn_offset(state, producer[0], key.group, key.topic, key.partition, value, now)  # type: ignore[arg-type]
        else:
            replay(state, key, value, now)


def _note_epoch(state: ShardState, producer_id: int, epoch: int) -> None:
    if epoch > state.producer_epochs.get(producer_id, -1):
        state.producer_epochs[producer_id] = epoch


def replay(state: ShardState, key: Key, value: Value | None, now: int) -> None:
    cls = key.__class__
    if cls is OffsetCommitKey or (cls is not GroupMetadataKey and isinstance(key, OffsetCommitKey)):
        replay_offset(state, key.group, key.topic, key.partition, value, now)  # type: ignore[union-attr, arg-type]
    elif isinstance(key, GroupMetadataKey):
        _replay_group(state, key.group, value, now)  # type: ignore[arg-type]


def _replay_group(state: ShardState, group_id: str, value: GroupMetadataValue | None, now: int) -> None:
    if value is None and group_id in state.dropping:
        undrop(state, group_id)
        return
    old = state.groups.get(group_id)
    if value is None:
        if old is None:
            return
        if old.offsets:
            # Offsets outlive a group tombstone: they keep a simple group alive.
            g = Group(group_id, now)
            g.offsets = old.offsets
            state.groups[group_id] = g
        else:
            del state.groups[group_id]
        return
    ts = value.current_state_timestamp
    g = Group(group_id, ts if ts >= 0 else None)
    if old is not None:
        g.offsets = old.offsets
        g.pending_commits = old.pending_commits
    ptype = value.protocol_type or None
    proto = value.protocol
    for mm in value.members:
        rebalance = mm.rebalance_timeout if mm.rebalance_timeout >= 0 else mm.session_timeout
        m = Member(
            mm.member_id,
            mm.group_instance_id,
            mm.client_id,
            mm.client_host,
            rebalance,
            mm.session_timeout,
            ptype or "",
            (Protocol(proto or "", mm.subscription),),
        )
        m.assignment = mm.assignment
        g.add(m)
    g.protocol_type = ptype
    g.generation = value.generation
    g.protocol = proto
    g.leader = value.leader if g.members else None
    g.state = g.prev_state = STABLE if g.members else S_EMPTY
    g.subscribed = g.compute_subscribed()
    state.groups[group_id] = g


def on_loaded(state: ShardState, now: int, cfg: GroupConfig) -> Result:
    """After a load: every member's session restarts now; an over-capacity group rebalances."""
    out = Out()
    for g in state.groups.values():
        if not g.members:
            continue
        for m in g.members.values():
            m.hb_deadline = now + m.session_timeout
            out.timers.append(_hb(g, m))
        if g.state == STABLE and len(g.members) > cfg.max_size:
            prepare_rebalance(g, now, cfg, out)
    return out.result()


def _hb(g: Group, m: Member) -> TimerOp:
    return TimerOp(("hb", g.group_id, m.member_id), m.hb_deadline)


def on_timer(state: ShardState, key: tuple[Any, ...], now: int, cfg: GroupConfig) -> Result:
    return on_group_timer(state, key, now, cfg)


def on_write_failed(state: ShardState, write_ref: Any, error: int, now: int, cfg: GroupConfig) -> Result:
    """Kafka maps a failed append into the answers itself (spec §4.4, §8.1)."""
    if not isinstance(write_ref, tuple) or not write_ref:
        return EMPTY
    kind = write_ref[0]
    if kind == "commit":
        return commit_failed(state, write_ref, error)
    if kind == "delete":
        return delete_failed(state, write_ref, error)
    if kind == "marker":
        return EMPTY  # the shell fails the caller's awaitable: it retries the marker
    if kind == "offdel":
        return Result(
            responses=((write_ref[1], OffsetDeleteResponse(E.offset_write_error(error))),), replay=False
        )
    if kind == "expire":
        return expire_failed(state, write_ref)
    out = Out()
    if kind == "sync":
        _undo_sync(state, write_ref, error, now, cfg, out)
    elif kind == "static":
        _undo_static(state, write_ref, error, now, out)
    else:
        return EMPTY  # member-less group metadata, expiry: Kafka only logs these failures
    return out.result()


def unload(state: ShardState) -> Result:
    """The partition is no longer ours: groups die and parked requests learn NOT_COORDINATOR."""
    responses = []
    for g in state.groups.values():
        for m in g.members.values():
            if m.join_token is not None:
                responses.append((m.join_token, JoinGroupResponse(E.NOT_COORDINATOR, member_id=m.member_id)))
            if m.sync_token is not None:
                responses.append((m.sync_token, SyncGroupResponse(E.NOT_COORDINATOR)))
        g.state = "Dead"
    state.groups.clear()
    state.pending_txn.clear()  # a later load brings them back from the log
    state.open_txns.clear()
    state.producer_epochs.clear()
    return Result(responses=tuple(responses), replay=False)
