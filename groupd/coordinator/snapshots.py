"""Snapshots of what one group-coordinator operation may change, for the runtime's rollback.

Kafka's coordinator runtime reverts its timeline structures to the snapshot taken before a write whose
records could not be appended (``SnapshotRegistry.revertToSnapshot``); no rule writes undo code. The
group coordinator's state is plain objects, so the same is done by structure: before an operation runs,
the runtime asks the shard rules (``GroupShardRules.snapshot``) for a snapshot of what the operation can
touch, chosen by its request, and restores it if the operation's records are not written.

What a request can touch is small and known: the groups of the id it names (classic, consumer, share)
and the shard's bookkeeping for that id (``dropping``), or, for a commit, only whether the group exists
and its count of commits in flight (offsets themselves change only by the replay of durable records, so
no snapshot holds them). Only an operation that names no group (the retention check) takes them all. A snapshot copies objects one level deep: slot values, the dicts and sets they
hold, and the slots of the members those dicts hold. Restoring puts the values back into the same
objects, so whatever else refers to a group or member sees it as it was.
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any

from groupd.coordinator.consumer.group import ConsumerGroup
from groupd.coordinator.consumer.group import Member as ConsumerMember
from groupd.coordinator.group import Group, Member
from groupd.coordinator.share.group import ShareGroup, ShareMember

if TYPE_CHECKING:
    from groupd.coordinator.shard import ShardState

class _Shape:
    """How to copy one slotted class: its slots read in one call, the containers among them (copied:
    the rules change them in place), and the one holding members. Left out of the containers: a classic
    group's ``offsets``, which only durable records change, so that a rollback never undoes those."""

    __slots__ = ("names", "get", "containers", "members")

    def __init__(self, cls: type, containers: tuple[str, ...] = (), members: str | None = None) -> None:
        self.names: tuple[str, ...] = tuple(n for c in cls.__mro__ for n in getattr(c, "__slots__", ()))
        self.get = attrgetter(*self.names)
        self.containers = tuple(self.names.index(n) for n in containers)
        self.members = self.names.index(members) if members is not None else -1


_MEMBER = _Shape(Member)
_GROUP = _Shape(Group, ("members", "static", "pending", "pending_sync", "support"), "members")
_CONSUMER_MEMBER = _Shape(ConsumerMember, ("assigned", "pending_revocation"))
_CONSUMER_GROUP = _Shape(
    ConsumerGroup, ("members", "static_members", "targets", "regexes", "owners"), "members"
)
_SHARE_MEMBER = _Shape(ShareMember, ("assigned",))
_SHARE_GROUP = _Shape(ShareGroup, ("members", "targets", "initializing", "initialized", "deleting"), "members")
_MEMBER_SHAPES = {Group: _MEMBER, ConsumerGroup: _CONSUMER_MEMBER, ShareGroup: _SHARE_MEMBER}
_GROUP_SHAPES = {Group: _GROUP, ConsumerGroup: _CONSUMER_GROUP, ShareGroup: _SHARE_GROUP}


class _Copy:
    """One object's slot values (containers copied), and its members' when it has them."""

    __slots__ = ("obj", "shape", "values", "members")

    def __init__(self, obj: Any, shape: _Shape, member_shape: _Shape | None = None) -> None:
        self.obj, self.shape = obj, shape
        values = self.values = list(shape.get(obj))
        for i in shape.containers:
            values[i] = values[i].copy()
        self.members: list[_Copy] = []
        if member_shape is not None:
            self.members = [_Copy(m, member_shape) for m in values[shape.members].values()]

    def restore(self) -> None:
        obj, values = self.obj, self.values
        for i in self.shape.containers:  # the snapshot stays as taken: restored twice, the same
            values[i] = values[i].copy()
        for name, v in zip(self.shape.names, values, strict=True):
            setattr(obj, name, v)
        for m in self.members:
            m.restore()


def _copy_group(g: Any) -> _Copy:
    cls = type(g)
    return _Copy(g, _GROUP_SHAPES[cls], _MEMBER_SHAPES[cls])


class GroupSnapshot:
    """Everything of one group id: its classic, consumer and share groups (present or not) and the
    shard's count of its tombstones in flight. Offsets are left out: they change only once durable."""

    __slots__ = ("state", "subject", "groups", "dropping")

    def __init__(self, state: ShardState, group_id: str) -> None:
        self.state, self.subject = state, group_id
        self.groups: list[tuple[dict[str, Any], _Copy | None]] = []
        for table in (state.groups, state.consumer_groups, state.share_groups):
            g = table.get(group_id)
            self.groups.append((table, _copy_group(g) if g is not None else None))
        self.dropping = state.dropping.get(group_id)

    def restore(self) -> None:
        gid = self.subject
        for table, saved in self.groups:
            if saved is None:
                table.pop(gid, None)
            else:
                saved.restore()
                table[gid] = saved.obj
        _put(self.state.dropping, gid, self.dropping)


class ShardSnapshot:
    """Every group of the shard, for an operation that names none (the retention check, a deleted topic):
    it may drop any of them. Taken once per such run, which walks every group anyway."""

    __slots__ = ("state", "subject", "tables", "copies", "dropping", "epochs")

    def __init__(self, state: ShardState) -> None:
        self.state, self.subject = state, None
        tables: tuple[dict[str, Any], ...] = (state.groups, state.consumer_groups, state.share_groups)
        self.tables = [(t, dict(t)) for t in tables]
        self.copies = [_copy_group(g) for _, saved in self.tables for g in saved.values()]
        self.dropping = dict(state.dropping)
        self.epochs = dict(state.producer_epochs)

    def restore(self) -> None:
        for copy in self.copies:
            copy.restore()
        for table, saved in self.tables:
            table.clear()
            table.update(saved)
        state = self.state
        state.dropping, state.producer_epochs = self.dropping, self.epochs


class CommitSnapshot:
    """An (transactional) offset commit: whether a group of the id existed and how many of its commits
    were in flight; the producer's last epoch for a transactional one. The member's session, renewed by
    the commit, is the runtime's to restore with the timers."""

    __slots__ = ("state", "subject", "group", "pending", "hb", "producer", "epoch")

    def __init__(self, state: ShardState, group_id: str, member_id: str, producer_id: int | None = None) -> None:
        self.state, self.subject = state, group_id
        g = self.group = state.groups.get(group_id)
        self.pending = g.pending_commits if g is not None else 0
        m = g.members.get(member_id) if g is not None and g.members else None
        self.hb = (m, m.hb_deadline) if m is not None else None
        self.producer = producer_id
        self.epoch = state.producer_epochs.get(producer_id) if producer_id is not None else None

    def restore(self) -> None:
        state, g = self.state, self.group
        if g is None:
            state.groups.pop(self.subject, None)
        else:
            g.pending_commits = self.pending
            state.groups[self.subject] = g
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
