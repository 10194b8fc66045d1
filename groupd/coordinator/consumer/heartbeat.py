"""ConsumerGroupHeartbeat (api 68) as a pure function, and the consumer group's timers.

``heartbeat(groups, topics, request, now, config)`` follows Kafka 4.3's
GroupMetadataManager.consumerGroupHeartbeat: validate the request, find or create the group and the
member (static members by instance id), fence stale epochs, update the member (a changed set of topic
names or a newly resolved regex bumps the group epoch, and so does a changed hash of the subscribed
topics' metadata), compute a new target assignment when the group epoch has moved past the assignment
epoch (at most once per ``assignment_interval_ms``), reconcile the member one step towards its target,
and answer with its epoch and, when needed, its assignment. Leaving (epoch -1) and the session and
rebalance timers fence a member: tombstones of its current assignment, target and metadata, then a
group-epoch bump.

Every record is replayed into ``groups`` as it is produced (``group.replay``), so the state after a call
is exactly what replaying its records gives. ``topics`` is the broker's metadata: name -> (id,
partition count); ``now`` is wall-clock ms.
"""

from __future__ import annotations

import hashlib
import struct
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from groupd.coordinator import errors as E
from groupd.coordinator.api import TimerOp
from groupd.coordinator.consumer import records as rec
from groupd.coordinator.consumer.api import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroupHeartbeat,
    ConsumerGroupHeartbeatResponse,
    Outcome,
    TopicPartitionList,
    join_timer,
    rebalance_timer,
    session_timer,
    sync_timer,
)
from groupd.coordinator.consumer.assignors import AssignorError, MemberSpec, assign
from groupd.coordinator.consumer.config import ConsumerConfig
from groupd.coordinator.consumer.group import (
    STABLE,
    UNKNOWN,
    UNREVOKED_PARTITIONS,
    ConsumerGroup,
    ConsumerGroups,
    Member,
    Partitions,
    plain,
    replay,
    target_value,
)
from groupd.coordinator.consumer.reconcile import FENCED, reconcile
from groupd.coordinator.consumer.regex import InvalidRegex, compile_regex, matching_topics

MIN_REGEX_REFRESH_MS = 10_000  # a group's regexes are resolved at most once per 10 s (GMM)


class TopicLike(Protocol):
    """What the core reads of a topic: the broker's registry entries have these two attributes."""

    @property
    def topic_id(self) -> uuid.UUID: ...

    @property
    def partitions(self) -> int: ...


@dataclass(slots=True, frozen=True)
class TopicInfo:
    topic_id: uuid.UUID
    partitions: int


Topics = Mapping[str, TopicLike]


class Refused(Exception):
    """A request refused with Kafka's error code and message (consumer and share heartbeats alike)."""

    def __init__(self, error: int, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


class _Out:
    """Records produced by one call, each replayed into the groups as it is added."""

    def __init__(self, groups: ConsumerGroups) -> None:
        self.groups = groups
        self.outcome = Outcome()

    def add(self, key: rec.ConsumerKey, value: rec.ConsumerValue | None) -> None:
        self.outcome.records.append((key, value))
        replay(self.groups, key, value)

    def timer(self, key: tuple, deadline: int | None) -> None:
        self.outcome.timers.append(TimerOp(key, deadline))


def _blank(s: str | None) -> bool:
    return s is not None and not s.strip()


def validate(request: ConsumerGroupHeartbeat, config: ConsumerConfig) -> None:
    """Kafka's GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid."""
    r = request
    if not r.group_id.strip():
        raise Refused(E.INVALID_REQUEST, "GroupId can't be empty.")
    if _blank(r.instance_id):
        raise Refused(E.INVALID_REQUEST, "InstanceId can't be empty.")
    if _blank(r.rack_id):
        raise Refused(E.INVALID_REQUEST, "RackId can't be empty.")
    if (r.version >= 1 or r.member_epoch > 0 or r.member_epoch == LEAVE_EPOCH) and not r.member_id.strip():
        raise Refused(E.INVALID_REQUEST, "MemberId can't be empty.")
    if r.member_epoch == JOIN_EPOCH:
        if r.rebalance_timeout_ms == -1:
            raise Refused(E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
        if r.owned is None or r.owned:
            raise Refused(E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
        if r.subscribed_topic_names is None and r.subscribed_topic_regex is None:
            raise Refused(
                E.INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
            )
    elif r.member_epoch == STATIC_LEAVE_EPOCH and r.instance_id is None:
        raise Refused(E.INVALID_REQUEST, "InstanceId can't be null.")
    elif r.member_epoch < STATIC_LEAVE_EPOCH:
        raise Refused(E.INVALID_REQUEST, f"MemberEpoch is {r.member_epoch}, but must be greater than or equal to -2.")
    if r.server_assignor is not None and r.server_assignor not in config.assignors:
        raise Refused(
            E.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {r.server_assignor} is not supported. Supported assignors: {', '.join(config.assignors)}.",
        )


# ---------------------------------------------------------------- subscriptions and metadata


def subscribed_names(group: ConsumerGroup, member: Member) -> frozenset[str]:
    names = set(member.subscribed_topic_names)
    regex = member.subscribed_topic_regex
    if regex:
        resolved = group.regexes.get(regex)
        if resolved is not None:
            names |= resolved.topics
    return frozenset(names)


def subscribed_ids(group: ConsumerGroup, member: Member, topics: Topics) -> frozenset[uuid.UUID]:
    return frozenset(topics[n].topic_id for n in subscribed_names(group, member) if n in topics)


def metadata_hash(group: ConsumerGroup, topics: Topics) -> int:
    """A hash of the subscribed topics' metadata (id, name, partition count), 0 when there are none.

    Kafka hashes with XXH3 (Utils.computeGroupHash); the value is only ever compared with itself, so any
    stable hash of the same inputs gives the same bumps."""
    names: set[str] = set()
    for m in group.members.values():
        names |= subscribed_names(group, m)
    return metadata_hash_of(names, topics)


def metadata_hash_of(names: set[str] | frozenset[str], topics: Topics) -> int:
    """The hash of these topics' metadata (consumer and share groups alike)."""
    present = sorted(n for n in names if n in topics)
    if not present:
        return 0
    h = hashlib.blake2b(digest_size=8)
    for n in present:
        info = topics[n]
        h.update(info.topic_id.bytes)
        h.update(n.encode())
        h.update(struct.pack(">i", info.partitions))
    return struct.unpack(">q", h.digest())[0]


def _bump(group: ConsumerGroup, topics: Topics, out: _Out) -> None:
    if group.has_partition_metadata:
        out.add(rec.GroupKey(rec.PARTITION_METADATA, group.group_id), None)
    out.add(
        rec.GroupKey(rec.GROUP_METADATA, group.group_id),
        rec.GroupMetadata(group.epoch + 1, metadata_hash(group, topics), group.creation_time_ms),
    )


# ---------------------------------------------------------------- target assignment


def preferred_assignor(group: ConsumerGroup, config: ConsumerConfig) -> str:
    """The assignor most members name in ServerAssignor, else the first configured one (ConsumerGroup L603)."""
    votes = Counter(m.server_assignor for m in group.members.values() if m.server_assignor in config.assignors)
    if votes:
        return votes.most_common(1)[0][0]
    return config.assignors[0]


def _maybe_new_target(group: ConsumerGroup, topics: Topics, now: int, config: ConsumerConfig, out: _Out) -> None:
    if group.assignment_epoch >= group.epoch:
        return
    interval = config.assignment_interval_ms
    if group.assignment_timestamp != 0 and interval != 0 and now < group.assignment_timestamp + interval:
        return  # KIP-1263 batching: keep the old target; a later heartbeat computes the new one
    specs = {
        mid: MemberSpec(subscribed_ids(group, m, topics), m.instance_id, m.rack_id, group.targets.get(mid, {}))
        for mid, m in group.members.items()
    }
    counts = {info.topic_id: info.partitions for info in topics.values()}
    try:
        targets = assign(preferred_assignor(group, config), specs, counts)
    except AssignorError as exc:
        raise Refused(E.UNKNOWN_SERVER_ERROR, f"Failed to compute a new target assignment: {exc}") from None
    for mid in group.members:
        new = {t: ps for t, ps in targets.get(mid, {}).items() if ps}
        if new != {t: ps for t, ps in group.targets.get(mid, {}).items() if ps}:
            out.add(rec.MemberKey(rec.TARGET_ASSIGNMENT_MEMBER, group.group_id, mid), target_value(new))
    out.add(
        rec.GroupKey(rec.TARGET_ASSIGNMENT_METADATA, group.group_id), rec.TargetAssignmentMetadata(group.epoch, now)
    )


# ---------------------------------------------------------------- reconciliation


def _reconcile(
    group: ConsumerGroup,
    member: Member,
    owned: TopicPartitionList | None,
    topics: Topics,
    subscription_changed: bool,
    now: int,
    out: _Out,
) -> Member:
    target = group.targets.get(member.member_id, {})
    result = reconcile(
        member,
        group.assignment_epoch,
        target,
        owned,
        subscribed_ids(group, member, topics),
        subscription_changed,
        group.owner_epoch,
    )
    if result == FENCED:
        raise Refused(
            E.FENCED_MEMBER_EPOCH,
            "The consumer group member is in an unknown state; it must abandon all its partitions and rejoin.",
        )
    assert isinstance(result, Member)
    if result is member:
        return member
    was_state, was_epoch = member.state, member.epoch  # replay below updates ``member`` in place
    if (result.epoch, result.previous_epoch, result.state, result.assigned, result.pending_revocation) != (
        member.epoch,
        member.previous_epoch,
        member.state,
        member.assigned,
        member.pending_revocation,
    ):
        out.add(
            rec.MemberKey(rec.CURRENT_MEMBER_ASSIGNMENT, group.group_id, member.member_id), result.assignment_value()
        )
    updated = group.members[member.member_id]
    if updated.classic is not None:
        return updated  # members using the classic protocol have join and sync timers instead (GMM maybeReconcile)
    key = rebalance_timer(group.group_id, member.member_id)
    if updated.state == UNREVOKED_PARTITIONS:
        if was_state != UNREVOKED_PARTITIONS or was_epoch != updated.epoch:
            updated.rebalance_timer_epoch = updated.epoch
            out.timer(key, now + max(updated.rebalance_timeout_ms, 0))
    elif was_state == UNREVOKED_PARTITIONS:
        updated.rebalance_timer_epoch = None
        out.timer(key, None)
    return updated


def _as_list(parts: Partitions) -> TopicPartitionList:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(parts.items()) if ps)


# ---------------------------------------------------------------- fencing


def fence(group: ConsumerGroup, member_id: str, topics: Topics, out: _Out) -> None:
    """Remove a member (``remove_member``), then bump the group epoch."""
    remove_member(group, member_id, out)
    _bump(group, topics, out)


def remove_member(group: ConsumerGroup, member_id: str, out: _Out) -> None:
    """A member's current assignment, target and metadata tombstones (in the order replay needs),
    tombstones of regexes nobody uses any more, and its timers cancelled."""
    g = group.group_id
    member = group.members[member_id]
    out.add(rec.MemberKey(rec.CURRENT_MEMBER_ASSIGNMENT, g, member_id), None)
    out.add(rec.MemberKey(rec.TARGET_ASSIGNMENT_MEMBER, g, member_id), None)
    out.add(rec.MemberKey(rec.MEMBER_METADATA, g, member_id), None)
    regex = member.subscribed_topic_regex
    if regex and regex in group.regexes and group.regex_users(regex) == 0:
        out.add(rec.RegexKey(g, regex), None)
    out.timer(session_timer(g, member_id), None)
    out.timer(rebalance_timer(g, member_id), None)
    if member.classic is not None:
        out.timer(join_timer(g, member_id), None)
        out.timer(sync_timer(g, member_id), None)


def on_session_timeout(groups: ConsumerGroups, topics: Topics, group_id: str, member_id: str, now: int) -> Outcome:
    """The session timer fired: the member sent no heartbeat for the session timeout."""
    out = _Out(groups)
    group = groups.get(group_id)
    if group is not None and member_id in group.members:
        fence(group, member_id, topics, out)
    return out.outcome


def on_rebalance_timeout(groups: ConsumerGroups, topics: Topics, group_id: str, member_id: str, now: int) -> Outcome:
    """The rebalance timer fired: fence the member if it is still at the epoch where it had to revoke."""
    out = _Out(groups)
    group = groups.get(group_id)
    member = None if group is None else group.members.get(member_id)
    if group is not None and member is not None and member.rebalance_timer_epoch == member.epoch:
        fence(group, member_id, topics, out)
    return out.outcome


# ---------------------------------------------------------------- the heartbeat


def heartbeat(
    groups: ConsumerGroups,
    topics: Topics,
    request: ConsumerGroupHeartbeat,
    now: int,
    config: ConsumerConfig,
    new_member_id: Callable[[], str] = lambda: str(uuid.uuid4()),
) -> Outcome:
    out = _Out(groups)
    created = False
    try:
        validate(request, config)
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            _leave(groups, topics, request, out)
        else:
            group = groups.get(request.group_id)
            if group is None:
                if request.member_epoch != JOIN_EPOCH:
                    raise Refused(E.GROUP_ID_NOT_FOUND, f"Group {request.group_id} not found.")
                group = groups[request.group_id] = ConsumerGroup(request.group_id)
                created = True
            _join_or_heartbeat(group, topics, request, now, config, new_member_id, out)
    except Refused as fail:
        # Every check that can fail runs before the first record, so a failed request writes nothing;
        # the one exception is an assignor failure (a subscribed topic missing from the metadata, which
        # the subscription filtering rules out): the member's update then stands, answered with the error.
        if created and request.group_id in groups and not groups[request.group_id].members:
            del groups[request.group_id]
        out.outcome.response = ConsumerGroupHeartbeatResponse(fail.error, fail.message)
    return out.outcome


def _static_member(group: ConsumerGroup, request: ConsumerGroupHeartbeat, out: _Out) -> Member | None:
    """Kafka's getOrMaybeSubscribeStaticConsumerGroupMember: the static member the request speaks for,
    None for a new one. A join replacing a member that left with epoch -2 moves that member (and its
    assignment) to the new member id."""
    assert request.instance_id is not None
    old_id = group.static_members.get(request.instance_id)
    if request.member_epoch == JOIN_EPOCH:
        if old_id is None:
            return None
        old = group.members[old_id]
        if old.classic is None and old.epoch != STATIC_LEAVE_EPOCH:
            # a classic static member is replaced at once: only two consumer-protocol members need the leave
            raise Refused(
                E.UNRELEASED_INSTANCE_ID,
                f"Static member {old_id} with instance id "
                f"{request.instance_id} is not released yet; it must leave with epoch -2 first.",
            )
        return replace_static_member(group, old_id, request.member_id, out)
    if old_id is None:
        raise Refused(E.UNKNOWN_MEMBER_ID, f"Instance id {request.instance_id} is unknown.")
    if old_id != request.member_id:
        raise Refused(
            E.FENCED_INSTANCE_ID,
            f"Static member {request.member_id} with instance id {request.instance_id} was fenced by member {old_id}.",
        )
    return group.members[old_id]


def replace_static_member(group: ConsumerGroup, old_id: str, new_id: str, out: _Out) -> Member:
    """A static member's new incarnation: a copy of the old member (its assignment too) under ``new_id``
    at epoch 0; the old member's records tombstoned, its timers cancelled (Kafka's replaceMember)."""
    g = group.group_id
    old = group.members[old_id]
    new = replace(old, member_id=new_id, epoch=0, previous_epoch=0, rebalance_timer_epoch=None, join_timer_set=False)
    target = group.targets.get(old_id, {})
    out.add(rec.MemberKey(rec.CURRENT_MEMBER_ASSIGNMENT, g, old_id), None)
    out.add(rec.MemberKey(rec.TARGET_ASSIGNMENT_MEMBER, g, old_id), None)
    out.add(rec.MemberKey(rec.MEMBER_METADATA, g, old_id), None)
    out.add(rec.MemberKey(rec.MEMBER_METADATA, g, new.member_id), new.metadata_value())
    out.add(rec.MemberKey(rec.TARGET_ASSIGNMENT_MEMBER, g, new.member_id), target_value(target))
    out.add(rec.MemberKey(rec.CURRENT_MEMBER_ASSIGNMENT, g, new.member_id), new.assignment_value())
    out.timer(session_timer(g, old_id), None)
    out.timer(rebalance_timer(g, old_id), None)
    if old.classic is not None:
        out.timer(join_timer(g, old_id), None)
        out.timer(sync_timer(g, old_id), None)
    return group.members[new.member_id]


def _check_epoch(member: Member, request: ConsumerGroupHeartbeat) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: a lower epoch is accepted only when it is the
    previous epoch (the last response was lost) and the member owns nothing beyond its assignment."""
    epoch = request.member_epoch
    if epoch > member.epoch:
        raise Refused(
            E.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({epoch}) "
            f"than the one known by the group coordinator ({member.epoch}).",
        )
    if epoch < member.epoch:
        ok = (
            epoch == member.previous_epoch
            and request.owned is not None
            and all(all(p in member.assigned.get(t, {}) for p in ps) for t, ps in request.owned)
        )
        if not ok:
            raise Refused(
                E.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({epoch}) "
                f"than the one known by the group coordinator ({member.epoch}).",
            )


def _join_or_heartbeat(
    group: ConsumerGroup,
    topics: Topics,
    request: ConsumerGroupHeartbeat,
    now: int,
    config: ConsumerConfig,
    new_member_id: Callable[[], str],
    out: _Out,
) -> None:
    g = group.group_id
    member_id = request.member_id or new_member_id()
    request = replace(request, member_id=member_id)
    # size: a static member coming back never counts against group.consumer.max.size
    returning_static = request.instance_id is not None and request.instance_id in group.static_members
    if not returning_static and len(group.members) >= config.max_size and member_id not in group.members:
        raise Refused(
            E.GROUP_MAX_SIZE_REACHED,
            f"The consumer group has reached its maximum capacity of {config.max_size} members.",
        )
    if request.instance_id is not None:
        member = _static_member(group, request, out)
    else:
        member = group.members.get(member_id)
        if member is None and request.member_epoch != JOIN_EPOCH:
            raise Refused(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {g}.")
    if member is not None and request.member_epoch != JOIN_EPOCH:
        _check_epoch(member, request)
    if member is not None and member.state == UNKNOWN and (request.owned is None or any(ps for _, ps in request.owned)):
        raise Refused(
            E.FENCED_MEMBER_EPOCH,
            "The consumer group member is in an unknown state; it must abandon all its partitions and rejoin.",
        )
    is_new = member is None
    base = member if member is not None else Member(member_id, epoch=0, previous_epoch=0)

    # the new regex, if any, must compile before anything is written
    regex = request.subscribed_topic_regex
    if regex and regex != base.subscribed_topic_regex:
        try:
            compile_regex(regex)
        except InvalidRegex as exc:
            raise Refused(E.INVALID_REGULAR_EXPRESSION, str(exc)) from None

    updated = replace(
        base,
        instance_id=request.instance_id if request.instance_id is not None else base.instance_id,
        rack_id=request.rack_id if request.rack_id is not None else base.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms
        if request.rebalance_timeout_ms != -1
        else base.rebalance_timeout_ms,
        server_assignor=request.server_assignor if request.server_assignor is not None else base.server_assignor,
        subscribed_topic_names=(
            request.subscribed_topic_names
            if request.subscribed_topic_names is not None
            else base.subscribed_topic_names
        ),
        subscribed_topic_regex=regex if regex is not None else base.subscribed_topic_regex,
        client_id=request.client_id,
        client_host=request.client_host,
    )
    names_changed = set(updated.subscribed_topic_names) != set(base.subscribed_topic_names)
    old_regex = base.subscribed_topic_regex or ""
    new_regex = updated.subscribed_topic_regex or ""
    old_regex_users = group.regex_users(old_regex) if old_regex else 0
    if is_new or updated.metadata_value() != base.metadata_value():
        out.add(rec.MemberKey(rec.MEMBER_METADATA, g, member_id), updated.metadata_value())
    member = group.members[member_id]

    # regular expressions (GMM maybeUpdateRegularExpressions)
    regex_resolved = False
    if new_regex != old_regex:
        if old_regex and old_regex_users <= 1 and old_regex in group.regexes:
            out.add(rec.RegexKey(g, old_regex), None)
        if not new_regex or new_regex in group.regexes:
            regex_resolved = True
        else:
            group.metadata_refresh = True
    if (names_changed or regex_resolved) or group.metadata_refresh:
        new_hash = metadata_hash(group, topics)
        if names_changed or regex_resolved or new_hash != group.metadata_hash:
            _bump(group, topics, out)
        group.metadata_refresh = False
    _maybe_new_target(group, topics, now, config, out)

    before = member.assigned
    member = _reconcile(group, member, request.owned, topics, names_changed or regex_resolved, now, out)
    out.timer(session_timer(g, member_id), now + config.session_timeout_ms)
    if _regex_refresh_due(group, now, config):
        group.regex_refresh_pending = True
        group.regex_filter = request.topic_filter  # Kafka resolves with the scheduling heartbeat's context
        out.outcome.regex_refresh = g

    full = (
        request.rebalance_timeout_ms != -1
        and request.owned is not None
        and (request.subscribed_topic_names is not None or request.subscribed_topic_regex is not None)
    )
    send = request.member_epoch == JOIN_EPOCH or full or plain(before) != plain(member.assigned)
    out.outcome.response = ConsumerGroupHeartbeatResponse(
        E.NONE,
        None,
        member_id,
        member.epoch,
        config.heartbeat_interval_ms,
        _as_list(member.assigned) if send else None,
    )


def _leave(groups: ConsumerGroups, topics: Topics, request: ConsumerGroupHeartbeat, out: _Out) -> None:
    group = groups.get(request.group_id)
    if group is None:
        raise Refused(E.GROUP_ID_NOT_FOUND, f"Group {request.group_id} not found.")
    member_id = request.member_id
    if request.instance_id is not None:
        owner = group.static_members.get(request.instance_id)
        if owner is None:
            raise Refused(E.UNKNOWN_MEMBER_ID, f"Instance id {request.instance_id} is unknown.")
        if owner != member_id:
            raise Refused(
                E.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {request.instance_id} was fenced by member {owner}.",
            )
    elif member_id not in group.members:
        raise Refused(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
    member = group.members[member_id]
    if request.member_epoch == STATIC_LEAVE_EPOCH:
        # the member stays, holding its partitions for its replacement; no bump
        left = replace(
            member,
            epoch=STATIC_LEAVE_EPOCH,
            previous_epoch=member.epoch,
            state=STABLE,
            assigned={t: dict.fromkeys(ps, 0) for t, ps in member.assigned.items()},
            pending_revocation={},
        )
        out.add(rec.MemberKey(rec.CURRENT_MEMBER_ASSIGNMENT, group.group_id, member_id), left.assignment_value())
        out.timer(rebalance_timer(group.group_id, member_id), None)
    else:
        fence(group, member_id, topics, out)
    out.outcome.response = ConsumerGroupHeartbeatResponse(E.NONE, None, member_id, request.member_epoch)


# ---------------------------------------------------------------- regular expressions


def _regex_refresh_due(group: ConsumerGroup, now: int, config: ConsumerConfig) -> bool:
    """Kafka's maybeRefreshRegularExpressions trigger: the group uses regexes, no resolution is running,
    the last one is at least 10 s old, and a regex is unresolved or the last one is older than
    ``group.consumer.regex.refresh.interval.ms``."""
    used = group.used_regexes()
    if not used or group.regex_refresh_pending:
        return False
    age = now - group.last_regex_refresh
    if group.last_regex_refresh and age < MIN_REGEX_REFRESH_MS:
        return False
    return any(r not in group.regexes for r in used) or age >= config.regex_refresh_interval_ms


def on_topics_changed(groups: ConsumerGroups, changed: set[str]) -> list[str]:
    """Topics were created, deleted or grew: groups subscribed to any of them (or using regexes) refresh
    their metadata hash at their next heartbeat; returns the groups with regexes to resolve again."""
    regex_groups = []
    for group in groups.values():
        if group.used_regexes():
            group.metadata_refresh = True
            group.last_regex_refresh = 0
            regex_groups.append(group.group_id)
            continue
        for m in group.members.values():
            if changed & set(m.subscribed_topic_names):
                group.metadata_refresh = True
                break
    return regex_groups


def resolve_regexes(groups: ConsumerGroups, topics: Topics, group_id: str, metadata_version: int, now: int) -> Outcome:
    """Resolve the group's regexes against the topic names (Kafka does this off the event loop and then
    writes the result): a record per regex whose topics changed, and a group-epoch bump if any did."""
    out = _Out(groups)
    group = groups.get(group_id)
    if group is None:
        return out.outcome
    group.regex_refresh_pending = False
    group.last_regex_refresh = now
    used = sorted(group.used_regexes())
    changed = False
    for regex in used:
        try:
            found = matching_topics(regex, topics)
        except InvalidRegex:
            continue
        if group.regex_filter is not None:  # filterTopicDescribeAuthorizedTopics: only what the member may see
            found = group.regex_filter(found)
        old = group.regexes.get(regex)
        if old is None or old.topics != found:
            out.add(rec.RegexKey(group_id, regex), rec.RegularExpression(tuple(sorted(found)), metadata_version, now))
            changed = True
    if changed or metadata_hash(group, topics) != group.metadata_hash:
        _bump(group, topics, out)
    return out.outcome
