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
from groupd.broker.security.access import DELETE, DESCRIBE, GROUP, READ
from groupd.coordinator import errors as E
from groupd.coordinator import group_types
from groupd.coordinator.service import CoordinatorError
from groupd.coordinator.share.api import AlterShareOffsets, DeleteShareOffsets
from groupd.coordinator.share_state.persister import SharePartitionKey
from groupd.protocol import codec

if TYPE_CHECKING:
    from groupd.broker.app import Broker

UNINITIALIZED = -1


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

    def part(index: int, start: int = UNINITIALIZED, epoch: int = -1, lag: int = -1, error: int = 0) -> Entity:
        return codec.make(
            part_cls,
            partition_index=index,
            start_offset=start,
            leader_epoch=epoch,
            lag=lag,
            error_code=error,
            error_message=None,
        )

    async def one(group: Any) -> Entity:
        gid = group.group_id
        if not broker.share_groups.enabled:
            return codec.make(
                group_cls, group_id=gid, topics=(), error_code=E.UNSUPPORTED_VERSION, error_message=DISABLED
            )
        wanted: list[tuple[str, uuid.UUID | None, tuple[int, ...]]] = []
        try:
            if (denied := broker.access.refused(ctx, DESCRIBE, GROUP, gid)) is not None:  # KafkaApis
                raise denied
            if group.topics is None:  # every initialized partition
                names = {t.topic_id: name for name, t in broker.topics.by_name.items()}
                initialized = broker.coordinator.call_sync(gid, group_types.share_initialized_partitions, gid)
                wanted = [(names[t], t, tuple(sorted(ps))) for t, ps in initialized.items() if t in names]
            else:
                for t in group.topics:
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
        return codec.make(group_cls, group_id=gid, topics=tuple(topics), error_code=0, error_message=None)

    groups = await asyncio.gather(*(one(g) for g in req.groups))
    return ctx.respond(throttle_time=0, groups=tuple(groups))


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
    request = AlterShareOffsets(
        req.group_id,
        tuple((t.topic_name, tuple((p.partition_index, p.start_offset) for p in t.partitions)) for t in req.topics),
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
    responses = tuple(
        codec.make(
            topic_cls,
            topic_name=name,
            topic_id=tid,
            partitions=tuple(
                codec.make(
                    part_cls,
                    partition_index=p,
                    error_code=code,
                    error_message="This server does not host this topic-partition." if code else None,
                )
                for p, code in parts
            ),
        )
        for name, tid, parts in plan.results
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
    try:
        plan = await broker.coordinator.call(
            req.group_id,
            group_types.share_delete_offsets,
            DeleteShareOffsets(req.group_id, tuple(t.topic_name for t in req.topics)),
        )
    except CoordinatorError as exc:
        return refused(exc.code)
    if plan.error:
        return refused(plan.error, plan.message)
    responses = [
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
