"""Version-free requests and responses of the share-group protocol (ShareGroupHeartbeat, api 76), the
share-partition initialization events, and what a call into the core returns.

Topic partitions travel as ``(topic id, partitions)`` pairs, as on the wire. The shell fills in
``client_id``/``client_host`` from the connection; the group's settings come from
``GroupConfig.share_config(group id)`` (the broker's group.share.* keys with the group's overrides).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from groupd.coordinator.api import TimerOp
from groupd.coordinator.consumer.api import DescribedPartitions
from groupd.coordinator.share.records import ShareKey, ShareValue
from groupd.coordinator.values import value

TopicPartitionList = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
MAX_MEMBER_ID_LENGTH = 36  # a printed UUID (KafkaApis.isMemberIdValid)
INITIALIZE_RETRY_INTERVAL_MS = 30_000  # group.share.initialize.retry.interval.ms (internal)
SESSION = "share-session"  # timer kind: (SESSION, group id, member id)
ASSIGNOR = "simple"


@value
class ShareGroupHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None  # None: unchanged
    client_id: str = ""
    client_host: str = ""


@value
class ShareInitialize:
    """Share partitions the shell initializes in the share coordinator after the heartbeat is durable
    (Kafka's InitializeShareGroupStateParameters): StateEpoch = the group epoch, StartOffset -1."""

    group_id: str
    state_epoch: int
    topics: TopicPartitionList


@value
class ShareGroupHeartbeatResponse:
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitionList | None = None  # None: unchanged since the last response
    initialize: ShareInitialize | None = None  # not on the wire: for the shell


@value
class ShareStateInitialized:
    """The share coordinator answered an initialization: ``ok`` records the partitions initialized (they
    become assignable), otherwise they leave the initializing set to be tried again."""

    group_id: str
    topics: TopicPartitionList
    ok: bool


@value
class SharePartitionsToDelete:
    """A share group's partitions whose share state the shell deletes before the group or its offsets go
    (``error``: NON_EMPTY_GROUP and the like, nothing to delete)."""

    error: int
    topics: TopicPartitionList


@value
class AlterShareOffsets:
    """AlterShareGroupOffsets (api 91): topic name -> (partition, start offset) pairs."""

    group_id: str
    topics: tuple[tuple[str, tuple[tuple[int, int], ...]], ...]


@value
class AlterShareOffsetsPlan:
    """The core's answer to AlterShareGroupOffsets: a top-level error, or per-partition results
    (``(topic name, topic id or None, ((partition, error), ...))``) and the partitions the shell
    initializes at their new start offsets (``(topic id, ((partition, offset), ...))``)."""

    error: int
    message: str | None = None
    results: tuple[tuple[str, uuid.UUID | None, tuple[tuple[int, int], ...]], ...] = ()
    state_epoch: int = 0
    offsets: tuple[tuple[uuid.UUID, tuple[tuple[int, int], ...]], ...] = ()


@value
class DeleteShareOffsets:
    """DeleteShareGroupOffsets (api 92)."""

    group_id: str
    topic_names: tuple[str, ...]


@value
class DeleteShareOffsetsPlan:
    """The core's answer to DeleteShareGroupOffsets: a top-level error, or the topics refused
    (``(name, error, message)``) and those whose share state the shell deletes (``(name, id, partitions)``)."""

    error: int
    message: str | None = None
    refused: tuple[tuple[str, int, str], ...] = ()
    to_delete: tuple[tuple[str, uuid.UUID, tuple[int, ...]], ...] = ()


@dataclass(slots=True)
class Outcome:
    """What one call into the share-group core produced; ``records`` are already applied (replayed)."""

    response: ShareGroupHeartbeatResponse | None = None
    records: list[tuple[ShareKey, ShareValue | None]] = field(default_factory=list)
    plan: AlterShareOffsetsPlan | None = None  # AlterShareGroupOffsets' answer
    delete_plan: DeleteShareOffsetsPlan | None = None  # DeleteShareGroupOffsets' answer
    timers: list[TimerOp] = field(default_factory=list)


def session_timer(group_id: str, member_id: str) -> tuple[str, str, str]:
    return (SESSION, group_id, member_id)


# ShareGroupDescribe's answers, published to the broker's handlers
@value
class DescribedShareMember:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: DescribedPartitions


@value
class DescribedShareGroup:
    error: int
    group_id: str
    message: str | None = None
    state: str = "Dead"  # the group's state name (share/group.py DEAD) when none is described
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedShareMember, ...] = ()
