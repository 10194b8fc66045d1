"""CreateTopics and DeleteTopics."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, cast

from kio.schema.create_topics.v7.request import CreateTopicsRequest
from kio.schema.delete_topics.v5.request import DeleteTopicsRequest as DeleteTopicsRequestV5
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest

from groupd.broker.dataplane.creation import Creation, create_all, storage_failure
from groupd.broker.dataplane.topic_configs import InvalidConfig, validate_topic_configs
from groupd.broker.dataplane.topics import TopicError
from groupd.broker.dispatch import Answer, RequestContext, Response, later_of
from groupd.broker.ops.quotas import Mutations
from groupd.broker.security.access import DELETE, DESCRIBE, DESCRIBE_CONFIGS, TOPIC
from groupd.clock import wall_ms
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.storage.errors import StorageError

if TYPE_CHECKING:
    from groupd.broker.app import Broker


THROTTLED = "The throttling quota has been exceeded."


def mutations(broker: Broker, ctx: RequestContext, strict_since: int) -> Mutations:
    """This request's controller mutation quota: strict from ``strict_since`` on, permissive before."""
    return broker.quotas.mutations.for_request(
        ctx.conn.user if ctx.conn else "ANONYMOUS", ctx.client_id, ctx.version >= strict_since
    )


def throttle_time(broker: Broker, ctx: RequestContext, quota: Mutations) -> int:
    """The throttle time to answer with; the connection is muted that long, as for the byte rates."""
    ms = quota.throttle_ms(wall_ms())
    if ms > 0 and ctx.conn is not None:
        ctx.conn.mute_after_answer(ms)
        broker.metrics.throttled("controller_mutation_rate", ms)
    return ms


def requested_partitions(req: CreateTopicsRequest, default: int) -> int:
    """The partitions a CreateTopics asks for in all, counted as Kafka's controller counts them before
    validating each topic (ReplicationControlManager.validateTotalNumberOfPartitions)."""
    total = 0
    for topic in req.topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == -1:
            total += default
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    return total


def create_topics(broker: Broker, ctx: RequestContext, req: CreateTopicsRequest) -> Answer:
    result_cls = ctx.nested("CreatableTopicResult")
    quota = mutations(broker, ctx, strict_since=6)
    limits = broker.partition_limits
    try:  # Kafka refuses the whole request, every topic, before looking at any of them
        limits.check_request(requested_partitions(req, broker.config["num.partitions"]))
        too_many = None
    except TopicError as exc:
        too_many = exc
    seen: dict[str, int] = {}
    for topic in req.topics:
        seen[topic.name] = seen.get(topic.name, 0) + 1
    rows: list[tuple[Creation, int]] = []  # each topic's outcome and replication factor
    admitted: list[Creation] = []
    for topic in req.topics:
        row, replication = Creation(topic.name, 0, -1), -1
        try:
            if too_many is not None:
                raise too_many
            if seen[topic.name] > 1:
                raise TopicError(
                    ErrorCode.invalid_request,
                    f"Create topics request from client contains duplicate topic {topic.name}",
                )
            if not broker.access.may_create_topic(ctx, topic.name):  # KafkaApis: CREATE on the cluster or topic
                raise TopicError(ErrorCode.topic_authorization_failed, "Authorization failed.")
            partitions: int = topic.num_partitions
            if topic.assignments:
                if partitions != -1 or topic.replication_factor != -1:
                    raise TopicError(
                        ErrorCode.invalid_request,
                        "Both numPartitions or replicationFactor and replicasAssignments were set.",
                    )
                partitions = len(topic.assignments)
                for a in topic.assignments:
                    if tuple(a.broker_ids) != (broker.node_id,):
                        raise TopicError(
                            ErrorCode.invalid_replica_assignment,
                            f"Replica assignment {list(a.broker_ids)} names brokers other than {broker.node_id}",
                        )
            elif partitions == -1:
                partitions = broker.config["num.partitions"]
            replication = 1 if topic.replication_factor == -1 else topic.replication_factor
            if partitions < 1:
                raise TopicError(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
            if replication < 1:
                raise TopicError(ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0.")
            if replication > 1:
                raise TopicError(
                    ErrorCode.invalid_replication_factor,
                    f"Unable to replicate the partition {replication} time(s): The target replication factor of "
                    f"{replication} cannot be reached because only 1 broker(s) are registered.",
                )
            try:
                row.configs = validate_topic_configs({c.name: c.value for c in topic.configs})
            except InvalidConfig as exc:
                raise TopicError(ErrorCode.invalid_config, str(exc)) from None
            broker.topics.check_new(topic.name, partitions)
            if limits.busy(topic.name):
                raise TopicError(ErrorCode.topic_already_exists, f"Topic '{topic.name}' already exists.")
            limits.check_broker(partitions)
            if not quota.record(partitions, wall_ms()):  # Kafka charges validate-only requests too
                raise TopicError(ErrorCode.throttling_quota_exceeded, THROTTLED)
            row.last = partitions
            if not (ctx.version >= 1 and req.validate_only):  # v1+ (v0 always creates)
                limits.reserve(topic.name, partitions)
                admitted.append(row)
        except TopicError as exc:
            row.error, row.message, row.last, replication = exc.code, exc.message, -1, -1
        rows.append((row, replication))

    def answer(_: object = None) -> Response:
        results = tuple(
            codec.make(
                result_cls,
                name=row.name,
                topic_id=row.topic_id or codec.ZERO_UUID,
                error_code=row.error,
                error_message=row.message,
                # KafkaApis: the configs are the principal's to see with DESCRIBE_CONFIGS on the topic
                topic_config_error_code=(
                    ErrorCode.none
                    if broker.access.allowed(ctx, DESCRIBE_CONFIGS, TOPIC, row.name, log_denied=False)
                    else ErrorCode.topic_authorization_failed
                ),
                num_partitions=row.last if row.error == ErrorCode.none else -1,
                replication_factor=replication if row.error == ErrorCode.none else -1,
                configs=(),  # on an error too: Kafka leaves Configs at its default, an empty array
            )
            for row, replication in rows
        )
        return ctx.respond(throttle_time=throttle_time(broker, ctx, quota), topics=results)

    if not admitted:
        return answer()
    work = create_all(admitted, broker.partitions, limits, broker.topics, broker.create_topic)
    return later_of(broker.partitions.run(work), answer)


def delete_topics(broker: Broker, ctx: RequestContext, req: DeleteTopicsRequest) -> Answer:
    result_cls = ctx.nested("DeletableTopicResult")
    if ctx.version >= 6:
        wanted: list[tuple[str | None, uuid.UUID | None]] = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, None) for name in cast(DeleteTopicsRequestV5, req).topic_names]
    results = []
    quota = mutations(broker, ctx, strict_since=5)
    for name, topic_id in wanted:
        error, message = ErrorCode.none, None
        if name is None and topic_id is not None:
            topic = broker.topics.by_id(topic_id)
            if topic is None:
                error, message = ErrorCode.unknown_topic_id, "This server does not host this topic ID."
            else:
                name = topic.name
                if not broker.access.allowed(ctx, DESCRIBE, TOPIC, name):  # the name is not for it to learn
                    error, name = ErrorCode.topic_authorization_failed, None
        if error == ErrorCode.none and not broker.access.allowed(ctx, DELETE, TOPIC, cast(str, name)):
            error = ErrorCode.topic_authorization_failed  # KafkaApis: DELETE on the topic
        if error == ErrorCode.none:
            try:
                existing = broker.topics.get(cast(str, name))  # named, or found by its id above
                if existing is not None and not quota.record(existing.partitions, wall_ms()):
                    raise TopicError(ErrorCode.throttling_quota_exceeded, THROTTLED)
                topic = broker.delete_topic(cast(str, name))
                topic_id = topic.topic_id
            except TopicError as exc:
                error, message = exc.code, exc.message
            except (StorageError, OSError) as exc:  # e.g. no descriptor left to rewrite the registry
                error = ErrorCode.kafka_storage_error
                message = storage_failure(broker.partitions, f"deleting topic {name}", exc)
        results.append(
            codec.make(
                result_cls, name=name, topic_id=topic_id or codec.ZERO_UUID, error_code=error, error_message=message
            )
        )
    return ctx.respond(throttle_time=throttle_time(broker, ctx, quota), responses=tuple(results))
