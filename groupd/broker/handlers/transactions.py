"""InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and
ListTransactions: kio entities <-> the transaction coordinator (``coordinator/transactions/service.py``)."""

from __future__ import annotations

import datetime
import re
from typing import TYPE_CHECKING, Any, cast

from kio.schema.add_offsets_to_txn.v4.request import AddOffsetsToTxnRequest
from kio.schema.add_partitions_to_txn.v3.request import (
    AddPartitionsToTxnRequest as AddPartitionsToTxnRequestV3,
)
from kio.schema.add_partitions_to_txn.v5.request import AddPartitionsToTxnRequest
from kio.schema.describe_producers.v0.request import DescribeProducersRequest
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.end_txn.v4.request import EndTxnRequest
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.list_transactions.v2.request import ListTransactionsRequest

from groupd.broker.dispatch import Answer, RequestContext, Response, waits
from groupd.broker.security.access import (
    CLUSTER_ACTION,
    DESCRIBE,
    GROUP,
    IDEMPOTENT_WRITE,
    NOTHING,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
)
from groupd.clock import wall_ms
from groupd.coordinator.transactions import rules as T
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import INTERNAL_TOPICS, OFFSETS_TOPIC

if TYPE_CHECKING:
    from groupd.broker.app import Broker


def _fenced(error: ErrorCode, version: int, since: int) -> ErrorCode:
    """PRODUCER_FENCED exists from these versions on (KIP-588); older ones hear INVALID_PRODUCER_EPOCH,
    as Kafka's responses map it (aiokafka, which speaks v0, knows only the latter)."""
    return ErrorCode.invalid_producer_epoch if error == ErrorCode.producer_fenced and version < since else error


@waits
async def init_producer_id(broker: Broker, ctx: RequestContext, req: InitProducerIdRequest) -> Response:
    tid = req.transactional_id
    if (refused := _producer_refused(broker, ctx, tid)) is not None:
        return ctx.respond(throttle_time=0, error_code=refused, producer_id=-1, producer_epoch=-1)
    if tid is None:  # an idempotent producer: a fresh id, or its own epoch bumped (KIP-360)
        pid, epoch = (req.producer_id, req.producer_epoch) if ctx.version >= 3 else (-1, -1)
        if pid >= 0 and 0 <= epoch < T.EPOCH_MAX - 1:
            return ctx.respond(throttle_time=0, error_code=ErrorCode.none, producer_id=pid, producer_epoch=epoch + 1)
        return ctx.respond(
            throttle_time=0, error_code=ErrorCode.none, producer_id=broker.producers.allocate(), producer_epoch=0
        )
    pid, epoch = (req.producer_id, req.producer_epoch) if ctx.version >= 3 else (-1, -1)
    expected = (pid, epoch) if pid >= 0 or epoch >= 0 else None
    timeout = round(req.transaction_timeout.total_seconds() * 1000)
    error, pid, epoch = await broker.transactions.init_producer_id(tid, timeout, expected)
    return ctx.respond(
        throttle_time=0, error_code=_fenced(error, ctx.version, 4), producer_id=pid, producer_epoch=epoch
    )


def _producer_refused(broker: Broker, ctx: RequestContext, tid: str | None) -> ErrorCode | None:
    """KafkaApis.handleInitProducerIdRequest: WRITE on the transactional id; without one, IDEMPOTENT_WRITE on
    the cluster or WRITE on some topic (authorizeByResourceType)."""
    access = broker.access
    if tid is not None:
        return (
            None
            if access.allowed(ctx, WRITE, TRANSACTIONAL_ID, tid)
            else ErrorCode.transactional_id_authorization_failed
        )
    if access.cluster(ctx, IDEMPOTENT_WRITE, log_denied=False) or access.any_of_type(ctx, WRITE, TOPIC):
        return None
    return ErrorCode.cluster_authorization_failed


def _partition_errors(
    broker: Broker, topics: Any, denied: frozenset[str] = NOTHING, internal: bool = False
) -> tuple[list[T.TopicPartition], dict[T.TopicPartition, ErrorCode]]:
    """The requested partitions, and Kafka's errors when any is refused or unknown: TOPIC_AUTHORIZATION_FAILED
    for ``denied`` topics, UNKNOWN_TOPIC_OR_PARTITION for unknown ones and OPERATION_NOT_ATTEMPTED for the
    rest (nothing is added). ``internal``: the coordinators' topics are known too (Kafka's metadata cache
    holds them), as a group coordinator's verification of a TxnOffsetCommit names ``__consumer_offsets``."""
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    failed = {}
    for name, p in wanted:
        if name in denied:
            failed[name, p] = ErrorCode.topic_authorization_failed
        elif not 0 <= p < _partition_count(broker, name, internal):
            failed[name, p] = ErrorCode.unknown_topic_or_partition
    if not failed:
        return wanted, {}
    return wanted, {tp: failed.get(tp, ErrorCode.operation_not_attempted) for tp in wanted}


def _partition_count(broker: Broker, name: str, internal: bool) -> int:
    """How many partitions ``name`` has (0: unknown)."""
    topic = broker.topics.get(name)
    if topic is not None:
        return topic.partitions
    coordinators = broker.internal_topics.get(name) if internal else None
    return coordinators.partitions if coordinators is not None else 0


def _txn_topics_refused(broker: Broker, ctx: RequestContext, topics: Any) -> frozenset[str]:
    """KafkaApis: a client's AddPartitionsToTxn needs WRITE on each topic, and may never add an internal one."""
    if not broker.access.enabled:
        return NOTHING
    names = {t.name for t in topics}
    internal = frozenset(n for n in names if n in INTERNAL_TOPICS)
    return internal | broker.access.refused_names(ctx, WRITE, TOPIC, names - internal)


def _results(
    ctx: RequestContext, errors: dict[T.TopicPartition, ErrorCode], topic_entity: str = "AddPartitionsToTxnTopicResult"
) -> tuple:
    part_cls = ctx.nested("AddPartitionsToTxnPartitionResult")
    topic_cls = ctx.nested(topic_entity)
    grouped: dict[str, list[Any]] = {}
    for (name, p), err in errors.items():
        grouped.setdefault(name, []).append(part_cls(partition_index=p, partition_error_code=err))
    return tuple(topic_cls(name=name, results_by_partition=tuple(parts)) for name, parts in grouped.items())


@waits
async def add_partitions_to_txn(broker: Broker, ctx: RequestContext, req: AddPartitionsToTxnRequest) -> Response:
    if ctx.version <= 3:
        old = cast(AddPartitionsToTxnRequestV3, req)
        if not broker.access.allowed(ctx, WRITE, TRANSACTIONAL_ID, old.v3_and_below_transactional_id):
            refused = ErrorCode.transactional_id_authorization_failed
            asked: list[T.TopicPartition] = [(t.name, p) for t in old.v3_and_below_topics for p in t.partitions]
            return ctx.respond(
                throttle_time=0, results_by_topic_v3_and_below=_results(ctx, dict.fromkeys(asked, refused))
            )
        denied = _txn_topics_refused(broker, ctx, old.v3_and_below_topics)
        wanted, errors = _partition_errors(broker, old.v3_and_below_topics, denied)
        if not errors:
            error = await broker.transactions.add_partitions(
                old.v3_and_below_transactional_id, old.v3_and_below_producer_id, old.v3_and_below_producer_epoch, wanted
            )
            errors = dict.fromkeys(wanted, _fenced(error, ctx.version, 2))
        return ctx.respond(throttle_time=0, results_by_topic_v3_and_below=_results(ctx, errors))
    # v4+: the brokers' batched form (KIP-890), several transactions, each may only verify: CLUSTER_ACTION
    if not broker.access.cluster(ctx, CLUSTER_ACTION):
        return ctx.respond(
            throttle_time=0, error_code=ErrorCode.cluster_authorization_failed, results_by_transaction=()
        )
    results = []
    result_cls = ctx.nested("AddPartitionsToTxnResult")
    for txn in req.transactions:
        wanted, errors = _partition_errors(broker, txn.topics, internal=True)
        if not errors:
            if txn.verify_only:
                errors = broker.transactions.verify_partitions(
                    txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted
                )
            else:
                error = await broker.transactions.add_partitions(
                    txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted
                )
                errors = dict.fromkeys(wanted, error)
        results.append(result_cls(transactional_id=txn.transactional_id, topic_results=_results(ctx, errors)))
    return ctx.respond(throttle_time=0, error_code=ErrorCode.none, results_by_transaction=tuple(results))


@waits
async def add_offsets_to_txn(broker: Broker, ctx: RequestContext, req: AddOffsetsToTxnRequest) -> Response:
    # KafkaApis: WRITE on the transactional id, then READ on the group
    refused = broker.access.refused(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id) or broker.access.refused(
        ctx, READ, GROUP, req.group_id
    )
    if refused is not None:
        return ctx.respond(throttle_time=0, error_code=refused.code)
    partition = broker.coordinator.partition_for(req.group_id)
    broker.internal_topics[OFFSETS_TOPIC].exists(create=True)
    error = await broker.transactions.add_partitions(
        req.transactional_id, req.producer_id, req.producer_epoch, [(OFFSETS_TOPIC, partition)], groups=[req.group_id]
    )
    return ctx.respond(throttle_time=0, error_code=_fenced(error, ctx.version, 2))


@waits
async def end_txn(broker: Broker, ctx: RequestContext, req: EndTxnRequest) -> Response:
    if (refused := broker.access.refused(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id)) is not None:
        return ctx.respond(throttle_time=0, error_code=refused.code)  # KafkaApis: WRITE on the transactional id
    error = await broker.transactions.end_txn(req.transactional_id, req.producer_id, req.producer_epoch, req.committed)
    return ctx.respond(throttle_time=0, error_code=_fenced(error, ctx.version, 2))


def _datetime(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def describe_transactions(broker: Broker, ctx: RequestContext, req: DescribeTransactionsRequest) -> Answer:
    state_cls = ctx.nested("TransactionState")
    topic_cls = ctx.nested("TopicData")
    states = []
    for tid in req.transactional_ids:
        # KafkaApis: DESCRIBE on the transactional id
        denied = bool(tid) and not broker.access.allowed(ctx, DESCRIBE, TRANSACTIONAL_ID, tid)
        txn = broker.transactions.describe(tid) if tid and not denied else None
        if txn is None or txn.state == T.DEAD:
            error = (
                ErrorCode.transactional_id_authorization_failed
                if denied
                else ErrorCode.invalid_request
                if not tid
                else ErrorCode.transactional_id_not_found
            )
            states.append(
                state_cls(
                    error_code=error,
                    transactional_id=tid,
                    transaction_state="",
                    transaction_timeout=datetime.timedelta(0),
                    transaction_start_time=_datetime(-1),
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=(),
                )
            )
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(txn.partitions):
            by_topic.setdefault(topic, []).append(p)
        states.append(
            state_cls(
                error_code=ErrorCode.none,
                transactional_id=tid,
                transaction_state=txn.state_name,
                transaction_timeout=datetime.timedelta(milliseconds=txn.timeout_ms),
                transaction_start_time=_datetime(txn.start_ms),
                producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch,
                topics=tuple(topic_cls(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
            )
        )
    return ctx.respond(throttle_time=0, transaction_states=tuple(states))


def list_transactions(broker: Broker, ctx: RequestContext, req: ListTransactionsRequest) -> Answer:
    known = set(T.STATE_NAMES) - {"Dead"}
    wanted_states = set(req.state_filters)
    unknown = tuple(s for s in req.state_filters if s not in known)
    pids = set(req.producer_id_filters)
    min_age = req.duration_filter if ctx.version >= 1 else -1
    pattern = req.transactional_id_pattern if ctx.version >= 2 else None
    try:
        matcher = re.compile(pattern) if pattern else None
    except re.error:
        return ctx.respond(
            throttle_time=0,
            error_code=ErrorCode.invalid_regular_expression,
            unknown_state_filters=(),
            transaction_states=(),
        )
    now = wall_ms()
    state_cls = ctx.nested("TransactionState")
    rows = []
    for txn in broker.transactions.all():
        if txn.state == T.DEAD:
            continue
        if wanted_states and txn.state_name not in wanted_states:
            continue
        if pids and txn.producer_id not in pids:
            continue
        if min_age >= 0 and (txn.state != T.ONGOING or now - txn.start_ms < min_age):
            continue
        if matcher is not None and not matcher.fullmatch(txn.transactional_id):
            continue
        if not broker.access.allowed(ctx, DESCRIBE, TRANSACTIONAL_ID, txn.transactional_id, log_denied=False):
            continue  # KafkaApis lists only the transactional ids the principal may DESCRIBE
        rows.append(
            state_cls(
                transactional_id=txn.transactional_id, producer_id=txn.producer_id, transaction_state=txn.state_name
            )
        )
    return ctx.respond(
        throttle_time=0, error_code=ErrorCode.none, unknown_state_filters=unknown, transaction_states=tuple(rows)
    )


def describe_producers(broker: Broker, ctx: RequestContext, req: DescribeProducersRequest) -> Answer:
    """The producers with state in each partition (kafka-transactions.sh describe-producers): their epoch,
    last sequence and timestamp, and where their open transaction starts (-1: none)."""
    topic_cls = ctx.nested("TopicResponse")
    part_cls = ctx.nested("PartitionResponse")
    state_cls = ctx.nested("ProducerState")
    topics = []
    denied = broker.access.refused_names(ctx, READ, TOPIC, (t.name for t in req.topics))  # KafkaApis: READ
    for t in req.topics:
        parts = []
        for index in t.partition_indexes:
            if t.name in denied or broker.partitions.get(t.name, index) is None:
                parts.append(
                    part_cls(
                        partition_index=index,
                        error_code=(
                            ErrorCode.topic_authorization_failed
                            if t.name in denied
                            else ErrorCode.unknown_topic_or_partition
                        ),
                        error_message=None,
                        active_producers=(),
                    )
                )
                continue
            txns = broker.partitions.txn_state((t.name, index))
            producers = tuple(
                state_cls(
                    producer_id=pid,
                    producer_epoch=last.epoch,
                    last_sequence=last.last_seq,
                    last_timestamp=last.max_timestamp,
                    coordinator_epoch=-1,
                    current_txn_start_offset=txns.ongoing.get(pid, -1) if txns is not None else -1,
                )
                for pid, last in sorted(broker.producers.active(t.name, index))
            )
            parts.append(
                part_cls(
                    partition_index=index, error_code=ErrorCode.none, error_message=None, active_producers=producers
                )
            )
        topics.append(topic_cls(name=t.name, partitions=tuple(parts)))
    return ctx.respond(throttle_time=0, topics=tuple(topics))
