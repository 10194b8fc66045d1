"""An in-memory Persister (groupd/coordinator/share_state/persister.py) for tests of the share partitions and of
the share group rules: the real share coordinator's rules in their simplest form (no records, no epochs
beyond the checks), so a test can run without ``__share_group_state``."""

from __future__ import annotations

from groupd.coordinator.share_state.persister import (
    ReadStateResult,
    ReadSummaryResult,
    SharePartitionKey,
    StateBatch,
)

INVALID_REQUEST = 42
FENCED_LEADER_EPOCH = 74
FENCED_STATE_EPOCH = 124


class FakePersister:
    def __init__(self) -> None:
        # key -> [state_epoch, leader_epoch, start_offset, delivery_complete_count, {offset: (state, count)}]
        self.states: dict[SharePartitionKey, list] = {}
        self.calls: list[tuple[str, SharePartitionKey]] = []
        self.fail_writes_with = 0  # set to an error code to make every write fail

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> int:
        self.calls.append(("initialize", key))
        old = self.states.get(key)
        if old is not None and state_epoch != -1 and old[0] > state_epoch:
            return FENCED_STATE_EPOCH
        self.states[key] = [state_epoch, 0, start_offset, -1 if start_offset == -1 else 0, {}]
        return 0

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ReadStateResult:
        self.calls.append(("read", key))
        s = self.states.get(key)
        if s is None:
            return ReadStateResult(INVALID_REQUEST, "not initialized", 0, -1, ())
        if s[1] > leader_epoch:
            return ReadStateResult(FENCED_LEADER_EPOCH, None, 0, -1, ())
        s[1] = leader_epoch
        return ReadStateResult(0, None, s[0], s[2], _batches(s[4]))

    async def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    delivery_complete_count: int, batches: tuple[StateBatch, ...]) -> int:
        self.calls.append(("write", key))
        if self.fail_writes_with:
            return self.fail_writes_with
        s = self.states.get(key)
        if s is None:
            return INVALID_REQUEST
        if leader_epoch < s[1]:
            return FENCED_LEADER_EPOCH
        if state_epoch < s[0]:
            return FENCED_STATE_EPOCH
        if start_offset != -1:
            s[2] = start_offset
        s[3] = delivery_complete_count
        for b in batches:
            for off in range(b.first_offset, b.last_offset + 1):
                s[4][off] = (b.delivery_state, b.delivery_count)
        for off in [o for o in s[4] if s[2] != -1 and o < s[2]]:
            del s[4][off]
        return 0

    async def delete(self, key: SharePartitionKey) -> int:
        self.calls.append(("delete", key))
        self.states.pop(key, None)
        return 0

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ReadSummaryResult:
        self.calls.append(("read_summary", key))
        s = self.states.get(key)
        if s is None:
            return ReadSummaryResult(0, None, 0, 0, -1, -1)
        return ReadSummaryResult(0, None, s[0], s[1], s[2], s[3])


def _batches(offsets: dict[int, tuple[int, int]]) -> tuple[StateBatch, ...]:
    out: list[StateBatch] = []
    for off in sorted(offsets):
        state, count = offsets[off]
        last = out[-1] if out else None
        if last and last.last_offset == off - 1 and (last.delivery_state, last.delivery_count) == (state, count):
            out[-1] = StateBatch(last.first_offset, off, state, count)
        else:
            out.append(StateBatch(off, off, state, count))
    return tuple(out)
