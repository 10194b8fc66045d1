"""An in-memory Persister (coordinator/share_state/persister.py) that the broker uses until the share
coordinator (``__share_group_state``) is wired in as ``broker.share_persister``: the share groups'
partition initialization, deletion and offsets summaries work against it, but nothing survives a restart.
"""

from __future__ import annotations

from coordinator.share_state.persister import (
    ReadStateResult,
    ReadSummaryResult,
    SharePartitionKey,
    StateBatch,
)

INVALID_REQUEST = 42
FENCED_STATE_EPOCH = 124


class MemoryPersister:
    def __init__(self) -> None:
        # key -> (state epoch, start offset, delivery complete count, batches)
        self.states: dict[SharePartitionKey, tuple[int, int, int, tuple[StateBatch, ...]]] = {}

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> int:
        old = self.states.get(key)
        if old is not None and state_epoch != -1 and old[0] > state_epoch:
            return FENCED_STATE_EPOCH
        self.states[key] = (state_epoch, start_offset, -1 if start_offset == -1 else 0, ())
        return 0

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ReadStateResult:
        s = self.states.get(key)
        if s is None:
            return ReadStateResult(INVALID_REQUEST, "The share partition is not initialized.", 0, -1, ())
        return ReadStateResult(0, None, s[0], s[1], s[3])

    async def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    delivery_complete_count: int, batches: tuple[StateBatch, ...]) -> int:
        s = self.states.get(key)
        if s is None:
            return INVALID_REQUEST
        if state_epoch < s[0]:
            return FENCED_STATE_EPOCH
        start = s[1] if start_offset == -1 else start_offset
        kept = tuple(b for b in s[3] if b.last_offset >= start) + batches
        self.states[key] = (s[0], start, delivery_complete_count, kept)
        return 0

    async def delete(self, key: SharePartitionKey) -> int:
        self.states.pop(key, None)
        return 0

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ReadSummaryResult:
        s = self.states.get(key)
        if s is None:
            return ReadSummaryResult(0, None, 0, 0, -1, -1)
        return ReadSummaryResult(0, None, s[0], 0, s[1], s[2])
