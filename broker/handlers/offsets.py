"""OffsetCommit, TxnOffsetCommit, OffsetFetch and OffsetDelete: kio entities <-> the core's offsets requests."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from broker.dispatch import RequestContext, answered_later, handles
from coordinator import errors as E
from coordinator import shard as core
from coordinator.api import (
    CommitPartition,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    PartitionError,
    Result,
    TxnOffsetCommit,
)
from coordinator.service import CoordinatorError
from protocol import codec
from protocol.request import Encoded

if TYPE_CHECKING:
    from broker.app import Broker


_COMMIT_ANSWERS_MAX = 4096
_commit_answers: dict[tuple, Any] = {}


def _commit_response(ctx: RequestContext, errors: list[PartitionError]) -> Any:
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
        entity = ctx.respond(throttle_time=0, topics=ctx.by_topic("OffsetCommitResponseTopic", "OffsetCommitResponsePartition", rows))
        answer = Encoded(codec.encode(entity), next((e.error for e in errors if e.error), 0))
        if len(_commit_answers) >= _COMMIT_ANSWERS_MAX:
            _commit_answers.clear()
        _commit_answers[key] = answer
    return answer


def _known_partitions(broker: Broker, req: Any) -> tuple[list[CommitPartition], list[PartitionError]]:
    """The request's partitions of existing topics, and UNKNOWN_TOPIC_OR_PARTITION for the others
    (answered by the API layer, never sent to the coordinator)."""
    unknown: list[PartitionError] = []
    partitions = []
    topics = broker.topics
    for topic in req.topics:
        name = topic.name
        known = topics.get(name)
        for p in topic.partitions:
            index = p.partition_index
            if known is None or not 0 <= index < known.partitions:
                unknown.append(PartitionError(name, index, E.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            # topic, partition, offset, leader epoch (v6+), metadata: positional, one per partition
            partitions.append(CommitPartition(name, index, p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata))
    return partitions, unknown


def _partition_errors(partitions: list[CommitPartition], payload: Any, error: BaseException | None) -> list[PartitionError]:
    """A commit's answers: the core's, or the coordinator's refusal on every partition."""
    if error is None:
        return list(payload.partitions)
    if isinstance(error, CoordinatorError):
        return [PartitionError(p.topic, p.partition, error.code) for p in partitions]
    raise error


@handles(8)
def offset_commit(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    partitions, unknown = _known_partitions(broker, req)
    retention = getattr(req, "retention_time", None)
    request = OffsetCommit(
        req.group_id, req.generation_id_or_member_epoch, req.member_id, getattr(req, "group_instance_id", None),
        codec.millis(retention) if retention is not None else -1, tuple(partitions), ctx.version,
    )

    def finish(payload: Any, error: BaseException | None) -> Any:
        errors = _partition_errors(partitions, payload, error)
        if broker.metrics is not None and partitions:
            broker.metrics.commit(len(partitions))
        return _commit_response(ctx, errors + unknown)

    if partitions:
        return answered_later(broker, req.group_id, core.offset_commit, request, finish)
    try:
        broker.coordinator.shard_for(req.group_id)
    except CoordinatorError as exc:
        return finish(None, exc)
    return _commit_response(ctx, unknown)  # only unknown partitions: nothing to write


def _txn_commit_response(ctx: RequestContext, errors: list[PartitionError]) -> Any:
    if ctx.version < 2:
        # Kafka keeps pre-2.0 producers (v0-1) from COORDINATOR_LOAD_IN_PROGRESS, which they did not expect
        errors = [PartitionError(e.topic, e.partition, E.COORDINATOR_NOT_AVAILABLE) if e.error == E.COORDINATOR_LOAD_IN_PROGRESS else e for e in errors]
    rows = ((e.topic, {"partition_index": e.partition, "error_code": e.error}) for e in errors)
    return ctx.respond(throttle_time=0, topics=ctx.by_topic("TxnOffsetCommitResponseTopic", "TxnOffsetCommitResponsePartition", rows))


@handles(28)
def txn_offset_commit(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    """Offsets of a transaction: written as the producer's transactional batch, applied at its COMMIT
    marker (GroupCoordinator.complete_transaction). Kafka 4.x's KafkaApis: unknown topics and
    partitions answer UNKNOWN_TOPIC_OR_PARTITION there, and with none left the coordinator is not asked."""
    partitions, unknown = _known_partitions(broker, req)
    if not partitions:
        return _txn_commit_response(ctx, unknown)
    request = TxnOffsetCommit(
        req.transactional_id, req.group_id, req.producer_id, req.producer_epoch,
        getattr(req, "generation_id", -1), getattr(req, "member_id", ""), getattr(req, "group_instance_id", None),
        tuple(partitions), ctx.version,
    )

    def finish(payload: Any, error: BaseException | None) -> Any:
        return _txn_commit_response(ctx, _partition_errors(partitions, payload, error) + unknown)

    return answered_later(broker, req.group_id, core.txn_offset_commit, request, finish)


def _after_earlier_writes(state: Any, request: Any, token: int, now: int, cfg: Any) -> Result:
    """No write of its own: answered once every earlier Result of the shard is durable and replayed."""
    return Result(responses=((token, None),), replay=False)


def _fetch_group(broker: Broker, group_id: str, topics: Any, require_stable: bool, version: int, member_id: Any = None, member_epoch: int = -1):
    wanted = None if topics is None else tuple((t.name, tuple(t.partition_indexes)) for t in topics)
    request = OffsetFetch(group_id=group_id, topics=wanted, require_stable=require_stable, version=version, member_id=member_id, member_epoch=member_epoch)
    try:
        shard = broker.coordinator.shard_for(group_id)
    except CoordinatorError as exc:
        return exc.code, []
    payload = core.offset_fetch(shard.state, request, broker.coordinator.now())
    return payload.error, list(payload.partitions)


def _fetch_topics(ctx: RequestContext, parts: list, topic_name: str, part_name: str) -> tuple:
    rows = (
        (p.topic, {"partition_index": p.partition, "committed_offset": p.offset, "committed_leader_epoch": p.leader_epoch,
                   "metadata": p.metadata, "error_code": p.error})
        for p in parts
    )
    return ctx.by_topic(topic_name, part_name, rows)


@handles(9)
def offset_fetch(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    require_stable = getattr(req, "require_stable", False)
    if require_stable:
        # Kafka 4.x answers a require_stable fetch after the writes before it (an offset of a
        # transaction still being written is then pending, and counted)
        group_ids = [g.group_id for g in req.groups] if ctx.version >= 8 else [req.group_id]
        waits = [w for gid in group_ids if (w := _earlier_writes(broker, gid)) is not None]
        if waits:
            return _fetch_after(waits, broker, ctx, req)
    return _fetch_answer(broker, ctx, req, require_stable)


def _earlier_writes(broker: Broker, group_id: str) -> Any:
    """An awaitable for the group's shard's writes in flight, or None when it has none."""
    try:
        shard = broker.coordinator.shard_for(group_id)
    except CoordinatorError:
        return None
    if not shard.queue:
        return None
    return broker.coordinator.call(group_id, _after_earlier_writes, None)


async def _fetch_after(waits: list[Any], broker: Broker, ctx: RequestContext, req: Any) -> Any:
    for w in waits:
        with contextlib.suppress(CoordinatorError):  # the fetch answers as the coordinator now stands
            await w
    return _fetch_answer(broker, ctx, req, True)


def _fetch_answer(broker: Broker, ctx: RequestContext, req: Any, require_stable: bool) -> Any:
    if ctx.version >= 8:
        group_cls = ctx.nested("OffsetFetchResponseGroup")
        groups = []
        for g in req.groups:
            error, parts = _fetch_group(broker, g.group_id, g.topics, require_stable, ctx.version, getattr(g, "member_id", None), getattr(g, "member_epoch", -1))
            topics = _fetch_topics(ctx, parts, "OffsetFetchResponseTopics", "OffsetFetchResponsePartitions")
            groups.append(codec.make(group_cls, group_id=g.group_id, topics=topics, error_code=error))
        return ctx.respond(throttle_time=0, groups=tuple(groups))
    error, parts = _fetch_group(broker, req.group_id, req.topics, require_stable, ctx.version)
    if error != E.NONE and ctx.version < 2:
        # v0-1 have no top-level error: every asked partition carries it
        parts = [type("P", (), {"topic": t.name, "partition": i, "offset": -1, "leader_epoch": -1, "metadata": "", "error": error})() for t in (req.topics or ()) for i in t.partition_indexes]
    topics = _fetch_topics(ctx, parts, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition")
    return ctx.respond(throttle_time=0, topics=topics, error_code=error)


@handles(47)
async def offset_delete(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    wanted = tuple((t.name, p.partition_index) for t in req.topics for p in t.partitions)
    request = OffsetDelete(group_id=req.group_id, partitions=wanted)
    try:
        payload = await broker.coordinator.call(
            req.group_id, lambda state, r, token, now, cfg: core.offset_delete(state, r, token, now), request
        )
    except CoordinatorError as exc:
        return ctx.respond(error_code=exc.code, throttle_time=0, topics=())
    rows = ((e.topic, {"partition_index": e.partition, "error_code": e.error}) for e in payload.partitions)
    topics = ctx.by_topic("OffsetDeleteResponseTopic", "OffsetDeleteResponsePartition", rows)
    return ctx.respond(error_code=payload.error, throttle_time=0, topics=topics)
