"""The share groups' offsets admin APIs (KIP-932): DescribeShareGroupOffsets (90, v0-1),
AlterShareGroupOffsets (91, v0) and DeleteShareGroupOffsets (92, v0), as Kafka's GroupCoordinatorService
answers them. The group's share partitions come from its shard (coordinator/share/); their start offsets
and delivery-complete counts from the share coordinator (``broker.share_persister``); lag = the
partition's end offset - start offset - delivery-complete count (v1; -1 when either is unknown)."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.alter_share_group_offsets.v0.request import AlterShareGroupOffsetsRequest
from kio.schema.delete_share_group_offsets.v0.request import DeleteShareGroupOffsetsRequest
from kio.schema.describe_share_group_offsets.v1.request import DescribeShareGroupOffsetsRequest
from kio.static.protocol import Entity

from groupd.broker.dispatch import RequestContext, Response, waits
from groupd.broker.handlers.share_groups import DISABLED
from groupd.broker.security.access import DELETE, DESCRIBE, GROUP, NOTHING, READ, TOPIC
from groupd.coordinator import errors as E
from groupd.coordinator import group_types
from groupd.coordinator.service import CoordinatorError
from groupd.coordinator.share.api import AlterShareOffsets, DeleteShareOffsets
from groupd.coordinator.share_state.persister import SharePartitionKey
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from groupd.broker.app import Broker

UNINITIALIZED = -1
TOPIC_REFUSED = ErrorCode.topic_authorization_failed
TOPIC_REFUSED_MESSAGE = "Topic authorization failed."  # Kafka's Errors.TOPIC_AUTHORIZATION_FAILED.message


@waits
async def describe_share_group_offsets(
    broker: Broker, ctx: RequestContext, req: DescribeShareGroupOffsetsRequest
) -> Response:
    group_cls, topic_cls, part_cls = (
        ctx.nested(n)
        for n in (
            "DescribeShareGroupOffsetsResponseGroup",
            "DescribeShareGroupOffsetsResponseTopic",
            "DescribeShareGroupOffsetsResponsePartition",
        )
    )

    def part(
        index: int,
        start: int = UNINITIALIZED,
        epoch: int = -1,
        lag: int = -1,
        error: int = 0,
        message: str | None = None,
    ) -> Entity:
        return codec.make(
            part_cls,
            partition_index=index,
            start_offset=start,
            leader_epoch=epoch,
            lag=lag,
            error_code=error,
            error_message=message,
        )

    async def one(group: Any) -> Entity:
        gid = group.group_id
        if not broker.share_groups.enabled:
            return codec.make(
                group_cls, group_id=gid, topics=(), error_code=E.UNSUPPORTED_VERSION, error_message=DISABLED
            )
        wanted: list[tuple[str, uuid.UUID | None, tuple[int, ...]]] = []
        unseen: frozenset[str] = NOTHING
        try:
            if (denied := broker.access.refused(ctx, DESCRIBE, GROUP, gid)) is not None:  # KafkaApis
                raise denied
            if group.topics is None:  # every initialized partition
                names = {t.topic_id: name for name, t in broker.topics.by_name.items()}
                initialized = broker.coordinator.call_sync(gid, group_types.share_initialized_partitions, gid)
                wanted = [(names[t], t, tuple(sorted(ps))) for t, ps in initialized.items() if t in names]
                # KafkaApis: the topics the principal may not DESCRIBE are left out of the answer
                hidden = broker.access.refused_names(ctx, DESCRIBE, TOPIC, (n for n, _t, _ps in wanted))
                wanted = [w for w in wanted if w[0] not in hidden]
            else:
                unseen = broker.access.refused_names(ctx, DESCRIBE, TOPIC, (t.topic_name for t in group.topics))
                for t in group.topics:
                    if t.topic_name in unseen:
                        continue
                    topic = broker.topics.get(t.topic_name)
                    wanted.append((t.topic_name, topic.topic_id if topic is not None else None, tuple(t.partitions)))
        except CoordinatorError as exc:
            return codec.make(group_cls, group_id=gid, topics=(), error_code=exc.code, error_message=None)
        topics = []
        known = [(n, t, ps) for n, t, ps in wanted if t is not None]
        for name, tid, parts in known:
            summaries = await asyncio.gather(
                *(broker.share_persister.read_summary(SharePartitionKey(gid, tid, p), 0) for p in parts)
            )
            rows = []
            for p, s in zip(parts, summaries, strict=True):
                if s.error_code or s.start_offset == UNINITIALIZED or s.delivery_complete_count == UNINITIALIZED:
                    ok = s.error_code == 0
                    rows.append(part(p, s.start_offset if ok else UNINITIALIZED, s.leader_epoch if ok else -1))
                    continue
                lg = broker.partitions.get(name, p)
                if lg is None:
                    rows.append(
                        codec.make(
                            part_cls,
                            partition_index=p,
                            start_offset=0,
                            leader_epoch=0,
                            lag=-1,
                            error_code=E.UNKNOWN_TOPIC_OR_PARTITION,
                            error_message=None,
                        )
                    )
                    continue
                lag = lg.high_watermark - s.start_offset - s.delivery_complete_count
                rows.append(part(p, s.start_offset, s.leader_epoch, lag))
            topics.append(codec.make(topic_cls, topic_name=name, topic_id=tid, partitions=tuple(rows)))
        # topics the metadata does not know: start offset -1 (no offsets), as Kafka answers
        for name, maybe_id, parts in wanted:
            if maybe_id is None:
                topics.append(
                    codec.make(
                        topic_cls, topic_name=name, topic_id=codec.ZERO_UUID, partitions=tuple(part(p) for p in parts)
                    )
                )
        # KafkaApis.describeShareGroupOffsetsForGroup: a named topic the principal may not DESCRIBE, last
        for t in () if group.topics is None else group.topics:
            if t.topic_name in unseen:
                hidden_rows = tuple(
                    part(p, UNINITIALIZED, 0, -1, TOPIC_REFUSED, TOPIC_REFUSED_MESSAGE) for p in t.partitions
                )
                topics.append(
                    codec.make(topic_cls, topic_name=t.topic_name, topic_id=codec.ZERO_UUID, partitions=hidden_rows)
                )
        return codec.make(group_cls, group_id=gid, topics=tuple(topics), error_code=0, error_message=None)

    groups = await asyncio.gather(*(one(g) for g in req.groups))
    return ctx.respond(throttle_time=0, groups=tuple(groups))


_PARTITION_MESSAGES = {  # an altered partition's error message: Kafka's ApiError(error).message
    E.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    TOPIC_REFUSED: TOPIC_REFUSED_MESSAGE,
}


def _topic_id(broker: Broker, name: str) -> uuid.UUID | None:
    topic = broker.topics.get(name)
    return topic.topic_id if topic is not None else None


@waits
async def alter_share_group_offsets(
    broker: Broker, ctx: RequestContext, req: AlterShareGroupOffsetsRequest
) -> Response:
    topic_cls, part_cls = (
        ctx.nested("AlterShareGroupOffsetsResponseTopic"),
        ctx.nested("AlterShareGroupOffsetsResponsePartition"),
    )

    def refused(code: int, message: str | None = None) -> Response:
        return ctx.respond(throttle_time=0, error_code=code, error_message=message, responses=())

    if not broker.share_groups.enabled:
        return refused(E.UNSUPPORTED_VERSION, DISABLED)
    if (denied := broker.access.refused(ctx, READ, GROUP, req.group_id)) is not None:  # KafkaApis: READ the group
        return refused(denied.code)
    # KafkaApis: READ on each topic, else its partitions answer TOPIC_AUTHORIZATION_FAILED (first in the answer)
    unread = broker.access.refused_names(ctx, READ, TOPIC, (t.topic_name for t in req.topics))
    request = AlterShareOffsets(
        req.group_id,
        tuple(
            (t.topic_name, tuple((p.partition_index, p.start_offset) for p in t.partitions))
            for t in req.topics
            if t.topic_name not in unread
        ),
    )
    try:
        plan = await broker.coordinator.call(req.group_id, group_types.share_alter_offsets, request)
    except CoordinatorError as exc:
        return refused(exc.code)
    if plan.error:
        return refused(plan.error, plan.message)
    if plan.offsets:
        error = await broker.share_groups.initialize_at(req.group_id, plan.state_epoch, plan.offsets)
        if error:
            return refused(error)
    unread_rows = [
        (t.topic_name, _topic_id(broker, t.topic_name), tuple((p.partition_index, TOPIC_REFUSED) for p in t.partitions))
        for t in req.topics
        if t.topic_name in unread
    ]
    responses = tuple(
        codec.make(
            topic_cls,
            topic_name=name,
            topic_id=tid,
            partitions=tuple(
                codec.make(part_cls, partition_index=p, error_code=code, error_message=_PARTITION_MESSAGES.get(code))
                for p, code in parts
            ),
        )
        for name, tid, parts in [*unread_rows, *plan.results]
    )
    return ctx.respond(throttle_time=0, error_code=0, error_message=None, responses=responses)


@waits
async def delete_share_group_offsets(
    broker: Broker, ctx: RequestContext, req: DeleteShareGroupOffsetsRequest
) -> Response:
    topic_cls = ctx.nested("DeleteShareGroupOffsetsResponseTopic")

    def refused(code: int, message: str | None = None) -> Response:
        return ctx.respond(throttle_time=0, error_code=code, error_message=message, responses=())

    if not broker.share_groups.enabled:
        return refused(E.UNSUPPORTED_VERSION, DISABLED)
    if not req.group_id:
        return refused(E.INVALID_GROUP_ID)
    if (denied := broker.access.refused(ctx, DELETE, GROUP, req.group_id)) is not None:  # KafkaApis: DELETE the group
        return refused(denied.code)
    # KafkaApis: READ on each topic, else TOPIC_AUTHORIZATION_FAILED for it (first in the answer)
    unread = broker.access.refused_names(ctx, READ, TOPIC, (t.topic_name for t in req.topics))
    try:
        plan = await broker.coordinator.call(
            req.group_id,
            group_types.share_delete_offsets,
            DeleteShareOffsets(req.group_id, tuple(t.topic_name for t in req.topics if t.topic_name not in unread)),
        )
    except CoordinatorError as exc:
        return refused(exc.code)
    if plan.error:
        return refused(plan.error, plan.message)
    responses = [
        codec.make(topic_cls, topic_name=t.topic_name, topic_id=None, error_code=TOPIC_REFUSED,
                   error_message=TOPIC_REFUSED_MESSAGE)  # fmt: skip
        for t in req.topics
        if t.topic_name in unread
    ] + [
        codec.make(topic_cls, topic_name=n, topic_id=None, error_code=code, error_message=msg)
        for n, code, msg in plan.refused
    ]
    done = []
    for name, tid, parts in plan.to_delete:
        code = await broker.share_groups.delete_partitions(req.group_id, ((tid, parts),))
        responses.append(codec.make(topic_cls, topic_name=name, topic_id=tid, error_code=code, error_message=None))
        if not code:
            done.append(tid)
    if done:
        try:
            await broker.coordinator.call(
                req.group_id, group_types.share_state_deleted, (req.group_id, frozenset(done))
            )
        except CoordinatorError as exc:
            return refused(exc.code)
    return ctx.respond(throttle_time=0, error_code=0, error_message=None, responses=tuple(responses))
