"""DescribeAcls, CreateAcls, DeleteAcls, DescribeLogDirs and ListPartitionReassignments.

The ACL APIs are Kafka's AclApis: DESCRIBE (DescribeAcls) or ALTER (CreateAcls, DeleteAcls) on the
cluster first (CLUSTER_AUTHORIZATION_FAILED), then, without an authorizer, SECURITY_DISABLED (with its
two sentences: DescribeAcls builds its own, CreateAcls and DeleteAcls carry the
SecurityDisabledException's on every creation or filter); with one, the bindings are validated as Kafka
validates them (INVALID_REQUEST per creation or filter) and what changed is durable before the answer.
The one log directory is ``log.dirs``; no partition is ever being reassigned.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from kio.schema.create_acls.v3.request import CreateAclsRequest
from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_log_dirs.v4.request import DescribeLogDirsRequest
from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest

from groupd.broker.dispatch import Answer, RequestContext
from groupd.broker.security.access import ALTER, DESCRIBE
from groupd.broker.security.acl import AclBinding, AclFilter, PatternType
from groupd.broker.security.authorizer import describe_binding
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_STATE_TOPIC
from groupd.storage.errors import StorageError

if TYPE_CHECKING:
    from groupd.broker.app import Broker
    from groupd.storage.engine import PartitionLog

log = logging.getLogger("groupd.security")
NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
NO_AUTHORIZER = "No Authorizer is configured."
NOT_AUTHORIZED = "Cluster authorization failed."


def describe_acls(broker: Broker, ctx: RequestContext, req: DescribeAclsRequest) -> Answer:
    # AclApis.handleDescribeAcls: DESCRIBE on the cluster first, then the authorizer's absence
    if not broker.access.cluster(ctx, DESCRIBE):
        return ctx.respond(
            throttle_time=0,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message=NOT_AUTHORIZED,
            resources=(),
        )
    if not broker.access.enabled:
        return ctx.respond(
            throttle_time=0, error_code=ErrorCode.security_disabled, error_message=NO_AUTHORIZER_DESCRIBE, resources=()
        )
    broker.access.document.catch_up()  # in a cluster: another node's latest ACLs
    flt = _filter(req)
    if (why := flt.unknown()) is not None:
        return ctx.respond(throttle_time=0, error_code=ErrorCode.invalid_request, error_message=why, resources=())
    assert broker.access.authorizer is not None
    # DescribeAclsResponse.aclsResources: the bindings grouped by resource pattern
    grouped: dict[tuple[int, str, int], list[AclBinding]] = {}
    for acl in broker.access.authorizer.describe(flt):
        grouped.setdefault((acl.resource_type, acl.name, acl.pattern), []).append(acl)
    resource_cls, acl_cls = ctx.nested("DescribeAclsResource"), ctx.nested("AclDescription")
    resources = tuple(
        codec.make(
            resource_cls,
            resource_type=rtype,
            resource_name=name,
            pattern_type=pattern,
            acls=tuple(
                codec.make(
                    acl_cls, principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission
                )
                for a in acls
            ),
        )
        for (rtype, name, pattern), acls in grouped.items()
    )
    return ctx.respond(throttle_time=0, error_code=ErrorCode.none, error_message=None, resources=resources)


def create_acls(broker: Broker, ctx: RequestContext, req: CreateAclsRequest) -> Answer:
    result_cls = ctx.nested("AclCreationResult")

    def every(code: ErrorCode, message: str | None) -> Answer:
        return ctx.respond(
            throttle_time=0,
            results=tuple(codec.make(result_cls, error_code=code, error_message=message) for _ in req.creations),
        )

    if not broker.access.cluster(ctx, ALTER):
        return every(ErrorCode.cluster_authorization_failed, NOT_AUTHORIZED)
    if not broker.access.enabled:
        return every(ErrorCode.security_disabled, NO_AUTHORIZER)
    bindings = [
        AclBinding.of_wire(
            c.resource_type,
            c.resource_name,
            getattr(c, "resource_pattern_type", PatternType.LITERAL),
            c.principal,
            c.host,
            c.operation,
            c.permission_type,
        )
        for c in req.creations
    ]
    try:
        refusals = broker.access.create(bindings)
    except (OSError, StorageError) as exc:
        log.error("ACLs not saved: %s", exc)
        return every(ErrorCode.kafka_storage_error, f"ACLs not saved: {exc}")
    created = [b for b, why in zip(bindings, refusals, strict=True) if why is None]
    if created:
        log.info("ACLs created: %s", ", ".join(map(describe_binding, created)))
    return ctx.respond(
        throttle_time=0,
        results=tuple(
            codec.make(
                result_cls, error_code=ErrorCode.none if why is None else ErrorCode.invalid_request, error_message=why
            )
            for why in refusals
        ),
    )


def delete_acls(broker: Broker, ctx: RequestContext, req: DeleteAclsRequest) -> Answer:
    result_cls = ctx.nested("DeleteAclsFilterResult")

    def every(code: ErrorCode, message: str | None) -> Answer:
        return ctx.respond(
            throttle_time=0,
            filter_results=tuple(
                codec.make(result_cls, error_code=code, error_message=message, matching_acls=()) for _ in req.filters
            ),
        )

    if not broker.access.cluster(ctx, ALTER):
        return every(ErrorCode.cluster_authorization_failed, NOT_AUTHORIZED)
    if not broker.access.enabled:
        return every(ErrorCode.security_disabled, NO_AUTHORIZER)
    filters = [_filter(f) for f in req.filters]
    valid = [f for f in filters if f.unknown() is None]
    try:
        removed = iter(broker.access.delete(valid))
    except (OSError, StorageError) as exc:
        log.error("ACLs not saved: %s", exc)
        return every(ErrorCode.kafka_storage_error, f"ACLs not saved: {exc}")
    matching_cls = ctx.nested("DeleteAclsMatchingAcl")
    results = []
    for f in filters:
        why = f.unknown()
        if why is not None:
            results.append(
                codec.make(result_cls, error_code=ErrorCode.invalid_request, error_message=why, matching_acls=())
            )
            continue
        gone = next(removed)
        if gone:
            log.info("ACLs deleted: %s", ", ".join(map(describe_binding, gone)))
        matching = tuple(
            codec.make(
                matching_cls,
                error_code=ErrorCode.none,
                error_message=None,
                resource_type=a.resource_type,
                resource_name=a.name,
                pattern_type=a.pattern,
                principal=a.principal,
                host=a.host,
                operation=a.operation,
                permission_type=a.permission,
            )
            for a in gone
        )
        results.append(codec.make(result_cls, error_code=ErrorCode.none, error_message=None, matching_acls=matching))
    return ctx.respond(throttle_time=0, filter_results=tuple(results))


def _filter(f: DescribeAclsRequest | DeleteAclsFilter) -> AclFilter:
    """A DescribeAcls request or a DeleteAcls filter as an AclFilter (v0 has no pattern type: LITERAL)."""
    return AclFilter.of_wire(
        f.resource_type_filter,
        f.resource_name_filter,
        getattr(f, "pattern_type_filter", PatternType.LITERAL),
        f.principal_filter,
        f.host_filter,
        f.operation,
        f.permission_type,
    )


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
    if not broker.access.cluster(ctx, DESCRIBE):  # KafkaApis: DESCRIBE on the cluster
        return ctx.respond(throttle_time=0, error_code=ErrorCode.cluster_authorization_failed, results=())
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
    if not broker.access.cluster(ctx, DESCRIBE):  # KafkaApis: DESCRIBE on the cluster
        code = ErrorCode.cluster_authorization_failed
        return ctx.respond(throttle_time=0, error_code=code, error_message=NOT_AUTHORIZED, topics=())
    # Kafka's controller lists only partitions being reassigned and leaves unknown topics and
    # partitions out without an error; on one node nothing is ever reassigned.
    return ctx.respond(throttle_time=0, error_code=ErrorCode.none, error_message=None, topics=())
