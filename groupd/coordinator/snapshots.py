"""Snapshots of what one group-coordinator operation may change, for the runtime's rollback.

Kafka's coordinator runtime reverts its timeline structures to the snapshot taken before a write whose
records could not be appended (``SnapshotRegistry.revertToSnapshot``); no rule writes undo code. The
group coordinator's state is plain objects, so the same is done by structure: before an operation runs,
the runtime asks the shard rules (``GroupShardRules.snapshot``) for a snapshot of what the operation can
touch, chosen by its request, and restores it if the operation's records are not written.

What a request can touch is small and known: the group of the id it names (whatever its type: each type
says how its groups are copied, ``GroupType.shape``), that id's entries in the offset store (committed
offsets, which a drop removes at once, and commits in flight) and the shard's count of its tombstones in flight
(``dropping``); or, for a commit, only whether the group exists, its commits in flight and its member's
session (committed offsets change only by the replay of durable records). Only an operation that names
no group (the retention check, a deleted topic) takes them all. A snapshot copies objects one level
deep: slot values, the dicts and sets they hold, and the slots of the members those dicts hold.
Restoring puts the values back into the same objects, so whatever else refers to a group or member
sees it as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from groupd.coordinator.offsets.store import GroupOffsets, OffsetStore
    from groupd.coordinator.shard import ShardState


class Shape:
    """How to copy one slotted class: its slots read in one call, the containers among them (copied:
    the rules change them in place), and the one holding members."""

    __slots__ = ("names", "get", "containers", "members")

    def __init__(self, cls: type, containers: tuple[str, ...] = (), members: str | None = None) -> None:
        self.names: tuple[str, ...] = tuple(n for c in cls.__mro__ for n in getattr(c, "__slots__", ()))
        self.get = _slot_reader(self.names)
        self.containers = tuple(self.names.index(n) for n in containers)
        self.members = self.names.index(members) if members is not None else -1


def _slot_reader(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function that returns an object's slots as a tuple, compiled once per class (as dataclasses
    compile their ``__init__``), so that each read is the interpreter's specialized slot load.
    ``operator.attrgetter`` takes every read through the generic attribute lookup, which made the copy
    of a classic group and its members at a leader's SyncGroup about 1 % of a whole rebalance's cost."""
    if not all(n.isidentifier() for n in names):
        raise ValueError(f"not slot names: {names}")
    return eval("lambda o: (" + "".join(f"o.{n}, " for n in names) + ")", {})


class GroupShape:
    """A group type's shapes (declared in its ``group_type`` module): its groups' and its members'."""

    __slots__ = ("group", "member")

    def __init__(self, group: Shape, member: Shape) -> None:
        self.group, self.member = group, member

    def copy(self, group: Any) -> Copy:
        return Copy(group, self.group, self.member)


class Copy:
    """One object's slot values (containers copied), and its members' when it has them."""

    __slots__ = ("obj", "shape", "values", "members")

    def __init__(self, obj: Any, shape: Shape, member_shape: Shape | None = None) -> None:
        self.obj, self.shape = obj, shape
        values = self.values = list(shape.get(obj))
        for i in shape.containers:
            values[i] = values[i].copy()
        self.members: list[Copy] = []
        if member_shape is not None:
            self.members = [Copy(m, member_shape) for m in values[shape.members].values()]

    def restore(self) -> None:
        obj, values = self.obj, self.values
        for i in self.shape.containers:  # the snapshot stays as taken: restored twice, the same
            values[i] = values[i].copy()
        for name, v in zip(self.shape.names, values, strict=True):
            setattr(obj, name, v)
        for m in self.members:
            m.restore()


def _copy_group(state: ShardState, g: Any) -> Copy:
    return state.type_of(g).shape.copy(g)


def _copy(offsets: GroupOffsets) -> GroupOffsets:
    return {t: dict(ps) for t, ps in offsets.items()}


def _copy_offsets(offsets: GroupOffsets | None) -> GroupOffsets | None:
    return _copy(offsets) if offsets is not None else None


class _IdOffsets:
    """One group id's entries in the offset store: committed offsets (a drop removes them at once) and
    commits in flight."""

    __slots__ = ("store", "gid", "committed", "writing")

    def __init__(self, store: OffsetStore, gid: str) -> None:
        self.store, self.gid = store, gid
        self.committed = _copy_offsets(store.committed.get(gid))
        self.writing = store.pending_commits.get(gid)

    def restore(self) -> None:
        store, gid = self.store, self.gid
        _put(store.committed, gid, _copy_offsets(self.committed))
        _put(store.pending_commits, gid, self.writing)


class GroupSnapshot:
    """Everything of one group id: its group (present or not), its offsets and the shard's count of its
    tombstones in flight."""

    __slots__ = ("state", "subject", "group", "offsets", "dropping")

    def __init__(self, state: ShardState, group_id: str) -> None:
        self.state, self.subject = state, group_id
        g = state.groups.get(group_id)
        self.group = _copy_group(state, g) if g is not None else None
        self.offsets = _IdOffsets(state.offsets, group_id)
        self.dropping = state.dropping.get(group_id)

    def restore(self) -> None:
        gid, groups = self.subject, self.state.groups
        if self.group is None:
            groups.pop(gid, None)
        else:
            self.group.restore()
            groups[gid] = self.group.obj
        self.offsets.restore()
        _put(self.state.dropping, gid, self.dropping)


class ShardSnapshot:
    """Every group and offset of the shard, for an operation that names no group (the retention check,
    a deleted topic): it may drop any of them. Taken once per such run, which walks every group anyway."""

    __slots__ = ("state", "subject", "groups", "copies", "committed", "writing", "dropping", "epochs")

    def __init__(self, state: ShardState) -> None:
        self.state, self.subject = state, None
        self.groups = dict(state.groups)
        self.copies = [_copy_group(state, g) for g in self.groups.values()]
        store = state.offsets
        self.committed = {gid: _copy(o) for gid, o in store.committed.items()}
        self.writing = dict(store.pending_commits)
        self.dropping = dict(state.dropping)
        self.epochs = dict(state.producer_epochs)

    def restore(self) -> None:
        for copy in self.copies:
            copy.restore()
        state, store = self.state, self.state.offsets
        state.groups.clear()
        state.groups.update(self.groups)
        store.committed.clear()
        store.committed.update((gid, _copy(o)) for gid, o in self.committed.items())
        store.pending_commits.clear()
        store.pending_commits.update(self.writing)
        state.dropping, state.producer_epochs = dict(self.dropping), dict(self.epochs)


class CommitSnapshot:
    """An (transactional) offset commit: which group held the id (a commit naming none makes a simple
    classic group) and how many of its commits were in flight; the producer's last epoch for a
    transactional one; the committing member's session, which a commit renews."""

    __slots__ = ("state", "subject", "group", "writing", "hb", "producer", "epoch")

    def __init__(self, state: ShardState, group_id: str, member_id: str, producer_id: int | None = None) -> None:
        self.state, self.subject = state, group_id
        g = self.group = state.groups.get(group_id)
        self.writing = state.offsets.pending_commits.get(group_id)
        members = getattr(g, "members", None)
        m = members.get(member_id) if members else None
        self.hb = (m, m.hb_deadline) if m is not None and hasattr(m, "hb_deadline") else None
        self.producer = producer_id
        self.epoch = state.producer_epochs.get(producer_id) if producer_id is not None else None

    def restore(self) -> None:
        state, g = self.state, self.group
        _put(state.groups, self.subject, g)
        _put(state.offsets.pending_commits, self.subject, self.writing)
        if self.hb is not None:
            self.hb[0].hb_deadline = self.hb[1]
        if self.producer is not None:
            _put(state.producer_epochs, self.producer, self.epoch)


class ProducerSnapshot:
    """A transaction marker: only the producer's last epoch changes before it is durable."""

    __slots__ = ("state", "subject", "producer", "epoch")

    def __init__(self, state: ShardState, producer_id: int) -> None:
        self.state, self.subject = state, None
        self.producer, self.epoch = producer_id, state.producer_epochs.get(producer_id)

    def restore(self) -> None:
        _put(self.state.producer_epochs, self.producer, self.epoch)


def _put(table: dict[Any, Any], key: Any, value: Any) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value
