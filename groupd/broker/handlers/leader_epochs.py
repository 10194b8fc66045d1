"""OffsetForLeaderEpoch (API 23): where a leader epoch ends, asked by consumers validating their
positions (KIP-320) and by followers looking for where to truncate (KIP-101)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.offset_for_leader_epoch.v4.request import OffsetForLeaderEpochRequest

from groupd.broker.dataplane.leader_epochs import (
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    current_epoch_error,
)
from groupd.broker.dispatch import Answer, RequestContext
from groupd.broker.security.access import CLUSTER_ACTION, DESCRIBE, NOTHING, TOPIC
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.storage.errors import StorageError

if TYPE_CHECKING:
    from groupd.broker.app import Broker


def offset_for_leader_epoch(broker: Broker, ctx: RequestContext, req: OffsetForLeaderEpochRequest) -> Answer:
    """Kafka's ReplicaManager.lastOffsetForLeaderEpoch: per partition, unknown first, then the current
    leader epoch (-1: no check), then the end offset of the asked epoch from the leader's log. The
    replica id (v3+: consumer -1, debug -2, a follower's id) does not pick the ACL: CLUSTER_ACTION or DESCRIBE
    on each topic will do, as in KafkaApis. One result per request topic, repeats kept, as Kafka's
    collections do."""
    part_cls, topic_cls = ctx.nested("EpochEndOffset"), ctx.nested("OffsetForLeaderTopicResult")
    # KafkaApis: CLUSTER_ACTION (a follower's) or DESCRIBE on each topic (a consumer's, KIP-320)
    access = broker.access
    every = access.cluster(ctx, CLUSTER_ACTION, log_denied=False)
    denied = NOTHING if every else access.refused_names(ctx, DESCRIBE, TOPIC, (t.topic for t in req.topics))
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            epoch, end = UNDEFINED_EPOCH, UNDEFINED_OFFSET
            lg = broker.readable_log(t.topic, p.partition)
            current = p.current_leader_epoch if ctx.version >= 2 else UNDEFINED_EPOCH  # v2+ (v0-1: no check)
            if t.topic in denied:
                error = ErrorCode.topic_authorization_failed
            elif (unready := broker.reopening_error(t.topic, p.partition, current)) is not None:
                error = unready  # taken, not yet served: retriable
            elif lg is None:
                error = ErrorCode.unknown_topic_or_partition
            elif not broker.leads(t.topic, p.partition):  # in a cluster, another node's (docs/cluster.md)
                error = ErrorCode.not_leader_or_follower
            else:
                leader = broker.leader_epoch(t.topic, p.partition)
                error = ErrorCode.none if current == UNDEFINED_EPOCH else current_epoch_error(current, leader)
                if error == ErrorCode.none:
                    try:
                        history = broker.epoch_cache(t.topic, p.partition, lg)
                        epoch, end = history.end_offset_for(p.leader_epoch, lg.log_start_offset, lg.log_end_offset)
                    except StorageError:  # its epochs could not be read (the database): retriable, as Kafka's
                        error = ErrorCode.kafka_storage_error
            parts.append(
                codec.make(part_cls, partition=p.partition, error_code=error, leader_epoch=epoch, end_offset=end)
            )
        topics.append(codec.make(topic_cls, topic=t.topic, partitions=tuple(parts)))
    return ctx.respond(throttle_time=0, topics=tuple(topics))
