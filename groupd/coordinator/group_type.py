"""What every type of group (classic, consumer, share) provides to the shard: Kafka's ``Group`` interface
and the per-type branches of its GroupMetadataManager, as one protocol.

A shard keeps one map of groups (``ShardState.groups``, id -> group of any type). The shard's entry
points (coordinator/shard.py) find the group a request, timer or record names, look up its type by the
group's class, and call the type; a request naming no group goes to the type that creates groups for
that API. Offsets are the offset manager's (coordinator/offsets/), which asks the owning type whether a
commit, fetch or delete is valid and which topics it is subscribed to. The types themselves are listed
once, in coordinator/group_types.py.

``GroupsOf`` lets a type's own code keep working on "its" groups as a mapping (get, set, delete,
iterate) while they live in the shard's one map.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from groupd.coordinator.api import (
    GroupConfig,
    GroupDescription,
    GroupListing,
    OffsetCommit,
    OffsetFetch,
    Result,
    TimerOp,
    Token,
    TxnOffsetCommit,
)
from groupd.coordinator.records import Key, Value
from groupd.coordinator.snapshots import GroupShape

if TYPE_CHECKING:
    from groupd.coordinator.shard import ShardState

G = TypeVar("G")

# an API entry point: (state, request, token, now, config) -> Result
Handler = Callable[["ShardState", Any, Token, int, GroupConfig], Result]
TimerHandler = Callable[["ShardState", tuple[Any, ...], int, GroupConfig], Result]
FailHandler = Callable[["ShardState", Any, int, int, GroupConfig], Result]
Observed = str | tuple[None, int, int] | None
"""What the observer follows of a group (``GroupType.observe``)."""


class GroupType(ABC):
    """One type of group. ``group_class`` is the class of its groups in the shard's one map; ``api``
    maps the shard's API names to its entry points for a group of this type (``creates``: the APIs
    that make a group of this type when the id is free); ``timers`` maps the first element of the timer
    keys its rules make, and ``write_refs`` the classes of the write refs (coordinator/api.py) they make,
    back to its handlers. ``shape`` says how a snapshot copies its groups (coordinator/snapshots.py)."""

    name: str
    group_class: type
    api: Mapping[str, Handler] = {}
    creates: frozenset[str] = frozenset()
    timers: Mapping[str, TimerHandler] = {}
    write_refs: Mapping[type, FailHandler] = {}
    shape: GroupShape
    keeps_offsets = True  # whether its groups commit consumer offsets (share groups do not)

    # ------------------------------------------------------------ what the group is

    @abstractmethod
    def state_name(self, group: Any) -> str:
        """The group's state as ListGroups and the metrics name it."""

    @abstractmethod
    def listing(self, group: Any) -> GroupListing:
        """Its ListGroups entry."""

    @abstractmethod
    def describe(self, state: ShardState, group: Any) -> GroupDescription:
        """Its DescribeGroups answer (types other than classic answer Dead, as Kafka does)."""

    @abstractmethod
    def member_count(self, group: Any) -> int: ...

    def is_empty(self, group: Any) -> bool:
        return self.member_count(group) == 0

    # ------------------------------------------------------------ DeleteGroups

    @abstractmethod
    def delete(self, state: ShardState, group: Any, token: Token, now: int) -> Result:
        """DeleteGroups of this group: validate (Kafka's validateDeleteGroup), then its offsets' and its
        own tombstones."""

    # ------------------------------------------------------------ offsets (Kafka's validateOffset*)

    @abstractmethod
    def validate_offset_commit(self, state: ShardState, group: Any, req: OffsetCommit) -> int: ...

    @abstractmethod
    def validate_txn_offset_commit(self, state: ShardState, group: Any, req: TxnOffsetCommit) -> int: ...

    @abstractmethod
    def validate_offset_fetch(self, state: ShardState, group: Any, req: OffsetFetch) -> int: ...

    @abstractmethod
    def validate_offset_delete(self, group: Any) -> int: ...

    @abstractmethod
    def subscribed_to(self, group: Any) -> Callable[[str], bool]:
        """Kafka's isSubscribedToTopic, as a predicate over topic names."""

    @abstractmethod
    def expiry(self, state: ShardState, group: Any, now: int, retention: int, records: list[tuple[Any, None]]) -> Any:
        """The retention check of the group (its offsets' tombstones into ``records`` and, if it goes,
        its own); returns the group if it dropped it (None: it stays). A failed write is the runtime's to
        roll back (the check runs under a snapshot of the whole shard)."""

    # ------------------------------------------------------------ rollback (coordinator/snapshots.py)

    def writes(self, group: Any, request: object) -> bool:
        """Whether ``request`` (or a firing timer's key) on ``group`` may write records, so that the runtime
        needs a snapshot of the group to roll back; False only where the type knows it writes nothing."""
        return True

    # ------------------------------------------------------------ records, load, unload

    @abstractmethod
    def replays(self, key: Key) -> bool:
        """Whether ``key`` is one of this type's group records."""

    @abstractmethod
    def replay(self, state: ShardState, key: Key, value: Value | None, now: int) -> None: ...

    @abstractmethod
    def rearm_after_load(self, state: ShardState, now: int, cfg: GroupConfig) -> Result:
        """After a load: its members' sessions restart now (timers), and what else the type re-arms."""

    @abstractmethod
    def unload(self, group: Any) -> list[tuple[Token, Any]]:
        """The partition is no longer ours: the group's parked requests learn NOT_COORDINATOR."""

    # ------------------------------------------------------------ what metrics and logs observe

    @staticmethod
    def observe(group: Any) -> Observed:
        """What the observer (coordinator/observe.py) compares before and after every operation on the
        group: its classic rebalance phase (a str), or ``(None, group epoch, member count)`` for the
        consumer-group-rebalance sensor; None: nothing to follow. It runs twice a request, so a type
        whose answer is one attribute gives ``operator.attrgetter`` (no Python frame) instead."""
        return None

    def topics_changed(self, state: ShardState, names: set[str], now: int) -> tuple[TimerOp, ...]:
        """Topics were created, deleted or grew (no-op unless the type's assignments read them)."""
        return ()


class GroupsOf(MutableMapping[str, G], Generic[G]):
    """The groups of one class in a shard's one map, as a mapping: a type's own code reads and writes
    "its" groups through it; ids held by another type's group are absent from it."""

    __slots__ = ("_all", "_cls")

    def __init__(self, groups: dict[str, Any], cls: type[G]) -> None:
        self._all = groups
        self._cls = cls

    def get(self, key: str, default: Any = None) -> Any:
        g = self._all.get(key)
        return g if g is not None and g.__class__ is self._cls else default

    def __getitem__(self, key: str) -> G:
        g = self._all[key]
        if g.__class__ is not self._cls:
            raise KeyError(key)
        return g

    def __contains__(self, key: object) -> bool:
        g = self._all.get(key)  # type: ignore[call-overload]
        return g is not None and g.__class__ is self._cls

    def __setitem__(self, key: str, value: G) -> None:
        self._all[key] = value

    def __delitem__(self, key: str) -> None:
        self[key]
        del self._all[key]

    def __iter__(self) -> Iterator[str]:
        cls = self._cls
        return iter([k for k, g in self._all.items() if g.__class__ is cls])

    def __len__(self) -> int:
        cls = self._cls
        return sum(1 for g in self._all.values() if g.__class__ is cls)

    def values(self) -> list[G]:  # type: ignore[override]
        cls = self._cls
        return [g for g in self._all.values() if g.__class__ is cls]

    def items(self) -> list[tuple[str, G]]:  # type: ignore[override]
        cls = self._cls
        return [(k, g) for k, g in self._all.items() if g.__class__ is cls]

    def clear(self) -> None:
        for k in list(self):
            del self._all[k]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"GroupsOf({self._cls.__name__}, {dict(self.items())!r})"
