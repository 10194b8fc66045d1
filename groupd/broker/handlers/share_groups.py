"""Share groups (KIP-932): ShareGroupHeartbeat (76) and ShareGroupDescribe (77), kio entities <-> the
core's version-free requests (coordinator/share/). Both answer UNSUPPORTED_VERSION unless the
``share.version`` feature is enabled (KafkaApis.isShareGroupProtocolEnabled)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest

from groupd.broker.dispatch import Answer, RequestContext, Response, answered_later
from groupd.broker.handlers.consumer_groups import (
    TOPICS_REFUSED,
    described_assignment,
    heartbeat_answer,
    heartbeat_refused,
    refused_group,
    subscription_refused,
    topics_refused,
)
from groupd.broker.handlers.operations import NOT_REQUESTED
from groupd.broker.security.access import DESCRIBE, GROUP, READ
from groupd.coordinator import errors as E
from groupd.coordinator import group_types
from groupd.coordinator.service import CoordinatorError
from groupd.coordinator.share.api import ShareGroupHeartbeat
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from groupd.broker.app import Broker

DISABLED = "Share groups are not enabled (the share.version feature is 0)."


def share_group_heartbeat(broker: Broker, ctx: RequestContext, req: ShareGroupHeartbeatRequest) -> Answer:
    if not broker.share_groups.enabled:
        return heartbeat_refused(ctx, E.UNSUPPORTED_VERSION, DISABLED)
    request = ShareGroupHeartbeat(
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=req.member_epoch,
        rack_id=req.rack_id,
        subscribed_topic_names=None if req.subscribed_topic_names is None else tuple(req.subscribed_topic_names),
        client_id=ctx.client_id,
        client_host="/" + ctx.client_host,
    )
    answer = heartbeat_answer(ctx)

    def finish(payload: Any, error: BaseException | None) -> Response:
        if error is None and payload.initialize is not None:
            broker.share_groups.initialize(payload.initialize)  # once the heartbeat's records are durable
        return answer(payload, error)

    if broker.access.authorizer is not None:
        if (refused := broker.access.refused(ctx, READ, GROUP, req.group_id)) is not None:  # KafkaApis
            return finish(None, refused)
        if subscription_refused(broker, ctx, req.subscribed_topic_names):
            return heartbeat_refused(ctx, ErrorCode.topic_authorization_failed)
    return answered_later(broker, req.group_id, group_types.share_group_heartbeat, request, finish)


def share_group_describe(broker: Broker, ctx: RequestContext, req: ShareGroupDescribeRequest) -> Answer:
    group_cls, member_cls = ctx.nested("DescribedGroup"), ctx.nested("Member")

    if not broker.share_groups.enabled:
        return ctx.respond(
            throttle_time=0,
            groups=tuple(refused_group(group_cls, g, E.UNSUPPORTED_VERSION, DISABLED) for g in req.group_ids),
        )
    asked = req.include_authorized_operations
    assignment = described_assignment(ctx)

    out = []
    for group_id in req.group_ids:
        try:
            if (refused := broker.access.refused(ctx, DESCRIBE, GROUP, group_id)) is not None:  # KafkaApis
                raise refused
            (d,) = broker.coordinator.call_sync(group_id, group_types.share_group_describe, [group_id])
        except CoordinatorError as exc:
            out.append(refused_group(group_cls, group_id, exc.code))
            continue
        if broker.access.authorizer is not None and topics_refused(broker, ctx, d.members, target=False):
            out.append(refused_group(group_cls, group_id, ErrorCode.topic_authorization_failed, TOPICS_REFUSED))
            continue
        members = tuple(
            codec.make(
                member_cls,
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                assignment=assignment(m.assignment),
            )
            for m in d.members
        )
        out.append(
            codec.make(
                group_cls,
                error_code=d.error,
                error_message=d.message,
                group_id=d.group_id,
                group_state=d.state if d.error == E.NONE else "",
                group_epoch=d.group_epoch,
                assignment_epoch=d.assignment_epoch,
                assignor_name=d.assignor_name,
                members=members,
                authorized_operations=(
                    broker.access.asked_operations(ctx, GROUP, d.group_id, asked)
                    if d.error == E.NONE
                    else NOT_REQUESTED
                ),
            )
        )
    return ctx.respond(throttle_time=0, groups=tuple(out))
