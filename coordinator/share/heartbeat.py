"""ShareGroupHeartbeat (api 76) as a pure function, the session timer, and share-partition initialization.

``heartbeat(groups, topics, request, now)`` follows Kafka 4.3's GroupMetadataManager.shareGroupHeartbeat:
validate, find or create the group (only a join, epoch 0, creates one) and the member, check the epoch
(a higher one is fenced, a lower one accepted only if it is the previous epoch: the last answer was
lost), update the member (changed topic names bump the group epoch, and so does a changed hash of the
subscribed topics' metadata, or initialized partitions that no target holds yet), compute a new target
with the ``simple`` assignor over the initialized partitions when the group epoch has moved past the
assignment epoch (at most once per ``assignment_interval_ms``), move the member to its target (no
revocation phase: shared partitions need none), and answer with its epoch and, when needed, its
assignment. Leaving (epoch -1) and the session timer fence the member: its three tombstones and a
group-epoch bump.

Subscribed partitions whose share state is neither initialized nor being initialized (for less than the
retry interval) are recorded as initializing (ShareGroupStatePartitionMetadata) and handed back in the
response for the shell to initialize in the share coordinator; its answer comes back through
``state_initialized``. Until then the partitions are not assignable, so a new group's first heartbeat
gets an empty assignment.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import replace

from coordinator import errors as E
from coordinator.api import TimerOp
from coordinator.consumer.heartbeat import Topics, metadata_hash_of
from coordinator.consumer.records import GroupKey, MemberKey, TargetAssignmentMetadata
from coordinator.share import records as rec
from coordinator.share.api import (
    INITIALIZE_RETRY_INTERVAL_MS,
    JOIN_EPOCH,
    LEAVE_EPOCH,
    MAX_MEMBER_ID_LENGTH,
    AlterShareOffsets,
    AlterShareOffsetsPlan,
    DeleteShareOffsets,
    DeleteShareOffsetsPlan,
    Outcome,
    ShareGroupHeartbeat,
    ShareGroupHeartbeatResponse,
    ShareInitialize,
    ShareStateInitialized,
    TopicPartitionList,
    session_timer,
)
from coordinator.share.assignor import assign
from coordinator.share.config import ShareGroupConfig
from coordinator.share.group import (
    INITIAL_EPOCH,
    STABLE,
    Assignment,
    InitTopic,
    ShareGroup,
    ShareGroups,
    ShareMember,
    replay,
    state_metadata,
    target_value,
)


class _Fail(Exception):
    def __init__(self, error: int, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


class _Out:
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


def _blank(s: str | None) -> bool:
    return s is not None and not s.strip()


def validate(request: ShareGroupHeartbeat) -> None:
    """KafkaApis.isMemberIdValid, then GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid."""
    r = request
    if not r.member_id or len(r.member_id) > MAX_MEMBER_ID_LENGTH:
        raise _Fail(E.INVALID_REQUEST, "Invalid member id in the request.")
    if _blank(r.member_id):
        raise _Fail(E.INVALID_REQUEST, "MemberId can't be empty.")
    if not r.group_id.strip():
        raise _Fail(E.INVALID_REQUEST, "GroupId can't be empty.")
    if _blank(r.rack_id):
        raise _Fail(E.INVALID_REQUEST, "RackId can't be empty.")
    if r.member_epoch == JOIN_EPOCH:
        if not r.subscribed_topic_names:
            raise _Fail(E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    elif r.member_epoch < LEAVE_EPOCH:
        raise _Fail(E.INVALID_REQUEST, "MemberEpoch is invalid.")


# ---------------------------------------------------------------- metadata and assignment


def _ids(names: frozenset[str] | tuple[str, ...], topics: Topics) -> frozenset[uuid.UUID]:
    return frozenset(topics[n].topic_id for n in names if n in topics)


def _bump(group: ShareGroup, names: frozenset[str], topics: Topics, out: _Out) -> None:
    out.add(GroupKey(rec.GROUP_METADATA, group.group_id), rec.ShareGroupMetadata(group.epoch + 1, metadata_hash_of(names, topics)))


def initialized_assignment_pending(group: ShareGroup) -> bool:
    """Kafka's initializedAssignmentPending: members, and an initialized topic they subscribe to whose
    initialized partitions are not exactly those the target holds."""
    if not group.members or not group.initialized:
        return False
    names = group.subscribed_topic_names()
    if not names:
        return False
    held: dict[uuid.UUID, set[int]] = {}
    for target in group.targets.values():
        for t, ps in target.items():
            held.setdefault(t, set()).update(ps)
    return any(
        info.name in names and held.get(t) != set(info.partitions) for t, info in group.initialized.items()
    )


def _assignable(group: ShareGroup, topics: Topics) -> dict[uuid.UUID, frozenset[int]]:
    counts = {info.topic_id: info.partitions for info in topics.values()}
    return {
        t: frozenset(p for p in info.partitions if p < counts[t])
        for t, info in group.initialized.items() if t in counts
    }


def _maybe_new_target(group: ShareGroup, topics: Topics, now: int, interval_ms: int, out: _Out) -> None:
    if group.assignment_epoch >= group.epoch:
        return
    if group.assignment_timestamp != 0 and interval_ms != 0 and now < group.assignment_timestamp + interval_ms:
        return  # KIP-1263 batching: the old target stays until the interval is over
    subscriptions = {mid: _ids(m.subscribed_topic_names, topics) for mid, m in group.members.items()}
    targets = assign(subscriptions, _assignable(group, topics), group.targets)
    for mid in sorted(group.members):
        new = targets.get(mid, {})
        if new != group.targets.get(mid, {}) or mid not in group.targets:
            out.add(MemberKey(rec.TARGET_ASSIGNMENT_MEMBER, group.group_id, mid), target_value(new))
    out.add(GroupKey(rec.TARGET_ASSIGNMENT_METADATA, group.group_id), TargetAssignmentMetadata(group.epoch, now))


def _reconcile(group: ShareGroup, member: ShareMember, topics: Topics, subscription_changed: bool, out: _Out) -> ShareMember:
    """Kafka's ShareGroupAssignmentBuilder: a new target epoch is taken at once (STABLE), the target
    filtered to the member's subscribed topics; a changed subscription refilters at the same epoch."""
    target_epoch = group.assignment_epoch
    if not subscription_changed and member.epoch == target_epoch:
        return member
    subscribed = _ids(member.subscribed_topic_names, topics)
    target = {t: ps for t, ps in group.targets.get(member.member_id, {}).items() if t in subscribed and ps}
    if target_epoch != member.epoch:
        updated = replace(member, state=STABLE, assigned=target, epoch=target_epoch, previous_epoch=member.epoch)
    else:
        updated = replace(member, assigned=target)
    if (updated.epoch, updated.previous_epoch, updated.state, updated.assigned) != (
        member.epoch, member.previous_epoch, member.state, member.assigned
    ):
        out.add(MemberKey(rec.CURRENT_MEMBER_ASSIGNMENT, group.group_id, member.member_id), updated.assignment_value())
    return group.members[member.member_id]


def _as_list(parts: Assignment) -> TopicPartitionList:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(parts.items()) if ps)


# ---------------------------------------------------------------- initialization


def _to_initialize(group: ShareGroup, names: frozenset[str], topics: Topics, now: int) -> dict[uuid.UUID, InitTopic]:
    """Kafka's subscribedTopicsChangeMap: subscribed partitions neither initialized nor initializing for
    less than the retry interval."""
    known: dict[uuid.UUID, set[int]] = {t: set(i.partitions) for t, i in group.initialized.items()}
    for t, i in group.initializing.items():
        if now - i.timestamp < INITIALIZE_RETRY_INTERVAL_MS:
            known.setdefault(t, set()).update(i.partitions)
    out: dict[uuid.UUID, InitTopic] = {}
    for name in sorted(names):
        info = topics.get(name)
        if info is None:
            continue
        have = known.get(info.topic_id, set())
        if not have or len(have) < info.partitions:
            missing = frozenset(range(info.partitions)) - have
            if missing:
                out[info.topic_id] = InitTopic(name, missing, now)
    return out


def _combine(base: dict[uuid.UUID, InitTopic], more: Mapping[uuid.UUID, InitTopic]) -> dict[uuid.UUID, InitTopic]:
    """Kafka's combineInitMaps: partitions united, name and timestamp from ``more`` where it has the topic."""
    out = dict(base)
    for t, info in more.items():
        old = out.get(t)
        out[t] = InitTopic(info.name, info.partitions | (old.partitions if old else frozenset()), info.timestamp)
    return out


def _maybe_initialize(group: ShareGroup, names: frozenset[str], topics: Topics, now: int, out: _Out) -> ShareInitialize | None:
    if not names or not topics:
        return None
    new = _to_initialize(group, names, topics, now)
    if not new:
        return None
    deleting = {t: n for t, n in group.deleting.items() if t not in new}
    out.add(
        GroupKey(rec.STATE_PARTITION_METADATA, group.group_id),
        state_metadata(_combine(group.initializing, new), group.initialized, deleting),
    )
    return ShareInitialize(group.group_id, group.epoch, tuple((t, tuple(sorted(i.partitions))) for t, i in sorted(new.items())))


def state_initialized(groups: ShareGroups, topics: Topics, event: ShareStateInitialized, now: int) -> Outcome:
    """The share coordinator's answer to an initialization (Kafka's initializeShareGroupState and
    uninitializeShareGroupState): the partitions move to initialized, or leave initializing."""
    out = _Out(groups, now)
    group = groups.get(event.group_id)
    if group is None or not event.topics:
        return out.outcome
    done = {t: frozenset(ps) for t, ps in event.topics}
    if event.ok:
        names = {info.topic_id: name for name, info in topics.items()}
        enriched = {t: InitTopic(names.get(t, "UNKNOWN"), ps, now) for t, ps in done.items()}
        initializing = {}
        for t, info in group.initializing.items():
            left = info.partitions - done.get(t, frozenset())
            if left:
                initializing[t] = InitTopic(info.name, left, info.timestamp)
        initialized = _combine(group.initialized, enriched)
    else:
        if not group.initializing:
            return out.outcome
        initializing = {}
        for t, info in group.initializing.items():
            left = info.partitions - done.get(t, frozenset())
            if left:
                initializing[t] = InitTopic(info.name, left, info.timestamp)
        initialized = group.initialized
    out.add(GroupKey(rec.STATE_PARTITION_METADATA, group.group_id), state_metadata(initializing, initialized, group.deleting))
    return out.outcome


def partitions_to_delete(
    groups: ShareGroups, group_id: str, out: Outcome, now: int, only: frozenset[uuid.UUID] | None = None
) -> TopicPartitionList:
    """The group's initializing and initialized partitions (of the topics ``only`` names, or all) move
    to deleting, recorded in ``out``; returns them (Kafka's sharePartitionDeleteRequests)."""
    group = groups[group_id]
    both = _combine(group.initialized, group.initializing)
    chosen = {t: i for t, i in both.items() if only is None or t in only}
    if not chosen:
        return ()
    w = _Out(groups, now)
    w.outcome = out
    w.add(GroupKey(rec.STATE_PARTITION_METADATA, group_id), state_metadata(
        {t: i for t, i in group.initializing.items() if t not in chosen},
        {t: i for t, i in group.initialized.items() if t not in chosen},
        {**group.deleting, **{t: i.name for t, i in chosen.items()}},
    ))
    return tuple((t, tuple(sorted(i.partitions))) for t, i in sorted(chosen.items()))


def deleted(groups: ShareGroups, group_id: str, topics: frozenset[uuid.UUID], now: int) -> Outcome:
    """The share state of these deleting topics is gone: they leave the group's deleting set."""
    out = _Out(groups, now)
    group = groups.get(group_id)
    if group is not None and topics & set(group.deleting):
        out.add(GroupKey(rec.STATE_PARTITION_METADATA, group_id), state_metadata(
            group.initializing, group.initialized, {t: n for t, n in group.deleting.items() if t not in topics},
        ))
    return out.outcome


# ---------------------------------------------------------------- fencing


def fence(group: ShareGroup, member_id: str, topics: Topics, out: _Out) -> None:
    """Remove a member (Kafka's shareGroupFenceMember): its current assignment, target and metadata
    tombstones, then a group-epoch bump with the hash of what the others subscribe to."""
    g = group.group_id
    others = frozenset(n for mid, m in group.members.items() if mid != member_id for n in m.subscribed_topic_names)
    out.add(MemberKey(rec.CURRENT_MEMBER_ASSIGNMENT, g, member_id), None)
    out.add(MemberKey(rec.TARGET_ASSIGNMENT_MEMBER, g, member_id), None)
    out.add(MemberKey(rec.MEMBER_METADATA, g, member_id), None)
    _bump(group, others, topics, out)
    out.timer(session_timer(g, member_id), None)


def on_session_timeout(groups: ShareGroups, topics: Topics, group_id: str, member_id: str, now: int) -> Outcome:
    """The session timer fired: the member sent no heartbeat for the session timeout."""
    out = _Out(groups, now)
    group = groups.get(group_id)
    if group is not None and member_id in group.members:
        fence(group, member_id, topics, out)
    return out.outcome


def on_topics_changed(groups: ShareGroups, changed: set[str]) -> None:
    """Topics were created, deleted or grew: groups subscribed to any of them recompute their metadata
    hash at their next heartbeat (which also initializes new partitions)."""
    for group in groups.values():
        if changed & group.subscribed_topic_names():
            group.metadata_refresh = True


# ---------------------------------------------------------------- the heartbeat


def heartbeat(groups: ShareGroups, topics: Topics, request: ShareGroupHeartbeat, now: int, config: ShareGroupConfig) -> Outcome:
    out = _Out(groups, now)
    created = False
    try:
        validate(request)
        if request.member_epoch == LEAVE_EPOCH:
            _leave(groups, topics, request, out)
        else:
            group = groups.get(request.group_id)
            if group is None:
                if request.member_epoch != JOIN_EPOCH:
                    raise _Fail(E.GROUP_ID_NOT_FOUND, f"Share group {request.group_id} not found.")
                group = groups[request.group_id] = ShareGroup(request.group_id)
                created = True
            _join_or_heartbeat(group, topics, request, now, config, out)
    except _Fail as fail:
        # every check that can fail runs before the first record: a refused request writes nothing
        if created and request.group_id in groups and not groups[request.group_id].members:
            del groups[request.group_id]
        out.outcome.response = ShareGroupHeartbeatResponse(fail.error, fail.message)
    return out.outcome


def _check_epoch(member: ShareMember, epoch: int) -> None:
    """Kafka's throwIfShareGroupMemberEpochIsInvalid."""
    if epoch == JOIN_EPOCH:
        return
    if epoch > member.epoch:
        raise _Fail(E.FENCED_MEMBER_EPOCH, f"The share group member has a greater member epoch ({epoch}) than the "
                    f"one known by the group coordinator ({member.epoch}). The member must abandon all its "
                    "partitions and rejoin.")
    if epoch < member.epoch and epoch != member.previous_epoch:
        raise _Fail(E.FENCED_MEMBER_EPOCH, f"The share group member has a smaller member epoch ({epoch}) than the "
                    f"one known by the group coordinator ({member.epoch}), and it does not match the previous "
                    f"member epoch ({member.previous_epoch}). The member must abandon all its partitions and rejoin.")


def _join_or_heartbeat(
    group: ShareGroup, topics: Topics, request: ShareGroupHeartbeat, now: int, config: ShareGroupConfig, out: _Out
) -> None:
    g, member_id = group.group_id, request.member_id
    if len(group.members) >= config.max_size and member_id not in group.members:
        raise _Fail(E.GROUP_MAX_SIZE_REACHED, f"The share group has reached its maximum capacity of {config.max_size} members.")
    member = group.members.get(member_id)
    if member is None:
        if request.member_epoch != JOIN_EPOCH:
            raise _Fail(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {g}.")
        base = ShareMember(member_id)
    else:
        _check_epoch(member, request.member_epoch)
        base = member
    updated = replace(
        base,
        rack_id=request.rack_id if request.rack_id is not None else base.rack_id,
        subscribed_topic_names=(
            request.subscribed_topic_names if request.subscribed_topic_names is not None else base.subscribed_topic_names
        ),
        client_id=request.client_id,
        client_host=request.client_host,
    )
    # what Kafka reads of the group before this call's records apply
    pending = group.assignment_epoch >= group.epoch and initialized_assignment_pending(group)
    names_changed = member is None or set(updated.subscribed_topic_names) != set(base.subscribed_topic_names)
    if member is None or updated.metadata_value() != base.metadata_value():
        out.add(MemberKey(rec.MEMBER_METADATA, g, member_id), updated.metadata_value())
    member = group.members[member_id]
    bump = names_changed or pending
    names = group.subscribed_topic_names()
    if bump or group.metadata_refresh:
        new_hash = metadata_hash_of(names, topics)
        if bump or new_hash != group.metadata_hash:
            _bump(group, names, topics, out)
        group.metadata_refresh = False
    _maybe_new_target(group, topics, now, config.assignment_interval_ms, out)
    before = member.assigned
    member = _reconcile(group, member, topics, names_changed, out)
    out.timer(session_timer(g, member_id), now + config.session_timeout_ms)
    full = request.subscribed_topic_names is not None
    send = request.member_epoch == JOIN_EPOCH or full or before != member.assigned
    out.outcome.response = ShareGroupHeartbeatResponse(
        E.NONE, None, member_id, member.epoch, config.heartbeat_interval_ms,
        _as_list(member.assigned) if send else None,
        _maybe_initialize(group, names, topics, now, out),
    )


def _leave(groups: ShareGroups, topics: Topics, request: ShareGroupHeartbeat, out: _Out) -> None:
    group = groups.get(request.group_id)
    if group is None:
        raise _Fail(E.GROUP_ID_NOT_FOUND, f"Share group {request.group_id} not found.")
    if request.member_id not in group.members:
        raise _Fail(E.UNKNOWN_MEMBER_ID, f"Member {request.member_id} is not a member of group {group.group_id}.")
    fence(group, request.member_id, topics, out)
    out.outcome.response = ShareGroupHeartbeatResponse(E.NONE, None, request.member_id, request.member_epoch)


# ---------------------------------------------------------------- offsets admin


def alter_offsets(groups: ShareGroups, topics: Topics, request: AlterShareOffsets, now: int, other_type: bool) -> Outcome:
    """Kafka's GroupMetadataManager.alterShareGroupOffsets: the group (made if missing) must be empty;
    known partitions are recorded initializing and handed to the shell to initialize at their new start
    offsets (StateEpoch = the group epoch); unknown topics or partitions are UNKNOWN_TOPIC_OR_PARTITION."""
    out = _Out(groups, now)
    gid = request.group_id
    if not gid:
        out.outcome.plan = AlterShareOffsetsPlan(E.INVALID_GROUP_ID, "The group id is invalid.")
        return out.outcome
    group = groups.get(gid)
    if group is None and other_type:
        out.outcome.plan = AlterShareOffsetsPlan(E.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group.")
        return out.outcome
    if group is not None and group.members:
        out.outcome.plan = AlterShareOffsetsPlan(E.NON_EMPTY_GROUP, "The group is not empty.")
        return out.outcome
    results: list[tuple[str, uuid.UUID | None, tuple[tuple[int, int], ...]]] = []
    offsets: dict[uuid.UUID, dict[int, int]] = {}
    initializing: dict[uuid.UUID, InitTopic] = {}
    for name, parts in request.topics:
        info = topics.get(name)
        if info is None:
            results.append((name, None, tuple((p, E.UNKNOWN_TOPIC_OR_PARTITION) for p, _ in parts)))
            continue
        known = {p: o for p, o in parts if p < info.partitions}
        results.append((name, info.topic_id, tuple((p, E.NONE if p in known else E.UNKNOWN_TOPIC_OR_PARTITION) for p, _ in parts)))
        offsets.setdefault(info.topic_id, {}).update(known)
        initializing[info.topic_id] = InitTopic(name, frozenset(known), now)
    epoch = group.epoch if group is not None else INITIAL_EPOCH
    initializing = {t: i for t, i in initializing.items() if i.partitions}
    if initializing:
        base = group if group is not None else ShareGroup(gid)
        out.add(GroupKey(rec.STATE_PARTITION_METADATA, gid), state_metadata(
            _combine(base.initializing, initializing), base.initialized,
            {t: n for t, n in base.deleting.items() if t not in initializing},
        ))
    out.outcome.plan = AlterShareOffsetsPlan(
        E.NONE, None, tuple(results), epoch,
        tuple((t, tuple(sorted(ps.items()))) for t, ps in sorted(offsets.items()) if ps),
    )
    return out.outcome


def delete_offsets(groups: ShareGroups, topics: Topics, request: DeleteShareOffsets, now: int) -> Outcome:
    """Kafka's initiateDeleteShareGroupOffsets: only an empty share group; each named topic's initialized
    partitions move to deleting (a topic already deleting is deleted again over all its partitions); a
    topic unknown or never initialized is UNKNOWN_TOPIC_OR_PARTITION."""
    out = _Out(groups, now)
    gid = request.group_id
    group = groups.get(gid)
    if group is None:
        out.outcome.delete_plan = DeleteShareOffsetsPlan(E.GROUP_ID_NOT_FOUND, f"Share group {gid} not found.")
        return out.outcome
    if group.members:
        out.outcome.delete_plan = DeleteShareOffsetsPlan(E.NON_EMPTY_GROUP, "The group is not empty.")
        return out.outcome
    refused: list[tuple[str, int, str]] = []
    to_delete: list[tuple[str, uuid.UUID, tuple[int, ...]]] = []
    initialized = dict(group.initialized)
    deleting = dict(group.deleting)
    for name in request.topic_names:
        info = topics.get(name)
        if info is None:
            refused.append((name, E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."))
        elif info.topic_id in initialized:
            to_delete.append((name, info.topic_id, tuple(sorted(initialized.pop(info.topic_id).partitions))))
            deleting[info.topic_id] = name
        elif info.topic_id in deleting:
            to_delete.append((name, info.topic_id, tuple(range(info.partitions))))
        else:
            refused.append((name, E.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete."))
    if group.has_state_metadata:
        out.add(GroupKey(rec.STATE_PARTITION_METADATA, gid), state_metadata(group.initializing, initialized, deleting))
    out.outcome.delete_plan = DeleteShareOffsetsPlan(E.NONE, None, tuple(refused), tuple(to_delete))
    return out.outcome
