"""ShareGroupHeartbeat (api 76) as a pure function, and the session timer.

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
retry interval) are recorded as initializing and handed back in the response for the shell to initialize
in the share coordinator (coordinator/share/partitions.py). Until they are initialized they are not
assignable, so a new group's first heartbeat gets an empty assignment.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from groupd.coordinator import errors as E
from groupd.coordinator.consumer.heartbeat import Refused, Topics, metadata_hash_of
from groupd.coordinator.consumer.records import GroupKey, MemberKey, TargetAssignmentMetadata
from groupd.coordinator.share import records as rec
from groupd.coordinator.share.api import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    MAX_MEMBER_ID_LENGTH,
    Outcome,
    ShareGroupHeartbeat,
    ShareGroupHeartbeatResponse,
    TopicPartitionList,
    session_timer,
)
from groupd.coordinator.share.assignor import assign
from groupd.coordinator.share.config import ShareGroupConfig
from groupd.coordinator.share.group import (
    STABLE,
    Assignment,
    Recorder,
    ShareGroup,
    ShareGroups,
    ShareMember,
    target_value,
)
from groupd.coordinator.share.partitions import maybe_initialize


def _blank(s: str | None) -> bool:
    return s is not None and not s.strip()


def validate(request: ShareGroupHeartbeat) -> None:
    """KafkaApis.isMemberIdValid, then GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid."""
    r = request
    if not r.member_id or len(r.member_id) > MAX_MEMBER_ID_LENGTH:
        raise Refused(E.INVALID_REQUEST, "Invalid member id in the request.")
    if _blank(r.member_id):
        raise Refused(E.INVALID_REQUEST, "MemberId can't be empty.")
    if not r.group_id.strip():
        raise Refused(E.INVALID_REQUEST, "GroupId can't be empty.")
    if _blank(r.rack_id):
        raise Refused(E.INVALID_REQUEST, "RackId can't be empty.")
    if r.member_epoch == JOIN_EPOCH:
        if not r.subscribed_topic_names:
            raise Refused(E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    elif r.member_epoch < LEAVE_EPOCH:
        raise Refused(E.INVALID_REQUEST, "MemberEpoch is invalid.")


# ---------------------------------------------------------------- metadata and assignment


def _ids(names: frozenset[str] | tuple[str, ...], topics: Topics) -> frozenset[uuid.UUID]:
    return frozenset(topics[n].topic_id for n in names if n in topics)


def _bump(group: ShareGroup, names: frozenset[str], topics: Topics, out: Recorder) -> None:
    out.add(
        GroupKey(rec.GROUP_METADATA, group.group_id),
        rec.ShareGroupMetadata(group.epoch + 1, metadata_hash_of(names, topics)),
    )


def initialized_assignment_pending(group: ShareGroup) -> bool:
    """Kafka's initializedAssignmentPending: members, and an initialized topic they subscribe to whose
    initialized partitions are not exactly those the target holds."""
    if not group.members or not group.initialized:
        return False
    names = group.subscribed_topic_names()
    if not names:
        return False
    held = group.target_partitions()
    return any(info.name in names and held.get(t) != info.partitions for t, info in group.initialized.items())


def _assignable(group: ShareGroup, topics: Topics) -> dict[uuid.UUID, frozenset[int]]:
    counts = {info.topic_id: info.partitions for info in topics.values()}
    return {
        t: frozenset(p for p in info.partitions if p < counts[t])
        for t, info in group.initialized.items()
        if t in counts
    }


def _maybe_new_target(group: ShareGroup, topics: Topics, now: int, interval_ms: int, out: Recorder) -> None:
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


def _reconcile(
    group: ShareGroup, member: ShareMember, topics: Topics, subscription_changed: bool, out: Recorder
) -> ShareMember:
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
        member.epoch,
        member.previous_epoch,
        member.state,
        member.assigned,
    ):
        out.add(MemberKey(rec.CURRENT_MEMBER_ASSIGNMENT, group.group_id, member.member_id), updated.assignment_value())
    return group.members[member.member_id]


def _as_list(parts: Assignment) -> TopicPartitionList:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(parts.items()) if ps)


# ---------------------------------------------------------------- fencing


def fence(group: ShareGroup, member_id: str, topics: Topics, out: Recorder) -> None:
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
    out = Recorder(groups, now)
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


def heartbeat(
    groups: ShareGroups, topics: Topics, request: ShareGroupHeartbeat, now: int, config: ShareGroupConfig
) -> Outcome:
    out = Recorder(groups, now)
    created = False
    try:
        validate(request)
        if request.member_epoch == LEAVE_EPOCH:
            _leave(groups, topics, request, out)
        else:
            group = groups.get(request.group_id)
            if group is None:
                if request.member_epoch != JOIN_EPOCH:
                    raise Refused(E.GROUP_ID_NOT_FOUND, f"Share group {request.group_id} not found.")
                group = groups[request.group_id] = ShareGroup(request.group_id)
                created = True
            _join_or_heartbeat(group, topics, request, now, config, out)
    except Refused as fail:
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
        raise Refused(
            E.FENCED_MEMBER_EPOCH,
            f"The share group member has a greater member epoch ({epoch}) than the "
            f"one known by the group coordinator ({member.epoch}). The member must abandon all its "
            "partitions and rejoin.",
        )
    if epoch < member.epoch and epoch != member.previous_epoch:
        raise Refused(
            E.FENCED_MEMBER_EPOCH,
            f"The share group member has a smaller member epoch ({epoch}) than the "
            f"one known by the group coordinator ({member.epoch}), and it does not match the previous "
            f"member epoch ({member.previous_epoch}). The member must abandon all its partitions and rejoin.",
        )


def _join_or_heartbeat(
    group: ShareGroup, topics: Topics, request: ShareGroupHeartbeat, now: int, config: ShareGroupConfig, out: Recorder
) -> None:
    g, member_id = group.group_id, request.member_id
    if len(group.members) >= config.max_size and member_id not in group.members:
        raise Refused(
            E.GROUP_MAX_SIZE_REACHED, f"The share group has reached its maximum capacity of {config.max_size} members."
        )
    member = group.members.get(member_id)
    if member is None:
        if request.member_epoch != JOIN_EPOCH:
            raise Refused(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {g}.")
        base = ShareMember(member_id)
    else:
        _check_epoch(member, request.member_epoch)
        base = member
    updated = replace(
        base,
        rack_id=request.rack_id if request.rack_id is not None else base.rack_id,
        subscribed_topic_names=(
            request.subscribed_topic_names
            if request.subscribed_topic_names is not None
            else base.subscribed_topic_names
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
        E.NONE,
        None,
        member_id,
        member.epoch,
        config.heartbeat_interval_ms,
        _as_list(member.assigned) if send else None,
        maybe_initialize(group, names, topics, now, out),
    )


def _leave(groups: ShareGroups, topics: Topics, request: ShareGroupHeartbeat, out: Recorder) -> None:
    group = groups.get(request.group_id)
    if group is None:
        raise Refused(E.GROUP_ID_NOT_FOUND, f"Share group {request.group_id} not found.")
    if request.member_id not in group.members:
        raise Refused(E.UNKNOWN_MEMBER_ID, f"Member {request.member_id} is not a member of group {group.group_id}.")
    fence(group, request.member_id, topics, out)
    out.outcome.response = ShareGroupHeartbeatResponse(E.NONE, None, request.member_id, request.member_epoch)
