"""The consumer group protocol (KIP-848): ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69),
kio entities of both versions <-> the core's version-free requests (coordinator/consumer/)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.static.protocol import Entity

from groupd.broker.dispatch import Answer, RequestContext, Response, answered_later
from groupd.broker.handlers.operations import NOT_REQUESTED
from groupd.broker.security.access import DESCRIBE, GROUP, READ, TOPIC
from groupd.coordinator import errors as E
from groupd.coordinator import group_types
from groupd.coordinator.consumer.api import ConsumerGroupHeartbeat, DescribedConsumerGroup, DescribedConsumerMember
from groupd.coordinator.service import CoordinatorError
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from groupd.broker.app import Broker
    from groupd.coordinator.share.api import DescribedShareGroup

TOPICS_REFUSED = "The group has described topic(s) that the client is not authorized to describe."  # Kafka's


def consumer_group_heartbeat(broker: Broker, ctx: RequestContext, req: ConsumerGroupHeartbeatRequest) -> Answer:
    owned = None
    if req.topic_partitions is not None:
        owned = tuple((tp.topic_id, tuple(tp.partitions)) for tp in req.topic_partitions if tp.topic_id is not None)
    request = ConsumerGroupHeartbeat(
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=req.member_epoch,
        instance_id=req.instance_id,
        rack_id=req.rack_id,
        rebalance_timeout_ms=codec.millis(req.rebalance_timeout),
        subscribed_topic_names=None if req.subscribed_topic_names is None else tuple(req.subscribed_topic_names),
        subscribed_topic_regex=req.subscribed_topic_regex if ctx.version >= 1 else None,
        server_assignor=req.server_assignor,
        owned=owned,
        client_id=ctx.client_id,
        client_host="/" + ctx.client_host,
        version=ctx.version,
        # an authorizer's: what a regex resolution this heartbeat schedules may keep (every heartbeat carries it:
        # the one that schedules need not name the regex)
        topic_filter=broker.access.describable_topics(ctx) if broker.access.authorizer is not None else None,
    )
    finish = heartbeat_answer(ctx)
    if broker.access.authorizer is not None:
        if (refused := broker.access.refused(ctx, READ, GROUP, req.group_id)) is not None:  # KafkaApis
            return finish(None, refused)
        if subscription_refused(broker, ctx, req.subscribed_topic_names):
            return heartbeat_refused(ctx, ErrorCode.topic_authorization_failed)
    return answered_later(broker, req.group_id, group_types.consumer_group_heartbeat, request, finish)


def subscription_refused(broker: Broker, ctx: RequestContext, names: Iterable[str] | None) -> bool:
    """Whether a heartbeat names a subscribed topic the principal may not DESCRIBE: KafkaApis'
    handleConsumerGroupHeartbeat and handleShareGroupHeartbeat then answer TOPIC_AUTHORIZATION_FAILED
    and nothing else (clients are not to learn of topics they may not describe)."""
    return names is not None and bool(broker.access.refused_names(ctx, DESCRIBE, TOPIC, names))


def topics_refused(broker: Broker, ctx: RequestContext, members: Iterable[Any], target: bool) -> bool:
    """Whether a described group's members' assignments (and target assignments, ``target``) name a
    topic the principal may not DESCRIBE: Kafka (handleConsumerGroupDescribe, handleShareGroupDescribe,
    with an authorizer only) then answers the group TOPIC_AUTHORIZATION_FAILED with no members."""
    names = {name for m in members for rows in ((m.assignment, m.target) if target else (m.assignment,))
             for _tid, name, _ps in rows}  # fmt: skip
    return bool(broker.access.refused_names(ctx, DESCRIBE, TOPIC, names))


def heartbeat_refused(ctx: RequestContext, code: int, message: str | None = None) -> Response:
    """A heartbeat's refusal (ConsumerGroupHeartbeat and ShareGroupHeartbeat have the same answer)."""
    return ctx.respond(throttle_time=0, error_code=code, error_message=message, member_id=None,
                       member_epoch=0, heartbeat_interval=0, assignment=None)


def heartbeat_answer(ctx: RequestContext) -> Callable[[Any, BaseException | None], Any]:
    """The ``finish`` of a heartbeat: the core's answer (or the coordinator's refusal) as the response."""
    assignment_cls = ctx.nested("Assignment")
    partitions_cls = ctx.nested("TopicPartitions")

    def finish(payload: Any, error: BaseException | None) -> Response:
        if error is not None:
            if not isinstance(error, CoordinatorError):
                raise error
            return heartbeat_refused(ctx, error.code)
        assignment = None
        if payload.assignment is not None:
            assignment = codec.make(
                assignment_cls,
                topic_partitions=tuple(
                    codec.make(partitions_cls, topic_id=t, partitions=ps) for t, ps in payload.assignment
                ),
            )
        return ctx.respond(
            throttle_time=0,
            error_code=payload.error,
            error_message=payload.message,
            member_id=payload.member_id,
            member_epoch=payload.member_epoch,
            heartbeat_interval=payload.heartbeat_interval_ms,
            assignment=assignment,
        )

    return finish


def described_assignment(ctx: RequestContext) -> Callable[[Any], Any]:
    """A describe answer's Assignment from ``(topic id, topic name, partitions)`` rows (Consumer- and
    ShareGroupDescribe have the same)."""
    assignment_cls, partitions_cls = ctx.nested("Assignment"), ctx.nested("TopicPartitions")

    def assignment(parts: Any) -> Entity:
        return codec.make(
            assignment_cls,
            topic_partitions=tuple(
                codec.make(partitions_cls, topic_id=t, topic_name=name, partitions=ps) for t, name, ps in parts
            ),
        )

    return assignment


def refused_group(group_cls: Any, group_id: str, code: int, message: str | None = None) -> Entity:
    """A described group's refusal: its id and error, every other field the schema's default (Consumer-
    and ShareGroupDescribe's DescribedGroup)."""
    return codec.make(group_cls, error_code=code, error_message=message, group_id=group_id, group_state="",
                      group_epoch=0, assignment_epoch=0, assignor_name="", members=(),
                      authorized_operations=NOT_REQUESTED)  # fmt: skip


def described_groups(
    broker: Broker,
    ctx: RequestContext,
    group_ids: Iterable[str],
    include_operations: bool,
    describe: Callable[[str], DescribedConsumerGroup | DescribedShareGroup],
    member: Callable[[Any], Entity],
    *,
    target: bool,
) -> Response:
    """Consumer- and ShareGroupDescribe, which Kafka answers alike: each group id needs DESCRIBE on the
    group (KafkaApis), is described by its type (``describe``; a CoordinatorError is the group's error),
    and with an authorizer is refused whole when its members' assignments (and target assignments,
    ``target``) name a topic the principal may not DESCRIBE; ``member`` writes one member."""
    group_cls = ctx.nested("DescribedGroup")
    out = []
    for group_id in group_ids:
        try:
            if (refused := broker.access.refused(ctx, DESCRIBE, GROUP, group_id)) is not None:
                raise refused
            d = describe(group_id)
        except CoordinatorError as exc:
            out.append(refused_group(group_cls, group_id, exc.code))
            continue
        if broker.access.authorizer is not None and topics_refused(broker, ctx, d.members, target=target):
            out.append(refused_group(group_cls, group_id, ErrorCode.topic_authorization_failed, TOPICS_REFUSED))
            continue
        described = d.error == E.NONE
        out.append(
            codec.make(
                group_cls,
                error_code=d.error,
                error_message=d.message,
                group_id=d.group_id,
                group_state=d.state if described else "",
                group_epoch=d.group_epoch,
                assignment_epoch=d.assignment_epoch,
                assignor_name=d.assignor_name,
                members=tuple(member(m) for m in d.members),
                authorized_operations=(
                    broker.access.asked_operations(ctx, GROUP, d.group_id, include_operations)
                    if described
                    else NOT_REQUESTED
                ),
            )
        )
    return ctx.respond(throttle_time=0, groups=tuple(out))


def consumer_group_describe(broker: Broker, ctx: RequestContext, req: ConsumerGroupDescribeRequest) -> Answer:
    member_cls = ctx.nested("Member")
    assignment = described_assignment(ctx)

    def describe(group_id: str) -> DescribedConsumerGroup:
        (d,) = broker.coordinator.call_sync(
            group_id, group_types.consumer_group_describe, [group_id], broker.coordinator.cfg
        )
        return d

    def member(m: DescribedConsumerMember) -> Entity:
        return codec.make(
            member_cls,
            member_id=m.member_id,
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=m.subscribed_topic_names,
            subscribed_topic_regex=m.subscribed_topic_regex,
            assignment=assignment(m.assignment),
            target_assignment=assignment(m.target),
            member_type=m.member_type,
        )

    return described_groups(
        broker, ctx, req.group_ids, req.include_authorized_operations, describe, member, target=True
    )
