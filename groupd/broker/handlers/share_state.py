"""InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState and
ReadShareGroupStateSummary: the share coordinator's inter-broker RPCs (KIP-932), kio entities <->
``coordinator/share_state/service.py``.

In Kafka a broker's share partitions reach the share coordinator through these RPCs; here they call it
in-process (``broker.share_persister``), and the RPCs serve other tools and tests, answering as Kafka's
ShareCoordinatorService does: a request with no topics, a topic with no partitions, or an empty group
id gets an empty response; otherwise each partition is one key, run on its own shard, with its own
error. Kafka gates them with CLUSTER_ACTION on the cluster; groupd has no authorizer, and Kafka without
one allows every operation, so nothing is refused here. Kafka lists them in ApiVersions (the broker
listener's APIs), and so does groupd.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from groupd.broker.dispatch import RequestContext, Response, waits
from groupd.broker.security.access import CLUSTER_ACTION, CLUSTER_DENIED
from groupd.coordinator.share_state.persister import SharePartitionKey, StateBatch
from groupd.protocol.codec import ZERO_UUID
from groupd.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from groupd.broker.app import Broker

Row = tuple[uuid.UUID | None, dict[str, Any]]


def _keyed(req: Any) -> list[tuple[Any, Any, SharePartitionKey]] | None:
    """(topic entry, partition entry, key) for every partition asked; None when Kafka answers nothing."""
    if not req.topics or any(not t.partitions for t in req.topics) or not req.group_id:
        return None
    return [
        (t, p, SharePartitionKey(req.group_id, t.topic_id or ZERO_UUID, p.partition))
        for t in req.topics for p in t.partitions
    ]


# what every partition answers when the principal may not CLUSTER_ACTION (KafkaApis' authorizeClusterOperation:
# the share state APIs are the brokers' own); make() keeps the fields each response has
_CLUSTER_REFUSED = {
    "error_code": ErrorCode.cluster_authorization_failed, "error_message": CLUSTER_DENIED, "state_epoch": -1,
    "start_offset": -1, "leader_epoch": -1, "state_batches": (), "delivery_complete_count": -1,
}


def _guarded(
    broker: Broker, ctx: RequestContext, call: Callable[[Any, Any, SharePartitionKey], Awaitable[dict[str, Any]]]
) -> Callable[[Any, Any, SharePartitionKey], Awaitable[dict[str, Any]]]:
    if broker.access.cluster(ctx, CLUSTER_ACTION):
        return call

    async def refused(_t: Any, _p: Any, _key: SharePartitionKey) -> dict[str, Any]:
        return _CLUSTER_REFUSED

    return refused


async def _answer(
    ctx: RequestContext, req: Any, call: Callable[[Any, Any, SharePartitionKey], Awaitable[dict[str, Any]]],
    topic_entity: str, partition_entity: str,
) -> Response:
    keyed = _keyed(req)
    if keyed is None:
        return ctx.respond(results=())
    answers = await asyncio.gather(*(call(t, p, key) for t, p, key in keyed))
    # one result per (topic, partition), as Kafka's map of futures keeps it
    rows: dict[tuple[uuid.UUID | None, int], dict[str, Any]] = {}
    for (t, p, _key), fields in zip(keyed, answers, strict=True):
        rows[(t.topic_id, p.partition)] = {"partition": p.partition, **fields}
    return ctx.respond(
        results=ctx.by_topic(
            topic_entity, partition_entity, ((tid, f) for (tid, _), f in rows.items()), key_field="topic_id"
        )
    )


@waits
async def initialize_share_group_state(broker: Broker, ctx: RequestContext, req: Any) -> Response:
    async def call(_t: Any, p: Any, key: SharePartitionKey) -> dict[str, Any]:
        a = await broker.share_coordinator.initialize_state(key, p.state_epoch, p.start_offset)
        return {"error_code": a.error_code, "error_message": a.error_message}

    return await _answer(ctx, req, _guarded(broker, ctx, call), "InitializeStateResult", "PartitionResult")


@waits
async def read_share_group_state(broker: Broker, ctx: RequestContext, req: Any) -> Response:
    batch_cls = ctx.nested("StateBatch")

    async def call(_t: Any, p: Any, key: SharePartitionKey) -> dict[str, Any]:
        r = await broker.share_coordinator.read_state(key, p.leader_epoch)
        batches = tuple(
            batch_cls(
                first_offset=b.first_offset,
                last_offset=b.last_offset,
                delivery_state=b.delivery_state,
                delivery_count=b.delivery_count,
            )
            for b in r.batches
        )
        return {
            "error_code": r.error_code,
            "error_message": r.error_message,
            "state_epoch": r.state_epoch,
            "start_offset": r.start_offset,
            "state_batches": batches,
        }

    return await _answer(ctx, req, _guarded(broker, ctx, call), "ReadStateResult", "PartitionResult")


@waits
async def write_share_group_state(broker: Broker, ctx: RequestContext, req: Any) -> Response:
    async def call(_t: Any, p: Any, key: SharePartitionKey) -> dict[str, Any]:
        batches = tuple(
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches
        )
        count = getattr(p, "delivery_complete_count", -1)  # v1+ (KIP-1226)
        a = await broker.share_coordinator.write_state(
            key, p.state_epoch, p.leader_epoch, p.start_offset, count, batches
        )
        return {"error_code": a.error_code, "error_message": a.error_message}

    return await _answer(ctx, req, _guarded(broker, ctx, call), "WriteStateResult", "PartitionResult")


@waits
async def delete_share_group_state(broker: Broker, ctx: RequestContext, req: Any) -> Response:
    async def call(_t: Any, _p: Any, key: SharePartitionKey) -> dict[str, Any]:
        a = await broker.share_coordinator.delete_state(key)
        return {"error_code": a.error_code, "error_message": a.error_message}

    return await _answer(ctx, req, _guarded(broker, ctx, call), "DeleteStateResult", "PartitionResult")


@waits
async def read_share_group_state_summary(broker: Broker, ctx: RequestContext, req: Any) -> Response:
    async def call(_t: Any, p: Any, key: SharePartitionKey) -> dict[str, Any]:
        r = await broker.share_coordinator.read_state_summary(key, p.leader_epoch)
        return {
            "error_code": r.error_code,
            "error_message": r.error_message,
            "state_epoch": r.state_epoch,
            "leader_epoch": r.leader_epoch,
            "start_offset": r.start_offset,
            "delivery_complete_count": r.delivery_complete_count,
        }  # v1+ (KIP-1226)

    return await _answer(ctx, req, _guarded(broker, ctx, call), "ReadStateSummaryResult", "PartitionResult")
