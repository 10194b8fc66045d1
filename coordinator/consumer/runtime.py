"""The consumer-group core behind the shard's entry points: the same ``(state, request, token, now, cfg)
-> Result`` shape as the classic handlers, timers by key, replay and the re-arming after a load.

The core's records are applied as they are made (``Result.replay`` is False): like Kafka's coordinator,
the in-memory group moves at once and the answer leaves once the records are durable. The metadata
the core reads is ``state.topics`` (the broker's topic registry, name -> entry with ``topic_id`` and
``partitions``), set by the shell.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator import errors as E
from coordinator.api import GroupConfig, Result, TimerOp, Token
from coordinator.consumer.api import (
    ConsumerGroupHeartbeat,
    ConsumerGroupHeartbeatResponse,
    Outcome,
    rebalance_timer,
    session_timer,
)
from coordinator.consumer.describe import DescribedConsumerGroup, describe
from coordinator.consumer.group import UNREVOKED_PARTITIONS, replay
from coordinator.consumer.heartbeat import (
    heartbeat,
    on_rebalance_timeout,
    on_session_timeout,
    on_topics_changed,
    resolve_regexes,
)

if TYPE_CHECKING:
    from coordinator.shard import ShardState

SESSION = "consumer-session"
REBALANCE = "consumer-rebalance"
REGEX = "consumer-regex"
TIMER_KINDS = frozenset((SESSION, REBALANCE, REGEX))

__all__ = ["replay", "consumer_group_heartbeat", "consumer_group_describe", "on_consumer_timer", "rearm_after_load"]


def _result(outcome: Outcome, token: Token | None, now: int) -> Result:
    timers = list(outcome.timers)
    if outcome.regex_refresh is not None:
        # Kafka resolves regexes off its event loop, then writes the result; here: as a due timer
        timers.append(TimerOp((REGEX, outcome.regex_refresh, ""), now))
    responses = ((token, outcome.response),) if token is not None and outcome.response is not None else ()
    return Result(records=tuple(outcome.records), responses=responses, timers=tuple(timers), replay=False)


def consumer_group_heartbeat(state: ShardState, request: ConsumerGroupHeartbeat, token: Token, now: int, cfg: GroupConfig) -> Result:
    config = cfg.consumer
    if not config.enabled:
        refusal = ConsumerGroupHeartbeatResponse(E.UNSUPPORTED_VERSION, "The consumer rebalance protocol is disabled.")
        return Result(responses=((token, refusal),), replay=False)
    if request.group_id in state.share_groups:
        refusal = ConsumerGroupHeartbeatResponse(E.GROUP_ID_NOT_FOUND, f"Group {request.group_id} is not a consumer group.")
        return Result(responses=((token, refusal),), replay=False)
    classic = state.groups.get(request.group_id)
    if classic is not None and classic.members:
        # a live classic group of that id: Kafka converts it online (KIP-848 migration), not done here
        refusal = ConsumerGroupHeartbeatResponse(E.GROUP_ID_NOT_FOUND, f"Group {request.group_id} is not a consumer group.")
        return Result(responses=((token, refusal),), replay=False)
    return _result(heartbeat(state.consumer_groups, state.topics, request, now, config), token, now)


def consumer_group_describe(state: ShardState, group_ids: list[str], cfg: GroupConfig) -> list[DescribedConsumerGroup]:
    names = {t.topic_id: name for name, t in state.topics.items()}
    return describe(state.consumer_groups, group_ids, names, cfg.consumer)


def on_consumer_timer(state: ShardState, key: tuple[Any, ...], now: int, cfg: GroupConfig) -> Result:
    kind, group_id, member_id = key
    if kind == SESSION:
        outcome = on_session_timeout(state.consumer_groups, state.topics, group_id, member_id, now)
    elif kind == REBALANCE:
        outcome = on_rebalance_timeout(state.consumer_groups, state.topics, group_id, member_id, now)
    else:
        outcome = resolve_regexes(state.consumer_groups, state.topics, group_id, now, now)
    return _result(outcome, None, now)


def topics_changed(state: ShardState, names: set[str], now: int) -> Result:
    """Topics were created, deleted or grew: groups recheck their metadata at their next heartbeat, and
    groups with regexes resolve them again."""
    regex_groups = on_topics_changed(state.consumer_groups, names)
    return Result(timers=tuple(TimerOp((REGEX, g, ""), now) for g in regex_groups), replay=False)


def rearm_after_load(state: ShardState, now: int, cfg: GroupConfig) -> list[TimerOp]:
    """Every member's session restarts now; a member revoking gets its rebalance timeout again."""
    timers = []
    for group in state.consumer_groups.values():
        for m in group.members.values():
            timers.append(TimerOp(session_timer(group.group_id, m.member_id), now + cfg.consumer.session_timeout_ms))
            if m.state == UNREVOKED_PARTITIONS:
                m.rebalance_timer_epoch = m.epoch
                timers.append(TimerOp(rebalance_timer(group.group_id, m.member_id), now + max(m.rebalance_timeout_ms, 0)))
    return timers

