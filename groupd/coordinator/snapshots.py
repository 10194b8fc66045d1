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
    from groupd.coordinator.offsets.store import GroupOffsets
    from groupd.coordinator.shard import ShardState


class Shape:
    """How to copy one slotted class: its slots, the containers among them (copied: the rules change
    them in place) and the one holding members; ``take`` and ``put`` are compiled for it once."""

    __slots__ = ("names", "containers", "members", "take", "put")

    def __init__(self, cls: type, containers: tuple[str, ...] = (), members: str | None = None) -> None:
        self.names: tuple[str, ...] = tuple(n for c in cls.__mro__ for n in getattr(c, "__slots__", ()))
        self.containers = tuple(self.names.index(n) for n in containers)
        self.members = self.names.index(members) if members is not None else -1
        self.take, self.put = _compiled(self.names, frozenset(containers))


def _compiled(
    names: tuple[str, ...], containers: frozenset[str]
) -> tuple[Callable[[Any], tuple[Any, ...]], Callable[[Any, tuple[Any, ...]], None]]:
    """Two functions compiled once per class (as dataclasses compile their ``__init__``): ``take(obj)``
    returns its slot values with its containers copied, ``put(obj, values)`` sets them back, copying the
    containers again so that a snapshot restored twice restores the same. Each slot is then the
    interpreter's specialised slot load or store; ``operator.attrgetter`` took every read through the
    generic attribute lookup, and a loop over the names cost a call and a lookup each (the copy of a
    classic group and its members at a leader's SyncGroup was about 1 % of a whole rebalance's cost)."""
    if not all(n.isidentifier() for n in names):
        raise ValueError(f"not slot names: {names}")

    def value(expr: str, name: str) -> str:
        return f"{expr}.copy()" if name in containers else expr

    take = "lambda o: (" + "".join(f"{value('o.' + n, n)}, " for n in names) + ")"
    put = "def put(o, v):\n" + "".join(f"    o.{n} = {value(f'v[{i}]', n)}\n" for i, n in enumerate(names))
    put += "    return None\n"
    scope: dict[str, Any] = {}
    exec(put, scope)  # noqa: S102 - built above from identifiers only
    return eval(take, {}), scope["put"]  # noqa: S307 - likewise


class GroupShape:
    """A group type's shapes (declared in its ``group_type`` module): its groups' and its members'."""

    __slots__ = ("group", "member")

    def __init__(self, group: Shape, member: Shape) -> None:
        self.group, self.member = group, member

    def copy(self, group: Any) -> Copy:
        return Copy(group, self)


class Copy:
    """A group's slot values (containers copied) and each of its members' with the member itself."""

    __slots__ = ("obj", "shape", "values", "members")

    def __init__(self, obj: Any, shape: GroupShape) -> None:
        self.obj, self.shape = obj, shape
        values = self.values = shape.group.take(obj)
        take = shape.member.take
        self.members = [(m, take(m)) for m in values[shape.group.members].values()]

    def restore(self) -> None:
        shape = self.shape
        shape.group.put(self.obj, self.values)
        put = shape.member.put
        for m, values in self.members:
            put(m, values)


def _copy_group(state: ShardState, g: Any) -> Copy:
    return state.type_of(g).shape.copy(g)


def _copy(offsets: GroupOffsets) -> GroupOffsets:
    return {t: dict(ps) for t, ps in offsets.items()}


def _copy_offsets(offsets: GroupOffsets | None) -> GroupOffsets | None:
    return _copy(offsets) if offsets is not None else None


class GroupSnapshot:
    """Everything of one group id: its group (present or not), the id's entries in the offset store
    (committed offsets, which a drop removes at once, and commits in flight) and the shard's count of its
    tombstones in flight. ``group`` is the id's group as the caller found it (None: none)."""

    __slots__ = ("state", "subject", "group", "committed", "writing", "dropping")

    def __init__(self, state: ShardState, group_id: str, group: Any) -> None:
        self.state, self.subject = state, group_id
        self.group = _copy_group(state, group) if group is not None else None
        store = state.offsets
        self.committed = _copy_offsets(store.committed.get(group_id))
        self.writing = store.pending_commits.get(group_id)
        self.dropping = state.dropping.get(group_id)

    def restore(self) -> None:
        gid, state = self.subject, self.state
        if self.group is None:
            state.groups.pop(gid, None)
        else:
            self.group.restore()
            state.groups[gid] = self.group.obj
        store = state.offsets
        _put(store.committed, gid, _copy_offsets(self.committed))
        _put(store.pending_commits, gid, self.writing)
        _put(state.dropping, gid, self.dropping)


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
