"""The share-group core behind the shard's entry points: the ``(state, request, token, now, cfg) ->
Result`` shape of every group handler, the session timer by key, the initialization events, ListGroups,
DescribeGroups and DeleteGroups of share groups, and the re-arming after a load.

Records are applied as they are made (``Result.replay`` is False), as for consumer groups. A share group
lives in ``ShardState.share_groups``; an id held by a classic or consumer group is not a share group
(GROUP_ID_NOT_FOUND to its heartbeat), and the other types' APIs refuse a share group's id.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from groupd.coordinator import errors as E
from groupd.coordinator.api import (
    DeleteGroupResponse,
    GroupConfig,
    GroupDescription,
    GroupListing,
    Result,
    TimerOp,
    Token,
)
from groupd.coordinator.share.api import (
    SESSION,
    AlterShareOffsets,
    DeleteShareOffsets,
    Outcome,
    ShareGroupHeartbeat,
    ShareGroupHeartbeatResponse,
    SharePartitionsToDelete,
    ShareStateInitialized,
    session_timer,
)
from groupd.coordinator.share.describe import DescribedShareGroup, describe
from groupd.coordinator.share.group import deletion_records, replay
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
    "rearm_after_load", "topics_changed", "list_share_groups", "TIMER_KINDS",
]


def _result(outcome: Outcome, token: Token | None) -> Result:
    responses = ((token, outcome.response),) if token is not None and outcome.response is not None else ()
    return Result(records=tuple(outcome.records), responses=responses, timers=tuple(outcome.timers), replay=False)


def other_type(state: ShardState, group_id: str) -> bool:
    """A classic group with members or a consumer group owns this id."""
    classic = state.groups.get(group_id)
    return group_id in state.consumer_groups or (classic is not None and bool(classic.members or classic.offsets))


def share_group_heartbeat(state: ShardState, request: ShareGroupHeartbeat, token: Token, now: int, cfg: GroupConfig) -> Result:
    if request.group_id not in state.share_groups and other_type(state, request.group_id):
        refusal = ShareGroupHeartbeatResponse(E.GROUP_ID_NOT_FOUND, f"Group {request.group_id} is not a share group.")
        return Result(responses=((token, refusal),), replay=False)
    return _result(heartbeat(state.share_groups, state.topics, request, now, cfg.share_config(request.group_id)), token)


def share_state_initialized(state: ShardState, event: ShareStateInitialized, token: Token, now: int, cfg: GroupConfig) -> Result:
    """The share coordinator answered the initialization a heartbeat asked for; answers None."""
    result = _result(state_initialized(state.share_groups, state.topics, event, now), None)
    return Result(records=result.records, responses=((token, None),), timers=result.timers, replay=False)


def share_group_describe(state: ShardState, group_ids: list[str]) -> list[DescribedShareGroup]:
    names = {t.topic_id: name for name, t in state.topics.items()}
    return describe(state.share_groups, group_ids, names, frozenset(g for g in group_ids if other_type(state, g)))


def on_share_timer(state: ShardState, key: tuple[Any, ...], now: int, cfg: GroupConfig) -> Result:
    _, group_id, member_id = key
    return _result(on_session_timeout(state.share_groups, state.topics, group_id, member_id, now), None)


def topics_changed(state: ShardState, names: set[str]) -> None:
    on_topics_changed(state.share_groups, names)


def share_topics_deleted(state: ShardState, topic_ids: frozenset[uuid.UUID], now: int) -> Result:
    """Deleted topics leave the share groups' partition states (a record per group that had them)."""
    return _result(topics_deleted(state.share_groups, topic_ids, now), None)


def rearm_after_load(state: ShardState, now: int, cfg: GroupConfig) -> list[TimerOp]:
    """Every member's session restarts now (with its group's session timeout)."""
    return [
        TimerOp(session_timer(g.group_id, m), now + cfg.share_config(g.group_id).session_timeout_ms)
        for g in state.share_groups.values() for m in g.members
    ]


def list_share_groups(state: ShardState, states: Iterable[str] | None, types: Iterable[str] | None) -> list[GroupListing]:
    """ListGroups rows of share groups: type ``share``, protocol type ``share``, state Empty or Stable."""
    wanted_types = {t.strip().lower() for t in types} if types else None
    if wanted_types is not None and PROTOCOL_TYPE not in wanted_types:
        return []
    wanted_states = {s.strip().lower() for s in states} if states else None
    out = []
    for gid, g in state.share_groups.items():
        st = g.state()
        if wanted_states is None or st.lower() in wanted_states:
            out.append(GroupListing(gid, PROTOCOL_TYPE, st, PROTOCOL_TYPE))
    return out


def describe_as_classic(state: ShardState, group_id: str) -> GroupDescription | None:
    """DescribeGroups on a share group: Kafka answers it Dead (v6: GROUP_ID_NOT_FOUND), as for consumer groups."""
    if group_id in state.share_groups:
        return GroupDescription(E.NONE, group_id, "Dead", "", "")
    return None


def share_delete_prepare(state: ShardState, group_id: str, token: Token, now: int, cfg: GroupConfig) -> Result:
    """DeleteGroups' first step on a share group (Kafka's sharePartitionDeleteRequests): NON_EMPTY_GROUP
    while it has members, else its initializing and initialized partitions move to deleting (recorded)
    and are answered for the shell to delete in the share coordinator. None: not a share group."""
    group = state.share_groups.get(group_id)
    if group is None:
        return Result(responses=((token, None),), replay=False)
    if group.members:
        return Result(responses=((token, SharePartitionsToDelete(E.NON_EMPTY_GROUP, ())),), replay=False)
    out = Outcome()
    topics = partitions_to_delete(state.share_groups, group_id, out, now)
    return Result(records=tuple(out.records), responses=((token, SharePartitionsToDelete(E.NONE, topics)),), replay=False)


def delete_share_group(state: ShardState, group_id: str, token: Token) -> Result | None:
    """DeleteGroups of a share group once its share state is gone (the shell deletes it first): its
    tombstones in Kafka's order; NON_EMPTY_GROUP while it has members. None: not a share group."""
    group = state.share_groups.get(group_id)
    if group is None:
        return None
    if group.members:
        return Result(responses=((token, DeleteGroupResponse(E.NON_EMPTY_GROUP)),), replay=False)
    tombstones = deletion_records(group)
    for key, value in tombstones:
        replay(state.share_groups, key, value, 0)
    return Result(records=tuple(tombstones), responses=((token, DeleteGroupResponse(E.NONE)),), replay=False)


def share_alter_offsets(state: ShardState, request: AlterShareOffsets, token: Token, now: int, cfg: GroupConfig) -> Result:
    """AlterShareGroupOffsets' write: answers an AlterShareOffsetsPlan."""
    outcome = alter_offsets(state.share_groups, state.topics, request, now, other_type(state, request.group_id))
    return Result(records=tuple(outcome.records), responses=((token, outcome.plan),), replay=False)


def share_delete_offsets(state: ShardState, request: DeleteShareOffsets, token: Token, now: int, cfg: GroupConfig) -> Result:
    """DeleteShareGroupOffsets' first write: answers a DeleteShareOffsetsPlan."""
    outcome = delete_offsets(state.share_groups, state.topics, request, now)
    return Result(records=tuple(outcome.records), responses=((token, outcome.delete_plan),), replay=False)


def share_state_deleted(state: ShardState, request: tuple[str, frozenset[uuid.UUID]], token: Token, now: int, cfg: GroupConfig) -> Result:
    """The share state of these deleting topics is gone: they leave the deleting set; answers None."""
    group_id, topic_ids = request
    outcome = deleted(state.share_groups, group_id, topic_ids, now)
    return Result(records=tuple(outcome.records), responses=((token, None),), replay=False)


def share_initialized_partitions(state: ShardState, group_id: str) -> dict[uuid.UUID, frozenset[int]]:
    """A read: the group's initialized partitions (DescribeShareGroupOffsets without topics)."""
    group = state.share_groups.get(group_id)
    return {} if group is None else {t: i.partitions for t, i in group.initialized.items()}
