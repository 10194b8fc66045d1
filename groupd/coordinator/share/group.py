"""The share group (KIP-932) and its members as plain objects, and ``replay``: the only way they change.

As for consumer groups (coordinator/consumer/group.py), the heartbeat computes records and replays them
into the in-memory group as it makes them, so a restart rebuilds from ``__consumer_offsets`` exactly
what the running coordinator had. Kafka's ShareGroup: states Empty and Stable only (no revocation
phase: partitions are shared, a member simply takes its new target), group and assignment epochs
starting at 1, and the group's share partitions by topic (Kafka's ShareGroupStatePartitionMetadataInfo):
being initialized in the share coordinator, initialized (the only assignable ones), being deleted.

Replay follows Kafka's ordering rules: a member's metadata tombstone needs its current-assignment
tombstone first; tombstones of a group or member already gone are ignored.
"""

from __future__ import annotations

import uuid
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from groupd.coordinator.api import TimerOp
from groupd.coordinator.consumer.records import (
    GroupKey,
    MemberKey,
    TargetAssignmentMember,
    TargetAssignmentMetadata,
)
from groupd.coordinator.share import records as rec
from groupd.coordinator.share.api import Outcome

if TYPE_CHECKING:
    from groupd.coordinator.shard import ShardState

# Member state (Kafka's MemberState): a share member is always STABLE
STABLE = 0

# Group states, Kafka's wire names (ShareGroup.ShareGroupState)
EMPTY = "Empty"
GROUP_STABLE = "Stable"
DEAD = "Dead"

INITIAL_EPOCH = 1  # ModernGroup: group epoch 1, assignment epoch 1 (timestamp 0), so a first join gives 2

Assignment = dict[uuid.UUID, frozenset[int]]


class ReplayError(ValueError):
    """A record that cannot apply to the current state (Kafka's IllegalStateException in replay)."""


@dataclass(slots=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    epoch: int = 0
    previous_epoch: int = 0
    state: int = STABLE
    assigned: Assignment = field(default_factory=dict)

    def metadata_value(self) -> rec.ShareMemberMetadata:
        return rec.ShareMemberMetadata(self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names)

    def assignment_value(self) -> rec.ShareCurrentAssignment:
        return rec.ShareCurrentAssignment(self.epoch, self.previous_epoch, self.state, topic_partitions(self.assigned))


def topic_partitions(parts: Assignment) -> tuple[rec.TopicPartitions, ...]:
    return tuple(rec.TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(parts.items()) if ps)


def target_value(assignment: Assignment) -> TargetAssignmentMember:
    return TargetAssignmentMember(topic_partitions(assignment))


@dataclass(slots=True)
class InitTopic:
    """Kafka's InitMapValue: a topic's partitions in one initialization state, and since when (the time
    the record was made or replayed: initializing partitions older than the retry interval are retried)."""

    name: str
    partitions: frozenset[int]
    timestamp: int


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    epoch: int = INITIAL_EPOCH
    metadata_hash: int = 0
    assignment_epoch: int = INITIAL_EPOCH
    assignment_timestamp: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    targets: dict[str, Assignment] = field(default_factory=dict)
    # the group's share partitions (ShareGroupStatePartitionMetadata); has_state_metadata: a record exists
    initializing: dict[uuid.UUID, InitTopic] = field(default_factory=dict)
    initialized: dict[uuid.UUID, InitTopic] = field(default_factory=dict)
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)
    has_state_metadata: bool = False
    metadata_refresh: bool = True  # transient: recompute the metadata hash at the next heartbeat
    # transient caches, dropped by the replay of what they are made from (every heartbeat asks)
    _names: frozenset[str] | None = None  # subscribed_topic_names()
    _held: dict[uuid.UUID, frozenset[int]] | None = None  # target_partitions()

    def state(self) -> str:
        return GROUP_STABLE if self.members else EMPTY

    def subscribed_topic_names(self) -> frozenset[str]:
        if self._names is None:
            names: set[str] = set()
            for m in self.members.values():
                names.update(m.subscribed_topic_names)
            self._names = frozenset(names)
        return self._names

    def target_partitions(self) -> dict[uuid.UUID, frozenset[int]]:
        """Every partition some member's target holds, by topic."""
        if self._held is None:
            held: dict[uuid.UUID, set[int]] = {}
            for target in self.targets.values():
                for t, ps in target.items():
                    held.setdefault(t, set()).update(ps)
            self._held = {t: frozenset(ps) for t, ps in held.items()}
        return self._held

    def state_metadata(self) -> rec.StatePartitionMetadata:
        return state_metadata(self.initializing, self.initialized, self.deleting)


ShareGroups = MutableMapping[str, ShareGroup]


def share_groups(state: ShardState) -> ShareGroups:
    """The shard's share groups (in its one map of groups), as the mapping this package works on."""
    return state.view(ShareGroup)


def state_metadata(
    initializing: dict[uuid.UUID, InitTopic], initialized: dict[uuid.UUID, InitTopic], deleting: dict[uuid.UUID, str]
) -> rec.StatePartitionMetadata:
    def infos(m: dict[uuid.UUID, InitTopic]) -> tuple[rec.TopicPartitionsInfo, ...]:
        return tuple(
            rec.TopicPartitionsInfo(t, v.name, tuple(sorted(v.partitions)))
            for t, v in sorted(m.items())
            if v.partitions
        )

    return rec.StatePartitionMetadata(
        infos(initializing), infos(initialized), tuple(rec.TopicInfo(t, n) for t, n in sorted(deleting.items()))
    )


def replay(groups: ShareGroups, key: rec.ShareKey, value: rec.ShareValue | None, now: int) -> None:
    """Apply one share-group record to ``groups`` (Kafka's GroupMetadataManager.replay of types 10-15).
    ``now`` stamps the state partition metadata, as Kafka stamps it with the replay's time."""
    group_id = key.group
    group = groups.get(group_id)
    if group is None:
        if value is None:
            return  # a tombstone of a group that is already gone (or replayed a second time)
        group = groups[group_id] = ShareGroup(group_id)
    kind = key.kind
    if kind == rec.TARGET_ASSIGNMENT_MEMBER:
        group._held = None
    elif kind == rec.MEMBER_METADATA:
        group._names = None
    if kind == rec.GROUP_METADATA:
        if value is None:
            if group.members or group.targets:
                raise ReplayError(f"share group {group_id} tombstoned while it still has members or targets")
            del groups[group_id]
            return
        assert isinstance(value, rec.ShareGroupMetadata)
        group.epoch = value.epoch
        group.metadata_hash = value.metadata_hash
    elif kind == rec.TARGET_ASSIGNMENT_METADATA:
        if value is None:
            group.assignment_epoch, group.assignment_timestamp = -1, 0
        else:
            assert isinstance(value, TargetAssignmentMetadata)
            group.assignment_epoch, group.assignment_timestamp = value.assignment_epoch, value.assignment_timestamp
    elif kind == rec.TARGET_ASSIGNMENT_MEMBER:
        assert isinstance(key, MemberKey)
        if value is None:
            group.targets.pop(key.member_id, None)
        else:
            assert isinstance(value, TargetAssignmentMember)
            group.targets[key.member_id] = {
                tp.topic_id: frozenset(tp.partitions) for tp in value.topics if tp.partitions
            }
    elif kind == rec.MEMBER_METADATA:
        assert isinstance(key, MemberKey)
        _replay_member_metadata(group, key.member_id, value)
    elif kind == rec.CURRENT_MEMBER_ASSIGNMENT:
        assert isinstance(key, MemberKey)
        _replay_current_assignment(group, key.member_id, value)
    elif kind == rec.STATE_PARTITION_METADATA:
        _replay_state_metadata(group, value, now)


def _replay_member_metadata(group: ShareGroup, member_id: str, value: rec.ShareValue | None) -> None:
    member = group.members.get(member_id)
    if value is None:
        if member is None:
            return
        if member.epoch != -1:
            raise ReplayError(f"metadata tombstone of share member {member_id} before its current-assignment tombstone")
        del group.members[member_id]
        group.metadata_refresh = True
        return
    assert isinstance(value, rec.ShareMemberMetadata)
    if member is None:
        member = group.members[member_id] = ShareMember(member_id)
    member.rack_id = value.rack_id
    member.client_id = value.client_id
    member.client_host = value.client_host
    member.subscribed_topic_names = value.subscribed_topic_names
    group.metadata_refresh = True


def _replay_current_assignment(group: ShareGroup, member_id: str, value: rec.ShareValue | None) -> None:
    member = group.members.get(member_id)
    if member is None:
        if value is None:
            return
        member = group.members[member_id] = ShareMember(member_id)
    if value is None:
        member.epoch = member.previous_epoch = -1
        member.assigned = {}
        return
    assert isinstance(value, rec.ShareCurrentAssignment)
    member.epoch = value.member_epoch
    member.previous_epoch = value.previous_member_epoch
    member.state = value.state
    member.assigned = {tp.topic_id: frozenset(tp.partitions) for tp in value.assigned if tp.partitions}


def _replay_state_metadata(group: ShareGroup, value: rec.ShareValue | None, now: int) -> None:
    if value is None:
        group.initializing, group.initialized, group.deleting = {}, {}, {}
        group.has_state_metadata = False
        return
    assert isinstance(value, rec.StatePartitionMetadata)
    group.initializing = {i.topic_id: InitTopic(i.topic_name, frozenset(i.partitions), now) for i in value.initializing}
    group.initialized = {i.topic_id: InitTopic(i.topic_name, frozenset(i.partitions), now) for i in value.initialized}
    group.deleting = {t.topic_id: t.topic_name for t in value.deleting}
    group.has_state_metadata = True


def deletion_records(group: ShareGroup) -> list[tuple[rec.ShareKey, None]]:
    """Every tombstone of a group, in the order replay needs (Kafka's ShareGroup.createGroupTombstoneRecords):
    current assignments, target members, target metadata, member metadata, state partition metadata,
    group metadata."""
    g = group.group_id
    out: list[tuple[rec.ShareKey, None]] = []
    out += [(MemberKey(rec.CURRENT_MEMBER_ASSIGNMENT, g, m), None) for m in group.members]
    out += [(MemberKey(rec.TARGET_ASSIGNMENT_MEMBER, g, m), None) for m in group.targets]
    out.append((GroupKey(rec.TARGET_ASSIGNMENT_METADATA, g), None))
    out += [(MemberKey(rec.MEMBER_METADATA, g, m), None) for m in group.members]
    out.append((GroupKey(rec.STATE_PARTITION_METADATA, g), None))
    out.append((GroupKey(rec.GROUP_METADATA, g), None))
    return out


class Recorder:
    """Records produced by one call, each replayed into the groups as it is added."""

    def __init__(self, groups: ShareGroups, now: int) -> None:
        self.groups = groups
        self.now = now
        self.outcome = Outcome()

    def add(self, key: rec.ShareKey, value: rec.ShareValue | None) -> None:
        self.outcome.records.append((key, value))
        replay(self.groups, key, value, self.now)

    def timer(self, key: tuple, deadline: int | None) -> None:
        self.outcome.timers.append(TimerOp(key, deadline))
