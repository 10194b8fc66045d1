"""ApiVersions, Metadata and FindCoordinator: how a client finds its way around."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.api_versions.v4.response import ApiVersionsResponse
from kio.schema.describe_cluster.v2.request import DescribeClusterRequest
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest as FindCoordinatorRequestV3
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.metadata.v10.request import MetadataRequest as MetadataRequestV10
from kio.schema.metadata.v13.request import MetadataRequest
from kio.static.protocol import Entity

from groupd.broker.dataplane.creation import create_now
from groupd.broker.dataplane.leader_epochs import LEADER_EPOCH
from groupd.broker.dataplane.topics import TopicError, validate_name
from groupd.broker.dispatch import Answer, RequestContext
from groupd.broker.handlers.operations import NOT_REQUESTED
from groupd.broker.security.access import CLUSTER, CLUSTER_ACTION, DESCRIBE, GROUP, TOPIC, TRANSACTIONAL_ID
from groupd.broker.security.acl import CLUSTER_NAME
from groupd.coordinator.partitioning import partition_for
from groupd.coordinator.share_state.keys import parse_coordinator_key
from groupd.protocol import codec
from groupd.protocol.api_table import API_TABLE
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import INTERNAL_TOPICS, OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_STATE_TOPIC

if TYPE_CHECKING:
    from groupd.broker.app import Broker

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
KEY_TYPE_SHARE = 2


def partition_state(
    broker: Broker,
    index: int,
    topic: str | None = None,
    listener: str | None = None,
    unreachable: ErrorCode = ErrorCode.listener_not_found,
) -> dict[str, Any]:
    """A partition as this single node describes it: it leads every replica set, alone and in sync. In a
    cluster (docs/cluster.md) the leader is the node holding the partition's lease, the one replica;
    LEADER_NOT_AVAILABLE while nobody holds it (a takeover under way), as Kafka says between leaders. A live
    leader without the request's ``listener`` is Kafka's KRaftMetadataCache answer: leader -1 at the
    partition's epoch, the leader offline, and ``unreachable`` (LISTENER_NOT_FOUND to Metadata v6+,
    LEADER_NOT_AVAILABLE before; no error in DescribeTopicPartitions)."""
    node, epoch = broker.node_id, LEADER_EPOCH
    if broker.cluster is not None and topic is not None:
        leader = broker.cluster.leader(topic, index)
        if leader is None:
            return {
                "error_code": ErrorCode.leader_not_available,
                "partition_index": index,
                "leader_id": -1,
                "leader_epoch": LEADER_EPOCH,
                "replica_nodes": (),
                "isr_nodes": (),
                "offline_replicas": (),
            }
        node, epoch = leader, broker.cluster.view_epoch(topic, index)  # the lease's epoch
        if broker.cluster.registered(node) and broker.cluster.endpoint(node, listener) is None:
            return {
                "error_code": unreachable,
                "partition_index": index,
                "leader_id": -1,
                "leader_epoch": epoch,
                "replica_nodes": (node,),
                "isr_nodes": (node,),
                "offline_replicas": (node,),
            }
    return {
        "error_code": ErrorCode.none,
        "partition_index": index,
        "leader_id": node,
        "leader_epoch": epoch,
        "replica_nodes": (node,),
        "isr_nodes": (node,),
        "offline_replicas": (),
    }


def api_versions_body(cls: type, error: ErrorCode = ErrorCode.none) -> ApiVersionsResponse:
    entry = codec.nested(cls, "ApiVersion")
    keys = tuple(
        entry(api_key=s.key, min_version=s.min_version, max_version=s.max_version)
        for s in sorted(API_TABLE.values(), key=lambda s: s.key)
    )
    return codec.make(cls, error_code=error, api_keys=keys, throttle_time=0)


SHARE_VERSION = "share.version"  # Kafka's feature (ShareVersion): level 1 enables share groups (KIP-932)


def api_versions(broker: Broker, ctx: RequestContext, req: ApiVersionsRequest) -> Answer:
    """v3+ also name the features: ``share.version`` supported 0-1, finalized at the broker's level
    (Kafka lists no finalized entry for a feature at level 0)."""
    if ctx.version < 3:
        return api_versions_body(ctx.response_class)
    cls = ctx.response_class
    level = broker.config["share.version"]
    body = api_versions_body(cls)
    supported = (codec.nested(cls, "SupportedFeatureKey")(name=SHARE_VERSION, min_version=0, max_version=1),)
    finalized = (
        (
            codec.nested(cls, "FinalizedFeatureKey")(
                name=SHARE_VERSION, max_version_level=level, min_version_level=level
            ),
        )
        if level
        else ()
    )
    return codec.make(
        cls,
        error_code=body.error_code,
        api_keys=body.api_keys,
        throttle_time=0,
        supported_features=supported,
        finalized_features_epoch=0 if finalized else -1,
        finalized_features=finalized,
    )


def _partitions(ctx: RequestContext, broker: Broker, count: int, topic: str | None) -> tuple:
    part = ctx.nested("MetadataResponsePartition")
    # KafkaApis: LISTENER_NOT_FOUND from v6, LEADER_NOT_AVAILABLE before, for a leader without the listener
    unreachable = ErrorCode.listener_not_found if ctx.version >= 6 else ErrorCode.leader_not_available
    return tuple(codec.make(part, **partition_state(broker, i, topic, ctx.listener, unreachable)) for i in range(count))


def _topic_entry(
    ctx: RequestContext,
    broker: Broker,
    name: str | None,
    topic_id,
    error: ErrorCode,
    partitions: int,
    ops: int = NOT_REQUESTED,
) -> Entity:
    return codec.make(
        ctx.nested("MetadataResponseTopic"),
        error_code=error,
        name=name,
        topic_id=topic_id,
        is_internal=name in INTERNAL_TOPICS,
        partitions=_partitions(ctx, broker, partitions, name) if error == ErrorCode.none else (),
        topic_authorized_operations=ops,
    )


def metadata(broker: Broker, ctx: RequestContext, req: MetadataRequest) -> Answer:
    registry = broker.topics
    access = broker.access
    asked_ops = ctx.version >= 8 and req.include_topic_authorized_operations

    def entry(
        ctx: RequestContext, broker: Broker, name: str | None, topic_id: Any, error: ErrorCode, partitions: int
    ) -> Entity:
        """A topic's entry, with its authorized operations when asked (v8+): not for a refused one."""
        refused = error == ErrorCode.topic_authorization_failed
        ops = access.operations(ctx, TOPIC, name) if asked_ops and name is not None and not refused else NOT_REQUESTED
        return _topic_entry(ctx, broker, name, topic_id, error, partitions, ops)

    def hidden(name: str | None, topic_id: Any = codec.ZERO_UUID) -> Entity | None:
        """KafkaApis: a topic the principal may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED whether
        it exists or not (with its id when asked by id, else the zero id)."""
        if name is None or access.allowed(ctx, DESCRIBE, TOPIC, name):
            return None
        shown = None if topic_id != codec.ZERO_UUID else name
        return entry(ctx, broker, shown, topic_id, ErrorCode.topic_authorization_failed, 0)

    zero_id = codec.ZERO_UUID
    entries = []
    if req.topics is None or (ctx.version == 0 and not req.topics):
        # null (v1+) or empty (v0) means every topic: those the principal may not DESCRIBE are left out
        for topic in broker.listed_topics():
            if access.allowed(ctx, DESCRIBE, TOPIC, topic.name, log_denied=False):
                entries.append(entry(ctx, broker, topic.name, topic.topic_id, ErrorCode.none, topic.partitions))
    elif 10 <= ctx.version < 12 and any(t.name is None or t.topic_id != zero_id for t in req.topics):
        # Kafka: v10-v11 carry a topic id field but take names only; the whole request fails, every topic
        # answered INVALID_REQUEST (a null name as ""), with no brokers, cluster id or controller
        invalid = tuple(entry(ctx, broker, t.name or "", t.topic_id, ErrorCode.invalid_request, 0) for t in req.topics)
        return ctx.respond(
            throttle_time=0, brokers=(), cluster_id=None, controller_id=-1, topics=invalid, error_code=ErrorCode.none
        )
    else:
        auto = broker.config["auto.create.topics.enable"] and (ctx.version < 4 or req.allow_auto_topic_creation)
        for wanted in req.topics:
            name = wanted.name
            wanted_id = wanted.topic_id if ctx.version >= 10 else None
            if refused := hidden(name if name is not None else _name_of(broker, wanted_id), wanted_id or zero_id):
                entries.append(refused)
                continue
            internal = broker.internal_topic(name, wanted_id)
            if internal is not None and internal.exists(create=auto):  # asked for by name, Kafka creates it
                entries.append(
                    entry(ctx, broker, internal.name, internal.topic_id, ErrorCode.none, internal.partitions)
                )
                continue
            if name is None and wanted_id not in (None, zero_id):
                known = registry.by_id(wanted_id)
                if known is None:
                    entries.append(entry(ctx, broker, None, wanted_id, ErrorCode.unknown_topic_id, 0))
                else:
                    entries.append(entry(ctx, broker, known.name, known.topic_id, ErrorCode.none, known.partitions))
                continue
            known = registry.get(cast(str, name))  # a null name finds nothing
            if known is None:
                try:
                    validate_name(name)
                except TopicError:
                    entries.append(entry(ctx, broker, name, zero_id, ErrorCode.invalid_topic_exception, 0))
                    continue
                if auto and not access.may_create_topic(ctx, cast(str, name)):
                    entries.append(entry(ctx, broker, name, zero_id, ErrorCode.topic_authorization_failed, 0))
                    continue
                if auto and name not in INTERNAL_TOPICS:
                    try:
                        known = create_now(
                            cast(str, name),
                            broker.config["num.partitions"],
                            broker.partitions,
                            broker.partition_limits,
                            broker.create_topic,
                        )
                    except TopicError as exc:
                        entries.append(entry(ctx, broker, name, zero_id, exc.code, 0))
                        continue
                else:
                    entries.append(entry(ctx, broker, name, zero_id, ErrorCode.unknown_topic_or_partition, 0))
                    continue
            entries.append(entry(ctx, broker, known.name, known.topic_id, ErrorCode.none, known.partitions))
    asked_cluster = (
        8 <= ctx.version <= 10 and cast(MetadataRequestV10, req).include_cluster_authorized_operations
    )  # DescribeCluster's from v11
    return ctx.respond(
        throttle_time=0,
        brokers=_brokers(broker, ctx, "MetadataResponseBroker", "node_id"),
        cluster_id=broker.config["cluster.id"],
        controller_id=broker.node_id,
        topics=tuple(entries),
        cluster_authorized_operations=access.cluster_operations(ctx) if asked_cluster else NOT_REQUESTED,
        error_code=ErrorCode.none,  # v13's top-level error (KIP-1102): one node never asks a client to rebootstrap
    )


def _name_of(broker: Broker, topic_id: Any) -> str | None:
    known = broker.topics.by_id(topic_id) if topic_id not in (None, codec.ZERO_UUID) else None
    return known.name if known is not None else None


def _brokers(broker: Broker, ctx: RequestContext, entity: str, id_field: str, **fields: Any) -> tuple:
    """This node as seen from the listener the request came through; none if that listener is not
    advertised (Kafka's metadata cache has no endpoint of the broker for it). In a cluster, every live
    node that registered that listener, at its address there (Kafka leaves out a broker without it)."""
    if broker.cluster is not None:
        nodes = broker.cluster.live_nodes(ctx.listener)
    else:
        address = broker.advertised_for(ctx.listener)
        nodes = [] if address is None else [(broker.node_id, *address, None)]
    cls = ctx.nested(entity)
    return tuple(
        codec.make(cls, host=host, port=port, rack=rack, **{id_field: node}, **fields)
        for node, host, port, rack in nodes
    )


BROKERS, CONTROLLERS = 1, 2  # DescribeCluster's endpoint types (KIP-919)


def describe_cluster(broker: Broker, ctx: RequestContext, req: DescribeClusterRequest) -> Answer:
    """The one broker, as Kafka's DescribeCluster describes its brokers: asked for controllers, a broker
    answers MISMATCHED_ENDPOINT_TYPE, and an unknown type UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST at
    v0, which cannot name one)."""
    wanted = req.endpoint_type if ctx.version >= 1 else BROKERS
    error, message = ErrorCode.none, None
    if wanted not in (BROKERS, CONTROLLERS):
        error = ErrorCode.invalid_request if ctx.version == 0 else ErrorCode.unsupported_endpoint_type
        message = f"Unsupported endpoint type {wanted}"
    elif wanted != BROKERS:
        error = ErrorCode.invalid_request if ctx.version == 0 else ErrorCode.mismatched_endpoint_type
        message = "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
    if error != ErrorCode.none:
        return ctx.respond(
            throttle_time=0,
            error_code=error,
            error_message=message,
            endpoint_type=wanted,
            cluster_id="",
            controller_id=-1,
            brokers=(),
            cluster_authorized_operations=NOT_REQUESTED,
        )
    entries = _brokers(broker, ctx, "DescribeClusterBroker", "broker_id", is_fenced=False)
    return ctx.respond(
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=BROKERS,
        cluster_id=broker.config["cluster.id"],
        controller_id=broker.node_id,
        brokers=entries,
        cluster_authorized_operations=(
            broker.access.cluster_operations(ctx) if req.include_cluster_authorized_operations else NOT_REQUESTED
        ),
    )


def find_coordinator(broker: Broker, ctx: RequestContext, req: FindCoordinatorRequest) -> Answer:
    key_type = req.key_type if ctx.version >= 1 else KEY_TYPE_GROUP
    keys = req.coordinator_keys if ctx.version >= 4 else (cast(FindCoordinatorRequestV3, req).key,)
    address = broker.advertised_for(ctx.listener)
    answers = [
        _refused_key(broker, ctx, key_type, key)
        or _coordinator_for(broker, ctx.version, key_type, key, address, ctx.listener)
        for key in keys
    ]
    if ctx.version >= 4:
        entry = ctx.nested("Coordinator")
        coordinators = tuple(
            entry(key=key, node_id=node, host=host, port=port, error_code=err, error_message=None)
            for key, (err, node, host, port) in zip(keys, answers, strict=True)
        )
        return ctx.respond(throttle_time=0, coordinators=coordinators)
    err, node, host, port = answers[0]
    message = "NONE" if err == ErrorCode.none else _message(err)
    return ctx.respond(throttle_time=0, error_code=err, error_message=message, node_id=node, host=host, port=port)


def _refused_key(
    broker: Broker, ctx: RequestContext, key_type: int, key: str
) -> tuple[ErrorCode, int, str, int] | None:
    """KafkaApis.getCoordinator: DESCRIBE on the group or the transactional id, CLUSTER_ACTION for a share
    coordinator's key (v6+); refused, no node."""
    access = broker.access
    if key_type == KEY_TYPE_GROUP:
        refused = access.refused(ctx, DESCRIBE, GROUP, key)
    elif key_type == KEY_TYPE_TRANSACTION:
        refused = access.refused(ctx, DESCRIBE, TRANSACTIONAL_ID, key)
    elif key_type == KEY_TYPE_SHARE and ctx.version >= 6:
        refused = access.refused(ctx, CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
    else:
        return None
    return None if refused is None else (ErrorCode(refused.code), -1, "", -1)


def _message(err: ErrorCode) -> str:
    return (err.__doc__ or err.name) if err.__doc__ != ErrorCode.__doc__ else err.name


def _coordinator_for(
    broker: Broker, version: int, key_type: int, key: str, address: tuple[str, int] | None, listener: str | None
) -> tuple[ErrorCode, int, str, int]:
    if key_type == KEY_TYPE_SHARE and version >= 6:  # the share coordinator, for "group:topicId:partition"
        share_key = parse_coordinator_key(key)
        if share_key is None:  # Kafka's SharePartitionKey.validate
            return ErrorCode.invalid_request, -1, "", -1
        if address is None:
            return ErrorCode.coordinator_not_available, -1, "", -1
        broker.internal_topics[SHARE_STATE_TOPIC].exists(create=True)  # Kafka creates it at the first lookup
        if broker.cluster is not None:  # the holder of the key's __share_group_state partition
            partition = broker.share_coordinator.partition_for(share_key)
            if not broker.cluster.serves((SHARE_STATE_TOPIC, partition)):
                return _cluster_coordinator(broker, SHARE_STATE_TOPIC, partition, listener)
        return ErrorCode.none, broker.node_id, *address  # alone, this node owns every __share_group_state partition
    if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
        return ErrorCode.invalid_request, -1, "", -1  # a share key before v6, or an unknown key type
    if address is None:
        return ErrorCode.coordinator_not_available, -1, "", -1  # no endpoint on the request's listener
    if key_type == KEY_TYPE_GROUP:
        partition = partition_for(key, broker.config["offsets.topic.num.partitions"])
        if broker.cluster is not None and not broker.owns_offsets_partition(partition):
            broker.internal_topics[OFFSETS_TOPIC].exists(create=True)  # listed by this node too from now on
            return _cluster_coordinator(broker, OFFSETS_TOPIC, partition, listener)
        if not broker.owns_offsets_partition(partition):
            return ErrorCode.not_coordinator, -1, "", -1
        broker.internal_topics[OFFSETS_TOPIC].exists(
            create=True
        )  # Kafka creates __consumer_offsets at the first lookup
        return ErrorCode.none, broker.node_id, *address
    # a transactional id: this node coordinates every one, or in a cluster the ids of the partitions it holds
    broker.internal_topics[TXN_STATE_TOPIC].exists(create=True)  # and __transaction_state, at the first
    if broker.cluster is not None:
        partition = broker.transactions.partition_for(key)
        if not broker.cluster.serves((TXN_STATE_TOPIC, partition)):
            return _cluster_coordinator(broker, TXN_STATE_TOPIC, partition, listener)
    return ErrorCode.none, broker.node_id, *address


def _cluster_coordinator(
    broker: Broker, topic: str, partition: int, listener: str | None
) -> tuple[ErrorCode, int, str, int]:
    """The node holding the lease of the key's partition (``__consumer_offsets`` for a group,
    ``__transaction_state`` for a transactional id, ``__share_group_state`` for a share-partition), as this
    node last saw it, at its address on the request's listener; COORDINATOR_NOT_AVAILABLE while nobody
    does (the client retries, as against Kafka between leaders) or when the holder has no such listener
    (Kafka's getCoordinator finds no alive broker node for it)."""
    assert broker.cluster is not None
    owner = broker.cluster.leader(topic, partition)
    address = broker.cluster.endpoint(owner, listener) if owner is not None and owner != broker.node_id else None
    if owner is None or address is None:
        return ErrorCode.coordinator_not_available, -1, "", -1
    return ErrorCode.none, owner, *address
