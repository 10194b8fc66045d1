"""The classic group type (Kafka's ClassicGroup) on the shard's group-type protocol (coordinator/group_type.py).

Classic groups are also the default type: the classic APIs make them, and offsets committed for an id
no group holds make a simple (member-less) classic group, as Kafka's getOrMaybeCreateClassicGroup does.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from groupd.coordinator import errors as E
from groupd.coordinator.api import (
    GroupConfig,
    GroupDescription,
    GroupListing,
    JoinGroup,
    JoinGroupResponse,
    OffsetCommit,
    OffsetFetch,
    Protocol,
    Result,
    StaticRejoinWrite,
    SyncGroup,
    SyncGroupResponse,
    SyncWrite,
    TimerOp,
    Token,
    TxnOffsetCommit,
)
from groupd.coordinator.classic import rules
from groupd.coordinator.classic.rules import Out, prepare_rebalance
from groupd.coordinator.group import CONSUMER, DEAD, EMPTY, STABLE, Group, Member
from groupd.coordinator.group_type import GroupType
from groupd.coordinator.offsets import commits
from groupd.coordinator.records import GroupMetadataKey, GroupMetadataValue, Key, Value
from groupd.coordinator.snapshots import GroupShape, Shape

if TYPE_CHECKING:
    from groupd.coordinator.shard import ShardState


class ClassicType(GroupType):
    name = "classic"
    group_class = Group
    api = {
        "join_group": rules.join_group, "sync_group": rules.sync_group,
        "heartbeat": rules.heartbeat, "leave_group": rules.leave_group,
    }
    creates = frozenset(api)
    timers = dict.fromkeys(("hb", "pend", "join", "sync"), rules.on_group_timer)
    write_refs = dict.fromkeys((SyncWrite, StaticRejoinWrite), rules.on_write_failed)
    shape = GroupShape(
        Shape(Group, ("members", "static", "pending", "pending_sync", "support"), "members"), Shape(Member)
    )

    def writes(self, group: Group, request: object) -> bool:
        """A JoinGroup writes only as a known static member's rejoin, a SyncGroup only as the leader's, and
        a join phase's end only if a member did not rejoin (then it is removed): the rest of a rebalance,
        most of its requests, needs no snapshot."""
        cls = request.__class__
        if cls is JoinGroup:
            return request.group_instance_id is not None  # type: ignore[attr-defined]
        if cls is SyncGroup:
            return request.member_id == group.leader  # type: ignore[attr-defined]
        if cls is tuple and request[0] == "join":  # type: ignore[index]
            return not group.members or group.n_awaiting_join != len(group.members)
        return True

    def state_name(self, group: Group) -> str:
        return group.state

    def listing(self, group: Group) -> GroupListing:
        return GroupListing(group.group_id, group.protocol_type or "", group.state)

    def describe(self, state: ShardState, group: Group) -> GroupDescription:
        return rules.describe_group(state, group.group_id)

    def member_count(self, group: Group) -> int:
        return len(group.members)

    def delete(self, state: ShardState, group: Group, token: Token, now: int) -> Result:
        return commits.delete_group(state, group.group_id, token, now)

    def validate_offset_commit(self, state: ShardState, group: Group, req: OffsetCommit) -> int:
        if req.generation_id < 0 and group.state == EMPTY:
            return E.NONE  # the simple group's commit, the common case, without the call below
        return validate_offset_commit(
            group, req.member_id, req.group_instance_id, req.generation_id, transactional=False
        )

    def validate_txn_offset_commit(self, state: ShardState, group: Group, req: TxnOffsetCommit) -> int:
        return validate_offset_commit(
            group, req.member_id, req.group_instance_id, req.generation_id, transactional=True
        )

    def validate_offset_fetch(self, state: ShardState, group: Group, req: OffsetFetch) -> int:
        return E.NONE  # served in every state

    def validate_offset_delete(self, group: Group) -> int:
        """Kafka's ClassicGroup.validateOffsetDelete: Empty groups, and consumer-protocol-type groups in
        any state (their subscribed topics are refused one by one)."""
        if group.state == DEAD:
            return E.GROUP_ID_NOT_FOUND
        if group.state != EMPTY and group.protocol_type != CONSUMER:
            return E.NON_EMPTY_GROUP
        return E.NONE

    def subscribed_to(self, group: Group) -> Callable[[str], bool]:
        return group.is_subscribed

    def expiry(
        self,
        state: ShardState,
        group: Group,
        now: int,
        retention: int,
        records: list[tuple[Any, None]],
    ) -> Any:
        base = _expiry_base(group) if state.offsets.has(group.group_id) else None
        if base is False:
            return None
        if not commits.expire_group_offsets(state, group.group_id, base, group.is_subscribed, now, retention, records):
            return None
        if group.state != EMPTY:
            return None
        records.append((GroupMetadataKey(group.group_id), None))
        commits.drop_group(state, group)
        return group

    def replays(self, key: Key) -> bool:
        return isinstance(key, GroupMetadataKey)

    def replay(self, state: ShardState, key: Key, value: Value | None, now: int) -> None:
        replay_group_metadata(state, key.group, value, now)  # type: ignore[arg-type]

    def rearm_after_load(self, state: ShardState, now: int, cfg: GroupConfig) -> Result:
        """Every member's session restarts now; an over-capacity group rebalances."""
        out = Out()
        for g in state.groups.values():
            if g.__class__ is not Group or not g.members:
                continue
            for m in g.members.values():
                m.hb_deadline = now + m.session_timeout
                out.timers.append(TimerOp(("hb", g.group_id, m.member_id), m.hb_deadline))
            if g.state == STABLE and len(g.members) > cfg.max_size:
                prepare_rebalance(
                    g,
                    now,
                    cfg,
                    out,
                    "join",
                    f"{len(g.members)} members exceed group.max.size={cfg.max_size} after loading",
                )
        return out.result()

    observe = staticmethod(attrgetter("state"))  # type: ignore[assignment]  # the rebalance phase, a str

    def unload(self, group: Group) -> list[tuple[Token, Any]]:
        responses: list[tuple[Token, Any]] = []
        for m in group.members.values():
            if m.join_token is not None:
                responses.append((m.join_token, JoinGroupResponse(E.NOT_COORDINATOR, member_id=m.member_id)))
            if m.sync_token is not None:
                responses.append((m.sync_token, SyncGroupResponse(E.NOT_COORDINATOR)))
        group.state = DEAD
        return responses


CLASSIC = ClassicType()


def validate_offset_commit(
    g: Group, member_id: str, instance_id: str | None, generation: int, *, transactional: bool
) -> int:
    """Kafka's ClassicGroup.validateOffsetCommit: a TxnOffsetCommit (``transactional``) skips the rule
    that a commit without member and generation needs an Empty group, and the CompletingRebalance one."""
    if g.state == DEAD:
        return E.COORDINATOR_NOT_AVAILABLE
    if generation < 0 and g.state == EMPTY:
        return E.NONE
    if generation >= 0 or member_id or instance_id is not None:
        err = rules.validate_member(g, member_id, instance_id)
        if err:
            return err
        if generation != g.generation:
            return E.ILLEGAL_GENERATION
    elif not transactional:
        return E.UNKNOWN_MEMBER_ID
    if not transactional and g.state == rules.COMPLETING:
        return E.REBALANCE_IN_PROGRESS
    return E.NONE


def _expiry_base(g: Group) -> int | None | bool:
    """When each eligible offset's clock starts: an int (the time the group became Empty), None (its own
    commit timestamp), or False (nothing is eligible in this state)."""
    if g.protocol_type:
        if g.state == EMPTY:
            return g.state_ts
        if g.protocol_type == CONSUMER and g.subscribed is not None and g.state == STABLE:
            return None
        return False
    return None


def replay_group_metadata(state: ShardState, group_id: str, value: GroupMetadataValue | None, now: int) -> None:
    """A GroupMetadata record (moved from coordinator/shard.py's ``_replay_group``): a tombstone of a
    group being dropped ends its drop; otherwise the record makes the group anew (offsets stay by id)."""
    if value is None and group_id in state.dropping:
        commits.undrop(state, group_id)
        return
    old = state.groups.get(group_id)
    if value is None:
        if old is None or old.__class__ is not Group:
            return
        if state.offsets.has(group_id):
            state.groups[group_id] = Group(group_id, now)  # offsets outlive a group tombstone: a simple group
        else:
            del state.groups[group_id]
        return
    ts = value.current_state_timestamp
    g = Group(group_id, ts if ts >= 0 else None)
    ptype = value.protocol_type or None
    proto = value.protocol
    for mm in value.members:
        rebalance = mm.rebalance_timeout if mm.rebalance_timeout >= 0 else mm.session_timeout
        m = Member(
            mm.member_id,
            mm.group_instance_id,
            mm.client_id,
            mm.client_host,
            rebalance,
            mm.session_timeout,
            ptype or "",
            (Protocol(proto or "", mm.subscription),),
        )
        m.assignment = mm.assignment
        g.add(m)
    g.protocol_type = ptype
    g.generation = value.generation
    g.protocol = proto
    g.leader = value.leader if g.members else None
    g.state = g.prev_state = STABLE if g.members else EMPTY
    g.subscribed = g.compute_subscribed()
    state.groups[group_id] = g
