"""ShareFetch and ShareAcknowledge (KIP-932), v1-2, with Kafka 4.3's checks in KafkaApis' order:
share groups enabled, group id, member id, v2's renew-only fetch, the share session, then per partition
unknown topic id / partition, the acknowledgements' validation, and the fetch.

The share-partitions and sessions are ``broker.share_partitions`` (broker/share/manager.py). With an
authorizer both need READ on the group (else GROUP_AUTHORIZATION_FAILED for the whole request) and READ on
each topic: a partition of a topic the principal may not read answers TOPIC_AUTHORIZATION_FAILED, an
acknowledgement after its batches were validated, a fetch before the partition is looked up.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from kio.schema.share_acknowledge.v2.request import ShareAcknowledgeRequest
from kio.schema.share_fetch.v2.request import ShareFetchRequest

from groupd.broker.dispatch import RequestContext, Response, waits
from groupd.broker.handlers.current_leader import CurrentLeaders
from groupd.broker.security.access import GROUP, NOTHING, READ, TOPIC
from groupd.broker.share.manager import NOT_LEADER_OR_FOLLOWER, PartResult
from groupd.broker.share.partition import GAP, RENEW, AckBatch
from groupd.broker.share.sessions import FINAL_EPOCH, SessionError
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from groupd.broker.app import Broker

log = logging.getLogger("groupd.share")

RECORD_LIMIT_MODE = 1  # ShareAcquireMode: 0 batch_optimized, 1 record_limit
TopicIdPartition = tuple[uuid.UUID, int]


def _enabled(broker: Broker) -> bool:
    """KafkaApis.isShareGroupProtocolEnabled: UNSUPPORTED_VERSION while the share.version feature is 0."""
    return bool(broker.share_groups.enabled)


def _member_id_valid(member_id: str | None) -> bool:
    """KafkaApis.isMemberIdValid: 1 to 36 characters."""
    return member_id is not None and 0 < len(member_id) <= 36


def _refused(broker: Broker, ctx: RequestContext, req: Any) -> Response | None:
    """The checks both APIs start with, in Kafka's order: share groups on, a group id, READ on the group, a
    valid member id."""
    if not _enabled(broker):
        return _top_error(ctx, ErrorCode.unsupported_version)
    if req.group_id is None:
        return _top_error(ctx, ErrorCode.invalid_request, "Invalid group id in the request.")
    if (denied := broker.access.refused(ctx, READ, GROUP, req.group_id)) is not None:  # KafkaApis: READ the group
        return _top_error(ctx, denied.code)
    if not _member_id_valid(req.member_id):
        return _top_error(ctx, ErrorCode.invalid_request, "Invalid member id in the request.")
    return None


def _top_error(ctx: RequestContext, code: int, message: str | None = None) -> Response:
    return ctx.respond(
        throttle_time=0,
        error_code=code,
        error_message=message,
        acquisition_lock_timeout=0,
        responses=(),
        node_endpoints=(),
    )


def _validate(batches: list[AckBatch], renew_supported: bool, is_renew: bool) -> bool:
    """KafkaApis.validateAcknowledgementBatches: any failure makes the partition's code INVALID_REQUEST."""
    prev_end = -1
    top = RENEW if renew_supported else 3
    for b in batches:
        if b.first_offset > b.last_offset or b.first_offset < prev_end or not b.types:
            return False
        if len(b.types) > 1 and b.last_offset - b.first_offset != len(b.types) - 1:
            return False
        if any(t < GAP or t > top for t in b.types):
            return False
        if RENEW in b.types and not is_renew:
            return False
        prev_end = b.last_offset
    return True


def _read_refused(broker: Broker, ctx: RequestContext, partitions: Iterable[TopicIdPartition]) -> frozenset[str]:
    """The named topics among the partitions' the principal may not READ (KafkaApis: filterByAuthorized(READ,
    TOPIC) over the request's partitions and the share session's)."""
    if broker.access.authorizer is None:
        return NOTHING
    return broker.access.refused_names(ctx, READ, TOPIC, {_topic_name(broker, tid) for tid, _p in partitions})


def _topic_name(broker: Broker, topic_id: uuid.UUID | None) -> str | None:
    topic = broker.listed_topic_by_id(topic_id) if topic_id is not None else None
    return None if topic is None else topic.name


def _topic_id(topic: Any) -> uuid.UUID:
    """A requested topic's id; kio reads the zero id as None, which the share partitions look up as it came."""
    return cast(uuid.UUID, topic.topic_id)


def _acks_of(topics: Any) -> dict[TopicIdPartition, list[AckBatch]]:
    acks: dict[TopicIdPartition, list[AckBatch]] = {}
    for t in topics:
        for p in t.partitions:
            if p.acknowledgement_batches:
                acks.setdefault((_topic_id(t), p.partition_index), []).extend(
                    AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
                    for b in p.acknowledgement_batches
                )
    return acks


async def _handle_acks(
    broker: Broker,
    group: str,
    member: str,
    acks: dict[TopicIdPartition, list[AckBatch]],
    version: int,
    is_renew: bool,
    denied: frozenset[str],
) -> dict[TopicIdPartition, tuple[int, str | None]]:
    """KafkaApis.handleAcknowledgements: validation, READ on the topic, unknown topic/partition, an empty
    acknowledgement (NONE), then the share-partitions."""
    results: dict[TopicIdPartition, tuple[int, str | None]] = {}
    wanted: dict[TopicIdPartition, list[AckBatch]] = {}
    for tp, batches in acks.items():
        if not _validate(batches, version >= 2, is_renew):
            results[tp] = (ErrorCode.invalid_request, None)
            continue
        topic = broker.listed_topic_by_id(tp[0]) if tp[0] is not None else None
        if topic is not None and topic.name in denied:
            results[tp] = (ErrorCode.topic_authorization_failed, None)
        elif topic is None:
            results[tp] = (ErrorCode.unknown_topic_or_partition, None)  # Kafka's topic id resolves to no name
        elif not 0 <= tp[1] < topic.partitions:
            results[tp] = (ErrorCode.unknown_topic_or_partition, None)
        elif not broker.leads(topic.name, tp[1]):
            results[tp] = (ErrorCode.not_leader_or_follower, None)  # in a cluster, another node's partition
        elif not batches:
            results[tp] = (ErrorCode.none, None)
        else:
            wanted[tp] = batches
    if wanted:
        results.update(await broker.share_partitions.acknowledge(group, member, wanted))
    return results


def _current_leader(leaders: CurrentLeaders, broker: Broker, code: int, tp: TopicIdPartition) -> dict[str, Any]:
    """NOT_LEADER_OR_FOLLOWER carries the current leader and its endpoint (KIP-951), in a cluster the holder
    of the partition's lease as this node knows it; any other answer the unknown leader (-1, -1)."""
    topic = broker.listed_topic_by_id(tp[0]) if code == NOT_LEADER_OR_FOLLOWER and tp[0] is not None else None
    return {"current_leader": leaders.of(topic.name if topic is not None else None, tp[1])}


@waits
async def share_fetch(broker: Broker, ctx: RequestContext, req: ShareFetchRequest) -> Response:
    refused = _refused(broker, ctx, req)
    if refused is not None:
        return refused
    group, member, epoch = (
        cast(str, req.group_id),
        cast(str, req.member_id),
        req.share_session_epoch,
    )  # checked by _refused
    is_renew = ctx.version >= 2 and req.is_renew_ack
    max_wait = codec.millis(req.max_wait)
    if is_renew and (req.max_bytes or req.min_bytes or req.max_records or max_wait):
        return _top_error(
            ctx,
            ErrorCode.invalid_request,
            "maxBytes, minBytes, maxRecords and maxWaitMs must be set to 0 if isRenewAck is true.",
        )
    manager = broker.share_partitions
    acks = _acks_of(req.topics)
    wanted: list[TopicIdPartition] = [(_topic_id(t), p.partition_index) for t in req.topics for p in t.partitions]
    forgotten: list[TopicIdPartition] = [(_topic_id(t), p) for t in req.forgotten_topics_data for p in t.partitions]
    names = {tp: _topic_name(broker, tp[0]) for tp in wanted}
    try:
        context = manager.sessions.new_context(
            group, member, epoch, wanted, forgotten, bool(acks), ctx.connection_id, names
        )
    except SessionError as exc:
        if exc.code == ErrorCode.share_session_limit_reached and max_wait > 0:
            await broker.partitions.wait_for_data([], max_wait / 1000)  # Kafka's idle timer: answered after MaxWaitMs
        return _top_error(ctx, exc.code, str(exc))
    denied = _read_refused(broker, ctx, [*context.partitions, *wanted, *acks])
    ack_results: dict[TopicIdPartition, tuple[int, str | None]] = {}
    if acks:
        ack_results = await _handle_acks(broker, group, member, acks, ctx.version, is_renew, denied)
    fetched: dict[TopicIdPartition, PartResult] = {}
    if not context.final and not is_renew:
        to_fetch = []
        session = context.session
        for tp in context.partitions:
            topic = broker.listed_topic_by_id(tp[0]) if tp[0] is not None else None
            if context.incremental and session is not None and session.names.get(tp) is None:
                # ShareSessionContext: a session partition whose topic id resolved to no name when it joined
                fetched[tp] = PartResult(ErrorCode.unknown_topic_id)
            elif topic is not None and topic.name in denied:
                fetched[tp] = PartResult(ErrorCode.topic_authorization_failed)
            elif topic is None or not 0 <= tp[1] < topic.partitions:
                fetched[tp] = PartResult(ErrorCode.unknown_topic_or_partition)  # not in the metadata
            elif not broker.leads(topic.name, tp[1]):
                fetched[tp] = PartResult(ErrorCode.not_leader_or_follower)  # in a cluster, another node's partition
            else:
                to_fetch.append((tp[0], topic.name, tp[1]))
        if to_fetch:
            fetched.update(
                await manager.fetch(
                    group,
                    member,
                    to_fetch,
                    max_wait,
                    req.min_bytes,
                    req.max_bytes,
                    req.max_records,
                    req.batch_size,
                    ctx.version >= 2 and req.share_acquire_mode == RECORD_LIMIT_MODE,
                    epoch,
                )
            )
    session = context.session
    if context.incremental and session is not None:
        fetched = {tp: r for tp, r in fetched.items() if session.must_respond(tp, bool(r.records), r.error)}
    response = _fetch_response(broker, ctx, fetched, ack_results, manager.lock_duration_ms(group))
    if epoch == FINAL_EPOCH and session is not None:
        manager.sessions.remove(session.key)
        await manager.release_session(group, member, list(session.partitions))
    return response


def _fetch_response(
    broker: Broker,
    ctx: RequestContext,
    fetched: dict[TopicIdPartition, PartResult],
    acks: dict[TopicIdPartition, tuple[int, str | None]],
    lock_ms: int,
) -> Response:
    part_cls = ctx.nested("PartitionData")
    acquired_cls = ctx.nested("AcquiredRecords")
    by_topic: dict[Any, list[Any]] = {}
    leaders = CurrentLeaders(broker, ctx, itself_unknown=True)
    for tp in list(fetched) + [tp for tp in acks if tp not in fetched]:
        r = fetched.get(tp, PartResult())
        ack_code, ack_message = acks.get(tp, (0, None))
        leader = _current_leader(leaders, broker, r.error, tp)
        by_topic.setdefault(tp[0], []).append(
            codec.make(
                part_cls,
                partition_index=tp[1],
                error_code=r.error,
                error_message=r.message,
                acknowledge_error_code=ack_code,
                acknowledge_error_message=ack_message,
                records=r.records,
                acquired_records=tuple(
                    codec.make(
                        acquired_cls,
                        first_offset=a.first_offset,
                        last_offset=a.last_offset,
                        delivery_count=a.delivery_count,
                    )
                    for a in r.acquired
                ),
                **leader,
            )
        )
    topic_cls = ctx.nested("ShareFetchableTopicResponse")
    topics = tuple(codec.make(topic_cls, topic_id=t, partitions=tuple(ps)) for t, ps in by_topic.items())
    return ctx.respond(
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        acquisition_lock_timeout=lock_ms,
        responses=topics,
        node_endpoints=leaders.endpoints(),
    )


@waits
async def share_acknowledge(broker: Broker, ctx: RequestContext, req: ShareAcknowledgeRequest) -> Response:
    refused = _refused(broker, ctx, req)
    if refused is not None:
        return refused
    group, member, epoch = (
        cast(str, req.group_id),
        cast(str, req.member_id),
        req.share_session_epoch,
    )  # checked by _refused
    manager = broker.share_partitions
    try:
        session = manager.sessions.acknowledge_update(group, member, epoch)
    except SessionError as exc:
        return _top_error(ctx, exc.code, str(exc))
    is_renew = ctx.version >= 2 and req.is_renew_ack
    acks: dict[TopicIdPartition, list[AckBatch]] = {}
    for t in req.topics:
        for p in t.partitions:
            acks.setdefault((_topic_id(t), p.partition_index), []).extend(
                AckBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types)) for b in p.acknowledgement_batches
            )
    denied = _read_refused(broker, ctx, acks)
    results = await _handle_acks(broker, group, member, acks, ctx.version, is_renew, denied)
    if epoch == FINAL_EPOCH:
        manager.sessions.remove(session.key)
        await manager.release_session(group, member, list(session.partitions))
    part_cls = ctx.nested("PartitionData")
    rows: dict[Any, list[Any]] = {}
    leaders = CurrentLeaders(broker, ctx, itself_unknown=True)
    for tp, (code, message) in results.items():
        leader = _current_leader(leaders, broker, code, tp)
        rows.setdefault(tp[0], []).append(
            codec.make(part_cls, partition_index=tp[1], error_code=code, error_message=message, **leader)
        )
    topic_cls = ctx.nested("ShareAcknowledgeTopicResponse")
    topics = tuple(codec.make(topic_cls, topic_id=t, partitions=tuple(ps)) for t, ps in rows.items())
    return ctx.respond(
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        acquisition_lock_timeout=manager.lock_duration_ms(group),
        responses=topics,
        node_endpoints=leaders.endpoints(),
    )
