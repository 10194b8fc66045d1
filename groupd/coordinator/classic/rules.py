"""The classic group protocol's rules: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, their timers, and the
read-only DescribeGroups / ListGroups, following Kafka 4.x's GroupMetadataManager (spec §1-§7, §12).

Pure functions over a ``ShardState``: they mutate the in-memory groups, and return the records to write,
the payloads to send (once those records are durable) and the timers to set or cancel.

Timer keys: ("hb", group, member) session/heartbeat expiry, ("pend", group, member) pending member
expiry, ("join", group) join phase end (also the initial delay), ("sync", group) pending-sync expiry.
Each firing is checked against the deadline kept in the group, so a stale firing is harmless.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from groupd.coordinator import errors as E
from groupd.coordinator.api import (
    EMPTY as EMPTY_RESULT,
)
from groupd.coordinator.api import (
    DescribedMember,
    GroupConfig,
    GroupDescription,
    Heartbeat,
    HeartbeatResponse,
    JoinGroup,
    JoinGroupResponse,
    JoinMember,
    LeaveGroup,
    LeaveGroupResponse,
    LeftMember,
    Result,
    StaticRejoinWrite,
    SyncGroup,
    SyncGroupResponse,
    SyncWrite,
    TimerOp,
    Token,
    WriteRef,
)
from groupd.coordinator.group import COMPLETING, DEAD, EMPTY, PREPARING, STABLE, Group, Member
from groupd.coordinator.records import GroupMetadataKey

if TYPE_CHECKING:
    from groupd.coordinator.shard import ShardState


class Out:
    """Collects one handler's effects; ``result()`` freezes them."""

    __slots__ = ("records", "responses", "timers", "write_ref", "replay")

    def __init__(self) -> None:
        self.records: list[Any] = []
        self.responses: list[tuple[Token, Any]] = []
        self.timers: list[TimerOp] = []
        self.write_ref: WriteRef | None = None
        self.replay = False

    def result(self) -> Result:
        if not self.records and not self.timers and len(self.responses) == 1:
            return Result(responses=(self.responses[0],), replay=False)
        # records, responses, timers, write_ref, replay: by position (see Result)
        return Result(tuple(self.records), tuple(self.responses), tuple(self.timers), self.write_ref, self.replay)


def _new_id_suffix(cfg: GroupConfig) -> str:
    factory: Callable[[], str] | None = cfg.extra.get("member_id_factory")
    return factory() if factory is not None else random_uuid()


def random_uuid() -> str:
    """A version-4 UUID's text, as Kafka's ``UUID.randomUUID()`` gives a member id: the same bytes
    ``uuid.uuid4()`` would draw, without building and formatting a UUID object (1.3 us, not 3)."""
    b = _random16()
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class _RandomBytes:
    """os.urandom drawn 4 KiB at a time and handed out 16 bytes a call: one getrandom syscall per
    256 member ids instead of one each (the bytes are the same kind: the kernel's CSPRNG)."""

    __slots__ = ("pool", "pos")

    def __init__(self) -> None:
        self.pool, self.pos = b"", 0

    def __call__(self) -> bytearray:
        if self.pos + 16 > len(self.pool):
            self.pool, self.pos = os.urandom(4096), 0
        self.pos += 16
        return bytearray(self.pool[self.pos - 16 : self.pos])


_random16 = _RandomBytes()


# ---------------------------------------------------------------- timers


def _arm_hb(g: Group, m: Member, deadline: int, out: Out) -> None:
    m.hb_deadline = deadline
    out.timers.append(TimerOp(("hb", g.group_id, m.member_id), deadline))


def _cancel_hb(g: Group, m: Member, out: Out) -> None:
    if m.hb_deadline is not None:
        m.hb_deadline = None
        out.timers.append(TimerOp(("hb", g.group_id, m.member_id), None))


def _arm_join(g: Group, deadline: int, out: Out) -> None:
    g.join_deadline = deadline
    out.timers.append(TimerOp(("join", g.group_id), deadline))


def _cancel_join(g: Group, out: Out) -> None:
    g.initial_delay = None
    if g.join_deadline is not None:
        g.join_deadline = None
        out.timers.append(TimerOp(("join", g.group_id), None))


def _cancel_sync(g: Group, out: Out) -> None:
    if g.sync_deadline is not None:
        g.sync_deadline = None
        out.timers.append(TimerOp(("sync", g.group_id), None))


# ---------------------------------------------------------------- shared steps


def validate_member(g: Group, member_id: str, instance_id: str | None) -> int:
    """Kafka's identity check: a static instance mapped to another id is fenced (82), unknown -> 25."""
    if instance_id is not None:
        current = g.static.get(instance_id)
        if current is None:
            return E.UNKNOWN_MEMBER_ID
        if current != member_id:
            return E.FENCED_INSTANCE_ID
        return E.NONE
    return E.NONE if member_id in g.members else E.UNKNOWN_MEMBER_ID


def _member_list(g: Group) -> tuple[JoinMember, ...]:
    proto = g.protocol
    return tuple(JoinMember(m.member_id, m.instance_id, m.metadata(proto)) for m in g.members.values())


def _remove_member(g: Group, m: Member, out: Out) -> None:
    """Drop a current member: cancel its session timer; a parked JoinGroup is answered 25 (Kafka does this so
    a still-alive new member retries)."""
    _cancel_hb(g, m, out)
    token = g.take_join(m)
    if token is not None:
        out.responses.append((token, JoinGroupResponse(E.UNKNOWN_MEMBER_ID)))
    g.remove(m.member_id)


def prepare_rebalance(g: Group, now: int, cfg: GroupConfig, out: Out, cause: str = "join", reason: str = "") -> None:
    """Enter PreparingRebalance; ``cause`` (join, leave, session_expiry, metadata_change) is kept on the
    group for the shell's metrics, ``reason`` (the member and what it did, in words) and the generation
    it starts from for the shell's log line, as Kafka logs "Preparing to rebalance group ... (reason: ...)"."""
    if g.state == COMPLETING:
        for m in g.members.values():
            m.assignment = b""
            if m.sync_token is not None:
                out.responses.append((m.sync_token, SyncGroupResponse(E.REBALANCE_IN_PROGRESS)))
                m.sync_token = None
                _arm_hb(g, m, now + m.session_timeout, out)
    g.pending_sync.clear()
    _cancel_sync(g, out)
    g.rebalance_cause = cause
    g.rebalance_reason = reason or cause.replace("_", " ")
    g.rebalance_generation = g.generation
    if g.state == EMPTY:
        delay = cfg.initial_rebalance_delay_ms
        remaining = max(g.rebalance_timeout() - delay, 0)
        g.transition(PREPARING, now)
        # new_member_added is left as it is: like Kafka, a flag left over from an earlier initial
        # rebalance extends this one by one more delay.
        # Even with a delay of 0 the end of the initial join phase is a timer, as in Kafka: its expiry
        # is queued behind the requests already received, so members whose JoinGroups arrived
        # together with this one are in the first generation (0 ms timers repeat while newcomers come).
        g.initial_delay = delay
        g.initial_remaining = remaining
        _arm_join(g, now + delay, out)
        return
    g.transition(PREPARING, now)
    _arm_join(g, now + g.rebalance_timeout(), out)
    if g.all_joined():
        complete_join(g, now, cfg, out)


def _maybe_complete(g: Group, now: int, cfg: GroupConfig, out: Out) -> None:
    """Kafka's maybeCompleteJoinPhase: never in a group's initial rebalance (coming from Empty), whose
    end belongs to the initial-delay timer."""
    if g.state == PREPARING and g.prev_state != EMPTY and g.all_joined():
        complete_join(g, now, cfg, out)


def _maybe_prepare_or_complete(
    g: Group, now: int, cfg: GroupConfig, out: Out, cause: str = "join", reason: str = ""
) -> None:
    if g.state == PREPARING:
        _maybe_complete(g, now, cfg, out)
    else:
        prepare_rebalance(g, now, cfg, out, cause, reason)


def _after_timer_removal(g: Group, now: int, cfg: GroupConfig, out: Out, reason: str = "") -> None:
    """After a member left by a timer: rebalance; in PreparingRebalance complete as soon as everyone left is
    parked, also during the initial delay (Kafka 4.x)."""
    if g.state in (STABLE, COMPLETING):
        prepare_rebalance(g, now, cfg, out, "session_expiry", reason)
    elif g.state == PREPARING and g.all_joined():
        complete_join(g, now, cfg, out)


def complete_join(g: Group, now: int, cfg: GroupConfig, out: Out) -> None:
    _cancel_join(g, out)
    members = g.members
    for m in [m for m in members.values() if m.join_token is None and m.instance_id is None]:
        _cancel_hb(g, m, out)
        g.remove(m.member_id)
    if g.leader is not None and members[g.leader].join_token is None:
        for mid, m in members.items():
            if m.join_token is not None:
                g.leader = mid
                break
        else:
            # Nobody rejoined but static members remain: wait another rebalance timeout.
            _arm_join(g, now + g.rebalance_timeout(), out)
            return
    g.generation += 1
    g.pending_sync.clear()
    if not members:
        g.protocol = None
        g.leader = None
        g.transition(EMPTY, now)
        g.subscribed = g.compute_subscribed()
        out.records.append((GroupMetadataKey(g.group_id), g.metadata_value()))
        return
    g.protocol = g.select_protocol()
    g.subscribed = g.compute_subscribed()
    g.transition(COMPLETING, now)
    gen = g.generation
    ptype = g.protocol_type
    proto = g.protocol
    leader = g.leader or ""
    for mid, m in members.items():
        token = g.take_join(m)
        if token is not None:
            out.responses.append(
                (
                    token,
                    JoinGroupResponse(
                        E.NONE,
                        gen,
                        ptype,
                        proto,
                        leader,
                        False,
                        mid,
                        _member_list(g) if mid == leader else (),
                    ),
                )
            )
        _arm_hb(g, m, now + m.session_timeout, out)
        m.is_new = False
        g.pending_sync[mid] = None
    g.sync_deadline = now + g.rebalance_timeout()
    g.sync_generation = gen
    out.timers.append(TimerOp(("sync", g.group_id), g.sync_deadline))


# ---------------------------------------------------------------- JoinGroup


def _classic(state: ShardState, group_id: str) -> Group | None:
    """The classic group of this id; a group of another type is none of these rules' business (the
    shard sends its requests here only to be answered as for an unknown group). Inlined where a rebalance
    passes several times (join, sync, heartbeat, leave)."""
    g = state.groups.get(group_id)
    return g if g.__class__ is Group else None


def join_group(state: ShardState, req: JoinGroup, token: Token, now: int, cfg: GroupConfig) -> Result:
    out = Out()
    _join(state, req, token, now, cfg, out)
    return out.result()


def _accepts(g: Group, member_id: str, max_size: int) -> bool:
    """group.max.size (KIP-389) by state."""
    st = g.state
    if st in (EMPTY, DEAD):
        return True
    m = g.members.get(member_id)
    if st == PREPARING:
        return (m is not None and m.join_token is not None) or g.n_awaiting_join < max_size
    return m is not None or len(g.members) < max_size


def _join(state: ShardState, req: JoinGroup, token: Token, now: int, cfg: GroupConfig, out: Out) -> None:
    respond = out.responses.append
    gid = req.group_id
    if not gid:
        respond((token, JoinGroupResponse(E.INVALID_GROUP_ID, member_id=req.member_id)))
        return
    if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
        respond((token, JoinGroupResponse(E.INVALID_SESSION_TIMEOUT, member_id=req.member_id)))
        return
    g = state.groups.get(gid)
    if g.__class__ is not Group:  # none, or another type's: as unknown here (see _classic)
        g = None
    unknown = req.member_id == ""
    if g is None:
        if not unknown:
            respond((token, JoinGroupResponse(E.UNKNOWN_MEMBER_ID, member_id=req.member_id)))
            return
        g = Group(gid, now)
        state.groups[gid] = g
    if not _accepts(g, req.member_id, cfg.max_size):
        m = g.members.get(req.member_id)
        if m is not None:
            _remove_member(g, m, out)
        respond((token, JoinGroupResponse(E.GROUP_MAX_SIZE_REACHED)))
        return
    if unknown:
        _join_unknown(g, req, token, now, cfg, out)
    else:
        _join_known(g, req, token, now, cfg, out)


def _join_unknown(g: Group, req: JoinGroup, token: Token, now: int, cfg: GroupConfig, out: Out) -> None:
    if not g.supports(req.protocol_type, req.protocols):
        out.responses.append((token, JoinGroupResponse(E.INCONSISTENT_GROUP_PROTOCOL)))
        return
    instance = req.group_instance_id
    new_id = (instance if instance is not None else req.client_id) + "-" + _new_id_suffix(cfg)
    if instance is not None:
        old_id = g.static.get(instance)
        if old_id is not None:
            _replace_static(g, req, token, old_id, new_id, now, cfg, out)
        else:
            _add_and_rebalance(g, req, new_id, token, now, cfg, out)
        return
    if req.version >= 4:
        deadline = now + req.session_timeout_ms
        g.pending[new_id] = deadline
        out.timers.append(TimerOp(("pend", g.group_id, new_id), deadline))
        # every new member's first join: by position (a keyword call of a slotted class builds a dict)
        out.responses.append((token, JoinGroupResponse(E.MEMBER_ID_REQUIRED, -1, None, None, "", False, new_id)))
        return
    _add_and_rebalance(g, req, new_id, token, now, cfg, out)


def _join_known(g: Group, req: JoinGroup, token: Token, now: int, cfg: GroupConfig, out: Out) -> None:
    mid = req.member_id
    respond = out.responses.append
    if not g.supports(req.protocol_type, req.protocols):
        respond((token, JoinGroupResponse(E.INCONSISTENT_GROUP_PROTOCOL, member_id=mid)))
        return
    if mid in g.pending:
        if req.group_instance_id is not None:
            # Pending ids are never static; Kafka fails such a request with an internal error.
            respond((token, JoinGroupResponse(E.UNKNOWN_SERVER_ERROR)))
            return
        del g.pending[mid]
        out.timers.append(TimerOp(("pend", g.group_id, mid), None))
        _add_and_rebalance(g, req, mid, token, now, cfg, out)
        return
    err = validate_member(g, mid, req.group_instance_id)
    if err:
        respond((token, JoinGroupResponse(err, member_id=mid)))
        return
    m = g.members[mid]
    st = g.state
    if st == PREPARING:
        _update_member(g, m, req, token)
        _maybe_complete(g, now, cfg, out)
    elif st == COMPLETING:
        if m.protocols == req.protocols:
            # Same metadata (it probably lost the first answer): current generation's information again.
            respond((token, _current_info(g, mid, _member_list(g) if mid == g.leader else ())))
        else:
            _update_member(g, m, req, token)
            prepare_rebalance(
                g, now, cfg, out, "metadata_change", f"member {mid} rejoined with new metadata during {st}"
            )
    elif st == STABLE:
        if mid == g.leader or m.protocols != req.protocols:
            # A leader's JoinGroup forces a rebalance (e.g. the topics' metadata changed).
            _update_member(g, m, req, token)
            what = "the leader, rejoined (topic metadata changed)" if mid == g.leader else "rejoined with new metadata"
            prepare_rebalance(
                g,
                now,
                cfg,
                out,
                "metadata_change",
                f"member {mid}, {what}" if mid == g.leader else f"member {mid} {what}",
            )
        else:
            respond((token, _current_info(g, mid, ())))
    else:
        respond((token, JoinGroupResponse(E.UNKNOWN_MEMBER_ID, member_id=mid)))


def _current_info(g: Group, mid: str, members: tuple[JoinMember, ...]) -> JoinGroupResponse:
    return JoinGroupResponse(E.NONE, g.generation, g.protocol_type, g.protocol, g.leader or "", False, mid, members)


def _update_member(g: Group, m: Member, req: JoinGroup, token: Token) -> None:
    if m.protocols != req.protocols:
        g.set_protocols(m, req.protocols)
    m.rebalance_timeout = req.rebalance_timeout_ms
    m.session_timeout = req.session_timeout_ms
    # A JoinGroup already parked for this member is superseded and, as in Kafka, never answered.
    g.park_join(m, token, req.version)


def _add_and_rebalance(g: Group, req: JoinGroup, mid: str, token: Token, now: int, cfg: GroupConfig, out: Out) -> None:
    m = Member(
        mid,
        req.group_instance_id,
        req.client_id,
        req.client_host,
        req.rebalance_timeout_ms,
        req.session_timeout_ms,
        req.protocol_type,
        req.protocols,
    )
    m.is_new = True
    m.join_token = token
    m.join_version = req.version
    # A new member cannot heartbeat and its socket is muted: bound its wait (KAFKA-7610).
    _arm_hb(g, m, now + cfg.new_member_join_timeout_ms, out)
    if g.state == PREPARING and g.prev_state == EMPTY:
        g.new_member_added = True
    g.add(m)
    _maybe_prepare_or_complete(g, now, cfg, out, "join", f"member {m.member_id} joined")


def _replace_static(
    g: Group, req: JoinGroup, token: Token, old_id: str, new_id: str, now: int, cfg: GroupConfig, out: Out
) -> None:
    """A known group.instance.id joins with an empty member id: the restarted instance takes over the old
    member (its assignment and leadership) under a new id; requests parked under the old id are fenced."""
    m = g.members[old_id]
    previous_leader = g.leader or ""
    old_token = g.take_join(m)
    if old_token is not None:
        out.responses.append((old_token, JoinGroupResponse(E.FENCED_INSTANCE_ID, member_id=old_id)))
    if m.sync_token is not None:
        out.responses.append((m.sync_token, SyncGroupResponse(E.FENCED_INSTANCE_ID)))
        m.sync_token = None
    _cancel_hb(g, m, out)
    _rekey(g, m, new_id)
    _update_member(g, m, req, token)
    _arm_hb(g, m, now + m.session_timeout, out)
    st = g.state
    if st == STABLE:
        if g.select_protocol() == g.protocol:
            # No rebalance: persist the new id, then hand the member its current generation.
            out.records.append((GroupMetadataKey(g.group_id), g.metadata_value()))
            g.take_join(m)
            is_leader = g.leader == new_id
            if req.version >= 9:
                resp = JoinGroupResponse(
                    E.NONE,
                    g.generation,
                    g.protocol_type,
                    g.protocol,
                    g.leader or "",
                    is_leader,
                    new_id,
                    _member_list(g) if is_leader else (),
                )
            else:
                # The old leader id keeps a restarted leader from running the assignor: a Stable group
                # would not distribute its new assignment anyway.
                resp = JoinGroupResponse(
                    E.NONE, g.generation, g.protocol_type, g.protocol, previous_leader, False, new_id, ()
                )
            out.responses.append((token, resp))
            out.write_ref = StaticRejoinWrite(g.group_id, old_id, token, previous_leader)
        else:
            prepare_rebalance(
                g,
                now,
                cfg,
                out,
                "metadata_change",
                f"static member {req.group_instance_id} rejoined as {new_id} with new metadata",
            )
    elif st == COMPLETING:
        prepare_rebalance(
            g, now, cfg, out, "join", f"static member {req.group_instance_id} rejoined as {new_id} during {st}"
        )
    elif st == PREPARING:
        _maybe_complete(g, now, cfg, out)


def _rekey(g: Group, m: Member, new_id: str) -> None:
    old_id = m.member_id
    del g.members[old_id]
    m.member_id = new_id
    m.is_new = False  # Kafka builds a fresh member object here, which is not "new"
    g.members[new_id] = m
    if m.instance_id is not None:
        g.static[m.instance_id] = new_id
    if g.leader == old_id:
        g.leader = new_id


def _static_rejoin_failed(state: ShardState, ref: StaticRejoinWrite, error: int, out: Out) -> None:
    """The runtime has put the old member back; requests it held were fenced by the failed Result and are
    answered with the write's error by the runtime, so they are no longer parked. The rejoining member
    hears the error with the group's generation and its previous leader, as Kafka answers it."""
    err = E.group_write_error(error)
    g = state.groups.get(ref.group_id)
    m = g.members.get(ref.old_id) if g is not None else None
    if g is None or m is None:
        out.responses.append((ref.token, JoinGroupResponse(err)))
        return
    g.take_join(m)
    m.sync_token = None
    out.responses.append(
        (ref.token, JoinGroupResponse(err, g.generation, g.protocol_type, g.protocol, ref.previous_leader))
    )


# ---------------------------------------------------------------- SyncGroup


def _inconsistent(asked: str | None, have: str | None) -> bool:
    return asked is not None and have is not None and asked != have


def sync_group(state: ShardState, req: SyncGroup, token: Token, now: int, cfg: GroupConfig) -> Result:
    out = Out()
    respond = out.responses.append
    if req.version >= 5 and (req.protocol_type is None or req.protocol_name is None):
        # Kafka's API layer answers this before the coordinator sees the request.
        respond((token, SyncGroupResponse(E.INCONSISTENT_GROUP_PROTOCOL)))
        return out.result()
    if not req.group_id:
        respond((token, SyncGroupResponse(E.INVALID_GROUP_ID)))
        return out.result()
    g = state.groups.get(req.group_id)
    if g.__class__ is not Group:  # none, or another type's: as unknown here (see _classic)
        g = None
    if g is None:
        respond((token, SyncGroupResponse(E.UNKNOWN_MEMBER_ID)))
        return out.result()
    mid = req.member_id
    err = validate_member(g, mid, req.group_instance_id)
    if not err and req.generation_id != g.generation:
        err = E.ILLEGAL_GENERATION
    if not err and (_inconsistent(req.protocol_type, g.protocol_type) or _inconsistent(req.protocol_name, g.protocol)):
        err = E.INCONSISTENT_GROUP_PROTOCOL
    if err:
        respond((token, SyncGroupResponse(err)))
        return out.result()
    st = g.state
    m = g.members[mid]
    if st == COMPLETING:
        m.sync_token = token
        g.pending_sync.pop(mid, None)
        if not g.pending_sync:
            _cancel_sync(g, out)
        if mid == g.leader:
            _leader_sync(g, req, now, out)
    elif st == STABLE:
        g.pending_sync.pop(mid, None)
        if not g.pending_sync:
            _cancel_sync(g, out)
        respond((token, SyncGroupResponse(E.NONE, g.protocol_type, g.protocol, m.assignment)))
    elif st == PREPARING:
        respond((token, SyncGroupResponse(E.REBALANCE_IN_PROGRESS)))
    else:
        respond((token, SyncGroupResponse(E.UNKNOWN_MEMBER_ID)))
    return out.result()


def _leader_sync(g: Group, req: SyncGroup, now: int, out: Out) -> None:
    """The leader's assignment becomes the group's: written as GroupMetadata, and every parked SyncGroup is
    answered in this Result, i.e. once the record is durable. The group turns Stable in memory now; if the
    write fails the runtime restores it and ``on_write_failed`` starts a new rebalance."""
    members = g.members
    assignments = {a.member_id: a.assignment for a in req.assignments if a.member_id in members}
    out.records.append((GroupMetadataKey(g.group_id), g.metadata_value(assignments)))
    ptype, proto = g.protocol_type, g.protocol
    answered = []
    for mid, m in members.items():
        m.assignment = assignments.get(mid, b"")
        if m.sync_token is not None:
            out.responses.append((m.sync_token, SyncGroupResponse(E.NONE, ptype, proto, m.assignment)))
            answered.append(m.sync_token)
            m.sync_token = None
            _arm_hb(g, m, now + m.session_timeout, out)
    g.transition(STABLE, now)
    out.write_ref = SyncWrite(g.group_id, g.generation, tuple(answered))


def _sync_failed(state: ShardState, ref: SyncWrite, error: int, now: int, cfg: GroupConfig, out: Out) -> None:
    """Kafka's resetAndPropagateAssignmentWithError and a new rebalance: every SyncGroup the leader's
    answered hears the error, no member keeps an assignment, and the group rebalances (the runtime has
    put it back in CompletingRebalance, the syncs parked again)."""
    err = E.group_write_error(error)
    tokens = ref.tokens
    for token in tokens:
        out.responses.append((token, SyncGroupResponse(err)))
    g = state.groups.get(ref.group_id)
    if g is None or g.generation != ref.generation or g.state not in (COMPLETING, STABLE):
        return
    for m in g.members.values():
        m.assignment = b""
        if m.sync_token is not None and m.sync_token in tokens:
            m.sync_token = None
            _arm_hb(g, m, now + m.session_timeout, out)
    prepare_rebalance(g, now, cfg, out, "join", f"the assignment of generation {ref.generation} could not be written")


# ---------------------------------------------------------------- Heartbeat


def heartbeat(state: ShardState, req: Heartbeat, token: Token, now: int, cfg: GroupConfig) -> Result:
    if not req.group_id:
        return _one(token, HeartbeatResponse(E.INVALID_GROUP_ID))
    g = state.groups.get(req.group_id)
    if g.__class__ is not Group:  # none, or another type's: as unknown here (see _classic)
        g = None
    if g is None:
        return _one(token, HeartbeatResponse(E.UNKNOWN_MEMBER_ID))
    err = validate_member(g, req.member_id, req.group_instance_id)
    if err:
        return _one(token, HeartbeatResponse(err))
    if req.generation_id != g.generation:
        return _one(token, HeartbeatResponse(E.ILLEGAL_GENERATION))
    st = g.state
    if st == EMPTY:
        return _one(token, HeartbeatResponse(E.UNKNOWN_MEMBER_ID))
    m = g.members[req.member_id]
    deadline = now + m.session_timeout
    m.hb_deadline = deadline
    timer = (TimerOp(("hb", g.group_id, m.member_id), deadline),)
    code = E.REBALANCE_IN_PROGRESS if st == PREPARING else E.NONE
    return Result((), ((token, HeartbeatResponse(code)),), timer, None, False)  # by position: every heartbeat


def _one(token: Token, payload: Any) -> Result:
    return Result(responses=((token, payload),), replay=False)


# ---------------------------------------------------------------- LeaveGroup


def leave_group(state: ShardState, req: LeaveGroup, token: Token, now: int, cfg: GroupConfig) -> Result:
    """Batch leave (v3+) with per-member errors; v0-2 answers fold the member's error into the top level."""
    out = Out()
    top, results = _leave(state, req, now, cfg, out)
    if req.version < 3:
        code = top or (results[0].error if results else E.NONE)
        out.responses.append((token, LeaveGroupResponse(code)))
    else:
        out.responses.append((token, LeaveGroupResponse(top, tuple(results))))
    return out.result()


def _leave(state: ShardState, req: LeaveGroup, now: int, cfg: GroupConfig, out: Out) -> tuple[int, list[LeftMember]]:
    if not req.group_id:
        return E.INVALID_GROUP_ID, []
    g = state.groups.get(req.group_id)
    if g.__class__ is not Group:  # none, or another type's: as unknown here (see _classic)
        g = None
    if g is None:
        return E.NONE, [LeftMember(x.member_id, x.group_instance_id, E.UNKNOWN_MEMBER_ID) for x in req.members]
    results = []
    removed = False
    for x in req.members:
        mid = x.member_id
        if mid == "":
            # Administrative removal by group.instance.id.
            current = g.static.get(x.group_instance_id) if x.group_instance_id is not None else None
            if current is None:
                err = E.UNKNOWN_MEMBER_ID
            else:
                _remove_member(g, g.members[current], out)
                removed = True
                err = E.NONE
        elif mid in g.pending:
            del g.pending[mid]
            out.timers.append(TimerOp(("pend", g.group_id, mid), None))
            removed = True  # counts as a member leaving, as in Kafka (a Stable group rebalances)
            err = E.NONE
        else:
            err = validate_member(g, mid, x.group_instance_id)
            if not err:
                _remove_member(g, g.members[mid], out)
                removed = True
        results.append(LeftMember(mid, x.group_instance_id, err))
    if removed:
        if g.state in (STABLE, COMPLETING):
            gone = [r.member_id for r in results if not r.error]
            who = f"member {gone[0]}" if len(gone) == 1 else "members " + ", ".join(gone)
            prepare_rebalance(g, now, cfg, out, "leave", f"{who} left the group (LeaveGroup)")
        else:
            _maybe_complete(g, now, cfg, out)
    return E.NONE, results


# ---------------------------------------------------------------- timers firing


def on_group_timer(state: ShardState, key: tuple[Any, ...], now: int, cfg: GroupConfig) -> Result:
    kind = key[0]
    g = _classic(state, key[1])
    if g is None:
        return EMPTY_RESULT
    out = Out()
    if kind == "hb":
        m = g.members.get(key[2])
        if m is None or m.hb_deadline is None or now < m.hb_deadline:
            return EMPTY_RESULT
        silent = now - (m.hb_deadline - m.session_timeout)
        m.hb_deadline = None
        if not m.is_new and (m.join_token is not None or m.sync_token is not None):
            # Members waiting for a phase to end satisfy their heartbeats (the phase's own timer bounds it).
            return EMPTY_RESULT
        _remove_member(g, m, out)
        _after_timer_removal(
            g,
            now,
            cfg,
            out,
            f"member {m.member_id} session expired: no heartbeat for {silent} ms"
            f" (session.timeout.ms={m.session_timeout})",
        )
    elif kind == "pend":
        deadline = g.pending.get(key[2])
        if deadline is None or now < deadline:
            return EMPTY_RESULT
        del g.pending[key[2]]
        if g.state == PREPARING and g.all_joined():
            complete_join(g, now, cfg, out)
    elif kind == "join":
        if g.join_deadline is None or now < g.join_deadline or g.state != PREPARING:
            return EMPTY_RESULT
        g.join_deadline = None
        if g.initial_delay is not None and g.new_member_added and g.initial_remaining != 0:
            g.new_member_added = False
            delay = min(cfg.initial_rebalance_delay_ms, g.initial_remaining)
            g.initial_remaining = max(g.initial_remaining - g.initial_delay, 0)
            g.initial_delay = delay
            _arm_join(g, now + delay, out)
        else:
            complete_join(g, now, cfg, out)
    elif kind == "sync":
        if g.sync_deadline is None or now < g.sync_deadline:
            return EMPTY_RESULT
        g.sync_deadline = None
        if g.generation != g.sync_generation or g.state not in (COMPLETING, STABLE) or not g.pending_sync:
            return EMPTY_RESULT
        missing = list(g.pending_sync)
        for mid in missing:
            m = g.members.get(mid)
            if m is not None:
                _cancel_hb(g, m, out)
            g.remove(mid)
        prepare_rebalance(
            g,
            now,
            cfg,
            out,
            "session_expiry",
            "members " + ", ".join(sorted(missing)) + " did not send SyncGroup in time",
        )
    else:
        return EMPTY_RESULT
    return out.result()


# ---------------------------------------------------------------- read-only views


def describe_group(state: ShardState, group_id: str) -> GroupDescription:
    g = state.groups.get(group_id)
    if g is None:
        return GroupDescription(E.NONE, group_id, DEAD, "", "")
    ptype = g.protocol_type or ""
    if g.state == STABLE:
        proto = g.protocol or ""
        members = tuple(
            DescribedMember(m.member_id, m.instance_id, m.client_id, m.client_host, m.metadata(proto), m.assignment)
            for m in g.members.values()
        )
        return GroupDescription(E.NONE, group_id, STABLE, ptype, proto, members)
    members = tuple(
        DescribedMember(m.member_id, m.instance_id, m.client_id, m.client_host, b"", b"") for m in g.members.values()
    )
    return GroupDescription(E.NONE, group_id, g.state, ptype, "", members)


def on_write_failed(state: ShardState, write_ref: WriteRef, error: int, now: int, cfg: GroupConfig) -> Result:
    """A classic group's metadata record was not written: the answers of a leader's sync or a static
    member's replacement carry the error, as Kafka's do (the runtime has restored the group)."""
    out = Out()
    if isinstance(write_ref, SyncWrite):
        _sync_failed(state, write_ref, error, now, cfg, out)
    elif isinstance(write_ref, StaticRejoinWrite):
        _static_rejoin_failed(state, write_ref, error, out)
    return out.result()
