"""Online migration between classic and consumer groups (KIP-848, ``group.consumer.migration.policy``),
as Kafka 4.3's GroupMetadataManager converts them (spec §1.13).

- Upgrade: a ConsumerGroupHeartbeat joining (epoch 0) a non-empty classic group turns it into a consumer
  group, if the policy allows it and the group can be read as one: protocol type ``consumer``, not more
  members than ``group.consumer.max.size``, every member's subscription and assignment well-formed and no
  assignment carrying user data (a custom client-side assignor). Parked JoinGroup/SyncGroup requests are
  answered REBALANCE_IN_PROGRESS; the classic group's tombstone and the consumer group's records are
  written; each classic member becomes a consumer-group member, STABLE at epoch = generation, its last
  assignment as its target and current assignment, its session timeout and protocols kept in the
  ClassicMemberMetadata of its member record (ConsumerGroup.fromClassicGroup).
- Downgrade: when the last consumer-protocol member is fenced (leaves, or its session or rebalance time
  runs out) and only classic members remain, or a classic static member replaces it, the consumer
  group's tombstones and a classic GroupMetadata (Stable, generation = group epoch, each member's target
  assignment in its ConsumerProtocol version) are written; a group left that way then rebalances
  (ClassicGroup.fromConsumerGroup).

Consumer-group records are applied as they are made (``replay``); the classic group is set in memory
here, as Kafka's conversion sets it directly, and is rebuilt from its GroupMetadata record at load.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from groupd.coordinator import errors as E
from groupd.coordinator.api import GroupConfig, JoinGroupResponse, Protocol, SyncGroupResponse, TimerOp, Token
from groupd.coordinator.classic.rules import Out, prepare_rebalance
from groupd.coordinator.consumer import records as rec
from groupd.coordinator.consumer.api import join_timer, rebalance_timer, session_timer, sync_timer
from groupd.coordinator.consumer.config import ConsumerConfig
from groupd.coordinator.consumer.embedded import (
    MalformedProtocol,
    assignment_bytes,
    parse_assignment,
    parse_subscription,
    version_of,
)
from groupd.coordinator.consumer.group import (
    STABLE,
    ConsumerGroup,
    Member,
    consumer_groups,
    deletion_records,
    replay,
    target_value,
)
from groupd.coordinator.consumer.heartbeat import Topics, metadata_hash
from groupd.coordinator.group import CONSUMER, Group
from groupd.coordinator.group import STABLE as CLASSIC_STABLE
from groupd.coordinator.group import Member as ClassicMember
from groupd.coordinator.records import GroupMetadataKey

if TYPE_CHECKING:
    from groupd.coordinator.shard import ShardState

log = logging.getLogger("groupd.coordinator")



def member_timers(group_id: str, member_id: str) -> tuple[tuple[str, str, str], ...]:
    """Every timer a consumer-group member may have: session, rebalance, and a classic member's join and sync."""
    return (session_timer(group_id, member_id), rebalance_timer(group_id, member_id),
            join_timer(group_id, member_id), sync_timer(group_id, member_id))


class UpgradeRefused(Exception):
    """The classic group cannot become a consumer group: GROUP_ID_NOT_FOUND with ``message``; ``reason``
    is what the log says (Kafka logs why validateOnlineUpgrade refused and answers "not a consumer group")."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or message


@dataclass(slots=True)
class Conversion:
    """The records, answers and timers of one conversion (its consumer records already applied)."""

    records: list[tuple[Any, Any]] = field(default_factory=list)
    responses: list[tuple[Token, Any]] = field(default_factory=list)
    timers: list[TimerOp] = field(default_factory=list)


# ---------------------------------------------------------------- upgrade


def upgrade_refusal(classic: Group, config: ConsumerConfig) -> str | None:
    """Kafka's validateOnlineUpgrade: why the group may not be upgraded, or None."""
    g = classic.group_id
    if not config.upgrade_enabled():
        return f"Cannot upgrade classic group {g} to consumer group because the online upgrade is disabled."
    if classic.protocol_type != CONSUMER:
        return (f"Cannot upgrade classic group {g} to consumer group because the group does not use the "
                "consumer embedded protocol.")
    if len(classic.members) > config.max_size:
        return (f"Cannot upgrade classic group {g} to consumer group because the group size exceeds the "
                "consumer group maximum size.")
    return None


def _topic_ids(
    parts: tuple[tuple[str, tuple[int, ...]], ...], topics: Topics, epoch: int
) -> dict[uuid.UUID, dict[int, int]]:
    """Named partitions as {topic id: {partition: epoch}}; topics unknown to the metadata are dropped."""
    out: dict[uuid.UUID, dict[int, int]] = {}
    for name, ps in parts:
        info = topics.get(name)
        if info is not None and ps:
            out.setdefault(info.topic_id, {}).update(dict.fromkeys(ps, epoch))
    return out


def _classic_metadata(m: ClassicMember) -> rec.ClassicMemberMetadata:
    return rec.ClassicMemberMetadata(
        m.session_timeout, tuple(rec.ClassicProtocol(p.name, p.metadata) for p in m.protocols)
    )


def upgrade(state: ShardState, classic: Group, topics: Topics, config: ConsumerConfig) -> Conversion:
    """Build the consumer group of a classic one (raises UpgradeRefused, leaving everything untouched).
    The classic group itself is left to ``retire_classic`` once the joining heartbeat succeeded."""
    gid, gen = classic.group_id, classic.generation
    reason = upgrade_refusal(classic, config)
    if reason is not None:
        raise UpgradeRefused(f"Group {gid} is not a consumer group.", reason)
    members: list[Member] = []
    for cm in classic.members.values():
        try:
            protocol_metadata = (
                cm.metadata(classic.protocol) if classic.protocol is not None else cm.protocols[0].metadata
            )
            subscription = parse_subscription(protocol_metadata)
            assigned, user_data = parse_assignment(cm.assignment)
        except (MalformedProtocol, IndexError):
            raise UpgradeRefused(
                f"Cannot upgrade the classic group {gid} to consumer group because the embedded "
                "consumer protocol is malformed."
            ) from None
        if user_data:
            raise UpgradeRefused(
                f"Cannot upgrade classic group {gid} to consumer group because an unsupported "
                "custom assignor is in use. Please refer to the documentation or switch to a "
                "default assignor before re-attempting the upgrade."
            )
        members.append(
            Member(
                cm.member_id,
                cm.instance_id,
                subscription.rack_id,
                cm.client_id,
                cm.client_host,
                subscription.topics,
                None,
                cm.rebalance_timeout,
                None,
                _classic_metadata(cm),
                gen,
                gen,
                STABLE,
                _topic_ids(assigned, topics, gen),
            )
        )
    conv = Conversion()
    groups = consumer_groups(state)

    def add(key: rec.ConsumerKey, value: rec.ConsumerValue | None) -> None:
        conv.records.append((key, value))
        replay(groups, key, value)

    # ConsumerGroup.createConsumerGroupRecords: members, group epoch, targets, target epoch, assignments
    for m in members:
        add(rec.MemberKey(rec.MEMBER_METADATA, gid, m.member_id), m.metadata_value())
    group = groups[gid]
    add(rec.GroupKey(rec.GROUP_METADATA, gid), rec.GroupMetadata(gen, metadata_hash(group, topics)))
    for m in members:
        add(
            rec.MemberKey(rec.TARGET_ASSIGNMENT_MEMBER, gid, m.member_id),
            target_value({t: frozenset(ps) for t, ps in m.assigned.items()}),
        )
    add(rec.GroupKey(rec.TARGET_ASSIGNMENT_METADATA, gid), rec.TargetAssignmentMetadata(gen, 0))
    for m in members:
        add(rec.MemberKey(rec.CURRENT_MEMBER_ASSIGNMENT, gid, m.member_id), m.assignment_value())
    group.metadata_refresh = False
    return conv


def retire_classic(state: ShardState, classic: Group, conv: Conversion, now: int) -> None:
    """The upgrade stands: parked JoinGroup/SyncGroup requests learn REBALANCE_IN_PROGRESS (their members
    rejoin the consumer group), the classic group's tombstone goes first, its timers are cancelled and
    the consumer group takes its id (its offsets stay, kept by id in the offset store); each converted
    member's session runs with its own session timeout."""
    gid = classic.group_id
    for m in classic.members.values():
        if m.join_token is not None:
            conv.responses.append((m.join_token, JoinGroupResponse(E.REBALANCE_IN_PROGRESS, member_id=m.member_id)))
        if m.sync_token is not None:
            conv.responses.append((m.sync_token, SyncGroupResponse(E.REBALANCE_IN_PROGRESS)))
        conv.timers.append(TimerOp(("hb", gid, m.member_id), None))
        conv.timers.append(TimerOp(session_timer(gid, m.member_id), now + m.session_timeout))
    for mid in classic.pending:
        conv.timers.append(TimerOp(("pend", gid, mid), None))
    conv.timers += [TimerOp(("join", gid), None), TimerOp(("sync", gid), None)]
    conv.records.insert(0, (GroupMetadataKey(gid), None))  # the consumer group holds its id now; its offsets stay


# ---------------------------------------------------------------- downgrade


def downgrade_allowed(group: ConsumerGroup, leaving_id: str, cfg: GroupConfig, replaced: bool = False) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMember (and ...WithReplacedMemberId when a classic static
    member takes the place of ``leaving_id``): every other member uses the classic protocol and the
    leaving one does not, the policy allows it, and the classic members fit in ``group.max.size``."""
    leaving = group.members.get(leaving_id)
    if leaving is None or leaving.classic is not None:
        return False
    if any(m.classic is None for mid, m in group.members.items() if mid != leaving_id):
        return False
    if not replaced and len(group.members) <= 1:
        return False  # nobody left: the group just empties
    if not cfg.consumer.downgrade_enabled():
        return False
    remaining = len(group.members) if replaced else len(group.members) - 1
    return remaining <= cfg.max_size


def downgrade(
    state: ShardState,
    group: ConsumerGroup,
    leaving_id: str,
    replaced: bool,
    topics: Topics,
    now: int,
    cfg: GroupConfig,
) -> Conversion:
    """Turn ``group`` into a classic group without ``leaving_id`` (``replaced``: a classic static member
    already took its place, and its target, in ``group``): consumer tombstones, then the classic
    GroupMetadata. A group left by a member rebalances at once; a replacement keeps the group Stable."""
    gid = group.group_id
    names = {info.topic_id: name for name, info in topics.items()}
    targets = dict(group.targets)
    kept = [m for mid, m in group.members.items() if mid != leaving_id]
    conv = Conversion()
    for m in group.members.values():
        conv.timers += [TimerOp(key, None) for key in member_timers(gid, m.member_id)]
    for key, value in deletion_records(group):
        conv.records.append((key, value))
        replay(consumer_groups(state), key, value)

    classic = Group(gid, now)
    classic.protocol_type = CONSUMER
    classic.generation = group.epoch
    for m in kept:
        assert m.classic is not None
        classic.add(
            ClassicMember(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.classic.session_timeout_ms,
                CONSUMER,
                tuple(Protocol(p.name, p.metadata) for p in m.classic.protocols),
            )
        )
    classic.protocol = classic.select_protocol()
    classic.subscribed = classic.compute_subscribed()
    for cm in classic.members.values():
        target = targets.get(cm.member_id, {})
        named = tuple((names[t], tuple(sorted(ps))) for t, ps in target.items() if t in names)
        try:
            version = version_of(cm.metadata(classic.protocol))
        except MalformedProtocol:
            version = 0
        cm.assignment = assignment_bytes(named, version)
    classic.transition(CLASSIC_STABLE, now)
    state.groups[gid] = classic
    conv.records.append((GroupMetadataKey(gid), classic.metadata_value()))
    out = Out()
    for cm in classic.members.values():
        cm.hb_deadline = now + cm.session_timeout
        out.timers.append(TimerOp(("hb", gid, cm.member_id), cm.hb_deadline))
    log.info(
        "consumer group %s downgraded to a classic group at generation %d (%d members): member %s %s",
        gid,
        classic.generation,
        len(classic.members),
        leaving_id,
        "was replaced" if replaced else "left",
    )
    if not replaced:
        prepare_rebalance(
            classic,
            now,
            cfg,
            out,
            "leave",
            f"group {gid} downgraded from consumer to classic: member {leaving_id} left",
        )
    conv.responses += out.responses
    conv.timers += out.timers
    return conv
