"""Produce, Fetch and ListOffsets: stored batches in, the same bytes out."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from kio.schema.fetch.v12.request import FetchTopic as FetchTopicV12
from kio.schema.fetch.v14.request import FetchRequest as FetchRequestV14
from kio.schema.fetch.v18.request import FetchRequest
from kio.schema.list_offsets.v11.request import ListOffsetsRequest
from kio.schema.produce.v12.request import TopicProduceData as TopicProduceDataV12
from kio.schema.produce.v13.request import ProduceRequest

from groupd.broker.dataplane.leader_epochs import (
    UNDEFINED_EPOCH,
    current_epoch_error,
)
from groupd.broker.dataplane.records_out import records_in
from groupd.broker.dispatch import Answer, Later, RequestContext, Response, later_of
from groupd.broker.handlers import old_versions
from groupd.broker.handlers.current_leader import CurrentLeaders
from groupd.broker.security.access import (
    CLUSTER_ACTION,
    DESCRIBE,
    EVERY_NAME,
    NOTHING,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
)
from groupd.broker.txn_produce_verification import (
    Asks,
    LocalVerification,
    RemoteVerification,
    Verification,
    remote_verifications,
)
from groupd.clock import wall_ms
from groupd.cluster.txn_verification import TxnVerifier, coordinator_error, produce_error
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import INTERNAL_TOPICS
from groupd.storage.batch import split_batches, validate_batch
from groupd.storage.errors import CorruptBatch, OffsetOutOfRange, StorageError, UnsupportedMagic

if TYPE_CHECKING:
    from groupd.broker.app import Broker

log = logging.getLogger("groupd.broker")

READ_UNCOMMITTED, READ_COMMITTED = 0, 1  # isolation levels of Fetch and ListOffsets
EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -2, -1, -3, -4, -5, -6
# the first ListOffsets version that may ask for each sentinel timestamp (Kafka's ReplicaManager)
_SENTINEL_SINCE = {
    LATEST: 1,
    EARLIEST: 1,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL: 8,
    LATEST_TIERED: 9,
    EARLIEST_PENDING_UPLOAD: 11,
}


def _produce_partition(
    broker: Broker,
    topic: str,
    index: int,
    records: bytes | None,
    verification: Verification | None = None,
) -> tuple[ErrorCode, int, int, Any]:
    """(error, base offset, log start offset, log to make durable); ``verification``: how transactional
    batches are checked against their transaction (by another node before, or here at the append; None:
    ``transaction.partition.verification.enable`` is false)."""
    if topic in INTERNAL_TOPICS:  # Kafka: "Cannot append to internal topic"
        return ErrorCode.invalid_topic_exception, -1, -1, None
    lg = broker.partitions.get(topic, index)
    if (unready := broker.reopening_error(topic, index)) is not None:  # taken, not yet served: retriable
        return unready, -1, -1, None
    if lg is None:
        return ErrorCode.unknown_topic_or_partition, -1, -1, None
    if broker.cluster is not None and not broker.leads(topic, index):  # another node's (docs/cluster.md)
        return ErrorCode.not_leader_or_follower, -1, -1, None
    if not records:
        return ErrorCode.corrupt_message, -1, lg.log_start_offset, None
    try:
        batches = list(split_batches(records))
        for batch in batches:
            header = validate_batch(batch)
            if len(batch) > lg.config.max_message_bytes:
                return ErrorCode.message_too_large, -1, lg.log_start_offset, None
            if header.is_control or (header.is_transactional and header.producer_id < 0):
                return ErrorCode.invalid_record, -1, lg.log_start_offset, None  # markers come from the coordinator only
    except UnsupportedMagic:
        return ErrorCode.unsupported_for_message_format, -1, lg.log_start_offset, None
    except CorruptBatch:
        return ErrorCode.corrupt_message, -1, lg.log_start_offset, None
    base = -1
    count = 0
    producers = broker.producers
    txns = broker.partitions.txn_state((topic, index))
    try:
        for batch in batches:
            h = validate_batch(batch)
            count += h.record_count
            if h.is_transactional:
                error = (
                    ErrorCode.none
                    if verification is None
                    else verification.admits(broker, (topic, index), h.producer_id, h.producer_epoch)
                )
                if error != ErrorCode.none:
                    return error, -1, lg.log_start_offset, None
                txns = broker.partitions.txn_state_for_write((topic, index), lg)
            elif txns is not None and h.producer_id >= 0 and txns.has_open(h.producer_id):
                return (
                    ErrorCode.invalid_txn_state,
                    -1,
                    lg.log_start_offset,
                    None,
                )  # Kafka: a transactional write was expected
            if h.producer_id >= 0 and broker.partitions.guards.overtakes(
                (topic, index), h.producer_id, h.base_sequence
            ):
                return ErrorCode.out_of_order_sequence_number, -1, lg.log_start_offset, None
            error, duplicate = producers.check(
                h.producer_id, h.producer_epoch, topic, index, h.base_sequence, h.record_count
            )
            if error != ErrorCode.none:
                return error, -1, lg.log_start_offset, None
            if duplicate is not None:
                first = duplicate
            else:
                # stamped with the leader epoch, as Kafka's leader stamps it
                first, _ = lg.append(bytearray(batch), broker.leader_epoch(topic, index))
                producers.record(
                    h.producer_id,
                    h.producer_epoch,
                    topic,
                    index,
                    h.base_sequence,
                    h.record_count,
                    first,
                    h.max_timestamp,
                )
                if h.is_transactional and txns is not None:
                    txns.data(h.producer_id, first)
                    broker.partitions.guards.clear((topic, index), h.producer_id)  # open here from now on
            if base < 0:
                base = first
    except StorageError:
        return ErrorCode.kafka_storage_error, -1, lg.log_start_offset, None
    broker.partitions.appended((topic, index))
    if broker.metrics is not None:
        broker.metrics.topic_in(topic, count, len(records))
    return ErrorCode.none, base, lg.log_start_offset, lg


ZSTD, ZSTD_PRODUCE_VERSION = 4, 7


def _first_batch_codec(records: bytes) -> int:
    """The compression codec of the first record batch v2 in ``records`` (-1: not a v2 batch)."""
    if len(records) < 23 or records[16] != 2:
        return -1
    return records[22] & 0x07


def produce(broker: Broker, ctx: RequestContext, req: ProduceRequest) -> Answer:
    cluster = broker.cluster
    if cluster is not None and cluster.reopening_any() and _reopening(broker, ctx, req):
        return later_of(_produce_reopened(broker, ctx, req))
    return _produce(broker, ctx, req)


def _reopening(broker: Broker, ctx: RequestContext, req: ProduceRequest) -> bool:
    """Whether the Produce names a partition whose lease this node just took and is still reopening."""
    assert broker.cluster is not None
    return any(
        broker.cluster.reopening((name, index)) for name, index, _ in _named_records(broker, ctx, req, _nothing_refused)
    )


async def _produce_reopened(broker: Broker, ctx: RequestContext, req: ProduceRequest) -> Response | None:
    """A Produce that waited for its partitions' reopening (at most a lease): answered as any other once
    they are served, so what a producer pipelined behind it is appended in its order, never after a refusal
    of it (an idempotent producer would see its sequence broken)."""
    assert broker.cluster is not None
    await broker.cluster.reopened(broker.config["cluster.lease.ms"] / 1000)
    answer = _produce(broker, ctx, req)
    if not isinstance(answer, Later):
        return answer
    if not answer.settled:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def settled(_later: Later) -> None:
            if not done.done():
                done.set_result(None)

        answer.listener = settled
        await done
    return answer.answer()


def _produce(broker: Broker, ctx: RequestContext, req: ProduceRequest) -> Answer:
    tid = req.transactional_id if ctx.version >= 3 else None  # v3+
    refusal = _write_refusal(broker, ctx, tid)  # the ACLs first, as KafkaApis: no verification for the refused
    verifier = broker.transactions.verifier
    remote = None
    if verifier is not None and tid and broker.config["transaction.partition.verification.enable"]:
        found = remote_verifications(broker, tid, _named_records(broker, ctx, req, refusal))
        if found is not None:
            asks, remote = found
            if asks:  # the transaction's coordinator is another node: ask it first (KIP-890), then append
                return later_of(_produce_verified(broker, ctx, req, verifier, tid, asks, remote, refusal))
    return _answer(broker, ctx, req, *_append(broker, ctx, req, refusal, remote))


def _write_refusal(broker: Broker, ctx: RequestContext, tid: str | None) -> Callable[[str], ErrorCode | None]:
    """KafkaApis.handleProduceRequest's authorization, before anything else: WRITE on the transactional
    id (refused: every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then WRITE on each topic (refused:
    its partitions TOPIC_AUTHORIZATION_FAILED); each asked once a request."""
    access = broker.access if broker.access.authorizer is not None else None  # None: nothing asked, no call
    if access is None:
        return _nothing_refused
    if tid is not None and not access.allowed(ctx, WRITE, TRANSACTIONAL_ID, tid):
        return lambda _name: ErrorCode.transactional_id_authorization_failed

    @functools.cache
    def refused(name: str) -> ErrorCode | None:
        return None if access.allowed(ctx, WRITE, TOPIC, name) else ErrorCode.topic_authorization_failed

    return refused


def _nothing_refused(_name: str) -> ErrorCode | None:
    return None


def _named_records(
    broker: Broker, ctx: RequestContext, req: ProduceRequest, refusal: Callable[[str], ErrorCode | None]
) -> list[tuple[str, int, bytes | None]]:
    """(topic, partition, records) of every partition the producer may write."""
    by_id = ctx.version >= 13
    named: list[tuple[str, int, bytes | None]] = []
    for topic in req.topic_data:
        if by_id:
            name = getattr(broker.listed_topic_by_id(cast(uuid.UUID, topic.topic_id)), "name", None)
        else:
            name = cast(TopicProduceDataV12, topic).name
        if name is not None and refusal(name) is None:
            named.extend((name, pd.index, pd.records) for pd in topic.partition_data)
    return named


async def _produce_verified(
    broker: Broker,
    ctx: RequestContext,
    req: ProduceRequest,
    verifier: TxnVerifier,
    tid: str,
    asks: Asks,
    remote: RemoteVerification,
    refusal: Callable[[str], ErrorCode | None],
) -> Response | None:
    for (producer_id, producer_epoch), tps in asks.items():
        if producer_id < 0:  # the coordinator loads here: retried, as Kafka's COORDINATOR_LOAD_IN_PROGRESS
            remote.errors.update(dict.fromkeys(tps, ErrorCode.not_enough_replicas))
            continue
        answers = await verifier.verify(tid, producer_id, producer_epoch, tps)
        remote.errors.update({tp: produce_error(coordinator_error(e, ctx.version)) for tp, e in answers.items()})
    results, touched, throttle = _append(broker, ctx, req, refusal, remote)
    if req.acks == 0:
        _acks_zero(broker, ctx, results, touched)
        return None
    if not touched:
        return _produced(broker, ctx, results, set(), throttle)
    outcomes = await asyncio.gather(
        *(broker.partitions.committer.durable(lg) for lg in touched.values()), return_exceptions=True
    )
    failed = {key for key, out in zip(touched, outcomes, strict=True) if isinstance(out, Exception)}
    return _produced(broker, ctx, results, failed, throttle)


def _append(
    broker: Broker,
    ctx: RequestContext,
    req: ProduceRequest,
    refusal: Callable[[str], ErrorCode | None],
    remote: RemoteVerification | None,
) -> tuple[list[tuple[Any, int, ErrorCode, int, int, Any]], dict[int, Any], int]:
    """Append every partition's records: (results, logs to make durable by id, throttle time)."""
    by_id = ctx.version >= 13  # KIP-516: topics named by id, and answered by id
    results: list[
        tuple[Any, int, ErrorCode, int, int, Any]
    ] = []  # (topic name or id, partition, error, base, start, log)
    touched = {}
    verification: Verification | None = remote
    if remote is None and broker.config["transaction.partition.verification.enable"]:
        verification = LocalVerification(req.transactional_id if ctx.version >= 3 else None, ctx.version)
    for topic in req.topic_data:
        if by_id:
            key: Any = topic.topic_id
            name = getattr(broker.listed_topic_by_id(cast(uuid.UUID, key)), "name", None)
        else:
            key = name = cast(TopicProduceDataV12, topic).name
        refused = None if name is None else refusal(name)
        for pd in topic.partition_data:
            if name is None or refused is not None:
                results.append((key, pd.index, refused or ErrorCode.unknown_topic_id, -1, -1, None))
                continue
            if req.acks not in (-1, 0, 1):  # Kafka appends nothing and answers every partition so
                results.append((key, pd.index, ErrorCode.invalid_required_acks, -1, -1, None))
                continue
            records: bytes | None = pd.records
            if 3 <= ctx.version < ZSTD_PRODUCE_VERSION and records and _first_batch_codec(records) == ZSTD:
                # Kafka's ProduceRequest.validateRecords: zstd batches need Produce v7 (KIP-110)
                results.append((key, pd.index, ErrorCode.unsupported_compression_type, -1, -1, None))
                continue
            if ctx.version < 3:  # message sets (magic 0/1) become a v2 batch, as Kafka 3.9's LogValidator
                records, error = old_versions.produced_records(broker, name, records)
                if error != ErrorCode.none:
                    results.append((key, pd.index, error, -1, -1, None))
                    continue
            error, base, start, lg = _produce_partition(broker, name, pd.index, records, verification)
            results.append((key, pd.index, error, base, start, lg))
            if lg is not None:
                touched[id(lg)] = lg
    throttle = _throttle(broker, ctx, broker.quotas.produce, ctx.size) if broker.quotas.produce.enabled else 0
    return results, touched, throttle


def _answer(
    broker: Broker,
    ctx: RequestContext,
    req: ProduceRequest,
    results: list[tuple[Any, int, ErrorCode, int, int, Any]],
    touched: dict[int, Any],
    throttle: int,
) -> Answer:
    if req.acks == 0:
        _acks_zero(broker, ctx, results, touched)
        return None
    if not touched:
        return _produced(broker, ctx, results, set(), throttle)
    keys = list(touched)

    def answer(outcomes: list[Any]) -> Response:
        failed = {key for key, out in zip(keys, outcomes, strict=True) if isinstance(out, Exception)}
        return _produced(broker, ctx, results, failed, throttle)

    # acks 1 or -1 are answered once the appends are durable (as flush.messages sets it)
    durable = asyncio.gather(
        *(broker.partitions.committer.durable(lg) for lg in touched.values()), return_exceptions=True
    )
    return later_of(durable, answer)


def _acks_zero(
    broker: Broker,
    ctx: RequestContext,
    results: list[tuple[Any, int, ErrorCode, int, int, Any]],
    touched: dict[int, Any],
) -> None:
    """A Produce with acks=0 gets no answer; as Kafka's KafkaApis, one that failed for any partition closes
    its connection instead (one log line), which is how such a producer learns to refresh its metadata."""
    for lg in touched.values():
        asyncio.get_running_loop().create_task(_quiet_durable(broker, lg))
    failed = Counter(ErrorCode(error).name for _key, _index, error, *_ in results if error != ErrorCode.none)
    if failed and ctx.conn is not None:
        log.info("connection %s closed: a Produce with acks=0 failed (%s)", ctx.connection_id, dict(failed))
        ctx.conn.close_idle()


def _produced(
    broker: Broker,
    ctx: RequestContext,
    results: list[tuple[Any, int, ErrorCode, int, int, Any]],
    failed: set[int],
    throttle: int,
) -> Response:
    """The Produce answer; ``failed``: the ids of the logs whose appends did not become durable. v10+:
    NOT_LEADER_OR_FOLLOWER names the current leader (KIP-951, current_leader.py)."""
    by_id = ctx.version >= 13
    part_cls = ctx.nested("PartitionProduceResponse")
    leaders = CurrentLeaders(broker, ctx) if ctx.version >= 10 else None
    grouped: dict[Any, list[Any]] = {}
    for key, index, error, base, start, lg in results:
        if lg is not None and id(lg) in failed:
            error, base = ErrorCode.kafka_storage_error, -1
        extra = {}
        if leaders is not None and error == ErrorCode.not_leader_or_follower:
            name = getattr(broker.listed_topic_by_id(key), "name", None) if by_id else key
            extra = {"current_leader": leaders.of(name, index)}
        grouped.setdefault(key, []).append(
            codec.make(
                part_cls,
                index=index,
                error_code=error,
                base_offset=base,
                log_append_time=None,
                log_start_offset=start,
                record_errors=(),
                error_message=None,
                **extra,
            )
        )
    topic_cls = ctx.nested("TopicProduceResponse")
    named = "topic_id" if by_id else "name"
    topics = tuple(codec.make(topic_cls, **{named: key}, partition_responses=tuple(ps)) for key, ps in grouped.items())
    endpoints = leaders.endpoints() if leaders is not None else ()
    return ctx.respond(responses=topics, throttle_time=throttle, node_endpoints=endpoints)


def _throttle(broker: Broker, ctx: RequestContext, quota: Any, value: int) -> int:
    """Record a client's bytes against its quota; over it, mute the connection for the throttle time."""
    ms = quota.record(ctx.conn.user, ctx.client_id, value, wall_ms())
    if ms > 0:
        ctx.conn.mute_after_answer(ms)
        broker.metrics.throttled(quota.key, ms)
    return ms


async def _quiet_durable(broker: Broker, lg: Any) -> None:
    with contextlib.suppress(StorageError):
        await broker.partitions.committer.durable(lg)


def fetch(broker: Broker, ctx: RequestContext, req: FetchRequest) -> Answer:
    version = ctx.version
    if version >= 7 and req.session_id != 0 and req.session_epoch > 0:
        return ctx.respond(
            throttle_time=0,
            error_code=ErrorCode.fetch_session_id_not_found,
            session_id=0,
            responses=(),
            node_endpoints=(),
        )
    wanted: list[tuple[str | None, Any, Any]] = []  # (topic name, topic id, partition request)
    for t in req.topics:
        if version >= 13:
            topic = broker.listed_topic_by_id(cast(uuid.UUID, t.topic_id))
            wanted.append((topic.name if topic is not None else None, t.topic_id, t.partitions))
        else:
            wanted.append((cast(FetchTopicV12, t).topic, None, t.partitions))
    deadline = time.monotonic() + codec.millis(req.max_wait) / 1000
    denied = _fetch_refused(broker, ctx, req, wanted)
    keys = [(name, p.partition) for name, _tid, ps in wanted if name is not None and name not in denied for p in ps]
    quota = broker.quotas.fetch
    budget: int = req.max_bytes if ctx.version >= 3 else 0x7FFFFFFF  # max_bytes: v3+
    min_bytes: int = req.min_bytes
    if quota.enabled:  # Kafka: never ask for more than the quota lets through in one window
        budget = int(min(budget, quota.max_in_window(ctx.conn.user, ctx.client_id)))
        min_bytes = min(min_bytes, budget)
    attempt = functools.partial(_fetch_attempt, broker, ctx, req, wanted, budget, min_bytes, deadline, denied)
    answer = attempt()
    if answer is not None:
        return answer  # data there, or no wait asked for: answered in this loop turn
    return later_of(_fetch_waiting(broker, attempt, keys, deadline))


def _fetch_refused(broker: Broker, ctx: RequestContext, req: FetchRequest, wanted: list) -> frozenset[str]:
    """The topics answered TOPIC_AUTHORIZATION_FAILED (KafkaApis.handleFetchRequest): a consumer's, those it
    may not READ; a follower's (replica id >= 0), none with CLUSTER_ACTION on the cluster, else every one."""
    access = broker.access
    if access.authorizer is None:
        return NOTHING
    replica = req.replica_state.replica_id if ctx.version >= 15 else cast(FetchRequestV14, req).replica_id
    if replica >= 0:
        return NOTHING if access.cluster(ctx, CLUSTER_ACTION) else EVERY_NAME
    return access.refused_names(ctx, READ, TOPIC, (name for name, _tid, _ps in wanted))


def _fetch_attempt(
    broker: Broker,
    ctx: RequestContext,
    req: FetchRequest,
    wanted: list[tuple[str | None, Any, Any]],
    budget: int,
    min_bytes: int,
    deadline: float,
    denied: frozenset[str],
) -> Response | None:
    """The answer if the fetch is to be answered now (min_bytes there, an error, the wait over), else None."""
    leaders = CurrentLeaders(broker, ctx) if ctx.version >= 16 else None
    total, answer_now, topics = _fetch_once(broker, ctx, req, wanted, budget, denied, leaders)
    if total >= min_bytes or answer_now or deadline - time.monotonic() <= 0 or broker.stopping:
        quota = broker.quotas.fetch
        throttle = _throttle(broker, ctx, quota, total) if quota.enabled else 0
        if throttle:  # Kafka answers a throttled fetch empty, and takes its bytes back
            quota.unrecord(ctx.conn.user, ctx.client_id, total, wall_ms())
            topics = ()
        if topics and total and broker.metrics is not None:  # a throttled answer carries nothing
            _count_out(broker.metrics, [name for name, _tid, _ps in wanted], topics)
        endpoints = leaders.endpoints() if leaders is not None else ()
        return ctx.respond(
            throttle_time=throttle, error_code=ErrorCode.none, session_id=0, responses=topics, node_endpoints=endpoints
        )
    return None


async def _fetch_waiting(
    broker: Broker, attempt: Callable[[], Response | None], keys: list[tuple[str, int]], deadline: float
) -> Response:
    """A long poll: wait for data on the partitions, or for the deadline, and try again."""
    while True:
        await broker.partitions.wait_for_data(keys, deadline - time.monotonic())
        answer = attempt()
        if answer is not None:
            return answer


def _count_out(metrics: Any, names: list[str | None], topics: tuple) -> None:
    """Records and bytes a fetch answer carries, per topic (a batch header's length and record count);
    ``names`` are the answer's topics in order (v13+ answers name them by id)."""
    for name, t in zip(names, topics, strict=True):
        records = nbytes = 0
        for p in t.partitions:
            data = p.records
            if not data:
                continue
            nbytes += len(data)
            records += records_in(data)
        if nbytes and name is not None:
            metrics.topic_out(name, records, nbytes)


def _fetch_once(
    broker: Broker,
    ctx: RequestContext,
    req: Any,
    wanted: list,
    budget: int,
    denied: frozenset[str] = NOTHING,
    leaders: CurrentLeaders | None = None,
) -> tuple[int, bool, tuple]:
    """One pass over the wanted partitions: (bytes read, whether to answer now, topics); ``denied``: the
    topics the principal may not READ, answered TOPIC_AUTHORIZATION_FAILED; ``leaders`` (v16+): where
    NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH name the current leader (KIP-951)."""
    part_cls = ctx.nested("PartitionData")
    topic_cls = ctx.nested("FetchableTopicResponse")
    read_committed = ctx.version >= 4 and req.isolation_level == READ_COMMITTED
    aborted_cls = ctx.nested("AbortedTransaction") if read_committed else None
    # KIP-320: v9+ partitions carry the fetcher's current leader epoch, v12+ the epoch of its last batch
    current_epochs, last_epochs = ctx.version >= 9, ctx.version >= 12
    magic = old_versions.fetch_magic(ctx.version)
    total = 0
    answer_now = False
    topics = []
    for name, topic_id, partitions in wanted:
        parts = []
        for p in partitions:
            lg = broker.readable_log(name, p.partition) if name is not None and name not in denied else None
            error, hw, lso, start, data = ErrorCode.none, -1, -1, -1, b""
            aborted: tuple | None = None
            diverging: tuple[int, int] | None = None
            # Kafka reads a negative current leader epoch as none given
            current = p.current_leader_epoch if current_epochs and p.current_leader_epoch >= 0 else UNDEFINED_EPOCH
            named = name is not None and name not in denied
            if named and (unready := broker.reopening_error(name, p.partition, current)) is not None:
                error = unready  # taken, not yet served: retriable
            elif lg is None:
                error = (
                    ErrorCode.topic_authorization_failed
                    if name in denied  # an unknown id too, for a follower refused (EVERY_NAME)
                    else ErrorCode.unknown_topic_id
                    if (name is None and ctx.version >= 13)
                    else ErrorCode.unknown_topic_or_partition
                )
            elif broker.cluster is not None and name is not None and not broker.leads(name, p.partition):
                error = ErrorCode.not_leader_or_follower
            elif (
                current_epochs
                and p.current_leader_epoch >= 0  # Kafka reads a negative epoch as none given
                and p.current_leader_epoch != (leader := broker.leader_epoch(name, p.partition))
            ):
                error = current_epoch_error(p.current_leader_epoch, leader)
            else:
                hw, start = lg.high_watermark, lg.log_start_offset
                txns = broker.partitions.txn_state((name, p.partition))
                lso = hw if txns is None else txns.last_stable_offset(hw)
                # the usual case (the leader's epoch, an offset in the log) needs no look-up: it cannot diverge
                epoch = p.last_fetched_epoch if last_epochs else UNDEFINED_EPOCH
                if epoch > UNDEFINED_EPOCH and not (
                    epoch == broker.leader_epoch(name, p.partition) and start <= p.fetch_offset <= hw
                ):
                    try:
                        history = broker.epoch_cache(name, p.partition, lg)
                        error, diverging = history.fetch_divergence(epoch, p.fetch_offset, start, lg.log_end_offset)
                    except StorageError:  # its epochs could not be read (the database): retriable, as Kafka's
                        error = ErrorCode.kafka_storage_error
                # Fetch below v10: a zstd topic is refused, and v0-3 where down-conversion is off (3.9)
                refusal = old_versions.fetch_refusal(broker, name, ctx.version) if ctx.version < 10 else ErrorCode.none
                try:
                    limit = min(p.partition_max_bytes, budget - total)
                    if error == ErrorCode.none and diverging is None and (limit > 0 or total == 0):
                        # READ_COMMITTED: nothing at or past the first offset of an open transaction
                        data = lg.read(p.fetch_offset, max(limit, 1), lso if read_committed else None)
                        if magic is not None and refusal == ErrorCode.none:
                            # Fetch v0-3: magic 0/1 message sets, as Kafka 3.9 down-converts
                            data, refusal = old_versions.down_converted(broker, data, magic, p.fetch_offset)
                except OffsetOutOfRange:
                    error = ErrorCode.offset_out_of_range
                except StorageError as exc:  # the log cannot be read now (PostgreSQL unreachable, a disk error)
                    # Kafka's answer for a log it cannot read: retriable, the connection and the rest served
                    error, data = ErrorCode.kafka_storage_error, b""
                    broker.partitions.read_errors.error(
                        "a Fetch of %s-%d could not be read: %s", name, p.partition, exc
                    )
                if refusal != ErrorCode.none:  # Kafka's FetchResponse.partitionResponse(tp, error)
                    error, hw, lso, start, data, diverging = refusal, -1, -1, -1, b"", None
                if aborted_cls is not None and error == ErrorCode.none:  # READ_COMMITTED
                    # the aborted transactions the data may hold, for the client to drop their records
                    found = txns.aborted_between(p.fetch_offset, lso) if txns is not None and data else ()
                    aborted = tuple(aborted_cls(producer_id=pid, first_offset=first) for pid, first in found)
            if error != ErrorCode.none or diverging is not None:
                answer_now = True  # as Kafka: errors and divergence are answered without waiting for data
            total += len(data or b"")
            extra = (
                {}
                if diverging is None
                else {"diverging_epoch": ctx.nested("EpochEndOffset")(epoch=diverging[0], end_offset=diverging[1])}
            )
            if leaders is not None and error in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch):
                extra["current_leader"] = leaders.of(name, p.partition)
            parts.append(
                codec.make(
                    part_cls,
                    partition_index=p.partition,
                    error_code=error,
                    high_watermark=hw,
                    last_stable_offset=lso,
                    log_start_offset=start,
                    aborted_transactions=aborted,
                    preferred_read_replica=-1,
                    # an errored partition's data is b"": Kafka answers MemoryRecords.EMPTY, never null, and
                    # librdkafka cannot parse a null (it would never see the error nor reset its offset)
                    records=data,
                    **extra,
                )
            )
        topics.append(
            codec.make(topic_cls, topic=name or "", topic_id=topic_id or codec.ZERO_UUID, partitions=tuple(parts))
        )
    return total, answer_now, tuple(topics)


def list_offsets(broker: Broker, ctx: RequestContext, req: ListOffsetsRequest) -> Answer:
    version = ctx.version
    if version == 0:  # the old offsets-array answer
        return old_versions.list_offsets_v0(broker, ctx, req)
    committed = version >= 2 and req.isolation_level == READ_COMMITTED

    def answer(topic: str, p: Any) -> dict[str, Any]:
        row = {
            "partition_index": p.partition_index,
            "error_code": ErrorCode.none,
            "timestamp": -1,
            "offset": -1,
            "leader_epoch": -1,
        }
        stamp = p.timestamp
        if stamp < 0 and version < _SENTINEL_SINCE.get(stamp, 1 << 15):
            return row | {"error_code": ErrorCode.unsupported_version}  # checked before the partition, as Kafka does
        lg = broker.readable_log(topic, p.partition_index)
        current = p.current_leader_epoch if version >= 4 else UNDEFINED_EPOCH
        if (unready := broker.reopening_error(topic, p.partition_index, current)) is not None:
            return row | {"error_code": unready}  # taken, not yet served
        if lg is None:
            return row | {"error_code": ErrorCode.unknown_topic_or_partition}
        if broker.cluster is not None and not broker.leads(topic, p.partition_index):
            return row | {"error_code": ErrorCode.not_leader_or_follower}
        leader = broker.leader_epoch(topic, p.partition_index)
        if version >= 4 and p.current_leader_epoch != UNDEFINED_EPOCH:  # KIP-320; only -1 skips the check
            error = current_epoch_error(p.current_leader_epoch, leader)
            if error != ErrorCode.none:
                return row | {"error_code": error}
        # a found offset is named with its record's epoch, as Kafka names it (the earliest: its cache's first entry)
        start = lg.log_start_offset
        try:
            history = broker.epoch_cache(topic, p.partition_index, lg)
        except StorageError:  # its epochs could not be read (the database): retriable, as Kafka's
            return row | {"error_code": ErrorCode.kafka_storage_error}
        if stamp in (EARLIEST, EARLIEST_LOCAL):  # no remote storage: the local log starts where the log does
            return row | {"offset": start, "leader_epoch": history.epoch_for(start, start)}
        if stamp == LATEST:  # READ_COMMITTED: the last stable offset
            latest = lg.high_watermark
            txns = broker.partitions.txn_state((topic, p.partition_index)) if committed else None
            return row | {
                "offset": latest if txns is None else txns.last_stable_offset(latest),
                "leader_epoch": leader,
            }
        if stamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
            return row  # nothing is tiered: no offset, as Kafka answers for a topic without remote storage
        if stamp == MAX_TIMESTAMP:
            found = lg.max_timestamp()
        else:
            found = lg.offset_for_timestamp(stamp)
            found = None if found is None else (found[1], found[0])
        if found is None:
            return row
        return row | {"timestamp": found[0], "offset": found[1], "leader_epoch": history.epoch_for(found[1], start)}

    named = Counter((t.name, p.partition_index) for t in req.topics for p in t.partitions)
    denied = broker.access.refused_names(ctx, DESCRIBE, TOPIC, (t.name for t in req.topics))  # KafkaApis: DESCRIBE
    rows = []
    for t in req.topics:
        for p in t.partitions:
            times = named[t.name, p.partition_index]
            if t.name in denied:
                continue
            if times == 1:
                rows.append((t.name, answer(t.name, p)))
            elif times > 1:  # a partition named more than once: one answer, INVALID_REQUEST
                named[t.name, p.partition_index] = 0
                rows.append(
                    (
                        t.name,
                        {
                            "partition_index": p.partition_index,
                            "error_code": ErrorCode.invalid_request,
                            "timestamp": -1,
                            "offset": -1,
                            "leader_epoch": -1,
                        },
                    )
                )
    # KafkaApis: the topics refused (partitionSeqByAuthorized) answered after the others
    refused = {"error_code": ErrorCode.topic_authorization_failed, "timestamp": -1, "offset": -1, "leader_epoch": -1}
    rows += [(t.name, refused | {"partition_index": p.partition_index}) for t in req.topics if t.name in denied
             for p in t.partitions]  # fmt: skip
    return ctx.respond(
        throttle_time=0, topics=ctx.by_topic("ListOffsetsTopicResponse", "ListOffsetsPartitionResponse", rows)
    )
