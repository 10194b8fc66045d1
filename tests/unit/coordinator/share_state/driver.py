"""A manual-clock driver of the share coordinator's rules on the real coordinator runtime, with an
in-memory ``__share_group_state`` partition that keeps every record as the bytes Kafka would store."""

from __future__ import annotations

import uuid
from typing import Any

from groupd.coordinator.runtime.runtime import CoordinatorRuntime, WriteFailed
from groupd.coordinator.share_state import records as R
from groupd.coordinator.share_state import rules
from groupd.coordinator.share_state.persister import SharePartitionKey, StateBatch

TOPIC = uuid.UUID("6f1f3c2e-0000-4000-8000-000000000001")
OTHER = uuid.UUID("6f1f3c2e-0000-4000-8000-000000000002")


class MemoryLog:
    """The LogPort: each Result's records appended as (offset, key bytes, value bytes); durable at once
    unless ``fail_with`` is set (the append is refused with that error)."""

    def __init__(self) -> None:
        self.records: list[tuple[int, bytes, bytes | None]] = []
        self.fail_with: int | None = None

    def append(self, shard: Any, result: Any) -> None:
        if self.fail_with is not None:
            raise WriteFailed("refused", self.fail_with)
        base = len(self.records)
        records = rules.result_records(result)
        for k, v in records:
            self.records.append((len(self.records), R.encode_key(k), R.encode_value(v)))
        rules.track_appended(shard.state, records, base)

    def when_durable(self, shard: Any, done: Any) -> bool:
        return False

    def decoded(self) -> list[tuple[R.ShareStateKey, Any]]:
        out = []
        for _off, k, v in self.records:
            key = R.decode_key(k)
            assert key is not None
            out.append((key, R.decode_value(key.kind, v)))
        return out


class _Wakeups:
    def soon(self, shard: Any) -> None: ...

    def at(self, shard: Any, delay_ms: int) -> None: ...

    def cancel(self, shard: Any) -> None: ...


class _Waiter:
    def __init__(self) -> None:
        self.payload: Any = None
        self.error: BaseException | None = None
        self.called = False

    def done(self) -> bool:
        return self.called

    def set_result(self, payload: Any) -> None:
        self.called, self.payload = True, payload

    def set_exception(self, error: BaseException) -> None:
        self.called, self.error = True, error


class Driver:
    def __init__(self, per_snapshot: int = 500, partitions: dict[uuid.UUID, int] | None = None) -> None:
        counts = {TOPIC: 3} if partitions is None else partitions
        self.cfg = rules.ShareStateConfig(snapshot_update_records_per_snapshot=per_snapshot, partitions_of=counts.get)
        self.now = 1_000
        self.log = MemoryLog()
        self.runtime = CoordinatorRuntime(
            "__share_group_state",
            rules.ShareShardRules(self.cfg),
            self.log,
            _Wakeups(),
            lambda: self.now,
            context=self.cfg,
        )
        self.shard = self.runtime.add_shard(0)
        self.shard.loaded = True

    @property
    def state(self) -> rules.ShareShard:
        return self.shard.state

    def run(self, handler: Any, request: Any) -> Any:
        waiter = _Waiter()
        self.runtime.run(self.shard, "", handler, request, waiter)
        assert waiter.called, "every share-state answer is delivered once its record is durable"
        if waiter.error is not None:
            raise waiter.error
        return waiter.payload

    def initialize(self, key: SharePartitionKey, state_epoch: int = 0, start_offset: int = -1) -> rules.Answer:
        return self.run(rules.initialize, rules.InitializeState(key, state_epoch, start_offset))

    def write(
        self,
        key: SharePartitionKey,
        batches: tuple[StateBatch, ...] = (),
        *,
        state_epoch: int = 0,
        leader_epoch: int = 0,
        start_offset: int = -1,
        delivery_complete_count: int = -1,
    ) -> rules.Answer:
        return self.run(
            rules.write,
            rules.WriteState(key, state_epoch, leader_epoch, start_offset, delivery_complete_count, batches),
        )

    def read(self, key: SharePartitionKey, leader_epoch: int = -1) -> Any:
        return self.run(rules.read, rules.ReadState(key, leader_epoch))

    def delete(self, key: SharePartitionKey) -> rules.Answer:
        return self.run(rules.delete, rules.DeleteState(key))

    def summary(self, key: SharePartitionKey, leader_epoch: int = -1) -> Any:
        return self.run(rules.read_summary, rules.ReadStateSummary(key, leader_epoch))

    def reloaded(self) -> rules.ShareShard:
        """A fresh shard that replays this one's log from its bytes, as a restart does."""
        fresh = rules.ShareShard(0)
        for off, k, v in self.log.records:
            key = R.decode_key(k)
            assert key is not None
            rules.replay(fresh, key, R.decode_value(key.kind, v), self.cfg, off)
        return fresh
