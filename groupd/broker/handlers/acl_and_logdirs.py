"""DescribeAcls, CreateAcls, DeleteAcls, DescribeLogDirs and ListPartitionReassignments.

Answered as a single-node Kafka without an authorizer answers them: ACL requests get SECURITY_DISABLED
(Kafka's AclApis, with its two sentences: DescribeAcls builds its own, CreateAcls and DeleteAcls carry
the SecurityDisabledException's on every creation or filter); the one log directory is ``log.dirs``;
no partition is ever being reassigned.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kio.schema.create_acls.v3.request import CreateAclsRequest
from kio.schema.delete_acls.v3.request import DeleteAclsRequest
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest

from groupd.broker.dispatch import Answer, RequestContext
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_STATE_TOPIC

if TYPE_CHECKING:
    from groupd.broker.app import Broker
    from groupd.storage.engine import PartitionLog

NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
NO_AUTHORIZER = "No Authorizer is configured."


def describe_acls(broker: Broker, ctx: RequestContext, req: DescribeAclsRequest) -> Answer:
    return ctx.respond(
        throttle_time=0, error_code=ErrorCode.security_disabled, error_message=NO_AUTHORIZER_DESCRIBE, resources=()
    )


def create_acls(broker: Broker, ctx: RequestContext, req: CreateAclsRequest) -> Answer:
    result_cls = ctx.nested("AclCreationResult")
    results = tuple(
        codec.make(result_cls, error_code=ErrorCode.security_disabled, error_message=NO_AUTHORIZER)
        for _ in req.creations
    )
    return ctx.respond(throttle_time=0, results=results)


def delete_acls(broker: Broker, ctx: RequestContext, req: DeleteAclsRequest) -> Answer:
    result_cls = ctx.nested("DeleteAclsFilterResult")
    results = tuple(
        codec.make(result_cls, error_code=ErrorCode.security_disabled, error_message=NO_AUTHORIZER, matching_acls=())
        for _ in req.filters
    )
    return ctx.respond(throttle_time=0, filter_results=results)


def stored_logs(broker: Broker) -> dict[tuple[str, int], PartitionLog]:
    """Every partition kept under log.dirs: the topics', the offsets partitions this node loaded and the
    ``__transaction_state`` partitions written so far."""
    logs: dict[tuple[str, int], PartitionLog] = dict(broker.partitions.logs)
    if broker.coordinator is not None:
        for p, shard in broker.coordinator.shards.items():
            logs[(OFFSETS_TOPIC, p)] = shard.log
    for p, lg in broker.transactions.logs.items():
        logs[(TXN_STATE_TOPIC, p)] = lg
    for p, lg in broker.share_coordinator.logs.items():
        logs[(SHARE_STATE_TOPIC, p)] = lg
    return logs


def describe_log_dirs(broker: Broker, ctx: RequestContext, req: DescribeLogDirsRequest) -> Answer:
    log_dir = os.path.abspath(broker.config["log.dirs"])
    logs = stored_logs(broker)
    if req.topics is None:
        wanted = sorted(logs)
    else:
        wanted = sorted({(t.topic, p) for t in req.topics for p in t.partitions if (t.topic, p) in logs})
    # Kafka lists a topic only with the partitions it has here; the lag of a leader's log is 0
    rows = (
        (
            topic,
            {
                "partition_index": p,
                "partition_size": logs[(topic, p)].size_bytes,
                "offset_lag": 0,
                "is_future_key": False,
            },
        )
        for topic, p in wanted
    )
    topics = ctx.by_topic("DescribeLogDirsTopic", "DescribeLogDirsPartition", rows)
    try:
        st = os.statvfs(log_dir)
        total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    except OSError:
        total = usable = -1  # the schema's "unknown"
    result = codec.make(
        ctx.nested("DescribeLogDirsResult"),
        error_code=ErrorCode.none,
        log_dir=log_dir,
        topics=topics,
        total_bytes=total,
        usable_bytes=usable,
        is_cordoned=False,
    )
    return ctx.respond(throttle_time=0, error_code=ErrorCode.none, results=(result,))


def list_partition_reassignments(broker: Broker, ctx: RequestContext, req: ListPartitionReassignmentsRequest) -> Answer:
    # Kafka's controller lists only partitions being reassigned and leaves unknown topics and
    # partitions out without an error; on one node nothing is ever reassigned.
    return ctx.respond(throttle_time=0, error_code=ErrorCode.none, error_message=None, topics=())
