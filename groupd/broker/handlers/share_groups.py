"""Share groups (KIP-932): ShareGroupHeartbeat (76) and ShareGroupDescribe (77), kio entities <-> the
core's version-free requests (coordinator/share/). Both answer UNSUPPORTED_VERSION unless the
``share.version`` feature is enabled (KafkaApis.isShareGroupProtocolEnabled)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.static.protocol import Entity

from groupd.broker.dispatch import Answer, RequestContext, Response, answered_later
from groupd.broker.handlers.consumer_groups import (
    described_assignment,
    described_groups,
    heartbeat_answer,
    heartbeat_refused,
    refused_group,
    subscription_refused,
)
from groupd.broker.security.access import GROUP, READ
from groupd.coordinator import errors as E
from groupd.coordinator import group_types
from groupd.coordinator.share.api import DescribedShareGroup, DescribedShareMember, ShareGroupHeartbeat
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
    group_cls = ctx.nested("DescribedGroup")
    if not broker.share_groups.enabled:
        return ctx.respond(
            throttle_time=0,
            groups=tuple(refused_group(group_cls, g, E.UNSUPPORTED_VERSION, DISABLED) for g in req.group_ids),
        )
    member_cls = ctx.nested("Member")
    assignment = described_assignment(ctx)

    def describe(group_id: str) -> DescribedShareGroup:
        (d,) = broker.coordinator.call_sync(group_id, group_types.share_group_describe, [group_id])
        return d

    def member(m: DescribedShareMember) -> Entity:
        return codec.make(
            member_cls,
            member_id=m.member_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=m.subscribed_topic_names,
            assignment=assignment(m.assignment),
        )

    return described_groups(
        broker, ctx, req.group_ids, req.include_authorized_operations, describe, member, target=False
    )
