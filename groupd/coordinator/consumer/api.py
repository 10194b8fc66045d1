"""Version-free requests and responses of the consumer-group protocol (ConsumerGroupHeartbeat, api 68),
and what a handler returns: records to append, the response, timers to set or cancel.

Topic partitions travel as ``(topic id, partitions)`` pairs, as on the wire. The shell fills in
``client_id``/``client_host`` from the connection (Kafka takes them from the request context).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from groupd.coordinator.api import TimerOp
from groupd.coordinator.consumer.records import ConsumerKey, ConsumerValue
from groupd.coordinator.values import value

TopicPartitionList = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]
TopicFilter = Callable[[frozenset[str]], frozenset[str]]

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2



@value
class ConsumerGroupHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1  # -1: unchanged
    subscribed_topic_names: tuple[str, ...] | None = None  # None: unchanged
    subscribed_topic_regex: str | None = None  # v1; None: unchanged, "": cleared
    server_assignor: str | None = None
    owned: TopicPartitionList | None = None  # None: unchanged (the member still owns what it owned)
    client_id: str = ""
    client_host: str = ""
    version: int = 1
    # with an authorizer, the topics among these the member may DESCRIBE: what a regex resolution scheduled by
    # this heartbeat keeps (Kafka's GroupMetadataManager.refreshRegularExpressions); None: every topic
    topic_filter: TopicFilter | None = None


@value
class ConsumerGroupHeartbeatResponse:
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitionList | None = None  # None: unchanged since the last response


@dataclass(slots=True)
class Outcome:
    """What one call into the consumer-group core produced. ``records`` are already applied to the
    in-memory state (through ``replay``), in order; the shell appends them to the group's partition and
    answers ``response`` once they are durable."""

    response: ConsumerGroupHeartbeatResponse | None = None
    records: list[tuple[ConsumerKey, ConsumerValue | None]] = field(default_factory=list)
    timers: list[TimerOp] = field(default_factory=list)
    regex_refresh: str | None = None  # group id whose regexes the shell should resolve


def session_timer(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-session", group_id, member_id)


def rebalance_timer(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-rebalance", group_id, member_id)


def join_timer(group_id: str, member_id: str) -> tuple[str, str, str]:
    """A classic member answered REBALANCE_IN_PROGRESS must send JoinGroup within its rebalance timeout."""
    return ("consumer-join", group_id, member_id)


def sync_timer(group_id: str, member_id: str) -> tuple[str, str, str]:
    """A classic member that joined must send SyncGroup within its JoinGroup's rebalance timeout."""
    return ("consumer-sync", group_id, member_id)


# DescribeGroups' and ConsumerGroupDescribe's answers, published to the broker's handlers
DescribedPartitions = tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]  # (topic id, topic name, partitions)


@value
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: DescribedPartitions
    target: DescribedPartitions
    member_type: int


@value
class DescribedConsumerGroup:
    error: int
    group_id: str
    message: str | None = None
    state: str = "Dead"  # the group's state name (consumer/group.py DEAD) when none is described
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()
