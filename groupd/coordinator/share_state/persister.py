"""The share coordinator's port: what a share partition and the group coordinator ask of the durable
state of a share group's partitions (Kafka's ``Persister``, here in-process rather than over the
``*ShareGroupState`` RPCs).

Kafka keeps each share-partition's state (start offset, state epoch, the delivery state and count of
in-flight records) in ``__share_group_state``, owned by the share coordinator. Three parties use it:
- the group coordinator initializes a partition's state when a share group first subscribes to it
  (``initialize``), deletes it with the group or its offsets (``delete``), and reports offsets and lag
  for DescribeShareGroupOffsets (``read_summary``);
- a share partition reads its state when it loads (``read``) and writes every change of acknowledged,
  released or archived records before it answers the acknowledgement (``write``).

Every call is for one key and answers Kafka's error code for it (0, or the code the share coordinator's
RPC would put in that partition's result: INVALID_REQUEST 42 when not initialized, FENCED_STATE_EPOCH
124, FENCED_LEADER_EPOCH 74, COORDINATOR_NOT_AVAILABLE 15, COORDINATOR_LOAD_IN_PROGRESS 14, ...).
An answer means the change is durable. The implementation lives with the share coordinator; tests may
use any object of this shape.
"""

from __future__ import annotations

import uuid
from typing import Protocol

from groupd.coordinator.values import value

# RecordState ids as persisted (Kafka's RecordState): ARCHIVING (3) is reserved and unused.
AVAILABLE = 0
ACQUIRED = 1
ACKNOWLEDGED = 2
ARCHIVED = 4


@value
class SharePartitionKey:
    """One share-partition: a share group's view of one topic partition."""

    group_id: str
    topic_id: uuid.UUID
    partition: int


@value
class StateBatch:
    """A run of offsets [first_offset, last_offset] in one delivery state with one delivery count."""

    first_offset: int
    last_offset: int
    delivery_state: int  # AVAILABLE, ACKNOWLEDGED or ARCHIVED (ACQUIRED is never persisted)
    delivery_count: int


@value
class ReadStateResult:
    error_code: int
    error_message: str | None
    state_epoch: int
    start_offset: int  # -1: never set (the partition applies share.auto.offset.reset)
    batches: tuple[StateBatch, ...]


@value
class ReadSummaryResult:
    error_code: int
    error_message: str | None
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int  # -1 when unknown


class Persister(Protocol):
    """Kafka's Persister, one key per call; each coroutine returns once the change is durable."""

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> int:
        """InitializeShareGroupState: a fresh snapshot (no batches) at ``start_offset`` (-1: unset)."""
        ...

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ReadStateResult:
        """ReadShareGroupState: the partition's state; a higher ``leader_epoch`` is persisted."""
        ...

    async def write(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,  # -1: unchanged
        delivery_complete_count: int,  # -1: unknown
        batches: tuple[StateBatch, ...],
    ) -> int:
        """WriteShareGroupState: batches merged newest-wins over the stored ones; returns the error code."""
        ...

    async def delete(self, key: SharePartitionKey) -> int:
        """DeleteShareGroupState: the key's state tombstoned (an unknown key succeeds, writing nothing)."""
        ...

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ReadSummaryResult:
        """ReadShareGroupStateSummary: start offset and delivery-complete count, for offsets and lag."""
        ...
