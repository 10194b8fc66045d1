"""The consumer group type (KIP-848, Kafka's ConsumerGroup) on the shard's group-type protocol
(coordinator/group_type.py): ConsumerGroupHeartbeat makes these groups; classic JoinGroup, SyncGroup,
Heartbeat and LeaveGroup naming one serve its classic members (coordinator/consumer/classic_members.py),
and a classic JoinGroup naming an empty one turns it into a classic group.

Its records are applied as they are made (``Result.replay`` is False for them); its offsets are the
shard's offset store's, validated here by member epoch (coordinator/consumer/offsets.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from groupd.coordinator import errors as E
from groupd.coordinator.api import (
    DeleteGroupResponse,
    GroupConfig,
    GroupDeleteWrite,
    GroupDescription,
    GroupListing,
    OffsetCommit,
    OffsetFetch,
    Result,
    Token,
    TxnOffsetCommit,
)
from groupd.coordinator.classic import rules as classic
from groupd.coordinator.consumer import offsets as consumer_offsets
from groupd.coordinator.consumer import records as rec
from groupd.coordinator.consumer import rules as consumer
from groupd.coordinator.consumer.expiry import (
    drop_consumer_group,
    is_empty,
    subscribed_topics,
)
from groupd.coordinator.consumer.group import ConsumerGroup, Member, deletion_records, replay
from groupd.coordinator.group_type import GroupsOf, GroupType, Observed
from groupd.coordinator.logfields import group_event
from groupd.coordinator.offsets.commits import expire_group_offsets, offset_tombstones
from groupd.coordinator.records import Key, Value
from groupd.coordinator.snapshots import GroupShape, Shape

if TYPE_CHECKING:
    from groupd.coordinator.shard import ShardState

log = logging.getLogger("groupd.coordinator")

_MEMBER_TIMERS = frozenset((consumer.SESSION, consumer.REBALANCE, consumer.JOIN, consumer.SYNC))


def consumer_groups(state: ShardState) -> GroupsOf[ConsumerGroup]:
    """The shard's consumer groups, as the mapping the type's own code works on."""
    return state.view(ConsumerGroup)


def classic_join_group(state: ShardState, req: Any, token: Token, now: int, cfg: GroupConfig) -> Result:
    """A classic JoinGroup naming a consumer group: its member joins as a classic member (KIP-848
    migration); an empty consumer group becomes a classic one (Kafka converts empty groups under any
    migration policy): its records are tombstoned, its offsets stay."""
    cg = state.groups[req.group_id]
    if cg.members:
        return consumer.classic_join_group(state, req, token, now, cfg)
    tombstones = deletion_records(cg)
    groups = consumer_groups(state)
    for key, value in tombstones:
        replay(groups, key, value)
    joined = classic.join_group(state, req, token, now, cfg)
    return replace(joined, records=tuple(tombstones) + joined.records)


def _timer(state: ShardState, key: tuple[Any, ...], now: int, cfg: GroupConfig) -> Result:
    result = consumer.on_consumer_timer(state, key, now, cfg)
    if key[0] in _MEMBER_TIMERS and result.records:
        group_event(
            log, "consumer member removed", key[1], key[2], reason=key[0].removeprefix("consumer-") + " timeout"
        )
    return result


class ConsumerType(GroupType):
    name = "consumer"
    group_class = ConsumerGroup
    api = {
        "join_group": classic_join_group,
        "sync_group": consumer.classic_sync_group,
        "heartbeat": consumer.classic_heartbeat,
        "leave_group": consumer.classic_leave_group,
        "consumer_group_heartbeat": consumer.consumer_group_heartbeat,
    }
    creates = frozenset({"consumer_group_heartbeat"})
    timers = dict.fromkeys(consumer.TIMER_KINDS, _timer)
    shape = GroupShape(
        Shape(ConsumerGroup, ("members", "static_members", "targets", "regexes", "owners"), "members"),
        Shape(Member, ("assigned", "pending_revocation")),
    )

    def state_name(self, group: ConsumerGroup) -> str:
        return group.state()

    def listing(self, group: ConsumerGroup) -> GroupListing:
        return GroupListing(group.group_id, "consumer", group.state(), "consumer")

    def describe(self, state: ShardState, group: ConsumerGroup) -> GroupDescription:
        """DescribeGroups: a consumer-protocol group is Dead to it (v6 answers GROUP_ID_NOT_FOUND), as in Kafka."""
        return GroupDescription(E.NONE, group.group_id, "Dead", "", "")

    def member_count(self, group: ConsumerGroup) -> int:
        return len(group.members)

    def delete(self, state: ShardState, group: ConsumerGroup, token: Token, now: int) -> Result:
        """An empty group goes with its offsets (its tombstones in Kafka's order, applied at once); a
        non-empty one is NON_EMPTY_GROUP."""
        if group.members:
            return Result(responses=((token, DeleteGroupResponse(E.NON_EMPTY_GROUP)),), replay=False)
        offsets = offset_tombstones(state, group.group_id)  # Kafka's order: the offsets, then the group
        tombstones = deletion_records(group)
        groups = consumer_groups(state)
        for key, value in tombstones:
            replay(groups, key, value)
        return Result(
            records=tuple(offsets) + tuple(tombstones),
            responses=((token, DeleteGroupResponse(E.NONE)),),
            write_ref=GroupDeleteWrite(token),
            replay=bool(offsets),
        )

    def validate_offset_commit(self, state: ShardState, group: ConsumerGroup, req: OffsetCommit) -> int:
        return consumer_offsets.commit_error(
            group,
            req.member_id,
            req.generation_id,
            req.version,
            ((p.topic, p.partition) for p in req.partitions),
            state.topics,
        )

    def validate_txn_offset_commit(self, state: ShardState, group: ConsumerGroup, req: TxnOffsetCommit) -> int:
        """The member epoch is checked unless no member is named at all; STALE_MEMBER_EPOCH is answered
        as ILLEGAL_GENERATION, as Kafka maps it for this API."""
        if req.generation_id < 0 and not req.member_id and req.group_instance_id is None:
            return E.NONE
        err = consumer_offsets.commit_error(
            group,
            req.member_id,
            req.generation_id,
            req.version,
            ((p.topic, p.partition) for p in req.partitions),
            state.topics,
            transactional=True,
        )
        return E.ILLEGAL_GENERATION if err == E.STALE_MEMBER_EPOCH else err

    def validate_offset_fetch(self, state: ShardState, group: ConsumerGroup, req: OffsetFetch) -> int:
        return consumer_offsets.fetch_error(group, req.member_id, req.member_epoch) if req.version >= 9 else E.NONE

    def validate_offset_delete(self, group: ConsumerGroup) -> int:
        return E.NONE  # Kafka's ConsumerGroup.validateOffsetDelete allows it in every state

    def subscribed_to(self, group: ConsumerGroup) -> Callable[[str], bool]:
        """Its members' subscribed topic names, by name or through a resolved regex."""
        return subscribed_topics(group).__contains__

    def expiry(
        self,
        state: ShardState,
        group: ConsumerGroup,
        now: int,
        retention: int,
        records: list[tuple[Any, None]],
    ) -> Any:
        """Commit time as the base in every state, its subscribed topics kept; once it is Empty with no
        offsets left it goes with its own tombstones (coordinator/consumer/expiry.py)."""
        subscribed = subscribed_topics(group)
        if expire_group_offsets(
            state, group.group_id, None, subscribed.__contains__, now, retention, records
        ) and is_empty(group):
            drop_consumer_group(state, group, records)
            return group
        return None

    def replays(self, key: Key) -> bool:
        return isinstance(key, rec.RegexKey) or (
            isinstance(key, (rec.GroupKey, rec.MemberKey)) and key.kind in rec.KEY_VERSIONS
        )

    def replay(self, state: ShardState, key: Key, value: Value | None, now: int) -> None:
        replay(consumer_groups(state), key, value)  # type: ignore[arg-type]

    def rearm_after_load(self, state: ShardState, now: int, cfg: GroupConfig) -> Result:
        return Result(timers=tuple(consumer.rearm_after_load(state, now, cfg)), replay=False)

    @staticmethod
    def observe(group: ConsumerGroup) -> Observed:
        return None, group.epoch, len(group.members)

    def unload(self, group: ConsumerGroup) -> list[tuple[Token, Any]]:
        return []

    def topics_changed(self, state: ShardState, names: set[str], now: int) -> tuple[Any, ...]:
        return consumer.topics_changed(state, names, now).timers


CONSUMER = ConsumerType()
