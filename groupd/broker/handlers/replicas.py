"""ElectLeaders, AlterPartitionReassignments and AlterReplicaLogDirs.

Answered as a single-node Apache Kafka 4.2 (KRaft) answers them. Every partition has one replica,
this node, which is its preferred replica and its leader, in the one log dir ``log.dirs``: no election
is ever needed, the only valid reassignment target is [this node] (a no-op), none is ever in progress,
and the only move of a replica is to the dir it is already in. Nothing here changes any state.

The checks, their order and their messages are Kafka's: ReplicationControlManager (electLeaders,
alterPartitionReassignments, validateManualPartitionAssignment) and QuorumController for the first
two, ReplicaManager.alterReplicaLogDirs and LogManager.isLogDirOnline for the third.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from kio.schema.alter_partition_reassignments.v1.request import AlterPartitionReassignmentsRequest
from kio.schema.alter_replica_log_dirs.v2.request import AlterReplicaLogDirsRequest
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest
from kio.static.protocol import Entity

from groupd.broker.dispatch import Answer, RequestContext, Response
from groupd.broker.handlers.acl_and_logdirs import stored_logs
from groupd.broker.security.access import ALTER, CLUSTER_DENIED
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from groupd.broker.app import Broker
    from groupd.broker.dataplane.topics import Topic

PREFERRED, UNCLEAN = 0, 1
ELECTION_NOT_NEEDED = "Leader election not needed for topic partition."  # the error's own message
# LocalLog.logFutureDirName: "<topic>-<partition>.<32 hex digits>-future", at most 255 characters
FUTURE_DIR_EXTRA = len(".") + 32 + len("-future")
MAX_DIR_NAME = 255

Outcome = tuple[ErrorCode, str | None]


def _has_partition(topic: Topic | None, partition: int) -> bool:
    return topic is not None and 0 <= partition < topic.partitions


# ---------------------------------------------------------------- ElectLeaders


def _election(broker: Broker, name: str, partition: int) -> Outcome:
    topic = broker.topics.get(name)
    if topic is None:
        return ErrorCode.unknown_topic_or_partition, f"No such topic as {name}"
    if not _has_partition(topic, partition):
        return ErrorCode.unknown_topic_or_partition, f"No such partition as {name}-{partition}"
    # PREFERRED: the preferred replica already leads; UNCLEAN: there is a leader
    return ErrorCode.election_not_needed, ELECTION_NOT_NEEDED


def elect_leaders(broker: Broker, ctx: RequestContext, req: ElectLeadersRequest) -> Answer:
    result_cls, part_cls = ctx.nested("ReplicaElectionResult"), ctx.nested("PartitionResult")

    def result(topic: str, outcomes: Any) -> Entity:
        parts = tuple(codec.make(part_cls, partition_id=p, error_code=e, error_message=m) for p, (e, m) in outcomes)
        return codec.make(result_cls, topic=topic, partition_result=parts)

    def answer(error: ErrorCode, results: Any) -> Response:
        return ctx.respond(throttle_time=0, error_code=error, replica_election_results=tuple(results))

    requested = req.topic_partitions
    if not broker.access.cluster(ctx, ALTER):  # KafkaApis: ALTER on the cluster, every partition refused
        refused = (ErrorCode.cluster_authorization_failed, None)
        return answer(
            ErrorCode.cluster_authorization_failed,
            (result(t.topic, ((p, refused) for p in t.partitions)) for t in requested or ()),
        )
    if requested is not None and not requested:
        return answer(ErrorCode.none, ())  # answered before the election type is looked at
    election_type = getattr(req, "election_type", PREFERRED)  # v0 has no field: preferred
    if election_type not in (PREFERRED, UNCLEAN):
        # an InvalidRequestException for the whole request, repeated on every partition it names
        failed = (ErrorCode.invalid_request, f"Unknown election type {election_type}")
        return answer(
            ErrorCode.invalid_request, (result(t.topic, ((p, failed) for p in t.partitions)) for t in requested or ())
        )
    if requested is None:
        # every topic gets an entry, but partitions whose election is not needed are left out
        results = []
        for t in sorted(broker.topics.all(), key=lambda t: t.name):
            outcomes = ((p, _election(broker, t.name, p)) for p in range(t.partitions))
            results.append(result(t.name, ((p, o) for p, o in outcomes if o[0] != ErrorCode.election_not_needed)))
        return answer(ErrorCode.none, results)
    return answer(
        ErrorCode.none, (result(t.topic, ((p, _election(broker, t.topic, p)) for p in t.partitions)) for t in requested)
    )


# ---------------------------------------------------------------- AlterPartitionReassignments


def _reassignment(broker: Broker, name: str, partition: int, replicas: tuple[int, ...] | None) -> Outcome:
    topic = broker.topics.get(name)
    if topic is None:
        return ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {name}."
    if not _has_partition(topic, partition):
        return ErrorCode.unknown_topic_or_partition, f"Unable to find partition {name}:{partition}."
    if replicas is None:
        return ErrorCode.no_reassignment_in_progress, None  # a cancel, with nothing to cancel
    if not replicas:
        return ErrorCode.invalid_replica_assignment, "The manual partition assignment includes an empty replica list."
    previous = None
    for broker_id in sorted(replicas):
        if broker_id != broker.node_id:
            return ErrorCode.invalid_replica_assignment, (
                f"The manual partition assignment includes broker {broker_id}, but no such broker is registered."
            )
        if broker_id == previous:
            return ErrorCode.invalid_replica_assignment, (
                f"The manual partition assignment includes the broker {broker_id} more than once."
            )
        previous = broker_id
    # the target is [this node], the current assignment: nothing to do. (KIP-860's replication factor
    # check, v1's allow_replication_factor_change=false, comes next in Kafka and cannot fail here.)
    return ErrorCode.none, None


def alter_partition_reassignments(
    broker: Broker, ctx: RequestContext, req: AlterPartitionReassignmentsRequest
) -> Answer:
    if not broker.access.cluster(ctx, ALTER):  # KafkaApis: ALTER on the cluster
        return ctx.respond(
            throttle_time=0,
            allow_replication_factor_change=True,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message=CLUSTER_DENIED,
            responses=(),
        )
    if not req.topics:
        # Kafka answers an empty request with a fresh response: ErrorMessage "" (its default), not null,
        # and AllowReplicationFactorChange at its default, true
        return ctx.respond(
            throttle_time=0,
            allow_replication_factor_change=True,
            error_code=ErrorCode.none,
            error_message="",
            responses=(),
        )
    topic_cls, part_cls = ctx.nested("ReassignableTopicResponse"), ctx.nested("ReassignablePartitionResponse")
    responses = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            error, message = _reassignment(broker, t.name, p.partition_index, p.replicas)
            parts.append(
                codec.make(part_cls, partition_index=p.partition_index, error_code=error, error_message=message)
            )
        responses.append(codec.make(topic_cls, name=t.name, partitions=tuple(parts)))
    return ctx.respond(
        throttle_time=0,
        allow_replication_factor_change=req.allow_replication_factor_change if ctx.version >= 1 else True,
        error_code=ErrorCode.none,
        error_message=None,
        responses=tuple(responses),
    )


# ---------------------------------------------------------------- AlterReplicaLogDirs


def alter_replica_log_dirs(broker: Broker, ctx: RequestContext, req: AlterReplicaLogDirsRequest) -> Answer:
    # the dir DescribeLogDirs reports; Kafka compares the request's path with it as a plain string
    log_dir = os.path.abspath(broker.config["log.dirs"])
    hosted = stored_logs(broker)
    # one destination per partition: Kafka reads the request into a map, so a later dir replaces an earlier
    destinations: dict[tuple[str, int], str] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                destinations[(t.name, p)] = d.path

    def outcome(topic: str, partition: int, path: str) -> ErrorCode:
        if len(f"{topic}-{partition}") + FUTURE_DIR_EXTRA > MAX_DIR_NAME:
            return ErrorCode.invalid_topic_exception  # "The topic name is too long."
        if path != log_dir:
            return ErrorCode.log_dir_not_found
        if (topic, partition) not in hosted:
            return ErrorCode.unknown_topic_or_partition
        return ErrorCode.none  # already in this dir: no future replica, nothing moves

    allowed = broker.access.cluster(ctx, ALTER)  # KafkaApis: ALTER on the cluster, else every partition refused
    by_topic: dict[str, list[Any]] = {}
    part_cls = ctx.nested("AlterReplicaLogDirPartitionResult")
    for (topic, partition), path in destinations.items():
        error = outcome(topic, partition, path) if allowed else ErrorCode.cluster_authorization_failed
        by_topic.setdefault(topic, []).append(codec.make(part_cls, partition_index=partition, error_code=error))
    topic_cls = ctx.nested("AlterReplicaLogDirTopicResult")
    results = tuple(codec.make(topic_cls, topic_name=t, partitions=tuple(ps)) for t, ps in by_topic.items())
    return ctx.respond(throttle_time=0, results=results)
