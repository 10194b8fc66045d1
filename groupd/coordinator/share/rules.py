"""The share-group core behind the shard's entry points: the ``(state, request, token, now, cfg) ->
Result`` shape of every group handler, the session timer by key, the initialization events and the
re-arming after a load (ListGroups, DescribeGroups and DeleteGroups: coordinator/share/group_type.py).

Records are applied as they are made (``Result.replay`` is False), as for consumer groups. A share group
lives in the shard's one map of groups (``share_groups(state)`` is the view of them); an id held by a
classic or consumer group is not a share group (GROUP_ID_NOT_FOUND to its heartbeat), and the other
types' APIs refuse a share group's id.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from groupd.coordinator import errors as E
from groupd.coordinator.api import (
    GroupConfig,
    Result,
    TimerOp,
    Token,
)
from groupd.coordinator.share.api import (
    SESSION,
    AlterShareOffsets,
    DeleteShareOffsets,
    DescribedShareGroup,
    Outcome,
    ShareGroupHeartbeat,
    ShareGroupHeartbeatResponse,
    SharePartitionsToDelete,
    ShareStateInitialized,
    session_timer,
)
from groupd.coordinator.share.describe import describe
from groupd.coordinator.share.group import ShareGroup, replay, share_groups
from groupd.coordinator.share.heartbeat import heartbeat, on_session_timeout, on_topics_changed
from groupd.coordinator.share.partitions import (
    alter_offsets,
    delete_offsets,
    deleted,
    partitions_to_delete,
    state_initialized,
    topics_deleted,
)

if TYPE_CHECKING:
    from groupd.coordinator.shard import ShardState

TIMER_KINDS = frozenset((SESSION,))
PROTOCOL_TYPE = "share"

__all__ = [
    "replay", "share_group_heartbeat", "share_group_describe", "share_state_initialized", "on_share_timer",
    "rearm_after_load", "topics_changed", "TIMER_KINDS",
]


def _result(outcome: Outcome, token: Token | None) -> Result:
    responses = ((token, outcome.response),) if token is not None and outcome.response is not None else ()
    return Result(records=tuple(outcome.records), responses=responses, timers=tuple(outcome.timers), replay=False)


def other_type(state: ShardState, group_id: str) -> bool:
    """A group of another type owns this id, members or not: Kafka's GroupMetadataManager
    (getOrMaybeCreateShareGroup) refuses a share heartbeat for any group whose type is not share, an empty
    classic group included, until that group is deleted."""
    held = state.groups.get(group_id)
    return held is not None and held.__class__ is not ShareGroup


def share_group_heartbeat(
    state: ShardState, request: ShareGroupHeartbeat, token: Token, now: int, cfg: GroupConfig
) -> Result:
    if request.group_id not in share_groups(state) and other_type(state, request.group_id):
        refusal = ShareGroupHeartbeatResponse(E.GROUP_ID_NOT_FOUND, f"Group {request.group_id} is not a share group.")
        return Result(responses=((token, refusal),), replay=False)
    return _result(
        heartbeat(share_groups(state), state.topics, request, now, cfg.share_config(request.group_id)), token
    )


def share_state_initialized(
    state: ShardState, event: ShareStateInitialized, token: Token, now: int, cfg: GroupConfig
) -> Result:
    """The share coordinator answered the initialization a heartbeat asked for; answers None."""
    result = _result(state_initialized(share_groups(state), state.topics, event, now), None)
    return Result(records=result.records, responses=((token, None),), timers=result.timers, replay=False)


def share_group_describe(state: ShardState, group_ids: list[str]) -> list[DescribedShareGroup]:
    names = {t.topic_id: name for name, t in state.topics.items()}
    return describe(share_groups(state), group_ids, names, frozenset(g for g in group_ids if other_type(state, g)))


def on_share_timer(state: ShardState, key: tuple[Any, ...], now: int, cfg: GroupConfig) -> Result:
    _, group_id, member_id = key
    return _result(on_session_timeout(share_groups(state), state.topics, group_id, member_id, now), None)


def topics_changed(state: ShardState, names: set[str]) -> None:
    on_topics_changed(share_groups(state), names)


def share_topics_deleted(state: ShardState, topic_ids: frozenset[uuid.UUID], now: int) -> Result:
    """Deleted topics leave the share groups' partition states (a record per group that had them)."""
    return _result(topics_deleted(share_groups(state), topic_ids, now), None)


def rearm_after_load(state: ShardState, now: int, cfg: GroupConfig) -> list[TimerOp]:
    """Every member's session restarts now (with its group's session timeout)."""
    return [
        TimerOp(session_timer(g.group_id, m), now + cfg.share_config(g.group_id).session_timeout_ms)
        for g in share_groups(state).values()
        for m in g.members
    ]


def share_delete_prepare(state: ShardState, group_id: str, token: Token, now: int, cfg: GroupConfig) -> Result:
    """DeleteGroups' first step on a share group (Kafka's sharePartitionDeleteRequests): NON_EMPTY_GROUP
    while it has members, else its initializing and initialized partitions move to deleting (recorded)
    and are answered for the shell to delete in the share coordinator. None: not a share group."""
    group = share_groups(state).get(group_id)
    if group is None:
        return Result(responses=((token, None),), replay=False)
    if group.members:
        return Result(responses=((token, SharePartitionsToDelete(E.NON_EMPTY_GROUP, ())),), replay=False)
    out = Outcome()
    topics = partitions_to_delete(share_groups(state), group_id, out, now)
    return Result(
        records=tuple(out.records), responses=((token, SharePartitionsToDelete(E.NONE, topics)),), replay=False
    )


def share_alter_offsets(
    state: ShardState, request: AlterShareOffsets, token: Token, now: int, cfg: GroupConfig
) -> Result:
    """AlterShareGroupOffsets' write: answers an AlterShareOffsetsPlan."""
    outcome = alter_offsets(share_groups(state), state.topics, request, now, other_type(state, request.group_id))
    return Result(records=tuple(outcome.records), responses=((token, outcome.plan),), replay=False)


def share_delete_offsets(
    state: ShardState, request: DeleteShareOffsets, token: Token, now: int, cfg: GroupConfig
) -> Result:
    """DeleteShareGroupOffsets' first write: answers a DeleteShareOffsetsPlan."""
    outcome = delete_offsets(share_groups(state), state.topics, request, now)
    return Result(records=tuple(outcome.records), responses=((token, outcome.delete_plan),), replay=False)


def share_state_deleted(
    state: ShardState, request: tuple[str, frozenset[uuid.UUID]], token: Token, now: int, cfg: GroupConfig
) -> Result:
    """The share state of these deleting topics is gone: they leave the deleting set; answers None."""
    group_id, topic_ids = request
    outcome = deleted(share_groups(state), group_id, topic_ids, now)
    return Result(records=tuple(outcome.records), responses=((token, None),), replay=False)


def share_initialized_partitions(state: ShardState, group_id: str) -> dict[uuid.UUID, frozenset[int]]:
    """A read: the group's initialized partitions (DescribeShareGroupOffsets without topics)."""
    group = share_groups(state).get(group_id)
    return {} if group is None else {t: i.partitions for t, i in group.initialized.items()}
