"""OffsetCommit, TxnOffsetCommit, OffsetFetch and OffsetDelete: kio entities <-> the core's offsets requests.

From v10 (KIP-848) OffsetCommit and OffsetFetch name topics by id. Offsets stay stored by name, so the
ids are resolved here, through the topics the broker lists, and the core never sees one: v9 and v10
read each other's commits. An id the broker does not know is answered UNKNOWN_TOPIC_ID on each of its
partitions here, as Kafka's KafkaApis does before asking its coordinator.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from kio.schema.offset_commit.v4.request import OffsetCommitRequest as OffsetCommitRequestV4
from kio.schema.offset_commit.v10.request import OffsetCommitRequest
from kio.schema.offset_delete.v0.request import OffsetDeleteRequest
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest as OffsetFetchRequestV7
from kio.schema.offset_fetch.v10.request import OffsetFetchRequest
from kio.schema.txn_offset_commit.v4.request import TxnOffsetCommitRequest

from groupd.broker.dispatch import Answer, RequestContext, Response, answered_later, later_of, waits
from groupd.broker.handlers import old_versions
from groupd.broker.security.access import DELETE, DESCRIBE, GROUP, NOTHING, READ, TOPIC, TRANSACTIONAL_ID, WRITE
from groupd.broker.txn_offsets_verification import commit_error, needs_verification, verified
from groupd.clock import wall_ms
from groupd.coordinator import errors as E
from groupd.coordinator import shard as core
from groupd.coordinator.api import (
    CommitPartition,
    FetchedOffset,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    PartitionError,
    Result,
    TxnOffsetCommit,
)
from groupd.coordinator.service import CoordinatorError
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.protocol.request import Encoded

if TYPE_CHECKING:
    from groupd.broker.app import Broker


TOPIC_IDS_FROM = 10  # the first OffsetCommit and OffsetFetch version that names topics by id
UNKNOWN_TOPIC_ID = int(ErrorCode.unknown_topic_id)  # an API-layer answer: the core never sees ids
TOPIC_AUTHORIZATION_FAILED = int(ErrorCode.topic_authorization_failed)

_COMMIT_ANSWERS_MAX = 4096
_commit_answers: dict[tuple, Any] = {}


def _commit_response(ctx: RequestContext, errors: list[PartitionError]) -> Response:
    # A client commits the same partitions again and again and nearly always hears "no error": the
    # answer is built and written once per (version, partitions, errors) and its bytes reused.
    if len(errors) == 1:  # the common case, without a generator
        e = errors[0]
        key: tuple = (ctx.version, (e.topic, e.partition, e.error))
    else:
        key = (ctx.version, *((e.topic, e.partition, e.error) for e in errors))
    answer = _commit_answers.get(key)
    if answer is None:
        rows = ((e.topic, {"partition_index": e.partition, "error_code": e.error}) for e in errors)
        topics = ctx.by_topic(
            "OffsetCommitResponseTopic", "OffsetCommitResponsePartition", rows, key_field=_topic_key(ctx)
        )
        entity = ctx.respond(throttle_time=0, topics=topics)
        answer = Encoded(codec.encode(entity), next((e.error for e in errors if e.error), 0))
        if len(_commit_answers) >= _COMMIT_ANSWERS_MAX:
            _commit_answers.clear()
        _commit_answers[key] = answer
    return answer


def _topic_key(ctx: RequestContext) -> str:
    return "topic_id" if ctx.version >= TOPIC_IDS_FROM else "name"


def _name_of(broker: Broker, topic_id: uuid.UUID) -> str | None:
    topic = broker.listed_topic_by_id(topic_id)
    return topic.name if topic is not None else None


def _known_partitions(
    broker: Broker,
    req: Any,
    leader_epochs: bool,
    by_id: bool = False,
    commit_timestamps: bool = False,
    denied: frozenset[str] = NOTHING,
) -> tuple[list[CommitPartition], list[PartitionError], dict[str, uuid.UUID]]:
    """The request's partitions of existing topics, and UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID
    for an id not known) for the others, answered by the API layer, never sent to the coordinator.
    ``leader_epochs``: the partitions carry a committed leader epoch (else -1); ``commit_timestamps``: a
    commit timestamp (v1). ``by_id`` (v10): each topic's name is its id's, and the id of each name is returned to
    answer by. ``denied``: topics the principal may not READ, answered TOPIC_AUTHORIZATION_FAILED first."""
    unknown: list[PartitionError] = []
    partitions = []
    ids: dict[str, uuid.UUID] = {}
    topics = broker.topics
    for topic in req.topics:
        if by_id:
            key = topic.topic_id
            name = _name_of(broker, key)
            if name is None:
                unknown += [PartitionError(key, p.partition_index, UNKNOWN_TOPIC_ID) for p in topic.partitions]
                continue
            ids[name] = key
        else:
            name = key = topic.name
        if name in denied:
            unknown += [PartitionError(key, p.partition_index, TOPIC_AUTHORIZATION_FAILED) for p in topic.partitions]
            continue
        known = topics.get(name)
        for p in topic.partitions:
            index = p.partition_index
            if known is None or not 0 <= index < known.partitions:
                unknown.append(PartitionError(key, index, E.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            # topic, partition, offset, leader epoch (v6+), metadata: positional, one per partition
            # v1's own commit timestamp (-1: the broker's now), as Kafka 3.9 kept it
            stamp = p.commit_timestamp if commit_timestamps else -1
            partitions.append(
                CommitPartition(
                    name,
                    index,
                    p.committed_offset,
                    p.committed_leader_epoch if leader_epochs else -1,
                    p.committed_metadata,
                    stamp,
                )
            )
    return partitions, unknown, ids


def _every_partition(req: Any, by_id: bool, code: int) -> list[PartitionError]:
    """Every partition of a commit refused with one error (Kafka's getErrorResponse)."""
    return [
        PartitionError(t.topic_id if by_id else t.name, p.partition_index, code)
        for t in req.topics
        for p in t.partitions
    ]


def _denied_topics(broker: Broker, ctx: RequestContext, req: Any, by_id: bool) -> frozenset[str]:
    """The committed topics the principal may not READ (KafkaApis' filterByAuthorized); asked one by one
    here rather than through refused_names, a commit's usual one topic costing one decision-cache lookup."""
    allowed = broker.access.allowed
    denied: set[str] | None = None
    for t in req.topics:
        name = _name_of(broker, t.topic_id) if by_id else t.name
        if name is not None and not allowed(ctx, READ, TOPIC, name):
            denied = {name} if denied is None else denied | {name}
    return NOTHING if denied is None else frozenset(denied)


def _by_id(errors: list[PartitionError], ids: dict[str, uuid.UUID]) -> list[PartitionError]:
    """The core's answers (by name) under the ids the request named the topics by."""
    return [PartitionError(cast(str, ids[e.topic]), e.partition, e.error) for e in errors]  # the id stands for the name


def _partition_errors(
    partitions: list[CommitPartition], payload: Any, error: BaseException | None
) -> list[PartitionError]:
    """A commit's answers: the core's, or the coordinator's refusal on every partition."""
    if error is None:
        return list(payload.partitions)
    if isinstance(error, CoordinatorError):
        return [PartitionError(p.topic, p.partition, error.code) for p in partitions]
    raise error


def _status_window(broker: Broker, group: str, partitions: list[CommitPartition], errors: list[PartitionError]) -> None:
    """The durable offsets of a commit, for the live consumer status (Burrow's window per partition)."""
    failed = {(e.topic, e.partition) for e in errors if e.error}
    rows = [(p.topic, p.partition, p.offset) for p in partitions if (p.topic, p.partition) not in failed]

    def log_end(topic: str, partition: int) -> int | None:
        lg = broker.partitions.get(topic, partition)
        return lg.high_watermark if lg is not None else None

    broker.metrics.offsets_durable(group, rows, wall_ms(), log_end)


def offset_commit(broker: Broker, ctx: RequestContext, req: OffsetCommitRequest) -> Answer:
    by_id = ctx.version >= TOPIC_IDS_FROM
    denied = NOTHING  # without an authorizer, the path every commit takes asks nothing (no call)
    if broker.access.authorizer is not None:
        if not broker.access.allowed(ctx, READ, GROUP, req.group_id):  # KafkaApis: READ the group
            return _commit_response(ctx, _every_partition(req, by_id, ErrorCode.group_authorization_failed))
        denied = _denied_topics(broker, ctx, req, by_id)
    partitions, unknown, ids = _known_partitions(
        broker, req, ctx.version >= 6, by_id, commit_timestamps=ctx.version == 1, denied=denied
    )
    if ctx.version == 0:  # ZooKeeper's store: refused as a KRaft Kafka 3.9 refuses it
        return old_versions.offset_commit_v0(ctx, req, unknown)
    retention = cast(OffsetCommitRequestV4, req).retention_time if 2 <= ctx.version <= 4 else None  # v2-v4 only
    request = OffsetCommit(
        req.group_id,
        req.generation_id_or_member_epoch,
        req.member_id,
        req.group_instance_id if ctx.version >= 7 else None,
        codec.millis(retention) if retention is not None else -1,
        tuple(partitions),
        ctx.version,
    )

    started = time.perf_counter()

    def finish(payload: Any, error: BaseException | None) -> Response:
        errors = _partition_errors(partitions, payload, error)
        if broker.metrics is not None and partitions:
            broker.metrics.commit(len(partitions), time.perf_counter() - started)
            if error is None:
                _status_window(broker, req.group_id, partitions, errors)
        return _commit_response(ctx, (_by_id(errors, ids) if by_id else errors) + unknown)

    if partitions:
        return answered_later(broker, req.group_id, core.offset_commit, request, finish)
    try:
        broker.coordinator.shard_for(req.group_id)
    except CoordinatorError as exc:
        return finish(None, exc)
    return _commit_response(ctx, unknown)  # only unknown partitions: nothing to write


def _txn_commit_response(ctx: RequestContext, errors: list[PartitionError]) -> Response:
    if ctx.version < 2:
        # Kafka keeps pre-2.0 producers (v0-1) from COORDINATOR_LOAD_IN_PROGRESS, which they did not expect
        errors = [
            PartitionError(e.topic, e.partition, E.COORDINATOR_NOT_AVAILABLE)
            if e.error == E.COORDINATOR_LOAD_IN_PROGRESS
            else e
            for e in errors
        ]
    rows = ((e.topic, {"partition_index": e.partition, "error_code": e.error}) for e in errors)
    return ctx.respond(
        throttle_time=0, topics=ctx.by_topic("TxnOffsetCommitResponseTopic", "TxnOffsetCommitResponsePartition", rows)
    )


def txn_offset_commit(broker: Broker, ctx: RequestContext, req: TxnOffsetCommitRequest) -> Answer:
    """Offsets of a transaction: written as the producer's transactional batch, applied at its COMMIT
    marker (GroupCoordinator.complete_transaction). Kafka 4.x's KafkaApis: unknown topics and
    partitions answer UNKNOWN_TOPIC_OR_PARTITION there, and with none left the coordinator is not asked."""
    # KafkaApis: WRITE on the transactional id, READ on the group (every partition refused), READ on each topic
    refused = broker.access.refused(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id) or broker.access.refused(
        ctx, READ, GROUP, req.group_id
    )
    if refused is not None:
        return _txn_commit_response(ctx, _every_partition(req, False, refused.code))
    denied = _denied_topics(broker, ctx, req, False)
    partitions, unknown, _ = _known_partitions(broker, req, ctx.version >= 2, denied=denied)
    if not partitions:
        return _txn_commit_response(ctx, unknown)
    generation, member, instance = (
        (req.generation_id, req.member_id, req.group_instance_id) if ctx.version >= 3 else (-1, "", None)
    )
    request = TxnOffsetCommit(
        req.transactional_id,
        req.group_id,
        req.producer_id,
        req.producer_epoch,
        generation,
        member,
        instance,
        tuple(partitions),
        ctx.version,
    )

    def finish(payload: Any, error: BaseException | None) -> Response:
        return _txn_commit_response(ctx, _partition_errors(partitions, payload, error) + unknown)

    if needs_verification(broker, req.transactional_id, req.producer_id, req.group_id):
        return later_of(_txn_commit_verified(broker, ctx, request, finish))
    return answered_later(broker, req.group_id, core.txn_offset_commit, request, finish)


async def _txn_commit_verified(
    broker: Broker,
    ctx: RequestContext,
    request: TxnOffsetCommit,
    finish: Callable[[Any, BaseException | None], Response],
) -> Response:
    """The commit once its transaction is verified (txn_offsets_verification.py); refused on every
    partition with the verification's answer otherwise."""
    coordinator = broker.coordinator
    partition = coordinator.partition_for(request.group_id)
    guard = coordinator.txn_guards.start(partition, request.producer_id)
    try:
        answer = await verified(broker, request)
    finally:
        still = coordinator.txn_guards.finish(partition, request.producer_id, guard)
    error = commit_error(answer, ctx.version)
    if error == ErrorCode.none and not still:
        error = ErrorCode.invalid_txn_state  # its transaction ended (a marker came) while it was verified
    if error != ErrorCode.none:
        return finish(None, CoordinatorError(int(error)))
    try:  # submitted at once: a marker asked for from now on is written after it
        payload = await coordinator.call(request.group_id, core.txn_offset_commit, request)
    except CoordinatorError as exc:
        return finish(None, exc)
    return finish(payload, None)


def _after_earlier_writes(state: Any, request: Any, token: int, now: int, cfg: Any) -> Result:
    """No write of its own: answered once every earlier Result of the shard is durable and replayed."""
    return Result(responses=((token, None),), replay=False)


def _fetch_authorized(
    broker: Broker, ctx: RequestContext, group_id: str, topics: Any, *rest: Any
) -> tuple[int, list[FetchedOffset]]:
    """KafkaApis: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED), and only the offsets of topics
    the principal may DESCRIBE: left out of a fetch of every offset, TOPIC_AUTHORIZATION_FAILED when named."""
    if (refused := broker.access.refused(ctx, DESCRIBE, GROUP, group_id)) is not None:
        return refused.code, []
    error, parts = _fetch_group(broker, group_id, topics, *rest)
    if not broker.access.enabled or error != E.NONE:
        return error, parts
    by_id = ctx.version >= TOPIC_IDS_FROM
    names = [_name_of(broker, cast(uuid.UUID, p.topic)) if by_id else p.topic for p in parts]
    denied = broker.access.refused_names(ctx, DESCRIBE, TOPIC, names)
    out = []
    for name, p in zip(names, parts, strict=True):
        if name in denied:
            if topics is None:
                continue
            p = FetchedOffset(p.topic, p.partition, -1, -1, "", TOPIC_AUTHORIZATION_FAILED)
        out.append(p)
    return error, out


def _fetch_group(
    broker: Broker,
    group_id: str,
    topics: Any,
    require_stable: bool,
    version: int,
    member_id: Any = None,
    member_epoch: int = -1,
):
    if version >= TOPIC_IDS_FROM:
        return _fetch_group_by_id(broker, group_id, topics, require_stable, version, member_id, member_epoch)
    wanted = None if topics is None else tuple((t.name, tuple(t.partition_indexes)) for t in topics)
    return _ask_core(
        broker,
        OffsetFetch(
            group_id=group_id,
            topics=wanted,
            require_stable=require_stable,
            version=version,
            member_id=member_id,
            member_epoch=member_epoch,
        ),
    )


def _ask_core(broker: Broker, request: OffsetFetch) -> tuple[int, list[FetchedOffset]]:
    try:
        shard = broker.coordinator.shard_for(request.group_id)
    except CoordinatorError as exc:
        return exc.code, []
    payload = core.offset_fetch(shard.state, request, broker.coordinator.now())
    return payload.error, list(payload.partitions)


def _fetch_group_by_id(
    broker: Broker, group_id: str, topics: Any, require_stable: bool, version: int, member_id: Any, member_epoch: int
):
    """v10: the ids resolved to the names offsets are kept by, the answers named by id again. An
    unknown id answers UNKNOWN_TOPIC_ID after the coordinator's answers (none on a group error); a
    fetch of every offset leaves out a topic the broker no longer lists, which has no id to give."""
    ids: dict[str, uuid.UUID] = {}
    unknown: list[FetchedOffset] = []
    wanted = None
    if topics is not None:
        wanted = []
        for t in topics:
            name = _name_of(broker, t.topic_id)
            if name is None:
                unknown += [FetchedOffset(t.topic_id, i, -1, -1, "", UNKNOWN_TOPIC_ID) for i in t.partition_indexes]
            else:
                ids[name] = t.topic_id
                wanted.append((name, tuple(t.partition_indexes)))
    request = OffsetFetch(
        group_id, None if wanted is None else tuple(wanted), require_stable, version, member_id, member_epoch
    )
    error, parts = _ask_core(broker, request)
    if error != E.NONE:
        return error, parts
    out = []
    for p in parts:
        topic_id = ids.get(p.topic)
        if topic_id is None:  # asked for every offset
            listed = broker.listed_topic(p.topic)
            if listed is None:
                continue
            topic_id = ids[p.topic] = listed.topic_id
        out.append(FetchedOffset(cast(str, topic_id), p.partition, p.offset, p.leader_epoch, p.metadata, p.error))
    return error, out + unknown


def _fetch_topics(ctx: RequestContext, parts: list, topic_name: str, part_name: str) -> tuple:
    rows = (
        (
            p.topic,
            {
                "partition_index": p.partition,
                "committed_offset": p.offset,
                "committed_leader_epoch": p.leader_epoch,
                "metadata": p.metadata,
                "error_code": p.error,
            },
        )
        for p in parts
    )
    return ctx.by_topic(topic_name, part_name, rows, key_field=_topic_key(ctx))


def offset_fetch(broker: Broker, ctx: RequestContext, req: OffsetFetchRequest) -> Answer:
    if ctx.version == 0:  # ZooKeeper's store: refused as a KRaft Kafka 3.9 refuses it
        return old_versions.offset_fetch_v0(ctx, req)
    require_stable = ctx.version >= 7 and req.require_stable
    if require_stable:
        # Kafka 4.x answers a require_stable fetch after the writes before it (an offset of a
        # transaction still being written is then pending, and counted)
        group_ids = [g.group_id for g in req.groups] if ctx.version >= 8 else [cast(OffsetFetchRequestV7, req).group_id]
        waits = [w for gid in group_ids if (w := _earlier_writes(broker, gid)) is not None]
        if waits:
            return later_of(_fetch_after(waits, broker, ctx, req))
    return _fetch_answer(broker, ctx, req, require_stable)


def _earlier_writes(broker: Broker, group_id: str) -> Awaitable[Any] | None:
    """An awaitable for the group's shard's writes in flight, or None when it has none."""
    try:
        shard = broker.coordinator.shard_for(group_id)
    except CoordinatorError:
        return None
    if not shard.queue:
        return None
    return broker.coordinator.call(group_id, _after_earlier_writes, None)


async def _fetch_after(waits: list[Awaitable[Any]], broker: Broker, ctx: RequestContext, req: Any) -> Response:
    for w in waits:
        with contextlib.suppress(CoordinatorError):  # the fetch answers as the coordinator now stands
            await w
    return _fetch_answer(broker, ctx, req, True)


def _fetch_answer(broker: Broker, ctx: RequestContext, req: Any, require_stable: bool) -> Response:
    if ctx.version >= 8:
        group_cls = ctx.nested("OffsetFetchResponseGroup")
        groups = []
        for g in req.groups:
            error, parts = _fetch_authorized(
                broker,
                ctx,
                g.group_id,
                g.topics,
                require_stable,
                ctx.version,
                *((g.member_id, g.member_epoch) if ctx.version >= 9 else (None, -1)),
            )
            topics = _fetch_topics(ctx, parts, "OffsetFetchResponseTopics", "OffsetFetchResponsePartitions")
            groups.append(codec.make(group_cls, group_id=g.group_id, topics=topics, error_code=error))
        return ctx.respond(throttle_time=0, groups=tuple(groups))
    error, parts = _fetch_authorized(broker, ctx, req.group_id, req.topics, require_stable, ctx.version)
    if error != E.NONE and ctx.version < 2:
        # v0-1 have no top-level error: every asked partition carries it
        parts = [
            type(
                "P",
                (),
                {"topic": t.name, "partition": i, "offset": -1, "leader_epoch": -1, "metadata": "", "error": error},
            )()
            for t in (req.topics or ())
            for i in t.partition_indexes
        ]
    topics = _fetch_topics(ctx, parts, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition")
    return ctx.respond(throttle_time=0, topics=topics, error_code=error)


@waits
async def offset_delete(broker: Broker, ctx: RequestContext, req: OffsetDeleteRequest) -> Response:
    # KafkaApis: DELETE on the group, READ on each topic
    if (refused := broker.access.refused(ctx, DELETE, GROUP, req.group_id)) is not None:
        return ctx.respond(error_code=refused.code, throttle_time=0, topics=())
    denied = broker.access.refused_names(ctx, READ, TOPIC, (t.name for t in req.topics))
    wanted = tuple((t.name, p.partition_index) for t in req.topics if t.name not in denied for p in t.partitions)
    request = OffsetDelete(group_id=req.group_id, partitions=wanted)
    try:
        payload = await broker.coordinator.call(
            req.group_id, lambda state, r, token, now, cfg: core.offset_delete(state, r, token, now), request
        )
    except CoordinatorError as exc:
        return ctx.respond(error_code=exc.code, throttle_time=0, topics=())
    refusals = [
        PartitionError(t.name, p.partition_index, TOPIC_AUTHORIZATION_FAILED)
        for t in req.topics
        if t.name in denied
        for p in t.partitions
    ]
    rows = (
        (e.topic, {"partition_index": e.partition, "error_code": e.error}) for e in [*payload.partitions, *refusals]
    )
    topics = ctx.by_topic("OffsetDeleteResponseTopic", "OffsetDeleteResponsePartition", rows)
    return ctx.respond(error_code=payload.error, throttle_time=0, topics=topics)
