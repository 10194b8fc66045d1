"""One ``__consumer_offsets`` partition's coordinator state, and the rules the runtime runs over it.

``replay`` is the only code that applies persisted records, at load and at runtime alike (for Results
with ``replay=True``). Classic group metadata is applied by the handlers themselves (Kafka 4.x does the
same: its group records are not replayed at runtime), so a GroupMetadata record is replayed only at load.

Group types plug in here, as in Kafka's GroupMetadataManager: ``GROUP_TYPES`` maps a group's type to
its rules (its API handlers, timers and failed-write follow-ups), and the entry points below dispatch on
the type of the group a request or timer names. Offsets (commit, fetch, delete, expiry, transactional
offsets) are shared by every type: coordinator/offsets/ validates a commit against whichever group owns
the id. ``GroupShardRules`` is what coordinator/runtime/ calls: fresh state, timers, failed writes,
replay, and the load's replay of a walked partition (``replay_walked``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from groupd.coordinator import errors as E
from groupd.coordinator.api import (
    EMPTY,
    DeleteGroupResponse,
    EndTxnMarker,
    GroupConfig,
    GroupDeleteWrite,
    GroupDescription,
    GroupListing,
    Heartbeat,
    JoinGroup,
    JoinGroupResponse,
    OffsetCommit,
    OffsetDelete,
    OffsetDeleteResponse,
    OffsetDeleteWrite,
    OffsetsWrite,
    Protocol,
    Result,
    StaticRejoinWrite,
    SyncGroup,
    SyncGroupResponse,
    SyncWrite,
    TimerOp,
    Token,
    TxnOffsetCommit,
)
from groupd.coordinator.classic import rules as classic
from groupd.coordinator.classic.rules import Out, prepare_rebalance
from groupd.coordinator.consumer import runtime as consumer
from groupd.coordinator.consumer.group import ConsumerGroups
from groupd.coordinator.consumer.group import deletion_records as consumer_deletion_records
from groupd.coordinator.consumer.runtime import consumer_group_describe, consumer_group_heartbeat
from groupd.coordinator.group import EMPTY as S_EMPTY
from groupd.coordinator.group import STABLE, Group, Member
from groupd.coordinator.logfields import group_event
from groupd.coordinator.offsets.commits import (
    commit_failed,
    delete_failed,
    expire_offsets,
    has_pending,
    offset_commit,
    offset_delete,
    offset_fetch,
    remove_topic_offsets,
    undrop,
)
from groupd.coordinator.offsets.commits import delete_group as classic_delete_group
from groupd.coordinator.offsets.replay import replay_marker, replay_offset, replay_txn_offset
from groupd.coordinator.offsets.transactional import PendingOffset, end_transaction, txn_offset_commit
from groupd.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    Key,
    OffsetCommitKey,
    RecordFormatError,
    Value,
    decode_key,
    decode_offset_commit,
    decode_value,
)
from groupd.coordinator.runtime.runtime import Snapshot
from groupd.coordinator.share import runtime as share
from groupd.coordinator.share.group import ShareGroups
from groupd.coordinator.share.records import is_share_key
from groupd.coordinator.share.runtime import (
    share_alter_offsets,
    share_delete_offsets,
    share_delete_prepare,
    share_group_describe,
    share_group_heartbeat,
    share_initialized_partitions,
    share_state_deleted,
    share_state_initialized,
    share_topics_deleted,
)
from groupd.coordinator.snapshots import CommitSnapshot, GroupSnapshot, ProducerSnapshot, ShardSnapshot
from groupd.protocol.topic_names import OFFSETS_TOPIC
from groupd.storage.batch import TxnWalk

__all__ = [
    "ShardState",
    "consumer_group_describe",
    "consumer_group_heartbeat",
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
    "replay_walked",
    "share_alter_offsets",
    "share_delete_offsets",
    "share_delete_prepare",
    "share_initialized_partitions",
    "share_state_deleted",
    "share_group_describe",
    "share_group_heartbeat",
    "share_state_initialized",
    "share_topics_deleted",
    "sync_group",
    "txn_offset_commit",
    "unload",
]


class ShardState:
    """Groups (with their committed offsets) of one offsets partition."""

    __slots__ = (
        "partition", "groups", "dropping", "pending_txn", "open_txns", "txn_seq", "producer_epochs",
        "consumer_groups", "topics", "share_groups",
    )

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.groups: dict[str, Group] = {}
        # Consumer-protocol (KIP-848) groups, kept apart from the classic ones (coordinator/consumer/);
        # their committed offsets live in ``groups`` like a simple group's. ``topics`` is the broker's
        # topic registry (name -> entry with topic_id and partitions), which their assignments read.
        self.consumer_groups: ConsumerGroups = {}
        self.topics: Mapping[str, Any] = {}
        # Share groups (KIP-932, coordinator/share/): no offsets of their own (their share partitions'
        # state is the share coordinator's)
        self.share_groups: ShareGroups = {}
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
    elif is_share_key(key):
        share.replay(state.share_groups, key, value, now)  # type: ignore[arg-type]
    else:
        consumer.replay(state.consumer_groups, key, value)  # type: ignore[arg-type]


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
            prepare_rebalance(g, now, cfg, out, "join", f"{len(g.members)} members exceed group.max.size={cfg.max_size} after loading")
    out.timers += consumer.rearm_after_load(state, now, cfg)
    out.timers += share.rearm_after_load(state, now, cfg)
    return out.result()


def _hb(g: Group, m: Member) -> TimerOp:
    return TimerOp(("hb", g.group_id, m.member_id), m.hb_deadline)


# ---------------------------------------------------------------- group types


@dataclass(frozen=True, slots=True)
class GroupType:
    """The rules of one type of group: what a new type (consumer, KIP-848; share, KIP-932) provides.

    ``timer_kinds`` name the first element of the timer keys and ``write_refs`` the types of the write
    refs its rules make, so that a timer or a failed write finds its way back to them."""

    name: str
    join_group: Callable[..., Result]
    sync_group: Callable[..., Result]
    heartbeat: Callable[..., Result]
    leave_group: Callable[..., Result]
    on_timer: Callable[[ShardState, tuple[Any, ...], int, GroupConfig], Result]
    timer_kinds: frozenset[str]
    on_write_failed: Callable[[ShardState, Any, int, int, GroupConfig], Result]
    write_refs: frozenset[type]


CLASSIC = GroupType(
    "classic", classic.join_group, classic.sync_group, classic.heartbeat, classic.leave_group,
    classic.on_group_timer, frozenset({"hb", "pend", "join", "sync"}),
    classic.on_write_failed, frozenset({SyncWrite, StaticRejoinWrite}),
)
GROUP_TYPES: dict[str, GroupType] = {CLASSIC.name: CLASSIC}
_BY_WRITE_REF = {kind: t for t in GROUP_TYPES.values() for kind in t.write_refs}


def type_of(state: ShardState, group_id: str) -> GroupType:
    """The rules of the group named ``group_id``: its own type's, or classic for a group not yet made
    (the classic APIs make classic groups; Kafka's consumer group APIs will make consumer groups)."""
    g = state.groups.get(group_id)
    return GROUP_TYPES[g.group_type] if g is not None else CLASSIC


def join_group(state: ShardState, req: Any, token: int, now: int, cfg: GroupConfig) -> Result:
    """A classic JoinGroup; into a consumer-protocol group with members, the member joins it as a classic
    member (KIP-848 migration, coordinator/consumer/classic_members.py)."""
    cg = state.consumer_groups.get(req.group_id)
    if cg is None:
        if req.group_id in state.share_groups:  # Kafka: a group of another type is not joined
            return Result(responses=((token, JoinGroupResponse(E.INCONSISTENT_GROUP_PROTOCOL, member_id="")),), replay=False)
        g = state.groups.get(req.group_id)  # type_of, inlined: every request of the type passes here
        return (CLASSIC if g is None else GROUP_TYPES[g.group_type]).join_group(state, req, token, now, cfg)
    if cg.members:
        return consumer.classic_join_group(state, req, token, now, cfg)
    # an empty consumer group becomes a classic one (Kafka converts empty groups under any migration
    # policy): its records are tombstoned, its offsets stay
    tombstones = consumer_deletion_records(cg)
    for key, value in tombstones:
        consumer.replay(state.consumer_groups, key, value)
    joined = classic.join_group(state, req, token, now, cfg)
    return replace(joined, records=tuple(tombstones) + joined.records)


def list_groups(state: ShardState, states: frozenset[str] | None, types: frozenset[str] | None) -> list[GroupListing]:
    """ListGroups: classic groups, then consumer-protocol groups (type ``consumer``). A consumer group's
    offsets sit in a member-less classic group of the same id, which is not listed on its own."""
    listed = [g for g in classic.list_groups(state, states, types) if g.group_id not in state.consumer_groups]
    listed += share.list_share_groups(state, states, types)
    wanted_types = {t.strip().lower() for t in types} if types else None
    if wanted_types is not None and "consumer" not in wanted_types:
        return listed
    wanted_states = {s.strip().lower() for s in states} if states else None
    for gid, cg in state.consumer_groups.items():
        st = cg.state()
        if wanted_states is None or st.lower() in wanted_states:
            listed.append(GroupListing(gid, "consumer", st, "consumer"))
    return listed


def describe_group(state: ShardState, group_id: str) -> GroupDescription:
    """DescribeGroups: a consumer-protocol group is Dead to it (v6 answers GROUP_ID_NOT_FOUND), as in Kafka."""
    if group_id in state.consumer_groups:
        return GroupDescription(E.NONE, group_id, "Dead", "", "")
    return share.describe_as_classic(state, group_id) or classic.describe_group(state, group_id)


def delete_group(state: ShardState, group_id: str, token: Token, now: int) -> Result:
    """DeleteGroups: an empty consumer-protocol group goes with its offsets (its tombstones in Kafka's
    order, applied at once), a non-empty one is NON_EMPTY_GROUP; classic groups as before."""
    cg = state.consumer_groups.get(group_id)
    if cg is None:
        return share.delete_share_group(state, group_id, token) or classic_delete_group(state, group_id, token, now)
    if cg.members:
        return Result(responses=((token, DeleteGroupResponse(E.NON_EMPTY_GROUP)),), replay=False)
    tombstones = consumer_deletion_records(cg)
    for key, value in tombstones:
        consumer.replay(state.consumer_groups, key, value)
    if group_id in state.groups:
        offsets = classic_delete_group(state, group_id, token, now)
        return replace(offsets, records=tuple(tombstones) + offsets.records)
    return Result(records=tuple(tombstones), responses=((token, DeleteGroupResponse(E.NONE)),), replay=False)


# SyncGroup, Heartbeat and LeaveGroup naming a consumer-protocol group serve its classic members
def sync_group(state: ShardState, req: Any, token: int, now: int, cfg: GroupConfig) -> Result:
    if req.group_id in state.consumer_groups:
        return consumer.classic_sync_group(state, req, token, now, cfg)
    g = state.groups.get(req.group_id)  # type_of, inlined: every request of the type passes here
    return (CLASSIC if g is None else GROUP_TYPES[g.group_type]).sync_group(state, req, token, now, cfg)


def heartbeat(state: ShardState, req: Any, token: int, now: int, cfg: GroupConfig) -> Result:
    if req.group_id in state.consumer_groups:
        return consumer.classic_heartbeat(state, req, token, now, cfg)
    g = state.groups.get(req.group_id)  # type_of, inlined: every request of the type passes here
    return (CLASSIC if g is None else GROUP_TYPES[g.group_type]).heartbeat(state, req, token, now, cfg)


def leave_group(state: ShardState, req: Any, token: int, now: int, cfg: GroupConfig) -> Result:
    if req.group_id in state.consumer_groups:
        return consumer.classic_leave_group(state, req, token, now, cfg)
    g = state.groups.get(req.group_id)  # type_of, inlined: every request of the type passes here
    return (CLASSIC if g is None else GROUP_TYPES[g.group_type]).leave_group(state, req, token, now, cfg)


# the consumer protocol's groups (coordinator/consumer/) live in ShardState.consumer_groups, not in
# ``groups``: its API (ConsumerGroupHeartbeat, ConsumerGroupDescribe) enters its rules directly, the
# classic JoinGroup above converts an empty one, and its timers come back to it from here
_TIMERS: dict[str, Callable[[ShardState, tuple[Any, ...], int, GroupConfig], Result]] = {
    **{kind: t.on_timer for t in GROUP_TYPES.values() for kind in t.timer_kinds},
    **dict.fromkeys(consumer.TIMER_KINDS, consumer.on_consumer_timer),
    **dict.fromkeys(share.TIMER_KINDS, share.on_share_timer),
}


def on_timer(state: ShardState, key: tuple[Any, ...], now: int, cfg: GroupConfig) -> Result:
    handler = _TIMERS.get(key[0]) if key else None
    return handler(state, key, now, cfg) if handler is not None else EMPTY


def on_write_failed(state: ShardState, write_ref: object, error: int, now: int, cfg: GroupConfig) -> Result:
    """Kafka maps a failed append into the answers itself (spec §4.4, §8.1)."""
    if isinstance(write_ref, OffsetsWrite):
        return commit_failed(write_ref, error)
    if isinstance(write_ref, GroupDeleteWrite):
        return delete_failed(write_ref, error)
    if isinstance(write_ref, OffsetDeleteWrite):
        return Result(
            responses=((write_ref.token, OffsetDeleteResponse(E.offset_write_error(error))),), replay=False
        )
    group_type = _BY_WRITE_REF.get(type(write_ref))
    if group_type is None:
        # a marker (the shell fails the caller's awaitable: it retries it), member-less group metadata,
        # deleted topics' offsets: Kafka only logs these failures
        return EMPTY
    return group_type.on_write_failed(state, write_ref, error, now, cfg)


def unload(state: ShardState) -> Result:
    """The partition is no longer ours: groups die and parked requests learn NOT_COORDINATOR."""
    responses: list[tuple[int, Any]] = []
    for g in state.groups.values():
        for m in g.members.values():
            if m.join_token is not None:
                responses.append((m.join_token, JoinGroupResponse(E.NOT_COORDINATOR, member_id=m.member_id)))
            if m.sync_token is not None:
                responses.append((m.sync_token, SyncGroupResponse(E.NOT_COORDINATOR)))
        g.state = "Dead"
    state.groups.clear()
    state.consumer_groups.clear()
    state.share_groups.clear()
    state.pending_txn.clear()  # a later load brings them back from the log
    state.open_txns.clear()
    state.producer_epochs.clear()
    return Result(responses=tuple(responses), replay=False)


# ---------------------------------------------------------------- what the runtime calls

log = logging.getLogger("groupd.coordinator")


def replay_walked(state: ShardState, latest: dict[bytes, bytes | None], txn: TxnWalk, now: int, partition: int = -1) -> int:
    """Replay what a load's walk kept: the last value of every key, then the offsets of transactions
    without a marker yet (pending until their marker). Returns how many are pending."""
    pending = txn.finish(latest)
    state.producer_epochs.update(txn.epochs)
    names: dict[bytes, tuple[str, str] | None] = {}
    for raw_key, raw_value in latest.items():
        offset = decode_offset_commit(raw_key, raw_value, names)
        if offset is not None:
            replay_offset(state, *offset, now)
            continue
        try:
            key = decode_key(raw_key)
            if key is not None:
                replay(state, key, decode_value(key, raw_value), now)
        except RecordFormatError as exc:
            log.warning("%s-%d: skipping unreadable record: %s", OFFSETS_TOPIC, partition, exc)
    for producer_id, raw_key, raw_value, superseded in pending:
        offset = decode_offset_commit(raw_key, raw_value, names)
        if offset is not None:
            replay_txn_offset(state, producer_id, *offset, now, superseded=superseded)
    return len(pending)


class GroupShardRules:
    """The group coordinator's shard rules for coordinator/runtime/ (its ShardRules port)."""

    def __init__(self, cfg: GroupConfig) -> None:
        self.cfg = cfg

    def new_state(self, partition: int) -> ShardState:
        return ShardState(partition)

    def on_timer(self, state: ShardState, key: tuple[Any, ...], now: int) -> Result:
        result = on_timer(state, key, now, self.cfg)
        if key[0] in (consumer.SESSION, consumer.REBALANCE, consumer.JOIN, consumer.SYNC) and result.records:
            group_event(log, "consumer member removed", key[1], key[2], reason=key[0].removeprefix("consumer-") + " timeout")
        elif key[0] in share.TIMER_KINDS and result.records:
            group_event(log, "share member removed", key[1], key[2], reason="session timeout")
        return result

    def snapshot(self, state: ShardState, subject: str, request: object) -> Snapshot | None:
        """What a request can change before its records are durable (coordinator/snapshots.py): a commit
        only its group's presence and commits in flight, a marker its producer's epoch; a heartbeat and an
        OffsetDelete nothing; any other request the groups of the id it names, and an operation that
        names no group (the retention check, a deleted topic) every group. A classic JoinGroup or SyncGroup
        writes only as a static member's rejoin, a leader's sync or against a consumer group (a conversion,
        or its classic members), and a join phase's end only if a member did not rejoin: the others, most
        of a rebalance, need none."""
        if not subject:
            return ShardSnapshot(state)
        cls = request.__class__
        if cls is Heartbeat or cls is OffsetDelete:
            return None
        if cls is tuple and request[0] == "join":  # type: ignore[index]
            # a classic join phase ending with every member rejoined removes nobody: it writes nothing
            g = state.groups.get(subject)
            if g is not None and g.members and g.n_awaiting_join == len(g.members):
                return None
        if (cls is JoinGroup or cls is SyncGroup) and subject not in state.consumer_groups:
            g = state.groups.get(subject)
            if g is None:
                return None
            if cls is JoinGroup and request.group_instance_id is None:  # type: ignore[attr-defined]
                return None
            if cls is SyncGroup and request.member_id != g.leader:  # type: ignore[attr-defined]
                return None
        if cls is OffsetCommit:
            return CommitSnapshot(state, subject, request.member_id)  # type: ignore[attr-defined]
        if cls is TxnOffsetCommit:
            return CommitSnapshot(state, subject, request.member_id, request.producer_id)  # type: ignore[attr-defined]
        if cls is EndTxnMarker:
            return ProducerSnapshot(state, request.producer_id)  # type: ignore[attr-defined]
        return GroupSnapshot(state, subject)

    def on_write_failed(self, state: ShardState, write_ref: object, error: int, now: int) -> Result:
        return on_write_failed(state, write_ref, error, now, self.cfg)

    def replay(self, state: ShardState, result: Result, now: int) -> None:
        if result.producer is None and result.marker is None:
            # Consumer-group records are applied when they are made, on every path (heartbeats,
            # conversions, DeleteGroups, expiry): applied again once durable, a tombstone would hit a
            # group of the same id made meanwhile. Only offsets and classic metadata replay here.
            for key, value in result.records:
                if isinstance(key, (OffsetCommitKey, GroupMetadataKey)):
                    replay(state, key, value, now)
        else:
            replay_result(state, result, now)

    def timer_subject(self, key: tuple[Any, ...]) -> str | None:
        """The group a timer belongs to: every group type's keys are (kind, group id, ...)."""
        return key[1] if len(key) > 1 and isinstance(key[1], str) else None
