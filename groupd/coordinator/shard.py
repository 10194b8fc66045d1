"""One ``__consumer_offsets`` partition's coordinator state, and the rules the runtime runs over it.

``replay`` is the only code that applies persisted records, at load and at runtime alike (for Results
with ``replay=True``). Classic group metadata is applied by the handlers themselves (Kafka 4.x does the
same: its group records are not replayed at runtime), so a GroupMetadata record is replayed only at load.

Group types plug in here, as in Kafka's GroupMetadataManager: coordinator/group_types.py registers them
(each a GroupType, coordinator/group_type.py), and the entry points below dispatch on the type of the
group a request, timer or record names, never on a type by name. Offsets (commit, fetch, delete, expiry,
transactional offsets) are the offset manager's (coordinator/offsets/), kept by group id and validated
against whichever group owns the id. ``GroupShardRules`` is what coordinator/runtime/ calls: fresh state,
timers, snapshots, failed writes, replay, and the load's replay of a walked partition (``replay_walked``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, TypeVar

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
    OffsetCommit,
    OffsetDelete,
    OffsetDeleteResponse,
    OffsetDeleteWrite,
    OffsetsWrite,
    Result,
    SyncGroup,
    Token,
    TxnOffsetCommit,
)
from groupd.coordinator.group_type import GroupsOf, GroupType, Handler
from groupd.coordinator.group_types import API, BY_CLASS, CREATORS, GROUP_TYPES, TIMERS, WRITE_REFS
from groupd.coordinator.offsets.commits import (
    commit_failed,
    delete_failed,
    expire_offsets,
    has_pending,
    offset_commit,
    offset_delete,
    offset_fetch,
    remove_topic_offsets,
)
from groupd.coordinator.offsets.replay import replay_marker, replay_offset, replay_txn_offset
from groupd.coordinator.offsets.store import OffsetStore
from groupd.coordinator.offsets.transactional import end_transaction, txn_offset_commit
from groupd.coordinator.records import (
    GroupMetadataKey,
    Key,
    OffsetCommitKey,
    RecordFormatError,
    Value,
    decode_key,
    decode_offset_commit,
    decode_value,
)
from groupd.coordinator.runtime.runtime import Snapshot, SnapshotTaker
from groupd.coordinator.snapshots import CommitSnapshot, GroupSnapshot, ProducerSnapshot, ShardSnapshot
from groupd.protocol.topic_names import OFFSETS_TOPIC
from groupd.storage.batch import TxnWalk

G = TypeVar("G")
log = logging.getLogger("groupd.coordinator")

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
    "replay_walked",
    "sync_group",
    "topics_changed",
    "txn_offset_commit",
    "unload",
]


class ShardState:
    """Groups and offsets of one offsets partition."""

    __slots__ = ("partition", "groups", "offsets", "dropping", "producer_epochs", "topics", "_views")
    types = BY_CLASS  # a group's class -> its GroupType (``type_of``, without the call on hot paths)

    def __init__(self, partition: int) -> None:
        self.partition = partition
        # One map of groups, whatever their type (coordinator/group_types.py lists the types); a type's
        # own code sees its groups through ``view``.
        self.groups: dict[str, Any] = {}
        # Committed and transactional offsets by group id, whatever the group's type (coordinator/offsets/).
        self.offsets = OffsetStore()
        # The broker's topic registry (name -> entry with topic_id and partitions), which the
        # assignments of the types with server-side assignors read.
        self.topics: Mapping[str, Any] = {}
        # Groups deleted in memory whose GroupMetadata tombstone is being written: its runtime replay is
        # then a no-op (at load this is empty and the tombstone removes the group).
        self.dropping: dict[str, int] = {}
        self.producer_epochs: dict[int, int] = {}  # the last epoch of each producer written here
        self._views: dict[type, GroupsOf[Any]] = {}

    def view(self, cls: type[G]) -> GroupsOf[G]:
        """The groups of class ``cls`` (one type's), as a mapping over the one map."""
        v = self._views.get(cls)
        if v is None:
            v = self._views[cls] = GroupsOf(self.groups, cls)
        return v

    def type_of(self, group: Any) -> GroupType:
        return BY_CLASS[group.__class__]


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
        return
    for group_type in GROUP_TYPES:  # each type replays its own group records (the classic one moved to
        if group_type.replays(key):  # coordinator/classic/group_type.py's replay_group_metadata)
            group_type.replay(state, key, value, now)
            return


def on_loaded(state: ShardState, now: int, cfg: GroupConfig) -> Result:
    """After a load: every type re-arms its groups (members' sessions restart now, and so on)."""
    results = [t.rearm_after_load(state, now, cfg) for t in GROUP_TYPES]
    return Result(
        records=tuple(r for res in results for r in res.records),
        responses=tuple(r for res in results for r in res.responses),
        timers=tuple(op for res in results for op in res.timers),
        replay=any(res.replay for res in results if res.records),
    )


# ---------------------------------------------------------------- the group types' entry points
# A request naming a group goes to that group's type (its entry point for the API); naming no group, or
# a group whose type does not serve the API, it goes to the type that creates groups for it (Kafka's
# getOrMaybeCreate...Group), which answers for an id another type holds.


def _dispatching(api: str) -> Handler:
    """The shard's entry point of a per-group API (named as the API, which the observer reads)."""
    serving = API[api]
    creator = CREATORS[api].api[api]

    def entry(state: ShardState, req: Any, token: Token, now: int, cfg: GroupConfig) -> Result:
        g = state.groups.get(req.group_id)
        return (creator if g is None else serving.get(g.__class__, creator))(state, req, token, now, cfg)

    # a code object of its own per API, so that each entry's call site specialises for its own rules
    # (one shared code object saw every API's rules at one site, and the interpreter gave up specialising it)
    entry.__code__ = entry.__code__.replace(co_name=api, co_qualname=api)
    entry.__name__ = entry.__qualname__ = api
    return entry


join_group = _dispatching("join_group")
sync_group = _dispatching("sync_group")
heartbeat = _dispatching("heartbeat")
leave_group = _dispatching("leave_group")


def list_groups(state: ShardState, states: frozenset[str] | None, types: frozenset[str] | None) -> list[GroupListing]:
    """ListGroups with KIP-518 state and KIP-848 type filters (case-insensitive, empty = all)."""
    wanted_types = {t.strip().lower() for t in types} if types else None
    wanted_states = {s.strip().lower() for s in states} if states else None
    listed = []
    for g in state.groups.values():
        t = BY_CLASS[g.__class__]
        if wanted_types is not None and t.name not in wanted_types:
            continue
        if wanted_states is None or t.state_name(g).lower() in wanted_states:
            listed.append(t.listing(g))
    return listed


def describe_group(state: ShardState, group_id: str) -> GroupDescription:
    """DescribeGroups: the group's type answers; no group is Dead."""
    g = state.groups.get(group_id)
    if g is None:
        return GroupDescription(E.NONE, group_id, "Dead", "", "")
    return BY_CLASS[g.__class__].describe(state, g)


def delete_group(state: ShardState, group_id: str, token: Token, now: int) -> Result:
    """DeleteGroups: the group's type validates it and writes its offsets' and its own tombstones."""
    g = state.groups.get(group_id)
    if g is None:
        return Result(responses=((token, DeleteGroupResponse(E.GROUP_ID_NOT_FOUND)),), replay=False)
    return BY_CLASS[g.__class__].delete(state, g, token, now)


def topics_changed(state: ShardState, names: set[str], now: int) -> Result:
    """Topics were created, deleted or grew: each type rechecks what its assignments read."""
    return Result(timers=tuple(op for t in GROUP_TYPES for op in t.topics_changed(state, names, now)), replay=False)


def on_timer(state: ShardState, key: tuple[Any, ...], now: int, cfg: GroupConfig) -> Result:
    handler = TIMERS.get(key[0]) if key else None
    return handler(state, key, now, cfg) if handler is not None else EMPTY


def on_write_failed(state: ShardState, write_ref: object, error: int, now: int, cfg: GroupConfig) -> Result:
    """Kafka maps a failed append into the answers itself (spec §4.4, §8.1)."""
    if isinstance(write_ref, OffsetsWrite):
        return commit_failed(write_ref, error)
    if isinstance(write_ref, GroupDeleteWrite):
        return delete_failed(write_ref, error)
    if isinstance(write_ref, OffsetDeleteWrite):
        return Result(responses=((write_ref.token, OffsetDeleteResponse(E.offset_write_error(error))),), replay=False)
    handler = WRITE_REFS.get(type(write_ref))
    if handler is None:
        # a marker (the shell fails the caller's awaitable: it retries it), member-less group metadata,
        # the retention check, deleted topics' offsets: Kafka only logs these failures
        return EMPTY
    return handler(state, write_ref, error, now, cfg)


def unload(state: ShardState) -> Result:
    """The partition is no longer ours: groups die and parked requests learn NOT_COORDINATOR."""
    responses: list[tuple[int, Any]] = []
    for g in state.groups.values():
        responses += BY_CLASS[g.__class__].unload(g)
    state.groups.clear()
    state.offsets.clear()  # a later load brings them back from the log
    state.producer_epochs.clear()
    return Result(responses=tuple(responses), replay=False)


# ---------------------------------------------------------------- what the runtime calls


def replay_walked(
    state: ShardState, latest: dict[bytes, bytes | None], txn: TxnWalk, now: int, partition: int = -1
) -> int:
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


def _commit_snapshot(state: ShardState, subject: str, request: OffsetCommit) -> Snapshot:
    return CommitSnapshot(state, subject, request.member_id)


def _txn_commit_snapshot(state: ShardState, subject: str, request: TxnOffsetCommit) -> Snapshot:
    return CommitSnapshot(state, subject, request.member_id, request.producer_id)


def _marker_snapshot(state: ShardState, subject: str, request: EndTxnMarker) -> Snapshot:
    return ProducerSnapshot(state, request.producer_id)


def _group_snapshot(state: ShardState, subject: str, request: object) -> Snapshot | None:
    """A request on the group of ``subject``: a snapshot of that group id (its group, its offsets), unless
    its group's type says the request writes nothing (``GroupType.writes``: most of a classic rebalance).
    No group: a JoinGroup or SyncGroup that finds none writes nothing before its new group's leader
    syncs; any other request may write its id's offsets or tombstones."""
    g = state.groups.get(subject)
    if g is None:
        return None if request.__class__ in _FIRST_WRITE_AT_SYNC else GroupSnapshot(state, subject, None)
    return GroupSnapshot(state, subject, g) if BY_CLASS[g.__class__].writes(g, request) else None


_FIRST_WRITE_AT_SYNC = frozenset((JoinGroup, SyncGroup))

# What each request of the group coordinator can change before its records are durable
# (coordinator/snapshots.py), by request class, so the runtime takes it with one lookup: a commit only its
# group's presence, its commits in flight and its member's session; a transaction marker its producer's
# epoch; a heartbeat and an OffsetDelete nothing the runtime should restore (None); the other per-group
# requests the group of the id they name with that id's offsets. Any other operation (a timer, the
# retention check, a deleted topic, the APIs that are not per group) goes to ``GroupShardRules.snapshot``.
SNAPSHOTS: dict[type, SnapshotTaker | None] = {
    OffsetCommit: _commit_snapshot,
    TxnOffsetCommit: _txn_commit_snapshot,
    EndTxnMarker: _marker_snapshot,
    Heartbeat: None,
    OffsetDelete: None,
    JoinGroup: _group_snapshot,
    SyncGroup: _group_snapshot,
}


class GroupShardRules:
    """The group coordinator's shard rules for coordinator/runtime/ (its ShardRules port)."""

    def __init__(self, cfg: GroupConfig) -> None:
        self.cfg = cfg
        self.snapshots: Mapping[type, SnapshotTaker | None] = SNAPSHOTS

    def new_state(self, partition: int) -> ShardState:
        return ShardState(partition)

    def on_timer(self, state: ShardState, key: tuple[Any, ...], now: int) -> Result:
        return on_timer(state, key, now, self.cfg)

    def snapshot(self, state: ShardState, subject: str, request: object) -> Snapshot | None:
        """What an operation not in ``snapshots`` can change before its records are durable: an operation
        that names no group (the retention check, a deleted topic) every group and offset; a firing
        timer, the group its key names, unless the group's type says the firing writes nothing."""
        if not subject:
            return ShardSnapshot(state)
        g = state.groups.get(subject)
        if g is not None and not BY_CLASS[g.__class__].writes(g, request):
            return None
        return GroupSnapshot(state, subject, g)

    def on_write_failed(self, state: ShardState, write_ref: object, error: int, now: int) -> Result:
        return on_write_failed(state, write_ref, error, now, self.cfg)

    def replay(self, state: ShardState, result: Result, now: int) -> None:
        if result.producer is None and result.marker is None:
            # Records of the types other than classic are applied when they are made, on every path
            # (heartbeats, conversions, DeleteGroups, expiry): applied again once durable, a tombstone
            # would hit a group of the same id made meanwhile. Only offsets and classic metadata replay here.
            for key, value in result.records:
                if isinstance(key, (OffsetCommitKey, GroupMetadataKey)):
                    replay(state, key, value, now)
        else:
            replay_result(state, result, now)

    def timer_subject(self, key: tuple[Any, ...]) -> str | None:
        """The group a timer belongs to: every group type's keys are (kind, group id, ...)."""
        return key[1] if len(key) > 1 and isinstance(key[1], str) else None
