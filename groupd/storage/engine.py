"""The storage seam: what every durable write of groupd goes through, whatever keeps the bytes.

A storage engine keeps three kinds of things, and this module is their contract:

- **partitions** (``PartitionLog``): a topic partition's record batches, Kafka's v2 format byte for byte
  (groupd/storage/batch.py builds and parses them for every engine), addressed by offset. The data
  topics and the coordinators' own topics (``__consumer_offsets``, ``__transaction_state``,
  ``__share_group_state``) are partitions alike.
- **durability** (``Durability``): an append returns at once and is *not yet* durable; a caller that
  must not acknowledge before it is asks the engine's Durability to be told when it is. Whether that is
  a group-committed fsync (the local engine) or a database commit is the engine's business.
- **small keyed metadata** (``MetadataStore``): topic and group configs, SCRAM credentials, the
  producer-id block, client quotas: documents rewritten whole, each under one key.

The engine (``StorageEngine``) opens, lists and deletes partitions and hands out the other two. The
broker picks one engine at one place (groupd/broker/app.py); coordinators, the data plane and handlers
see only these Protocols. tests/storage/contract/ is the contract written as tests: an engine is done
when it passes them unchanged.

Errors are the typed ones of groupd/storage/errors.py: ``StorageError`` (a write or read that did not
happen: never acknowledge what raised it), its subclasses ``OffsetOutOfRange``, ``RecordTooLarge``,
``CorruptBatch`` and ``UnknownPartition``.

What the next engines add later (fencing epochs for several nodes, issue 37) belongs here too, as new
methods with their contract tests.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from groupd.storage.batch import BatchHeader, TxnWalk
from groupd.storage.errors import StorageError


@dataclass
class LogConfig:
    """A partition's storage settings (Kafka's per-topic log configs); an engine honours them as it can:
    ``max_message_bytes`` always (RecordTooLarge), retention and compaction by ``apply_retention`` and
    ``compact``; segments are the local engine's unit."""

    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 86_400_000
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1_048_588

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy


@dataclass
class CompactionStats:
    segments: int = 0
    records_before: int = 0
    records_after: int = 0


@dataclass(frozen=True)
class SegmentInfo:
    """One stretch of a log as Kafka's v0 ListOffsets sees it: where it starts, how big it is and when it
    was last written (a segment file of the local engine)."""

    base_offset: int
    size: int
    modified_ms: int


class PartitionLog(Protocol):
    """One topic partition's log of record batches.

    Offsets are Kafka's: ``log_start_offset <= high_watermark <= log_end_offset``; appends take the next
    offsets; nothing below the start offset is ever returned. Every batch read back is byte for byte the
    batch appended, but for the base offset (and the partitionLeaderEpoch when the append gave one),
    which the log assigns. Methods raise ``StorageError`` when the partition cannot serve (its storage
    failed: it stays failed until reopened) and the narrower errors each one names.
    """

    config: LogConfig

    @property
    def log_start_offset(self) -> int:
        """The first offset still readable (raised by DeleteRecords and retention, never lowered)."""
        ...

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record takes."""
        ...

    @property
    def high_watermark(self) -> int:
        """The offset up to which consumers may read (the log end on one node)."""
        ...

    @property
    def size_bytes(self) -> int: ...

    @property
    def failed(self) -> bool:
        """True once a write or sync failed: appends then raise StorageError until reopened."""
        ...

    def append(self, batch: bytes | bytearray, leader_epoch: int | None = None) -> tuple[int, int]:
        """Store one v2 record batch at the log end; (base offset, last offset). The base offset is
        rewritten, and the partitionLeaderEpoch when ``leader_epoch`` is given; the rest is kept byte for
        byte. Not yet durable (see ``Durability``). RecordTooLarge above ``config.max_message_bytes``;
        CorruptBatch for bytes that are not a v2 batch."""
        ...

    def append_records(
        self, records: Sequence[tuple[bytes | None, bytes | None]], timestamp_ms: int | None = None,
        *, producer_id: int = -1, producer_epoch: int = -1, attributes: int = 0,
    ) -> tuple[int, int]:
        """A batch of these (key, value) records built and appended (the coordinators' writes)."""
        ...

    def read(self, offset: int, max_bytes: int, upto: int | None = None) -> bytes:
        """Whole batches from the one holding ``offset``, at most ``max_bytes`` of them but at least the
        first (a fetch must progress); ``upto``: only batches that start below it (the last stable
        offset of a READ_COMMITTED fetch). Empty at the log end; OffsetOutOfRange outside
        [log_start_offset, log_end_offset]."""
        ...

    def batches(self, start_offset: int | None = None) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Every stored batch from the one holding ``start_offset`` (default: the log start), in order."""
        ...

    def chunks(self) -> Iterator[memoryview]:
        """The whole log (from the log start) as runs of whole batches: start-up replay's reads."""
        ...

    def headers(self, last_segments: int | None = None) -> Iterator[BatchHeader]:
        """Every stored batch's header in order (no record data); ``last_segments``: only the newest part
        of the log, which an engine without segments may take as the whole log."""
        ...

    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= ``ts_ms`` (ListOffsets)."""
        ...

    def max_timestamp(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the record with the largest timestamp (ListOffsets MAX_TIMESTAMP)."""
        ...

    def delete_records_before(self, offset: int) -> int:
        """Raise the log start offset to ``offset`` (DeleteRecords), durably; the new log start.
        OffsetOutOfRange past the log end; a lower offset changes nothing."""
        ...

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= ``offset`` (a follower's truncation to a leader epoch's
        end); the new log end, which is the base offset of the first batch removed. OffsetOutOfRange
        below the log start offset."""
        ...

    def apply_retention(self, now_ms: int) -> int:
        """Drop data older than retention.ms or beyond retention.bytes (cleanup.policy=delete)."""
        ...

    def compact(self, now_ms: int, min_age_ms: int = 0) -> CompactionStats:
        """Keep only the last record of each key (cleanup.policy=compact), as Kafka's cleaner."""
        ...

    def segments_info(self) -> list[SegmentInfo]:
        """The log's stretches, oldest first, never empty (Kafka's legacy offsets-before answers from
        segment bases and times); an engine without segments answers one stretch for the whole log."""
        ...

    def save_snapshot(self, name: str, state: Any) -> None:
        """Keep JSON-able ``state`` beside the log, valid for the log end as it is now (a clean stop's
        producer and transaction snapshots, so the next start need not read the log)."""
        ...

    def load_snapshot(self, name: str) -> Any | None:
        """The state saved as ``name`` if it describes this very log end, else None."""
        ...

    def mark(self, name: str) -> None:
        """Set a durable flag on the partition (e.g. 'has held transactional batches') before the write
        that needs it; set for good, until the partition is deleted."""
        ...

    def is_marked(self, name: str) -> bool: ...

    def flush(self) -> None:
        """Make everything appended so far durable now, on the caller's thread (a clean stop)."""
        ...

    def close(self) -> None:
        """Release the partition; a closed log raises StorageError. Reopen with ``open_partition``."""
        ...


DurableCallback = Callable[[StorageError | None], None]


class Durability(Protocol):
    """Tells writers when their appends are durable. Group commit is the engine's business: every
    writer waiting meanwhile shares one sync (or one database commit).

    The contract: a callback or future registered after an append to a log fires once that append and
    every earlier one to the same log is durable, with None, or with the StorageError that made the
    round fail (then nothing since the last success may be acknowledged). Callbacks of one log fire in
    the order they were registered. With a flush interval above one message (``synchronous`` False)
    nothing waits: ``when_durable`` returns False and ``durable_future`` None, as Kafka acknowledges
    before its periodic flush."""

    observers: list[Callable[[float, int], None]]  # told (seconds, waiters) of every round: metrics

    @property
    def synchronous(self) -> bool: ...

    def when_durable(self, log: PartitionLog, callback: DurableCallback) -> bool:
        """Call ``callback`` once what was appended to ``log`` before this call is durable; False (and no
        call) when the policy does not wait."""
        ...

    def durable_future(self, log: PartitionLog) -> asyncio.Future[None] | None:
        """The same as a future shared by every caller of the round (add callbacks, never cancel it)."""
        ...

    async def durable(self, log: PartitionLog) -> None:
        """Return once what was appended to ``log`` before this call is durable; raise StorageError if
        its round failed."""
        ...

    async def start(self) -> None:
        """Start what the rounds use (e.g. a sync helper process); rounds work without it, slower."""
        ...

    async def close(self) -> None:
        """Finish the rounds under way and make every log durable; nothing is registered after this."""
        ...


class PartitionSet(Protocol):
    """A coordinator's partitions opened together at start-up and written through one Durability that
    waits after every append (``__consumer_offsets``). The engine may share work among them: the local
    engine writes their batches behind and makes them durable through one journal (storage/journal.py)."""

    logs: Mapping[int, PartitionLog]

    @property
    def maintenance_interval(self) -> float | None:
        """Seconds between ``maintain`` calls the engine wants, or None for none."""
        ...

    def maintain(self, tick: int) -> None:
        """Background upkeep, called every ``maintenance_interval`` with a counter (the local engine writes
        a slice of the partitions' files out, so they are current for offline readers)."""
        ...

    def close(self) -> None:
        """Flush and close every log, after the Durability's close (a failure was logged where it happened)."""
        ...


# the last value of every key, as a replay collects them (None: a tombstone)
LatestValues = dict[bytes, bytes | None]


class ReplayReader(Protocol):
    """Reads partitions for a coordinator's start-up replay: the last value of every key, following
    transactional batches in log order (storage/batch.py collect_latest and TxnWalk); an engine may
    share the work (the local engine has walk helper processes)."""

    async def collect(self, topic: str, partition: int, log: PartitionLog, latest: LatestValues, txn: TxnWalk) -> int:
        """Fill ``latest`` (and ``txn``) from the whole log; the count of records walked. CorruptBatch for
        a damaged log."""
        ...

    async def close(self) -> None: ...


_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")


def check_key(key: str) -> str:
    """Metadata keys are plain names (letters, digits, ``_``, then ``.`` and ``-`` too), so every engine
    can keep them as file names, row keys or object names alike."""
    if not _KEY.fullmatch(key):
        raise ValueError(f"bad storage metadata key {key!r}")
    return key


class MetadataStore(Protocol):
    """Small documents under plain keys (``check_key``), each written whole and atomically: a ``put``
    that returned is durable, and a crash leaves the old or the new value, never a torn one."""

    def get(self, key: str) -> bytes | None: ...

    def put(self, key: str, value: bytes) -> None:
        """Store ``value`` under ``key`` durably; StorageError when it could not be."""
        ...

    def delete(self, key: str) -> None:
        """Remove ``key`` durably; nothing happens when it is absent."""
        ...


class StorageEngine(Protocol):
    """One place every durable thing of a broker lives: partitions, durability rounds and metadata.

    A partition is named (topic, partition); it exists from its first ``open_partition`` until
    ``delete_partition``, across restarts: a reopened engine finds every partition, batch, start offset,
    snapshot, flag and metadata value that was durable when it stopped."""

    metadata: MetadataStore

    def open(self) -> None:
        """Make the storage ready, once at start-up before anything else (the local engine makes its data
        directory); StorageError when it cannot be."""
        ...

    def open_partition(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        """The partition's log, created empty when it does not exist; StorageError when it cannot be
        opened. Open each partition once at a time: the engine hands out one log per partition.
        CreateTopics and CreatePartitions call this (and DeleteTopics ``delete_partition``) on one
        worker thread, one call at a time, while the event loop goes on using the engine."""
        ...

    def open_broker_log(self, name: str, config: LogConfig | None = None) -> PartitionLog:
        """A log of the broker's own outside every topic (log-end-history), named by a plain name
        (``check_key``); created empty when it does not exist. It is listed by no ``partitions``."""
        ...

    def partitions(self, topic: str | None = None) -> list[tuple[str, int]]:
        """Every stored partition (of ``topic``), opened or not, sorted."""
        ...

    def stored_bytes(self, topic: str, partitions: Iterable[int]) -> int:
        """How many bytes these partitions hold (sizing start-up work before they are opened)."""
        ...

    def delete_partition(self, topic: str, partition: int) -> None:
        """Remove the partition and everything stored with it; its log must be closed first.
        UnknownPartition when there is no such partition."""
        ...

    def open_partition_set(
        self, topic: str, partitions: Iterable[int], config: LogConfig, durability: Durability
    ) -> PartitionSet:
        """The partitions of a coordinator's topic opened together (see PartitionSet); what a previous
        run left half-done (a journal) is made durable in them first. StorageError when it cannot be."""
        ...

    def replay_reader(self, helpers: int, stored_bytes: int) -> ReplayReader:
        """A reader for start-up replay, called on the running loop; ``helpers``: how many other processes
        may share the walk, worth it from some ``stored_bytes`` on (see ReplayReader)."""
        ...

    def durability(
        self, *, flush_interval_messages: int = 1, flush_interval_ms: int = 0, shared: bool = False
    ) -> Durability:
        """A new group-commit source under Kafka's flush policy (log.flush.interval.*); ``shared``: one
        round serves every log of the source (one sync for all), else each log has its own rounds."""
        ...
