"""The memory engine (``storage.engine=memory``): the storage seam (storage/engine.py) in process memory.

**For tests only.** Nothing is written anywhere: ``log.dirs`` is not created, read or written, and
everything the broker stored is gone when the process ends. What it buys is the fastest start there can
be (no directory, no files, no fsync helper, no journal to recover) and appends that are durable the
moment they return, so a test's broker answers without waiting for a disk.

Across a "restart" within one process: the stores live in a process-wide table named by ``log.dirs``
(used as a name only). An engine built again with the same name, after the first broker stopped, finds
every partition, batch, start offset, snapshot, flag and metadata value the first one stored, as a local
engine reopened over the same directory would; this is how the storage seam's contract tests and a
test that restarts its broker in the same process see the same data. ``discard(name)`` forgets a store
(groupd.testing.Broker does, when it stops, unless asked to keep the data); two brokers running at once
must use two names.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from groupd.storage.batch import TxnWalk
from groupd.storage.engine import (
    Durability,
    DurableCallback,
    LatestValues,
    LogConfig,
    MetadataStore,
    PartitionLog,
    PartitionSet,
    ReplayReader,
    check_key,
)
from groupd.storage.errors import StorageError, UnknownPartition
from groupd.storage.local_replay import walk
from groupd.storage.memory_log import MemoryLog, StoredPartition


class MemoryMetadata:
    """Each key's value in a dict: a ``put`` is whole and durable once it returns."""

    def __init__(self, values: dict[str, bytes]) -> None:
        self.values = values

    def get(self, key: str) -> bytes | None:
        return self.values.get(check_key(key))

    def put(self, key: str, value: bytes) -> None:
        self.values[check_key(key)] = bytes(value)

    def delete(self, key: str) -> None:
        self.values.pop(check_key(key), None)


@dataclass
class MemoryStore:
    """Everything one memory engine holds, kept in the process-wide table under its name."""

    partitions: dict[tuple[str, int], StoredPartition] = field(default_factory=dict)
    broker_logs: dict[str, StoredPartition] = field(default_factory=dict)
    metadata: dict[str, bytes] = field(default_factory=dict)


_STORES: dict[str, MemoryStore] = {}
_STORES_LOCK = threading.Lock()  # brokers in several threads (groupd.testing) build engines at once


def store(name: str) -> MemoryStore:
    """The store named ``name``, made empty at its first use."""
    with _STORES_LOCK:
        return _STORES.setdefault(name, MemoryStore())


def discard(name: str) -> None:
    """Forget the store named ``name`` (its memory is freed once no broker uses it)."""
    with _STORES_LOCK:
        _STORES.pop(name, None)


def stored_names() -> list[str]:
    """The names of every store this process holds (tests check nothing is left behind)."""
    with _STORES_LOCK:
        return sorted(_STORES)


class MemoryDurability:
    """Appends are durable when they return, so a round is over as soon as it begins: a callback is
    called on the next turn of the loop (never from inside ``when_durable``, whose caller queues its
    waiter after the call), in the order callbacks were registered. The flush policy is kept as it is
    given, so a broker told to acknowledge before its flush does so here too."""

    def __init__(self, flush_interval_messages: int = 1) -> None:
        self.flush_interval_messages = flush_interval_messages
        self.observers: list[Callable[[float, int], None]] = []  # no rounds: nothing to tell them

    @property
    def synchronous(self) -> bool:
        return self.flush_interval_messages <= 1

    def when_durable(self, log: PartitionLog, callback: DurableCallback) -> bool:
        if not self.synchronous:
            return False
        asyncio.get_running_loop().call_soon(callback, None)
        return True

    def durable_future(self, log: PartitionLog) -> asyncio.Future[None] | None:
        if not self.synchronous:
            return None
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut

    async def durable(self, log: PartitionLog) -> None:
        return None

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None


class MemoryPartitionSet:
    """A coordinator's partitions: plain memory logs, nothing to recover, nothing to maintain."""

    def __init__(self, logs: dict[int, PartitionLog]) -> None:
        self.logs: Mapping[int, PartitionLog] = logs

    @property
    def maintenance_interval(self) -> float | None:
        return None

    def maintain(self, tick: int) -> None:
        return None

    def close(self) -> None:
        for log in self.logs.values():
            log.close()


class MemoryReplayReader:
    """Start-up replay in this process (there is nothing another process could read)."""

    async def collect(self, topic: str, partition: int, log: PartitionLog, latest: LatestValues, txn: TxnWalk) -> int:
        return await walk(log.chunks(), latest, txn)

    async def close(self) -> None:
        return None


class MemoryEngine:
    """The storage seam over a ``MemoryStore``; see the module's text."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.store = store(name)
        self.metadata: MetadataStore = MemoryMetadata(self.store.metadata)

    def open(self) -> None:
        return None  # nothing to make: log.dirs stays untouched

    def open_partition(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        stored = self.store.partitions.setdefault((topic, partition), StoredPartition())
        return MemoryLog(f"{topic}-{partition}", stored, config)

    def open_broker_log(self, name: str, config: LogConfig | None = None) -> PartitionLog:
        stored = self.store.broker_logs.setdefault(check_key(name), StoredPartition())
        return MemoryLog(name, stored, config)

    def partitions(self, topic: str | None = None) -> list[tuple[str, int]]:
        return sorted(k for k in self.store.partitions if topic is None or k[0] == topic)

    def stored_bytes(self, topic: str, partitions: Iterable[int]) -> int:
        found = (self.store.partitions.get((topic, p)) for p in partitions)
        return sum(seg.size for stored in found if stored is not None for seg in stored.segments)

    def delete_partition(self, topic: str, partition: int) -> None:
        if self.store.partitions.pop((topic, partition), None) is None:
            raise UnknownPartition(f"no partition {topic}-{partition}")

    def open_partition_set(
        self, topic: str, partitions: Iterable[int], config: LogConfig, durability: Durability
    ) -> PartitionSet:
        if not isinstance(durability, MemoryDurability):
            raise StorageError("the memory engine's partition sets are written through its own durability")
        return MemoryPartitionSet({p: self.open_partition(topic, p, config) for p in sorted(partitions)})

    def replay_reader(self, helpers: int, stored_bytes: int) -> ReplayReader:
        return MemoryReplayReader()

    def durability(
        self, *, flush_interval_messages: int = 1, flush_interval_ms: int = 0, shared: bool = False
    ) -> Durability:
        return MemoryDurability(flush_interval_messages)
