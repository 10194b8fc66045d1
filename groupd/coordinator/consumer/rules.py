"""The consumer-group core behind the shard's entry points: the same ``(state, request, token, now, cfg)
-> Result`` shape as the classic handlers, timers by key, replay and the re-arming after a load.

The core's records are applied as they are made (``Result.replay`` is False): like Kafka's coordinator,
the in-memory group moves at once and the answer leaves once the records are durable. The metadata
the core reads is ``state.topics`` (the broker's topic registry, name -> entry with ``topic_id`` and
``partitions``), set by the shell.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from groupd.coordinator import errors as E
from groupd.coordinator.api import GroupConfig, JoinGroup, Result, TimerOp, Token
from groupd.coordinator.consumer import classic_members
from groupd.coordinator.consumer.api import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    ConsumerGroupHeartbeat,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    Outcome,
    rebalance_timer,
    session_timer,
)
from groupd.coordinator.consumer.describe import describe
from groupd.coordinator.consumer.group import UNREVOKED_PARTITIONS, ConsumerGroup, consumer_groups, replay
from groupd.coordinator.consumer.heartbeat import Refused as Fail
from groupd.coordinator.consumer.heartbeat import (
    heartbeat,
    on_rebalance_timeout,
    on_session_timeout,
    on_topics_changed,
    resolve_regexes,
    validate,
)
from groupd.coordinator.consumer.migration import (
    Conversion,
    UpgradeRefused,
    downgrade,
    downgrade_allowed,
    retire_classic,
    upgrade,
)
from groupd.coordinator.group import Group
from groupd.coordinator.group import Group as ClassicGroup

if TYPE_CHECKING:
    from groupd.coordinator.shard import ShardState

log = logging.getLogger("groupd.coordinator")

SESSION = "consumer-session"
REBALANCE = "consumer-rebalance"
REGEX = "consumer-regex"
JOIN = "consumer-join"  # a classic member's: told to rejoin, it must within its rebalance timeout
SYNC = "consumer-sync"  # a classic member's: joined, it must send SyncGroup within its rebalance timeout
TIMER_KINDS = frozenset((SESSION, REBALANCE, REGEX, JOIN, SYNC))

__all__ = [
    "replay", "consumer_group_heartbeat", "consumer_group_describe", "on_consumer_timer", "rearm_after_load",
    "classic_join_group", "classic_sync_group", "classic_heartbeat", "classic_leave_group",
]


def _result(outcome: Outcome, token: Token | None, now: int) -> Result:
    timers = list(outcome.timers)
    if outcome.regex_refresh is not None:
        # Kafka resolves regexes off its event loop, then writes the result; here: as a due timer
        timers.append(TimerOp((REGEX, outcome.regex_refresh, ""), now))
    responses = ((token, outcome.response),) if token is not None and outcome.response is not None else ()
    return Result(records=tuple(outcome.records), responses=responses, timers=tuple(timers), replay=False)


def consumer_group_heartbeat(
    state: ShardState, request: ConsumerGroupHeartbeat, token: Token, now: int, cfg: GroupConfig
) -> Result:
    config = cfg.consumer_for(request.group_id)
    if not config.enabled:
        refusal = ConsumerGroupHeartbeatResponse(E.UNSUPPORTED_VERSION, "The consumer rebalance protocol is disabled.")
        return Result(responses=((token, refusal),), replay=False)
    gid = request.group_id
    held = state.groups.get(gid)
    if held is not None and held.__class__ is not ConsumerGroup and held.__class__ is not ClassicGroup:
        refusal = ConsumerGroupHeartbeatResponse(
            E.GROUP_ID_NOT_FOUND, f"Group {request.group_id} is not a consumer group."
        )
        return Result(responses=((token, refusal),), replay=False)
    if held is not None and held.__class__ is ClassicGroup:
        classic: ClassicGroup = held
        if classic.members:
            return _into_classic_group(state, classic, request, token, now, cfg)
        if request.member_epoch == JOIN_EPOCH:
            return _replacing_empty_classic_group(state, classic, request, token, now, cfg)
    if request.member_epoch == LEAVE_EPOCH:
        left = _leave_downgrading(state, request, token, now, cfg)
        if left is not None:
            return left
    return _result(heartbeat(consumer_groups(state), state.topics, request, now, config), token, now)


def _replacing_empty_classic_group(
    state: ShardState,
    classic: Group,
    request: ConsumerGroupHeartbeat,
    token: Token,
    now: int,
    cfg: GroupConfig,
) -> Result:
    """A join naming an empty classic group (or one holding only offsets): the consumer group replaces
    it under any migration policy, the classic group's tombstone first (Kafka's
    maybeDeleteEmptyClassicGroup); its offsets stay."""
    del state.groups[classic.group_id]  # the consumer group takes its id, unless the join is refused
    groups = consumer_groups(state)
    joined = _result(heartbeat(groups, state.topics, request, now, cfg.consumer_for(request.group_id)), token, now)
    if request.group_id not in groups:
        state.groups[classic.group_id] = classic
        return joined  # refused: nothing changes
    conversion = Conversion()
    retire_classic(state, classic, conversion, now)
    return Result(
        records=tuple(conversion.records) + joined.records,
        responses=joined.responses,
        timers=tuple(conversion.timers) + joined.timers,
        replay=False,
    )


def _into_classic_group(
    state: ShardState,
    classic: Group,
    request: ConsumerGroupHeartbeat,
    token: Token,
    now: int,
    cfg: GroupConfig,
) -> Result:
    """A heartbeat naming a live classic group: a valid join (epoch 0) upgrades it when allowed (spec
    §1.13); anything else, or a refused upgrade, is GROUP_ID_NOT_FOUND. The upgrade stands only if the
    join itself succeeds."""
    config = cfg.consumer_for(request.group_id)
    try:
        validate(request, config)
    except Fail as fail:
        return Result(responses=((token, ConsumerGroupHeartbeatResponse(fail.error, fail.message)),), replay=False)
    gid = request.group_id
    try:
        if request.member_epoch != JOIN_EPOCH:
            raise UpgradeRefused(f"Group {gid} is not a consumer group.")
        conversion = upgrade(state, classic, state.topics, config)
    except UpgradeRefused as refused:
        log.info("consumer heartbeat to classic group %s refused: %s", gid, refused.reason)
        return Result(
            responses=((token, ConsumerGroupHeartbeatResponse(E.GROUP_ID_NOT_FOUND, refused.message)),), replay=False
        )
    joined = heartbeat(consumer_groups(state), state.topics, request, now, config)
    if joined.response is not None and joined.response.error:
        state.groups[gid] = classic  # the conversion is dropped with the failed join
        return _result(Outcome(joined.response), token, now)
    retire_classic(state, classic, conversion, now)
    log.info(
        "classic group %s upgraded to a consumer group at epoch %d (%d members)",
        gid,
        classic.generation,
        len(classic.members),
    )
    result = _result(joined, token, now)
    return Result(
        records=tuple(conversion.records) + result.records,
        responses=tuple(conversion.responses) + result.responses,
        timers=tuple(conversion.timers) + result.timers,
        replay=False,
    )


def _leave_downgrading(
    state: ShardState, request: ConsumerGroupHeartbeat, token: Token, now: int, cfg: GroupConfig
) -> Result | None:
    """A consumer-protocol member leaving (epoch -1) a group where only classic members remain: the group
    becomes a classic one when the policy allows it (None: the ordinary leave)."""
    group = consumer_groups(state).get(request.group_id)
    if group is None or not request.member_id.strip():
        return None
    owner = group.static_members.get(request.instance_id) if request.instance_id is not None else request.member_id
    if owner != request.member_id or not downgrade_allowed(group, request.member_id, cfg):
        return None  # the ordinary path answers the refusals
    conversion = downgrade(state, group, request.member_id, False, state.topics, now, cfg)
    response = ConsumerGroupHeartbeatResponse(E.NONE, None, request.member_id, LEAVE_EPOCH)
    return _converted(conversion, token, response)


def _converted(conversion: Conversion, token: Token | None, response: object) -> Result:
    responses = tuple(conversion.responses) + (((token, response),) if token is not None else ())
    return Result(records=tuple(conversion.records), responses=responses, timers=tuple(conversion.timers), replay=False)


def consumer_group_describe(state: ShardState, group_ids: list[str], cfg: GroupConfig) -> list[DescribedConsumerGroup]:
    names = {t.topic_id: name for name, t in state.topics.items()}
    return describe(consumer_groups(state), group_ids, names, cfg.consumer)


def on_consumer_timer(state: ShardState, key: tuple[Any, ...], now: int, cfg: GroupConfig) -> Result:
    kind, group_id, member_id = key
    if kind == REGEX:
        return _result(resolve_regexes(consumer_groups(state), state.topics, group_id, now, now), None, now)
    group = consumer_groups(state).get(group_id)
    member = None if group is None else group.members.get(member_id)
    if group is None or member is None:
        return Result(replay=False)
    if kind == REBALANCE and member.rebalance_timer_epoch != member.epoch:
        return Result(replay=False)
    if kind == JOIN:
        member.join_timer_set = False
    if downgrade_allowed(group, member_id, cfg):
        return _converted(downgrade(state, group, member_id, False, state.topics, now, cfg), None, None)
    if kind == REBALANCE:
        outcome = on_rebalance_timeout(consumer_groups(state), state.topics, group_id, member_id, now)
    else:  # session, or a classic member's join or sync time ran out
        outcome = on_session_timeout(consumer_groups(state), state.topics, group_id, member_id, now)
    return _result(outcome, None, now)


def classic_join_group(state: ShardState, req: JoinGroup, token: Token, now: int, cfg: GroupConfig) -> Result:
    factory = cfg.extra.get("member_id_factory")
    return classic_members.join(
        state, req, token, now, cfg, factory() if factory is not None and not req.member_id else None
    )


classic_sync_group = classic_members.sync
classic_heartbeat = classic_members.heartbeat
classic_leave_group = classic_members.leave


def topics_changed(state: ShardState, names: set[str], now: int) -> Result:
    """Topics were created, deleted or grew: groups recheck their metadata at their next heartbeat, and
    groups with regexes resolve them again."""
    regex_groups = on_topics_changed(consumer_groups(state), names)
    return Result(timers=tuple(TimerOp((REGEX, g, ""), now) for g in regex_groups), replay=False)


def rearm_after_load(state: ShardState, now: int, cfg: GroupConfig) -> list[TimerOp]:
    """Every member's session restarts now; a member revoking gets its rebalance timeout again."""
    timers = []
    for group in consumer_groups(state).values():
        for m in group.members.values():
            session = (
                m.classic.session_timeout_ms
                if m.classic is not None
                else cfg.consumer_for(group.group_id).session_timeout_ms
            )
            timers.append(TimerOp(session_timer(group.group_id, m.member_id), now + session))
            if m.state == UNREVOKED_PARTITIONS:
                m.rebalance_timer_epoch = m.epoch
                timers.append(
                    TimerOp(rebalance_timer(group.group_id, m.member_id), now + max(m.rebalance_timeout_ms, 0))
                )
    return timers
