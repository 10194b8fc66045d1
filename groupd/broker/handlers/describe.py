"""DescribeTopicPartitions, ListConfigResources and DescribeQuorum: the KRaft-era describe APIs.

Answered as a single-node Kafka 4.2 (KRaft, combined broker and controller, no authorizer) answers them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.describe_quorum.v2.request import DescribeQuorumRequest
from kio.schema.describe_topic_partitions.v0.request import DescribeTopicPartitionsRequest
from kio.schema.list_config_resources.v1.request import ListConfigResourcesRequest
from kio.static.protocol import Entity

from groupd.broker.dataplane.topics import TopicError, validate_name
from groupd.broker.dispatch import Answer, RequestContext, Response
from groupd.broker.handlers.cluster import partition_state
from groupd.broker.handlers.operations import NOT_REQUESTED
from groupd.broker.security import access as acl
from groupd.clock import wall_ms
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import INTERNAL_TOPICS

if TYPE_CHECKING:
    from groupd.broker.app import Broker


# ---------------------------------------------------------------- DescribeTopicPartitions (KIP-966)


def describe_topic_partitions(broker: Broker, ctx: RequestContext, req: DescribeTopicPartitionsRequest) -> Answer:
    """Topics in name order, at most ``min(response_partition_limit, max.request.partition.size.limit)``
    partitions (at least one), resumed from ``cursor``; ``next_cursor`` names the first partition left out.

    As Kafka's DescribeTopicPartitionsRequestHandler: an empty list is every topic (those Metadata lists);
    the cursor's partition applies to the cursor's topic alone, names before the cursor's are skipped, and
    a named list must contain the cursor's topic; a page that ends with a topic's last partition points
    the cursor at the next topic's partition 0, whether it exists or not.
    """
    cursor = req.cursor
    first_name = "" if cursor is None else cursor.topic_name
    every = not req.topics
    if every:
        names = {t.name for t in broker.listed_topics() if t.name >= first_name}
    else:
        names = {t.name for t in req.topics if t.name >= first_name}
        if cursor is not None and cursor.topic_name not in names:
            return _refused(ctx, req, ErrorCode.invalid_request)
    if cursor is not None and cursor.partition_index < 0:
        return _refused(ctx, req, ErrorCode.invalid_request)

    topic_cls, part_cls = (
        ctx.nested("DescribeTopicPartitionsResponseTopic"),
        ctx.nested("DescribeTopicPartitionsResponsePartition"),
    )
    remaining = max(min(broker.config["max.request.partition.size.limit"], req.response_partition_limit), 1)
    out: list[Any] = []
    next_cursor = None
    access = broker.access
    for name in sorted(names):
        if remaining == 0:
            next_cursor = codec.make(ctx.nested("Cursor"), topic_name=name, partition_index=0)
            break
        # KafkaApis: DESCRIBE on each topic; every topic leaves the others out, named ones are refused
        if not access.allowed(ctx, acl.DESCRIBE, acl.TOPIC, name, log_denied=not every):
            if not every:
                refused = ErrorCode.topic_authorization_failed
                out.append(
                    codec.make(
                        topic_cls,
                        error_code=refused,
                        name=name,
                        topic_id=codec.ZERO_UUID,
                        is_internal=False,
                        partitions=(),
                        topic_authorized_operations=NOT_REQUESTED,
                    )
                )
            continue
        topic = broker.listed_topic(name)
        if topic is None:
            if not every:
                out.append(
                    codec.make(
                        topic_cls,
                        error_code=_unknown_topic_error(name),
                        name=name,
                        topic_id=codec.ZERO_UUID,
                        is_internal=name in INTERNAL_TOPICS,
                        partitions=(),
                        topic_authorized_operations=access.operations(ctx, acl.TOPIC, name),
                    )
                )
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        end = min(topic.partitions, start + remaining)
        partitions = tuple(
            # a healthy partition: its eligible-leader lists are empty, not null; a leader without the request's
            # listener is leader -1 with no error (Kafka's getPartitionMetadataForDescribeTopicResponse)
            codec.make(
                part_cls,
                **partition_state(broker, i, name, ctx.listener, ErrorCode.none),
                eligible_leader_replicas=(),
                last_known_elr=(),
            )
            for i in range(start, end)
        )
        out.append(
            codec.make(
                topic_cls,
                error_code=ErrorCode.none,
                name=name,
                topic_id=topic.topic_id,
                is_internal=name in INTERNAL_TOPICS,
                partitions=partitions,
                topic_authorized_operations=access.operations(ctx, acl.TOPIC, name),
            )
        )
        if end < topic.partitions:
            next_cursor = codec.make(ctx.nested("Cursor"), topic_name=name, partition_index=end)
            break
        remaining -= len(partitions)
    return ctx.respond(throttle_time=0, topics=tuple(out), next_cursor=next_cursor)


def _unknown_topic_error(name: str) -> ErrorCode:
    try:
        validate_name(name)
    except TopicError as exc:
        return exc.code
    return ErrorCode.unknown_topic_or_partition


def _refused(ctx: RequestContext, req: Any, error: ErrorCode) -> Response:
    """Kafka's error answer for the whole request: every requested topic, in request order, with the error."""
    topic_cls = ctx.nested("DescribeTopicPartitionsResponseTopic")
    topics = tuple(
        codec.make(
            topic_cls,
            error_code=error,
            name=t.name,
            topic_id=codec.ZERO_UUID,
            is_internal=False,
            partitions=(),
            topic_authorized_operations=NOT_REQUESTED,
        )
        for t in req.topics
    )
    return ctx.respond(throttle_time=0, topics=topics, next_cursor=None)


# ---------------------------------------------------------------- ListConfigResources (KIP-1142)

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32  # ConfigResource.Type ids
# ListConfigResourcesRequest.supportedResourceTypes: v0 (ListClientMetricsResources) only client metrics
_SUPPORTED_TYPES = {0: frozenset({CLIENT_METRICS}), 1: frozenset({TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP})}


def list_config_resources(broker: Broker, ctx: RequestContext, req: ListConfigResourcesRequest) -> Answer:
    """The resources of the asked types (none asked: every supported type), as KafkaApis lists them.

    Kafka's order is fixed: groups, client metrics, the brokers as broker loggers, the brokers, the topics.
    It lists the groups that have configs (GroupConfigManager's, in name order here) and the client-metrics
    subscriptions, which groupd does not keep (always none). A type the version does not support answers
    UNSUPPORTED_VERSION with no resources.
    """
    if not broker.access.cluster(ctx, acl.DESCRIBE_CONFIGS):  # KafkaApis: DESCRIBE_CONFIGS on the cluster, first
        return ctx.respond(throttle_time=0, error_code=ErrorCode.cluster_authorization_failed, config_resources=())
    supported = _SUPPORTED_TYPES[ctx.version]
    wanted = (frozenset(req.resource_types) if ctx.version >= 1 else frozenset()) or supported
    if not wanted <= supported:
        return ctx.respond(throttle_time=0, error_code=ErrorCode.unsupported_version, config_resources=())
    entry = ctx.nested("ConfigResource")
    node = str(broker.node_id)
    found = [(GROUP, group_id) for group_id in broker.group_configs.group_ids()] if GROUP in wanted else []
    found += [(kind, node) for kind in (BROKER_LOGGER, BROKER) if kind in wanted]
    if TOPIC in wanted:
        # Kafka walks its metadata image's map (no defined order); groupd sorts
        found += [(TOPIC, name) for name in sorted(t.name for t in broker.listed_topics())]
    resources = tuple(codec.make(entry, resource_name=name, resource_type=kind) for kind, name in found)
    return ctx.respond(throttle_time=0, error_code=ErrorCode.none, config_resources=resources)


# ---------------------------------------------------------------- DescribeQuorum (KIP-595, KIP-853)

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
# A fresh single voter becomes candidate, then leader, in epoch 1 (Kafka adds one at every restart).
QUORUM_LEADER_EPOCH = 1
# groupd keeps no metadata log (topics live in log.dirs/topics.json), so its log is empty: the end
# offset and high watermark are 0 and stay 0.
METADATA_END_OFFSET = 0
NO_DIRECTORY_ID = codec.ZERO_UUID  # no metadata log directory, as Kafka reports a voter without one
UNKNOWN_PARTITION_MESSAGE = "This server does not host this topic-partition."


def describe_quorum(broker: Broker, ctx: RequestContext, req: DescribeQuorumRequest) -> Answer:
    """This node as the whole quorum of ``__cluster_metadata-0``: leader, only voter, no observers.

    As KafkaRaftClient: anything but exactly that one partition answers UNKNOWN_TOPIC_OR_PARTITION on
    every requested partition; the leader reports the current time as both of its own timestamps.
    """
    topics = req.topics
    if not broker.access.cluster(ctx, acl.DESCRIBE):  # ControllerApis: DESCRIBE on the cluster
        return ctx.respond(
            error_code=ErrorCode.cluster_authorization_failed, error_message=acl.CLUSTER_DENIED, topics=(), nodes=()
        )
    if not (
        len(topics) == 1
        and topics[0].topic_name == METADATA_TOPIC
        and len(topics[0].partitions) == 1
        and topics[0].partitions[0].partition_index == METADATA_PARTITION
    ):
        return _quorum_refused(ctx, topics, ErrorCode.unknown_topic_or_partition, UNKNOWN_PARTITION_MESSAGE)
    node = broker.node_id
    now = wall_ms()
    voter = codec.make(
        ctx.nested("ReplicaState"),
        replica_id=node,
        replica_directory_id=NO_DIRECTORY_ID,
        log_end_offset=METADATA_END_OFFSET,
        last_fetch_timestamp=now,
        last_caught_up_timestamp=now,
    )
    partition = codec.make(
        ctx.nested("PartitionData"),
        partition_index=METADATA_PARTITION,
        error_code=ErrorCode.none,
        error_message=None,
        leader_id=node,
        leader_epoch=QUORUM_LEADER_EPOCH,
        high_watermark=METADATA_END_OFFSET,
        current_voters=(voter,),
        observers=(),
    )
    topic = codec.make(ctx.nested("TopicData"), topic_name=METADATA_TOPIC, partitions=(partition,))
    nodes: tuple[Entity, ...] = ()
    if ctx.version >= 2:  # the voters' endpoints (KIP-853)
        listeners = tuple(
            codec.make(ctx.nested("Listener"), name=spec.name, host=address[0], port=address[1])
            for spec in broker.config.listeners
            if (address := broker.advertised_for(spec.name)) is not None
        )
        nodes = (codec.make(ctx.nested("Node"), node_id=node, listeners=listeners),)
    return ctx.respond(error_code=ErrorCode.none, error_message=None, topics=(topic,), nodes=nodes)


def _quorum_refused(ctx: RequestContext, topics: Any, error: ErrorCode, message: str) -> Response:
    """DescribeQuorumRequest.getPartitionLevelErrorResponse: the error on every requested partition."""
    topic_cls, part_cls = ctx.nested("TopicData"), ctx.nested("PartitionData")
    out = tuple(
        codec.make(
            topic_cls,
            topic_name=t.topic_name,
            partitions=tuple(
                codec.make(
                    part_cls,
                    partition_index=p.partition_index,
                    error_code=error,
                    error_message=message,
                    leader_id=0,
                    leader_epoch=0,
                    high_watermark=0,
                    current_voters=(),
                    observers=(),
                )
                for p in t.partitions
            ),
        )
        for t in topics
    )
    return ctx.respond(error_code=ErrorCode.none, error_message=None, topics=out, nodes=())
