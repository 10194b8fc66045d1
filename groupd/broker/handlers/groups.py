"""Group APIs: kio entities of every version <-> the core's version-free requests and payloads."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any, cast

from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_groups.v6.request import DescribeGroupsRequest
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v9.request import JoinGroupRequest
from kio.schema.leave_group.v2.request import LeaveGroupRequest as LeaveGroupRequestV2
from kio.schema.leave_group.v5.request import LeaveGroupRequest
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.sync_group.v5.request import SyncGroupRequest
from kio.static.protocol import Entity

from groupd.broker.dispatch import Answer, RequestContext, Response, answered_later, waits
from groupd.broker.handlers.operations import NOT_REQUESTED
from groupd.broker.security.access import AUTHORIZATION_ERRORS, DELETE, DESCRIBE, GROUP, READ
from groupd.coordinator import errors as E
from groupd.coordinator import shard as core
from groupd.coordinator.api import (
    Heartbeat,
    JoinGroup,
    JoinGroupResponse,
    LeaveGroup,
    LeavingMember,
    Protocol,
    SyncAssignment,
    SyncGroup,
)
from groupd.coordinator.service import CoordinatorError
from groupd.protocol import codec

if TYPE_CHECKING:
    from groupd.broker.app import Broker


def join_group(broker: Broker, ctx: RequestContext, req: JoinGroupRequest) -> Answer:
    session = codec.millis(req.session_timeout)
    rebalance = codec.millis(req.rebalance_timeout) if ctx.version >= 1 else session  # KAFKA-8653
    # by position, in JoinGroup's field order: a keyword call of a slotted class builds a dict of its
    # arguments first, once per request (bench/HISTORY.md, session 21)
    request = JoinGroup(
        req.group_id,
        req.member_id,
        req.group_instance_id if ctx.version >= 5 else None,  # group_instance_id
        session,  # session_timeout_ms
        rebalance,  # rebalance_timeout_ms
        # a held member keeps these for its whole life, and across members they repeat: one shared copy
        # each (100,000 three-member groups: about 60 MiB less)
        sys.intern(req.protocol_type),
        tuple([Protocol(sys.intern(p.name), p.metadata) for p in req.protocols]),
        sys.intern(ctx.client_id),
        sys.intern("/" + ctx.client_host),  # client_host
        ctx.version,
        req.reason if ctx.version >= 8 else None,
    )

    def finish(payload: Any, error: BaseException | None) -> Response:
        if error is not None:
            payload = JoinGroupResponse(_refusal(error), member_id=req.member_id)
        members = [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
            for m in payload.members
        ]
        protocol_name = payload.protocol_name
        if ctx.version < 7 and protocol_name is None:
            protocol_name = ""  # non-nullable before v7
        return ctx.encoded(
            throttle_time=0,
            error_code=payload.error,
            generation_id=payload.generation_id,
            protocol_type=payload.protocol_type,
            protocol_name=protocol_name,
            leader=payload.leader,
            skip_assignment=payload.skip_assignment,
            member_id=payload.member_id,
            members=members,
        )

    if broker.access.authorizer is not None and not broker.access.allowed(ctx, READ, GROUP, req.group_id):
        return finish(None, CoordinatorError(AUTHORIZATION_ERRORS[GROUP]))  # KafkaApis: READ on the group
    return answered_later(broker, req.group_id, core.join_group, request, finish)


def _refusal(error: BaseException) -> int:
    """The error code of a coordinator's refusal; anything else is a bug, left to close the connection."""
    if isinstance(error, CoordinatorError):
        return error.code
    raise error


def sync_group(broker: Broker, ctx: RequestContext, req: SyncGroupRequest) -> Answer:
    v5 = ctx.version >= 5
    request = SyncGroup(  # by position, in SyncGroup's field order (as JoinGroup above)
        req.group_id,
        req.generation_id,
        req.member_id,
        req.group_instance_id if ctx.version >= 3 else None,
        req.protocol_type if v5 else None,
        req.protocol_name if v5 else None,
        tuple([SyncAssignment(a.member_id, a.assignment) for a in req.assignments]),
        ctx.version,
    )

    def finish(payload: Any, error: BaseException | None) -> Response:
        if error is not None:
            return ctx.encoded(
                throttle_time=0, error_code=_refusal(error), protocol_type=None, protocol_name=None, assignment=b""
            )
        return ctx.encoded(
            throttle_time=0,
            error_code=payload.error,
            protocol_type=payload.protocol_type,
            protocol_name=payload.protocol_name,
            assignment=payload.assignment,
        )

    if broker.access.authorizer is not None and not broker.access.allowed(ctx, READ, GROUP, req.group_id):
        return finish(None, CoordinatorError(AUTHORIZATION_ERRORS[GROUP]))  # KafkaApis: READ on the group
    return answered_later(broker, req.group_id, core.sync_group, request, finish)


def heartbeat(broker: Broker, ctx: RequestContext, req: HeartbeatRequest) -> Answer:
    request = Heartbeat(
        req.group_id, req.generation_id, req.member_id, req.group_instance_id if ctx.version >= 3 else None, ctx.version
    )

    def finish(payload: Any, error: BaseException | None) -> Response:
        if error is None:
            code = payload.error
        else:
            # Kafka answers NONE to heartbeats while the partition loads (spec §2).
            code = _refusal(error)
            code = E.NONE if code == E.COORDINATOR_LOAD_IN_PROGRESS else code
        if broker.metrics is not None:
            broker.metrics.heartbeat()
        # a member heartbeats every few seconds and nearly always hears NONE: one answer, written
        # once, per (version, error)
        answer = _heartbeat_answers.get((ctx.version, code))
        if answer is None:
            answer = _heartbeat_answers[ctx.version, code] = ctx.encoded(throttle_time=0, error_code=code)
        return answer

    # no write: usually answered before the coordinator returns, unless earlier answers of the shard
    # still wait for their flush round (they leave first)
    if broker.access.authorizer is not None and not broker.access.allowed(ctx, READ, GROUP, req.group_id):
        return finish(None, CoordinatorError(AUTHORIZATION_ERRORS[GROUP]))  # KafkaApis: READ on the group
    return answered_later(broker, req.group_id, core.heartbeat, request, finish)


_heartbeat_answers: dict[tuple[int, int], Any] = {}  # bounded: versions x error codes


def leave_group(broker: Broker, ctx: RequestContext, req: LeaveGroupRequest) -> Answer:
    if ctx.version >= 3:
        members = tuple(
            LeavingMember(m.member_id, m.group_instance_id, m.reason if ctx.version >= 5 else None) for m in req.members
        )
    else:
        members = (LeavingMember(cast(LeaveGroupRequestV2, req).member_id, None),)
    request = LeaveGroup(group_id=req.group_id, members=members, version=ctx.version)

    def finish(payload: Any, error: BaseException | None) -> Response:
        if error is not None:
            return ctx.respond(throttle_time=0, error_code=_refusal(error), members=())
        member_cls = ctx.nested("MemberResponse") if ctx.version >= 3 else None
        members_out = ()
        if member_cls is not None:
            members_out = tuple(
                codec.make(member_cls, member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error)
                for m in payload.members
            )
        return ctx.respond(throttle_time=0, error_code=payload.error, members=members_out)

    if broker.access.authorizer is not None and not broker.access.allowed(ctx, READ, GROUP, req.group_id):
        return finish(None, CoordinatorError(AUTHORIZATION_ERRORS[GROUP]))  # KafkaApis: READ on the group
    return answered_later(broker, req.group_id, core.leave_group, request, finish)


def describe_groups(broker: Broker, ctx: RequestContext, req: DescribeGroupsRequest) -> Answer:
    group_cls = ctx.nested("DescribedGroup")
    member_cls = ctx.nested("DescribedGroupMember")
    asked = ctx.version >= 3 and req.include_authorized_operations  # the operations allowed on each group (v3+)
    out = []
    for group_id in req.groups:
        try:
            if (refused := broker.access.refused(ctx, DESCRIBE, GROUP, group_id)) is not None:  # KafkaApis
                raise refused
            d = broker.coordinator.call_sync(group_id, core.describe_group, group_id)
        except CoordinatorError as exc:
            out.append(
                codec.make(
                    group_cls,
                    error_code=exc.code,
                    group_id=group_id,
                    group_state="",
                    protocol_type="",
                    protocol_data="",
                    members=(),
                    authorized_operations=NOT_REQUESTED,
                )
            )
            continue
        members = tuple(
            codec.make(
                member_cls,
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata,
                member_assignment=m.assignment,
            )
            for m in d.members
        )
        error, message = d.error, None
        if ctx.version >= 6 and d.state == "Dead":  # Kafka 4's coordinator: v6 says so (KIP-1043)
            error, message = E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
        out.append(
            codec.make(
                group_cls,
                error_code=error,
                group_id=d.group_id,
                group_state=d.state,
                protocol_type=d.protocol_type,
                protocol_data=d.protocol,
                members=members,
                authorized_operations=(
                    broker.access.asked_operations(ctx, GROUP, d.group_id, asked) if error == E.NONE else NOT_REQUESTED
                ),
                error_message=message,
            )
        )
    return ctx.respond(throttle_time=0, groups=tuple(out))


def list_groups(broker: Broker, ctx: RequestContext, req: ListGroupsRequest) -> Answer:
    states = frozenset(req.states_filter) if ctx.version >= 4 and req.states_filter else None
    types = frozenset(req.types_filter) if ctx.version >= 5 and req.types_filter else None
    listed_cls = ctx.nested("ListedGroup")
    coordinator = broker.coordinator
    error = E.NONE
    groups = []
    # KafkaApis: DESCRIBE on the cluster lists every group, else only those the principal may DESCRIBE
    every = broker.access.cluster(ctx, DESCRIBE, log_denied=False)
    for shard in coordinator.shards.values():
        if shard.failed:
            continue  # not this broker's to answer for (NOT_COORDINATOR), as Kafka skips such partitions
        if not shard.loaded:
            error = E.COORDINATOR_LOAD_IN_PROGRESS
            continue
        for g in core.list_groups(shard.state, states, types):
            if not every and not broker.access.allowed(ctx, DESCRIBE, GROUP, g.group_id, log_denied=False):
                continue
            groups.append(
                codec.make(
                    listed_cls,
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    group_state=g.state,
                    group_type=g.group_type,
                )
            )
    return ctx.respond(throttle_time=0, error_code=error, groups=tuple(groups))


@waits
async def delete_groups(broker: Broker, ctx: RequestContext, req: DeleteGroupsRequest) -> Response:
    result_cls = ctx.nested("DeletableGroupResult")

    async def one(group_id: str) -> Entity:
        try:
            if (refused := broker.access.refused(ctx, DELETE, GROUP, group_id)) is not None:  # KafkaApis
                raise refused
            share_error = await broker.share_groups.delete_state(group_id)  # a share group's state goes first
            if share_error:
                return codec.make(result_cls, group_id=group_id, error_code=share_error)
            payload = await broker.coordinator.call(
                group_id, lambda state, gid, token, now, cfg: core.delete_group(state, gid, token, now), group_id
            )
            code = payload.error
        except CoordinatorError as exc:
            code = exc.code
        return codec.make(result_cls, group_id=group_id, error_code=code)

    results = await asyncio.gather(*(one(g) for g in req.groups_names))
    return ctx.respond(throttle_time=0, results=tuple(results))
