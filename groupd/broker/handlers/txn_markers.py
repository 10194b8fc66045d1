"""WriteTxnMarkers: the markers a transaction coordinator on another node of the cluster sends to the
owner of a partition (docs/cluster.md), as Kafka's coordinator sends them to each partition's leader.

Each data partition this node leads gets its COMMIT/ABORT control batch, each ``__consumer_offsets``
partition its marker through the group coordinator (the producer's pending offsets applied or dropped);
the answer comes once all of them are durable. A partition this node does not lead is answered
NOT_LEADER_OR_FOLLOWER (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS for an offsets partition) and the
sender retries it. Only other brokers send it: CLUSTER_ACTION on the cluster, as KafkaApis asks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from kio.schema.write_txn_markers.v1.request import WritableTxnMarker, WriteTxnMarkersRequest

from groupd.broker.dispatch import RequestContext, Response, waits
from groupd.broker.security.access import CLUSTER_ACTION
from groupd.coordinator.runtime.runtime import CoordinatorError
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import OFFSETS_TOPIC
from groupd.storage.errors import StorageError

if TYPE_CHECKING:
    from groupd.broker.app import Broker

log = logging.getLogger("groupd.transactions")


@waits
async def write_txn_markers(broker: Broker, ctx: RequestContext, req: WriteTxnMarkersRequest) -> Response:
    allowed = broker.access.cluster(ctx, CLUSTER_ACTION)
    results = await asyncio.gather(*(_marker(broker, m) if allowed else _refused(m) for m in req.markers))
    part_cls, topic_cls, marker_cls = (
        ctx.nested(n)
        for n in ("WritableTxnMarkerPartitionResult", "WritableTxnMarkerTopicResult", "WritableTxnMarkerResult")
    )
    markers = []
    for m, errors in zip(req.markers, results, strict=True):
        topics = tuple(
            topic_cls(
                name=t.name,
                partitions=tuple(
                    part_cls(partition_index=p, error_code=errors[t.name, p]) for p in t.partition_indexes
                ),
            )
            for t in m.topics
        )
        markers.append(marker_cls(producer_id=m.producer_id, topics=topics))
    return ctx.respond(markers=tuple(markers))


async def _refused(m: WritableTxnMarker) -> dict[tuple[str, int], ErrorCode]:
    return {(t.name, p): ErrorCode.cluster_authorization_failed for t in m.topics for p in t.partition_indexes}


async def _marker(broker: Broker, m: WritableTxnMarker) -> dict[tuple[str, int], ErrorCode]:
    """Write one transaction's markers; each partition's error."""
    commit = bool(m.transaction_result)
    errors: dict[tuple[str, int], ErrorCode] = {}
    waits: dict[tuple[str, int], Awaitable[Any]] = {}
    for t in m.topics:
        for p in t.partition_indexes:
            tp = (str(t.name), int(p))
            if t.name == OFFSETS_TOPIC:
                waits[tp] = broker.coordinator.complete_transaction_in(tp[1], m.producer_id, m.producer_epoch, commit)
                continue
            topic = broker.topics.get(t.name)
            if topic is None or not 0 <= tp[1] < topic.partitions:
                errors[tp] = ErrorCode.unknown_topic_or_partition
            elif not broker.leads(*tp):
                errors[tp] = ErrorCode.not_leader_or_follower
            elif (lg := broker.partitions.write_marker(tp, m.producer_id, m.producer_epoch, commit)) is None:
                errors[tp] = ErrorCode.unknown_topic_or_partition
            else:
                waits[tp] = broker.partitions.committer.durable(lg)
    done = await asyncio.gather(*waits.values(), return_exceptions=True)
    for tp, outcome in zip(waits, done, strict=True):
        if isinstance(outcome, CoordinatorError):
            errors[tp] = ErrorCode(outcome.code)
        elif isinstance(outcome, StorageError):
            log.warning("transaction marker for %s-%d not written: %s", *tp, outcome)
            errors[tp] = ErrorCode.kafka_storage_error
        elif isinstance(outcome, BaseException):
            raise outcome
        else:
            errors[tp] = ErrorCode.none
    return errors
