"""CreatePartitions, DeleteRecords, DescribeConfigs, AlterConfigs and IncrementalAlterConfigs."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from kio.schema.alter_configs.v2.request import AlterConfigsRequest
from kio.schema.create_partitions.v3.request import CreatePartitionsRequest
from kio.schema.delete_records.v2.request import DeleteRecordsRequest
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest
from kio.schema.incremental_alter_configs.v1.request import IncrementalAlterConfigsRequest
from kio.static.protocol import Entity

from groupd.broker.config import KEYS
from groupd.broker.dataplane.creation import Creation, create_all
from groupd.broker.dataplane.topic_configs import (
    DYNAMIC_BROKER_DEFAULTS,
    LIST,
    TOPIC_CONFIGS,
    InvalidConfig,
    effective_topic_config,
    validate_topic_configs,
)
from groupd.broker.dataplane.topics import TopicError
from groupd.broker.dispatch import Answer, RequestContext, Response, later_of
from groupd.broker.handlers.group_configs import GROUP, alter_group, describe_group, duplicated_groups
from groupd.broker.handlers.topics import THROTTLED, mutations, throttle_time
from groupd.broker.security import access as acl
from groupd.broker.security.acl import CLUSTER_NAME
from groupd.clock import wall_ms
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.storage.errors import OffsetOutOfRange

if TYPE_CHECKING:
    from groupd.broker.app import Broker

TOPIC, BROKER = 2, 4
SOURCE_TOPIC, SOURCE_DYNAMIC_DEFAULT, SOURCE_STATIC_BROKER, SOURCE_DEFAULT = 1, 3, 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
TYPE_STRING = 2


BROKER_LOGGER = 8
# a config resource's ACL resource (KafkaApis/ConfigHelper: brokers' configs are the cluster's)
_CONFIG_ACL_RESOURCES = {TOPIC: acl.TOPIC, BROKER: acl.CLUSTER, BROKER_LOGGER: acl.CLUSTER, GROUP: acl.GROUP}


def _config_refused(broker: Broker, ctx: RequestContext, op: acl.Operation, res: Any) -> ErrorCode | None:
    """DESCRIBE_CONFIGS or ALTER_CONFIGS on a config resource refused: its type's authorization error."""
    rtype = _CONFIG_ACL_RESOURCES.get(res.resource_type)
    if rtype is None:
        return None  # the handler refuses the type itself
    name = CLUSTER_NAME if rtype == acl.CLUSTER else res.resource_name
    return None if broker.access.allowed(ctx, op, rtype, name) else acl.AUTHORIZATION_ERRORS[rtype]


def create_partitions(broker: Broker, ctx: RequestContext, req: CreatePartitionsRequest) -> Answer:
    result_cls = ctx.nested("CreatePartitionsTopicResult")
    quota = mutations(broker, ctx, strict_since=3)
    limits = broker.partition_limits
    try:  # counted as CreateTopics' are: the new partitions of every topic the request names
        limits.check_request(
            sum(max(0, t.count - (existing.partitions if (existing := broker.topics.get(t.name)) else 0))
                for t in req.topics)
        )
        too_many = None
    except TopicError as exc:
        too_many = exc
    rows: list[Creation] = []
    admitted: list[Creation] = []
    for t in req.topics:
        row = Creation(t.name, 0, t.count)
        rows.append(row)
        topic = broker.topics.get(t.name)
        try:
            if not broker.access.allowed(ctx, acl.ALTER, acl.TOPIC, t.name):  # KafkaApis: ALTER on the topic
                raise TopicError(ErrorCode.topic_authorization_failed, "The topic authorization is failed.")
            if too_many is not None:
                raise too_many
            if topic is None:
                raise TopicError(
                    ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition."
                )
            if t.count <= topic.partitions:
                message = (
                    f"Topic currently has {topic.partitions} partitions, which is higher than the requested {t.count}."
                )
                if t.count == topic.partitions:
                    message = f"Topic already has {topic.partitions} partitions."
                raise TopicError(ErrorCode.invalid_partitions, message)
            if t.assignments is not None and any(tuple(a.broker_ids) != (broker.node_id,) for a in t.assignments):
                raise TopicError(ErrorCode.invalid_replica_assignment, "Assignments may name only this broker.")
            if limits.busy(t.name):
                raise TopicError(  # Kafka's controller would have run the other request first
                    ErrorCode.invalid_partitions, f"Another request is adding partitions to {t.name} right now."
                )
            row.first = topic.partitions
            limits.check_broker(t.count - topic.partitions)
            if not quota.record(t.count - topic.partitions, wall_ms()):
                raise TopicError(ErrorCode.throttling_quota_exceeded, THROTTLED)
            if not req.validate_only:
                limits.reserve(t.name, t.count - topic.partitions)
                row.configs = dict(topic.configs)
                admitted.append(row)
        except TopicError as exc:
            row.error, row.message = exc.code, exc.message

    def answer(_: object = None) -> Response:
        results = tuple(
            codec.make(result_cls, name=row.name, error_code=row.error, error_message=row.message) for row in rows
        )
        return ctx.respond(throttle_time=throttle_time(broker, ctx, quota), results=results)

    if not admitted:
        return answer()
    return later_of(
        broker.partitions.run(create_all(admitted, broker.partitions, limits, broker.topics, broker.create_topic)),
        answer,
    )


def delete_records(broker: Broker, ctx: RequestContext, req: DeleteRecordsRequest) -> Answer:
    denied = broker.access.refused_names(ctx, acl.DELETE, acl.TOPIC, (t.name for t in req.topics))  # KafkaApis

    def answer(topic: str, p: Any) -> dict[str, Any]:
        if topic in denied:
            return {
                "partition_index": p.partition_index,
                "low_watermark": -1,
                "error_code": ErrorCode.topic_authorization_failed,
            }
        lg = broker.partitions.get(topic, p.partition_index)
        if lg is None:
            return {
                "partition_index": p.partition_index,
                "low_watermark": -1,
                "error_code": ErrorCode.unknown_topic_or_partition,
            }
        target = lg.high_watermark if p.offset == -1 else p.offset
        try:
            if target < 0:
                raise OffsetOutOfRange(f"offset {p.offset}")
            low = lg.delete_records_before(target)
        except OffsetOutOfRange:
            return {
                "partition_index": p.partition_index,
                "low_watermark": -1,
                "error_code": ErrorCode.offset_out_of_range,
            }
        return {"partition_index": p.partition_index, "low_watermark": low, "error_code": ErrorCode.none}

    rows = ((t.name, answer(t.name, p)) for t in req.topics for p in t.partitions)
    return ctx.respond(
        throttle_time=0, topics=ctx.by_topic("DeleteRecordsTopicResult", "DeleteRecordsPartitionResult", rows)
    )


def describe_configs(broker: Broker, ctx: RequestContext, req: DescribeConfigsRequest) -> Answer:
    result_cls = ctx.nested("DescribeConfigsResult")
    entry_cls = ctx.nested("DescribeConfigsResourceResult")
    include_synonyms = ctx.version >= 1 and req.include_synonyms  # v1+ (v0: Kafka 3.9's, no synonyms)
    synonym_cls = ctx.nested("DescribeConfigsSynonym") if include_synonyms else None
    broker.topics.document.catch_up()  # in a cluster: another node's latest topic and group configs
    broker.group_configs.document.catch_up()
    results = []
    for res in req.resources:
        wanted = set(res.configuration_keys) if res.configuration_keys else None
        error, message, entries = ErrorCode.none, None, []
        if (refused := _config_refused(broker, ctx, acl.DESCRIBE_CONFIGS, res)) is not None:
            error = refused
        elif res.resource_type == TOPIC:
            topic = broker.listed_topic(res.resource_name)
            if topic is None:
                error, message = ErrorCode.unknown_topic_or_partition, f"Topic {res.resource_name} does not exist."
            else:
                for key in sorted(TOPIC_CONFIGS):
                    if wanted is not None and key not in wanted:
                        continue
                    value, override = effective_topic_config(broker.config, topic.configs, key)
                    dynamic = DYNAMIC_BROKER_DEFAULTS.get(key)
                    source = (
                        SOURCE_TOPIC if override else SOURCE_DYNAMIC_DEFAULT if dynamic is not None else SOURCE_DEFAULT
                    )
                    synonyms: tuple[Entity, ...] = ()
                    if synonym_cls is not None:
                        synonyms = (
                            ((synonym_cls(name=key, value=value, source=SOURCE_TOPIC),) if override else ())
                            + (
                                (synonym_cls(name=key, value=dynamic, source=SOURCE_DYNAMIC_DEFAULT),)
                                if dynamic is not None
                                else ()
                            )
                            + (synonym_cls(name=key, value=TOPIC_CONFIGS[key].default, source=SOURCE_DEFAULT),)
                        )
                    entries.append(
                        codec.make(
                            entry_cls,
                            name=key,
                            value=value,
                            read_only=False,
                            config_source=source,
                            is_default=source == SOURCE_DEFAULT,
                            is_sensitive=False,
                            synonyms=synonyms,
                            config_type=TOPIC_CONFIGS[key].type,
                            documentation=None,
                        )
                    )
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(broker.node_id)):
                error, message = (
                    ErrorCode.invalid_request,
                    f"Unexpected broker id {res.resource_name}, expected {broker.node_id}",
                )
            else:
                for key, spec in KEYS.items():
                    if wanted is not None and key not in wanted:
                        continue
                    value = broker.config[key]
                    text = (
                        ""
                        if value is None
                        else (
                            str(value).lower()
                            if isinstance(value, bool)
                            else str(value)
                            if not isinstance(value, tuple)
                            else ":".join(map(str, value))
                        )
                    )
                    entries.append(
                        codec.make(
                            entry_cls,
                            name=key,
                            value=text,
                            read_only=True,
                            config_source=SOURCE_STATIC_BROKER,
                            is_default=False,
                            is_sensitive=False,
                            synonyms=(),
                            config_type=TYPE_STRING,
                            documentation=spec.doc if ctx.version >= 3 and req.include_documentation else None,
                        )
                    )
        elif res.resource_type == GROUP:
            documentation = ctx.version >= 3 and req.include_documentation
            error, message, entries = describe_group(
                broker, res.resource_name, wanted, synonym_cls, entry_cls, documentation
            )
        else:
            error, message = ErrorCode.invalid_request, f"Unsupported resource type {res.resource_type}"
        results.append(
            codec.make(
                result_cls,
                error_code=error,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
                configs=tuple(entries),
            )
        )
    return ctx.respond(throttle_time=0, results=tuple(results))


# (resource, its current overrides) -> its whole new set of overrides, or InvalidConfig
ConfigsUpdate = Callable[[Any, dict[str, str]], dict[str, str | None]]


def _alter_configs(broker: Broker, ctx: RequestContext, req: Any, update: ConfigsUpdate, incremental: bool) -> Response:
    """AlterConfigs and IncrementalAlterConfigs: the same checks, validation and storage per resource."""
    resp_cls = ctx.nested("AlterConfigsResourceResponse")
    out = []
    twice = duplicated_groups(req.resources)
    for res in req.resources:
        if (refused := _config_refused(broker, ctx, acl.ALTER_CONFIGS, res)) is not None:
            error, message = refused, None
        elif res.resource_type == GROUP:
            error, message = (
                (ErrorCode.invalid_request, "Each resource must appear at most once.")
                if res.resource_name in twice
                else alter_group(broker, res, req.validate_only, incremental)
            )
        else:
            error, message = _alter_resource(broker, res, req.validate_only, update)
        out.append(
            codec.make(
                resp_cls,
                error_code=error,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
            )
        )
    return ctx.respond(throttle_time=0, responses=tuple(out))


def _alter_resource(
    broker: Broker, res: Any, validate_only: bool, update: ConfigsUpdate
) -> tuple[ErrorCode, str | None]:
    if res.resource_type == BROKER:
        return ErrorCode.invalid_request, "groupd's broker configs are static (server.properties / --override)"
    if res.resource_type != TOPIC:
        return ErrorCode.invalid_request, f"Unsupported resource type {res.resource_type}"
    broker.topics.follow()  # in a cluster: an incremental change starts from another node's latest configs
    topic = broker.topics.get(res.resource_name)
    if topic is None:
        return ErrorCode.unknown_topic_or_partition, f"Topic {res.resource_name} does not exist."
    try:
        configs = validate_topic_configs(update(res, dict(topic.configs)))
    except InvalidConfig as exc:
        return ErrorCode.invalid_config, str(exc)
    if not validate_only:
        broker.topics.set_configs(topic.name, configs)
        broker.partitions.reconfigure(topic)
    return ErrorCode.none, None


def _replace(res: Any, current: dict[str, str]) -> dict[str, str | None]:
    return {c.name: c.value for c in res.configs}


def alter_configs(broker: Broker, ctx: RequestContext, req: AlterConfigsRequest) -> Answer:
    """The legacy AlterConfigs: the given set replaces the topic's overrides, as Kafka overwrites every
    existing one; keys left out go back to their defaults."""
    return _alter_configs(broker, ctx, req, _replace, incremental=False)


def incremental_alter_configs(broker: Broker, ctx: RequestContext, req: IncrementalAlterConfigsRequest) -> Answer:
    def apply_ops(res: Any, configs: dict[str, str]) -> dict[str, str | None]:
        for c in res.configs:
            if c.name not in TOPIC_CONFIGS:
                raise InvalidConfig(f"Unknown topic config name: {c.name}")
            if c.config_operation == SET:
                configs[c.name] = c.value
            elif c.config_operation == DELETE:
                configs.pop(c.name, None)
            elif c.config_operation in (APPEND, SUBTRACT) and TOPIC_CONFIGS[c.name].type == LIST:
                current = [v for v in effective_topic_config(broker.config, configs, c.name)[0].split(",") if v]
                items = [v for v in (c.value or "").split(",") if v]
                current = (
                    current + [v for v in items if v not in current]
                    if c.config_operation == APPEND
                    else [v for v in current if v not in items]
                )
                configs[c.name] = ",".join(current)
            else:
                raise InvalidConfig(f"Operation {c.config_operation} is not valid for {c.name}")
        return cast(dict[str, str | None], configs)  # read only by the caller

    return _alter_configs(broker, ctx, req, apply_ops, incremental=True)
