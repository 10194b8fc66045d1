"""Members using the classic protocol inside a consumer group (KIP-848 migration), served through
JoinGroup, SyncGroup, Heartbeat and LeaveGroup as Kafka 4.3's GroupMetadataManager serves them
(classicGroupJoinToConsumerGroup, classicGroupSyncToConsumerGroup, classicGroupHeartbeatToConsumerGroup,
classicGroupLeaveToConsumerGroup; spec §1.13, scenario 29).

A classic member is a consumer-group member whose ClassicMemberMetadata holds its session timeout and
protocols. Its JoinGroup is its heartbeat with a full subscription: the topics, rack and owned partitions
come from the embedded ConsumerProtocol subscription, then the group epoch, target assignment and
reconciliation run as for any member, and the answer's GenerationId is the member's epoch. SyncGroup hands
it its assigned partitions in its ConsumerProtocol version; Heartbeat tells it to rejoin
(REBALANCE_IN_PROGRESS) while it has catching up to do. It has no rebalance timer: a join timer (after
being told to rejoin) and a sync timer (after joining) fence it instead, and its session runs with its
own session timeout.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

from groupd.coordinator import errors as E
from groupd.coordinator.api import (
    GroupConfig,
    Heartbeat,
    HeartbeatResponse,
    JoinGroup,
    JoinGroupResponse,
    LeaveGroup,
    LeaveGroupResponse,
    LeftMember,
    Result,
    SyncGroup,
    SyncGroupResponse,
    Token,
)
from groupd.coordinator.consumer import records as rec
from groupd.coordinator.consumer.api import TopicPartitionList, join_timer, session_timer, sync_timer
from groupd.coordinator.consumer.embedded import (
    MalformedProtocol,
    Subscription,
    assignment_bytes,
    parse_subscription,
    version_of,
)
from groupd.coordinator.consumer.group import (
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    ConsumerGroup,
    Member,
    consumer_groups,
)
from groupd.coordinator.consumer.heartbeat import (
    Refused,
    Topics,
    _bump,
    _maybe_new_target,
    _Out,
    _reconcile,
    metadata_hash,
    remove_member,
    replace_static_member,
)
from groupd.coordinator.consumer.migration import downgrade, downgrade_allowed
from groupd.coordinator.group import CONSUMER

if TYPE_CHECKING:
    from groupd.coordinator.shard import ShardState


def _result(out: _Out, token: Token, payload: object, extra_records: tuple = (), extra_timers: tuple = ()) -> Result:
    return Result(
        records=tuple(out.outcome.records) + extra_records, responses=((token, payload),),
        timers=tuple(out.outcome.timers) + extra_timers, replay=False,
    )


def supports_protocols(group: ConsumerGroup, protocol_type: str, names: set[str]) -> bool:
    """ConsumerGroup.supportsClassicProtocols: type ``consumer`` and, in a non-empty group, one protocol
    name that every classic member offers."""
    if protocol_type != CONSUMER:
        return False
    if not group.members:
        return bool(names)
    classic = [m.classic for m in group.members.values() if m.classic is not None]
    return any(all(any(p.name == name for p in c.protocols) for c in classic) for name in names)


def _owned(subscription: Subscription, topics: Topics) -> TopicPartitionList:
    owned = []
    for name, ps in subscription.owned:
        info = topics.get(name)
        if info is not None:
            owned.append((info.topic_id, ps))
    return tuple(owned)


def _static(group: ConsumerGroup, member_id: str, instance_id: str) -> Member:
    """The static member of ``instance_id``, which must be ``member_id`` (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID)."""
    owner = group.static_members.get(instance_id)
    if owner is None:
        raise Refused(
            E.UNKNOWN_MEMBER_ID, f"Member with instance id {instance_id} is not a member of group {group.group_id}."
        )
    if owner != member_id:
        raise Refused(
            E.FENCED_INSTANCE_ID,
            f"Static member {member_id} with instance id {instance_id} was fenced by member {owner}.",
        )
    return group.members[owner]


def _find(group: ConsumerGroup, member_id: str, instance_id: str | None) -> Member:
    """Kafka's validateConsumerGroupMember plus throwIfMemberDoesNotUseClassicProtocol."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise Refused(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
    else:
        member = _static(group, member_id, instance_id)
    if member.classic is None:
        raise Refused(E.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol.")
    return member


# ---------------------------------------------------------------- JoinGroup


def join(
    state: ShardState, req: JoinGroup, token: Token, now: int, cfg: GroupConfig, new_id: str | None = None
) -> Result:
    """A classic JoinGroup to a non-empty consumer group."""
    group = consumer_groups(state)[req.group_id]
    out = _Out(consumer_groups(state))
    try:
        return _join(state, group, req, token, now, cfg, new_id or str(uuid.uuid4()), out)
    except Refused as fail:
        return _result(out, token, JoinGroupResponse(fail.error, member_id=req.member_id))


def _join(
    state: ShardState,
    group: ConsumerGroup,
    req: JoinGroup,
    token: Token,
    now: int,
    cfg: GroupConfig,
    new_id: str,
    out: _Out,
) -> Result:
    config = cfg.consumer_for(group.group_id)  # the group's own consumer.* configs, if any
    g = group.group_id
    if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
        # checked for every JoinGroup before the group is looked at (GroupCoordinatorService.joinGroup)
        raise Refused(E.INVALID_SESSION_TIMEOUT, f"Session timeout {req.session_timeout_ms} ms is out of bounds.")
    if config.migration_policy == "disabled":
        raise Refused(E.INCONSISTENT_GROUP_PROTOCOL, f"Group {g} is a consumer group: classic members may not join it.")
    unknown = req.member_id == ""
    member_id = new_id if unknown else req.member_id
    instance = req.group_instance_id
    returning_static = instance is not None and instance in group.static_members
    if not returning_static and len(group.members) >= config.max_size and member_id not in group.members:
        raise Refused(
            E.GROUP_MAX_SIZE_REACHED,
            f"The consumer group has reached its maximum capacity of {config.max_size} members.",
        )
    if not req.protocols or not supports_protocols(group, req.protocol_type, {p.name for p in req.protocols}):
        raise Refused(E.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not supported.")
    if unknown and instance is None and req.version >= 4:
        # JoinGroupRequest.requiresKnownMemberId: the member rejoins with the id it is given
        return Result(responses=((token, JoinGroupResponse(E.MEMBER_ID_REQUIRED, member_id=member_id)),), replay=False)
    try:
        subscription = parse_subscription(req.protocols[0].metadata)
    except MalformedProtocol:
        raise Refused(E.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s subscription is malformed.") from None

    replaced: str | None = None
    if instance is None:
        member = group.members.get(member_id)
    elif unknown:
        replaced = group.static_members.get(instance)
        member = None
    else:
        member = _static(group, member_id, instance)
    downgrading = replaced is not None and downgrade_allowed(group, replaced, cfg, replaced=True)
    if replaced is not None:
        member = replace_static_member(group, replaced, member_id, out)

    is_new = member is None
    base = member if member is not None else Member(member_id, epoch=0, previous_epoch=0)
    updated = replace(
        base,
        instance_id=instance if instance is not None else base.instance_id,
        rack_id=subscription.rack_id if subscription.rack_id is not None else base.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else base.rebalance_timeout_ms,
        subscribed_topic_names=subscription.topics,
        client_id=req.client_id,
        client_host=req.client_host,
        classic=rec.ClassicMemberMetadata(
            req.session_timeout_ms, tuple(rec.ClassicProtocol(p.name, p.metadata) for p in req.protocols)
        ),
    )
    names_changed = set(updated.subscribed_topic_names) != set(base.subscribed_topic_names)
    if is_new or updated.metadata_value() != base.metadata_value():
        out.add(rec.MemberKey(rec.MEMBER_METADATA, g, member_id), updated.metadata_value())
    topics = state.topics
    if names_changed or group.metadata_refresh:
        if names_changed or metadata_hash(group, topics) != group.metadata_hash:
            _bump(group, topics, out)
        group.metadata_refresh = False
    _maybe_new_target(group, topics, now, config, out)
    member = _reconcile(group, group.members[member_id], _owned(subscription, topics), topics, names_changed, now, out)
    response = JoinGroupResponse(E.NONE, member.epoch, CONSUMER, req.protocols[0].name, "", False, member_id, ())
    if downgrading:
        assert replaced is not None
        conv = downgrade(state, group, replaced, True, topics, now, cfg)
        return _result(out, token, response, tuple(conv.records), tuple(conv.timers))
    member.join_timer_set = False
    out.timer(join_timer(g, member_id), None)
    out.timer(session_timer(g, member_id), now + req.session_timeout_ms)
    out.timer(sync_timer(g, member_id), now + req.rebalance_timeout_ms)
    return _result(out, token, response)


# ---------------------------------------------------------------- SyncGroup and Heartbeat


def _must_rejoin(group: ConsumerGroup, member: Member, now: int, out: _Out) -> None:
    """REBALANCE_IN_PROGRESS, with the member's join timer started unless it runs already."""
    if not member.join_timer_set:
        member.join_timer_set = True
        out.timer(join_timer(group.group_id, member.member_id), now + max(member.rebalance_timeout_ms, 0))
    raise Refused(
        E.REBALANCE_IN_PROGRESS,
        f"A new rebalance is triggered in group {group.group_id} and member "
        f"{member.member_id} should rejoin to catch up.",
    )


def sync(state: ShardState, req: SyncGroup, token: Token, now: int, cfg: GroupConfig) -> Result:
    """A classic SyncGroup to a consumer group: the member's assigned partitions, once it is caught up."""
    out = _Out(consumer_groups(state))
    group = consumer_groups(state)[req.group_id]
    try:
        if req.version >= 5 and (req.protocol_type is None or req.protocol_name is None):
            raise Refused(E.INCONSISTENT_GROUP_PROTOCOL, "SyncGroup v5+ names its protocol type and name.")
        if not group.members:
            raise Refused(E.UNKNOWN_MEMBER_ID, f"Group {group.group_id} is empty.")
        member = _find(group, req.member_id, req.group_instance_id)
        if req.generation_id != member.epoch:
            raise Refused(
                E.ILLEGAL_GENERATION,
                f"The request generation id {req.generation_id} is not equal to the "
                f"member epoch {member.epoch} of member {member.member_id}.",
            )
        assert member.classic is not None
        first = member.classic.protocols[0]
        if (req.protocol_type is not None and req.protocol_type != CONSUMER) or (
            req.protocol_name is not None and req.protocol_name != first.name
        ):
            raise Refused(
                E.INCONSISTENT_GROUP_PROTOCOL, f"The protocol of member {member.member_id}'s request does not match."
            )
        if group.assignment_epoch > member.epoch and member.state != UNREVOKED_PARTITIONS:
            _must_rejoin(group, member, now, out)
    except Refused as fail:
        return _result(out, token, SyncGroupResponse(fail.error))
    names = {info.topic_id: name for name, info in state.topics.items()}
    assigned = tuple((names[t], tuple(sorted(ps))) for t, ps in sorted(member.assigned.items()) if t in names)
    try:
        version = version_of(first.metadata)
    except MalformedProtocol:
        version = 0
    g = group.group_id
    out.timer(sync_timer(g, member.member_id), None)
    out.timer(session_timer(g, member.member_id), now + member.classic.session_timeout_ms)
    return _result(
        out, token, SyncGroupResponse(E.NONE, req.protocol_type, req.protocol_name, assignment_bytes(assigned, version))
    )


def _waiting_on_unreleased(group: ConsumerGroup, member: Member) -> bool:
    """ConsumerGroup.waitingOnUnreleasedPartition: a target partition the member lacks is still held."""
    if member.state != UNRELEASED_PARTITIONS:
        return False
    for topic, ps in group.targets.get(member.member_id, {}).items():
        have = member.assigned.get(topic, {})
        if any(p not in have and group.owner_epoch(topic, p) != -1 for p in ps):
            return True
    return False


def heartbeat(state: ShardState, req: Heartbeat, token: Token, now: int, cfg: GroupConfig) -> Result:
    """A classic Heartbeat to a consumer group: keeps the session, and says REBALANCE_IN_PROGRESS while the
    member must rejoin (a newer target, partitions to revoke, or released partitions to collect)."""
    out = _Out(consumer_groups(state))
    group = consumer_groups(state)[req.group_id]
    try:
        member = _find(group, req.member_id, req.group_instance_id)
        if req.generation_id != member.epoch:
            raise Refused(
                E.ILLEGAL_GENERATION,
                f"The request generation id {req.generation_id} is not equal to the "
                f"member epoch {member.epoch} of member {member.member_id}.",
            )
        assert member.classic is not None
        out.timer(session_timer(group.group_id, member.member_id), now + member.classic.session_timeout_ms)
        # A group of classic members only has no ConsumerGroupHeartbeat to compute a target the group
        # epoch is waiting for (a member left): their heartbeats do it, under the same batching interval.
        _maybe_new_target(group, state.topics, now, cfg.consumer_for(group.group_id), out)
        if (
            member.epoch < group.assignment_epoch
            or member.state == UNREVOKED_PARTITIONS
            or (member.state == UNRELEASED_PARTITIONS and not _waiting_on_unreleased(group, member))
        ):
            _must_rejoin(group, member, now, out)
    except Refused as fail:
        return _result(out, token, HeartbeatResponse(fail.error))
    return _result(out, token, HeartbeatResponse(E.NONE))


# ---------------------------------------------------------------- LeaveGroup


def leave(state: ShardState, req: LeaveGroup, token: Token, now: int, cfg: GroupConfig) -> Result:
    """A classic LeaveGroup to a consumer group: each named classic member is removed (per-member
    UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID otherwise), then the group epoch moves once."""
    group = consumer_groups(state)[req.group_id]
    out = _Out(consumer_groups(state))
    answers = []
    removed = False
    for x in req.members:
        member_id = x.member_id
        try:
            if x.group_instance_id is None:
                member = _find(group, member_id, None)
            else:
                owner = group.static_members.get(x.group_instance_id)
                # administrative removal by instance id names no member id
                member = _find(
                    group, owner if member_id == "" and owner is not None else member_id, x.group_instance_id
                )
                member_id = member.member_id
            remove_member(group, member_id, out)
            removed = True
            answers.append(LeftMember(member_id, x.group_instance_id, E.NONE))
        except Refused as fail:
            answers.append(LeftMember(member_id, x.group_instance_id, fail.error))
    if removed:
        _bump(group, state.topics, out)
    if req.version < 3:
        payload = LeaveGroupResponse(answers[0].error if answers else E.NONE)
    else:
        payload = LeaveGroupResponse(E.NONE, tuple(answers))
    return _result(out, token, payload)
