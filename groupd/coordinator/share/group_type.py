"""The share group type (KIP-932, Kafka's ShareGroup) on the shard's group-type protocol
(coordinator/group_type.py): ShareGroupHeartbeat (and AlterShareGroupOffsets) make these groups; they
have no consumer offsets (every offset API answers GROUP_ID_NOT_FOUND, as ShareGroup.validateOffset*
do), and the classic APIs do not join them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from groupd.coordinator import errors as E
from groupd.coordinator.api import (
    DeleteGroupResponse,
    GroupConfig,
    GroupDescription,
    GroupListing,
    JoinGroupResponse,
    OffsetCommit,
    OffsetFetch,
    Result,
    Token,
    TxnOffsetCommit,
)
from groupd.coordinator.group_type import GroupType
from groupd.coordinator.logfields import group_event
from groupd.coordinator.records import Key, Value
from groupd.coordinator.share import rules as share
from groupd.coordinator.share.group import ShareGroup, ShareMember, deletion_records, replay, share_groups
from groupd.coordinator.share.records import is_share_key
from groupd.coordinator.snapshots import GroupShape, Shape

if TYPE_CHECKING:
    from groupd.coordinator.shard import ShardState

log = logging.getLogger("groupd.coordinator")


def _refuse_join(state: ShardState, req: Any, token: Token, now: int, cfg: GroupConfig) -> Result:
    """Kafka: a group of another type is not joined."""
    return Result(responses=((token, JoinGroupResponse(E.INCONSISTENT_GROUP_PROTOCOL, member_id="")),), replay=False)


def _timer(state: ShardState, key: tuple[Any, ...], now: int, cfg: GroupConfig) -> Result:
    result = share.on_share_timer(state, key, now, cfg)
    if result.records:
        group_event(log, "share member removed", key[1], key[2], reason="session timeout")
    return result


class ShareType(GroupType):
    name = share.PROTOCOL_TYPE
    group_class = ShareGroup
    api = {"join_group": _refuse_join, "share_group_heartbeat": share.share_group_heartbeat}
    creates = frozenset({"share_group_heartbeat"})
    timers = dict.fromkeys(share.TIMER_KINDS, _timer)
    shape = GroupShape(
        Shape(ShareGroup, ("members", "targets", "initializing", "initialized", "deleting"), "members"),
        Shape(ShareMember, ("assigned",)),
    )
    keeps_offsets = False

    def state_name(self, group: ShareGroup) -> str:
        return group.state()

    def listing(self, group: ShareGroup) -> GroupListing:
        """Type ``share``, protocol type ``share``, state Empty or Stable."""
        return GroupListing(group.group_id, share.PROTOCOL_TYPE, group.state(), share.PROTOCOL_TYPE)

    def describe(self, state: ShardState, group: ShareGroup) -> GroupDescription:
        """DescribeGroups on a share group: Kafka answers it Dead (v6: GROUP_ID_NOT_FOUND)."""
        return GroupDescription(E.NONE, group.group_id, "Dead", "", "")

    def member_count(self, group: ShareGroup) -> int:
        return len(group.members)

    def delete(self, state: ShardState, group: ShareGroup, token: Token, now: int) -> Result:
        """Once its share state is gone (the shell deletes it first): its tombstones in Kafka's order;
        NON_EMPTY_GROUP while it has members."""
        if group.members:
            return Result(responses=((token, DeleteGroupResponse(E.NON_EMPTY_GROUP)),), replay=False)
        tombstones = deletion_records(group)
        groups = share_groups(state)
        for key, value in tombstones:
            replay(groups, key, value, 0)
        return Result(records=tuple(tombstones), responses=((token, DeleteGroupResponse(E.NONE)),), replay=False)

    def validate_offset_commit(self, state: ShardState, group: ShareGroup, req: OffsetCommit) -> int:
        return E.GROUP_ID_NOT_FOUND

    def validate_txn_offset_commit(self, state: ShardState, group: ShareGroup, req: TxnOffsetCommit) -> int:
        return E.GROUP_ID_NOT_FOUND

    def validate_offset_fetch(self, state: ShardState, group: ShareGroup, req: OffsetFetch) -> int:
        return E.GROUP_ID_NOT_FOUND

    def validate_offset_delete(self, group: ShareGroup) -> int:
        return E.GROUP_ID_NOT_FOUND

    def subscribed_to(self, group: ShareGroup) -> Callable[[str], bool]:
        return group.subscribed_topic_names().__contains__

    def expiry(
        self, state: ShardState, group: ShareGroup, now: int, retention: int, records: list[tuple[Any, None]],
    ) -> Any:
        return None  # no offsets of its own; its share partitions' state is the share coordinator's

    def replays(self, key: Key) -> bool:
        return is_share_key(key)

    def replay(self, state: ShardState, key: Key, value: Value | None, now: int) -> None:
        replay(share_groups(state), key, value, now)  # type: ignore[arg-type]

    def rearm_after_load(self, state: ShardState, now: int, cfg: GroupConfig) -> Result:
        return Result(timers=tuple(share.rearm_after_load(state, now, cfg)), replay=False)

    def unload(self, group: ShareGroup) -> list[tuple[Token, Any]]:
        return []

    def topics_changed(self, state: ShardState, names: set[str], now: int) -> tuple[Any, ...]:
        share.topics_changed(state, names)
        return ()


SHARE = ShareType()
