"""The consumer group (KIP-848) and its members as plain objects, and ``replay``: the only way they change.

Kafka's handler computes records and the coordinator runtime replays them into the in-memory group;
this core does the same, so what a restart rebuilds from ``__consumer_offsets`` is by construction what
the running coordinator had. Replay enforces Kafka's ordering rules (GroupMetadataManager.replay): a
member's metadata tombstone needs its current-assignment tombstone (epoch -1) and its target tombstone
first; a group's metadata tombstone needs no members, no targets and a target-metadata tombstone.

Assignments are ``{topic id: {partition: assignment epoch}}``: since Kafka 4.3 (KIP-1251) each assigned
partition remembers the target epoch at which the member got it (for offset-commit validation); a record
without those epochs gives ``max(member epoch, 0)``.
"""

from __future__ import annotations

import uuid
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from groupd.coordinator.consumer import records as rec

if TYPE_CHECKING:
    from groupd.coordinator.consumer.api import TopicFilter
    from groupd.coordinator.shard import ShardState

# Member states (Kafka's MemberState byte values)
STABLE = 0
UNREVOKED_PARTITIONS = 1
UNRELEASED_PARTITIONS = 2
UNKNOWN = 127

# Group states, Kafka's wire names (ConsumerGroup.ConsumerGroupState)
EMPTY = "Empty"
ASSIGNING = "Assigning"
RECONCILING = "Reconciling"
GROUP_STABLE = "Stable"
DEAD = "Dead"

# Kafka 4.3 starts a group at group epoch 1 and assignment epoch 1 (timestamp 0), so a first join gives
# epoch 2 (KAFKA-20268)
INITIAL_EPOCH = 1

Partitions = dict[uuid.UUID, dict[int, int]]  # topic id -> partition -> assignment epoch


class ReplayError(ValueError):
    """A record that cannot apply to the current state (Kafka's IllegalStateException in replay)."""


def member_state(byte: int) -> int:
    return byte if byte in (STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS) else UNKNOWN


def plain(parts: Partitions) -> dict[uuid.UUID, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in parts.items() if ps}


@dataclass(slots=True)
class Member:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic: rec.ClassicMemberMetadata | None = None
    epoch: int = 0
    previous_epoch: int = 0
    state: int = STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    rebalance_timer_epoch: int | None = None  # transient: the epoch at which the rebalance timer was armed
    join_timer_set: bool = False  # transient: a classic member's join timer runs (it was told to rejoin)

    def metadata_value(self) -> rec.MemberMetadata:
        return rec.MemberMetadata(
            self.instance_id, self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names,
            self.subscribed_topic_regex, self.rebalance_timeout_ms, self.server_assignor, self.classic,
        )

    def assignment_value(self) -> rec.CurrentMemberAssignment:
        return rec.CurrentMemberAssignment(
            self.epoch, self.previous_epoch, self.state, _topic_partitions(self.assigned, True),
            _topic_partitions(self.pending_revocation, True),
        )

    def assigned_count(self) -> int:
        return sum(len(ps) for ps in self.assigned.values())


def _topic_partitions(parts: Partitions, with_epochs: bool) -> tuple[rec.TopicPartitions, ...]:
    out = []
    for topic in sorted(parts):
        ps = sorted(parts[topic])
        if ps:
            epochs = tuple(parts[topic][p] for p in ps) if with_epochs else None
            out.append(rec.TopicPartitions(topic, tuple(ps), epochs))
    return tuple(out)


def target_value(assignment: dict[uuid.UUID, frozenset[int]]) -> rec.TargetAssignmentMember:
    return rec.TargetAssignmentMember(
        tuple(rec.TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(assignment.items()) if ps)
    )


@dataclass(slots=True)
class ResolvedRegex:
    topics: frozenset[str]
    version: int
    timestamp: int


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    epoch: int = INITIAL_EPOCH
    metadata_hash: int = 0
    creation_time_ms: int = -1
    assignment_epoch: int = INITIAL_EPOCH
    assignment_timestamp: int = 0
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    targets: dict[str, dict[uuid.UUID, frozenset[int]]] = field(default_factory=dict)
    regexes: dict[str, ResolvedRegex] = field(default_factory=dict)
    # partition -> epoch of the member holding it (assigned or pending revocation); absent = free (-1)
    owners: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    has_partition_metadata: bool = False  # a legacy (<= 4.0) record to tombstone at the next bump
    metadata_refresh: bool = True  # recompute the metadata hash at the next heartbeat
    last_regex_refresh: int = 0  # transient
    regex_refresh_pending: bool = False  # transient
    regex_filter: TopicFilter | None = None  # transient: that of the heartbeat that last scheduled a resolution
    _used_regexes: frozenset[str] | None = None  # cache of used_regexes(), dropped by member-metadata replay

    def used_regexes(self) -> frozenset[str]:
        """The non-empty regexes members subscribe with (cached: every heartbeat asks)."""
        if self._used_regexes is None:
            self._used_regexes = frozenset(
                m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex
            )
        return self._used_regexes

    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.epoch > self.assignment_epoch:
            return ASSIGNING
        for m in self.members.values():
            if m.state != STABLE or m.epoch != self.assignment_epoch:
                return RECONCILING
        return GROUP_STABLE

    def owner_epoch(self, topic: uuid.UUID, partition: int) -> int:
        return self.owners.get((topic, partition), -1)

    def regex_users(self, regex: str) -> int:
        return sum(1 for m in self.members.values() if m.subscribed_topic_regex == regex)

    def _release(self, member: Member) -> None:
        for parts in (member.assigned, member.pending_revocation):
            for topic, ps in parts.items():
                for p in ps:
                    if self.owners.get((topic, p)) is not None:
                        del self.owners[topic, p]

    def _hold(self, member: Member) -> None:
        for parts in (member.assigned, member.pending_revocation):
            for topic, ps in parts.items():
                for p in ps:
                    self.owners[topic, p] = member.epoch


ConsumerGroups = MutableMapping[str, ConsumerGroup]


def consumer_groups(state: ShardState) -> ConsumerGroups:
    """The shard's consumer groups (in its one map of groups), as the mapping this package works on."""
    return state.view(ConsumerGroup)


def _partitions_of(topics: tuple[rec.TopicPartitions, ...], default_epoch: int) -> Partitions:
    out: Partitions = {}
    for tp in topics:
        epochs = tp.assignment_epochs
        if epochs is not None and len(epochs) == len(tp.partitions):
            out.setdefault(tp.topic_id, {}).update(zip(tp.partitions, epochs, strict=True))
        else:
            out.setdefault(tp.topic_id, {}).update((p, default_epoch) for p in tp.partitions)
    return out


def replay(groups: ConsumerGroups, key: rec.ConsumerKey, value: rec.ConsumerValue | None) -> None:
    """Apply one consumer-group record to ``groups`` (Kafka's GroupMetadataManager.replay)."""
    group_id = key.group
    group = groups.get(group_id)
    if value is not None and group is None:
        group = groups[group_id] = ConsumerGroup(group_id)
    if isinstance(key, rec.RegexKey):
        if value is None:
            if group is not None:
                group.regexes.pop(key.regex, None)
        else:
            assert isinstance(value, rec.RegularExpression) and group is not None  # made above for a value
            group.regexes[key.regex] = ResolvedRegex(frozenset(value.topics), value.version, value.timestamp)
        return
    kind = key.kind
    if group is None:
        return  # a tombstone of a group that is already gone (or replayed a second time)
    if kind == rec.GROUP_METADATA:
        if value is None:
            if group.members or group.targets or group.assignment_epoch != -1:
                raise ReplayError(f"group {group_id} tombstoned while it still has members or a target")
            del groups[group_id]
            return
        assert isinstance(value, rec.GroupMetadata)
        group.epoch = value.epoch
        group.metadata_hash = value.metadata_hash
        group.creation_time_ms = value.creation_time_ms
    elif kind == rec.PARTITION_METADATA:
        group.has_partition_metadata = value is not None
    elif kind == rec.TARGET_ASSIGNMENT_METADATA:
        if value is None:
            group.assignment_epoch = -1
            group.assignment_timestamp = 0
        else:
            assert isinstance(value, rec.TargetAssignmentMetadata)
            group.assignment_epoch = value.assignment_epoch
            group.assignment_timestamp = value.assignment_timestamp
    elif kind == rec.TARGET_ASSIGNMENT_MEMBER:
        assert isinstance(key, rec.MemberKey)
        if value is None:
            group.targets.pop(key.member_id, None)
        else:
            assert isinstance(value, rec.TargetAssignmentMember)
            group.targets[key.member_id] = {tp.topic_id: frozenset(tp.partitions) for tp in value.topics}
    elif kind == rec.MEMBER_METADATA:
        _replay_member_metadata(group, key, value)
    elif kind == rec.CURRENT_MEMBER_ASSIGNMENT:
        _replay_current_assignment(group, key, value)


def _replay_member_metadata(group: ConsumerGroup, key: rec.ConsumerKey, value: rec.ConsumerValue | None) -> None:
    assert isinstance(key, rec.MemberKey)
    member = group.members.get(key.member_id)
    if value is None:
        if member is None:
            return
        if member.epoch != -1:
            raise ReplayError(
                f"metadata tombstone of member {key.member_id} before its current-assignment tombstone"
            )
        if key.member_id in group.targets:
            raise ReplayError(f"metadata tombstone of member {key.member_id} before its target tombstone")
        del group.members[key.member_id]
        group._used_regexes = None
        if member.instance_id is not None and group.static_members.get(member.instance_id) == key.member_id:
            del group.static_members[member.instance_id]
        return
    assert isinstance(value, rec.MemberMetadata)
    if member is None:
        member = group.members[key.member_id] = Member(key.member_id)
    if member.instance_id is not None and member.instance_id != value.instance_id:
        group.static_members.pop(member.instance_id, None)
    member.instance_id = value.instance_id
    member.rack_id = value.rack_id
    member.client_id = value.client_id
    member.client_host = value.client_host
    member.subscribed_topic_names = value.subscribed_topic_names
    member.subscribed_topic_regex = value.subscribed_topic_regex
    member.rebalance_timeout_ms = value.rebalance_timeout_ms
    member.server_assignor = value.server_assignor
    member.classic = value.classic
    if value.instance_id is not None:
        group.static_members[value.instance_id] = key.member_id
    group.metadata_refresh = True
    group._used_regexes = None


def _replay_current_assignment(group: ConsumerGroup, key: rec.ConsumerKey, value: rec.ConsumerValue | None) -> None:
    assert isinstance(key, rec.MemberKey)
    member = group.members.get(key.member_id)
    if member is None:
        if value is None:
            return
        member = group.members[key.member_id] = Member(key.member_id)
    group._release(member)
    if value is None:
        member.epoch = member.previous_epoch = -1
        member.state = UNREVOKED_PARTITIONS
        member.assigned = {}
        member.pending_revocation = {}
        return
    assert isinstance(value, rec.CurrentMemberAssignment)
    member.epoch = value.member_epoch
    member.previous_epoch = value.previous_member_epoch
    member.state = member_state(value.state)
    default_epoch = max(value.member_epoch, 0)
    member.assigned = _partitions_of(value.assigned, default_epoch)
    member.pending_revocation = _partitions_of(value.pending_revocation, default_epoch)
    group._hold(member)


def deletion_records(group: ConsumerGroup) -> list[tuple[rec.ConsumerKey, None]]:
    """Every tombstone of a group, in the order replay needs (Kafka's ConsumerGroup.createGroupTombstoneRecords):
    current assignments, target members, target metadata, member metadata, regexes, partition metadata,
    group metadata."""
    g = group.group_id
    out: list[tuple[rec.ConsumerKey, None]] = []
    out += [(rec.MemberKey(rec.CURRENT_MEMBER_ASSIGNMENT, g, m), None) for m in group.members]
    out += [(rec.MemberKey(rec.TARGET_ASSIGNMENT_MEMBER, g, m), None) for m in group.targets]
    out.append((rec.GroupKey(rec.TARGET_ASSIGNMENT_METADATA, g), None))
    out += [(rec.MemberKey(rec.MEMBER_METADATA, g, m), None) for m in group.members]
    out += [(rec.RegexKey(g, r), None) for r in group.regexes]
    out.append((rec.GroupKey(rec.PARTITION_METADATA, g), None))
    out.append((rec.GroupKey(rec.GROUP_METADATA, g), None))
    return out
