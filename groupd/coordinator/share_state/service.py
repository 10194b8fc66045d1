"""The share coordinator as a broker service (Kafka's ``ShareCoordinatorService``): the shell around the
rules in ``coordinator/share_state/rules.py``, and the broker's in-process ``Persister``.

It runs the rules on the coordinator runtime (coordinator/runtime/), as the group coordinator does:
one shard per ``__share_group_state`` partition (``share.coordinator.state.topic.num.partitions``, 50),
a share-partition's state in partition ``abs(javaHash("<group>:<topic id>:<partition>")) % 50`` (Kafka's
SharePartitionKey.asCoordinatorKey, the topic id in Kafka's base64 form). Each answer leaves once its
record is durable (the broker's group committer, as the transaction coordinator's writes). A partition's
log is opened at its first write, as the transaction state's are; start-up replays every partition found
on disk, record by record (an update is a delta over the snapshot before it), so a restart keeps every
state. Every ``share.coordinator.cold.partition.snapshot.interval.ms`` (5 minutes) share-partitions not
snapshotted that long are snapshotted again, and every ``share.coordinator.state.topic.prune.interval.ms``
(5 minutes) each partition's records below the oldest last snapshot of its keys are deleted (the topic's
cleanup.policy is delete, retention -1: nothing else removes them).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from groupd.clock import wall_ms
from groupd.coordinator import errors as E
from groupd.coordinator.api import Result
from groupd.coordinator.internal_logs import InternalLogs
from groupd.coordinator.runtime.loop import LoopWakeups, write_failed
from groupd.coordinator.runtime.runtime import CoordinatorError, CoordinatorRuntime, Shard, Then
from groupd.coordinator.share_state import records as R
from groupd.coordinator.share_state import rules
from groupd.coordinator.share_state.keys import coordinator_key, state_partition
from groupd.coordinator.share_state.persister import (
    ReadStateResult,
    ReadSummaryResult,
    SharePartitionKey,
    StateBatch,
)
from groupd.coordinator.tasks import Tasks
from groupd.protocol.topic_names import SHARE_STATE_TOPIC
from groupd.storage.batch import iter_records
from groupd.storage.engine import Durability, LogConfig, PartitionLog, StorageEngine
from groupd.storage.errors import StorageError

log = logging.getLogger("groupd.share_coordinator")


class DataPartitions(Protocol):
    committer: Durability

    def appended(self, tp: tuple[str, int]) -> None: ...


class Host(Protocol):
    """What the broker gives the service: its config, the committer and long-poll wake-ups of the data
    plane, and the topics (a topic id's partition count, Kafka's metadata image check)."""

    config: Any
    storage: StorageEngine
    partitions: DataPartitions
    topics: Any


class _StateLog:
    """The runtime's LogPort over ``__share_group_state``: a Result's records as one batch in its shard's
    partition (opened at the first write), durable through the group committer."""

    def __init__(self, service: ShareCoordinator) -> None:
        self.service = service

    def append(self, shard: Shard, result: Result) -> None:
        service = self.service
        try:
            lg = shard.log if shard.log is not None else service.log_of(shard.partition)
            records = rules.result_records(result)
            base, _last = lg.append_records([(R.encode_key(k), R.encode_value(v)) for k, v in records], service.now())
        except StorageError as exc:  # RecordTooLarge is one
            raise write_failed(exc, SHARE_STATE_TOPIC, shard.partition, "share-state", log) from exc
        rules.track_appended(shard.state, records, base)
        service.records_written += len(records)
        service.broker.partitions.appended((SHARE_STATE_TOPIC, shard.partition))  # long-polling fetchers

    def when_durable(self, shard: Shard, done: Callable[[BaseException | None], None]) -> bool:
        return self.service.broker.partitions.committer.when_durable(shard.log, done)


class ShareCoordinator:
    """Broker service: the ``__share_group_state`` shards, their logs, and the Persister over them."""

    def __init__(self, broker: Host, *, now: Callable[[], int] = wall_ms) -> None:
        self.broker = broker
        config = broker.config
        self.num_partitions: int = config["share.coordinator.state.topic.num.partitions"]
        self.prune_interval_ms: int = config["share.coordinator.state.topic.prune.interval.ms"]
        self.cfg = rules.ShareStateConfig(
            snapshot_update_records_per_snapshot=config["share.coordinator.snapshot.update.records.per.snapshot"],
            cold_partition_snapshot_interval_ms=config["share.coordinator.cold.partition.snapshot.interval.ms"],
            partitions_of=self._partitions_of,
        )
        self._logs = InternalLogs(
            broker.storage,
            SHARE_STATE_TOPIC,
            LogConfig(
                cleanup_policy="delete",
                retention_ms=-1,
                segment_bytes=config["share.coordinator.state.topic.segment.bytes"],
                max_message_bytes=config["message.max.bytes"],
            ),
        )
        self.now = now
        self.wakeups = LoopWakeups(None)  # type: ignore[arg-type]  # its loop is start()'s
        self.runtime = CoordinatorRuntime(
            SHARE_STATE_TOPIC, rules.ShareShardRules(self.cfg), _StateLog(self), self.wakeups, now, context=self.cfg
        )
        self.wakeups.runtime = self.runtime
        self.logs: dict[int, PartitionLog] = self._logs.logs  # the partitions opened so far
        self.active = False
        self.records_written = 0
        self.loaded_records = 0
        self.last_pruned: dict[int, int] = {}  # partition -> offset pruned below (Kafka's last-pruned-offset)
        self.on_write: Callable[[float], None] | None = None  # seconds of each durable write (metrics)
        # in a cluster (docs/cluster.md) no shard until the node's leases give it (acquire), and whether this
        # node may serve a partition now (its lease, by its own clock)
        self.clustered: bool = bool(config.get("cluster.enabled"))
        self.serving: Callable[[int], bool] | None = None
        self._tasks = Tasks()
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._loop = self.wakeups.loop = asyncio.get_running_loop()
        if self.clustered:  # each partition is loaded when this node takes its lease
            self._start_jobs()
            return
        for p in range(self.num_partitions):
            self.runtime.add_shard(p)
        for p in self._logs.stored():
            if p >= self.num_partitions:
                log.warning(
                    "%s-%d is past share.coordinator.state.topic.num.partitions (%d): not loaded",
                    SHARE_STATE_TOPIC,
                    p,
                    self.num_partitions,
                )
                continue
            self._load(self.runtime.shards[p], self.log_of(p))
        for shard in self.runtime.shards.values():
            shard.loaded = True
        states = self.states()
        if states:
            log.info(
                "loaded %d share-partition states (%d records) from %d %s partitions",
                states,
                self.loaded_records,
                len(self.logs),
                SHARE_STATE_TOPIC,
            )
        self._start_jobs()

    def _start_jobs(self) -> None:
        self.active = True
        # Kafka's two periodic jobs, each on its own interval
        if self.prune_interval_ms > 0:
            self._tasks.spawn(self._every(self.prune_interval_ms, self.prune, "pruning"))
        self._tasks.spawn(
            self._every(
                self.cfg.cold_partition_snapshot_interval_ms,
                self.snapshot_cold,
                "snapshotting cold share-partitions of",
            )
        )

    async def stop(self) -> None:
        self.active = False
        await self._tasks.cancel_all()
        for _ in range(500):  # answers whose flush rounds are still running go first
            if not any(shard.queue for shard in self.runtime.shards.values()):
                break
            await asyncio.sleep(0.01)
        self._logs.close()
        for shard in self.runtime.shards.values():
            shard.log = None

    # ------------------------------------------------------------ ownership in a cluster

    async def acquire(self, partition: int) -> None:
        """This node took the lease of ``__share_group_state-<partition>``: open it afresh from the database
        and replay it; its keys answer COORDINATOR_LOAD_IN_PROGRESS meanwhile, as Kafka's shard loading does."""
        self.release(partition)
        shard = self.runtime.add_shard(partition)
        try:  # on the loop, as the group coordinator opens its partitions: ``logs`` is read there
            lg = self.log_of(partition)
        except StorageError as exc:
            shard.failed = f"{type(exc).__name__}: {exc}"
            log.error("failed to open %s-%d after taking it over: %s", SHARE_STATE_TOPIC, partition, exc)
            return
        # replayed off the loop: nothing reads the shard's state before it is loaded
        await asyncio.to_thread(self._load, shard, lg)
        if self.runtime.shards.get(partition) is shard:
            shard.loaded = True
            log.info(
                "loaded %d share-partition states from %s-%d", len(shard.state.offsets), SHARE_STATE_TOPIC, partition
            )

    def release(self, partition: int) -> None:
        """This node lost (or handed over) the lease: its keys answer NOT_COORDINATOR at once; a write still
        in a flush round is refused by the engine's fence and answered with the error."""
        shard = self.runtime.shards.pop(partition, None)
        if shard is not None:
            self.wakeups.cancel(shard)
            shard.deadlines.clear()
            shard.keys.clear()
            shard.heap.clear()
        lg = self.logs.pop(partition, None)
        if lg is not None:
            try:
                lg.close()
            except StorageError as exc:
                log.info("%s-%d closed with writes the new owner refused: %s", SHARE_STATE_TOPIC, partition, exc)

    def owns(self, partition: int) -> bool:
        """This node serves the partition now (always, alone)."""
        if not self.clustered:
            return True
        return partition in self.runtime.shards and (self.serving is None or self.serving(partition))

    def _load(self, shard: Shard, lg: PartitionLog) -> None:
        """Replay the partition record by record: a snapshot replaces a key's state, an update merges
        into it, a tombstone removes it; a damaged record fails the partition (logged)."""
        state, cfg = shard.state, self.cfg
        try:
            for header, batch in lg.batches():
                if header.is_control:
                    continue
                for rec in iter_records(batch, header):
                    if rec.key is None:
                        continue
                    key = R.decode_key(rec.key)
                    if key is None:
                        continue  # a record type this coordinator does not know: ignored, as Kafka does
                    rules.replay(state, key, R.decode_value(key.kind, rec.value), cfg, rec.offset)
                    self.loaded_records += 1
        except Exception as exc:  # noqa: BLE001 - one bad record must not stop the broker
            # a state built on part of the log must not be written over: the partition answers
            # NOT_COORDINATOR, as Kafka's shard whose load failed
            shard.failed = f"damaged record: {exc}"
            log.error(
                "%s-%d: load stopped at a damaged record, its share-partitions are unavailable: %s",
                SHARE_STATE_TOPIC,
                shard.partition,
                exc,
            )

    # ------------------------------------------------------------ partitions

    def partition_for(self, key: SharePartitionKey) -> int:
        return state_partition(key, self.num_partitions)

    def log_of(self, partition: int) -> PartitionLog:
        """A partition's log, opened (made, the first time) at its first use."""
        lg = self._logs.log_of(partition)
        shard = self.runtime.shards.get(partition)
        if shard is not None and shard.log is None:
            shard.log = lg
        return lg

    def states(self) -> int:
        """Share-partition states held, every partition together."""
        return sum(len(shard.state.offsets) for shard in self.runtime.shards.values())

    def has_records(self) -> bool:
        return self._logs.has_records()

    def _partitions_of(self, topic_id: uuid.UUID) -> int | None:
        topic = self.broker.topics.by_id(topic_id)
        return topic.partitions if topic is not None else None

    # ------------------------------------------------------------ requests

    async def _call(self, key: SharePartitionKey, handler: Callable[..., Result], request: Any) -> Any:
        """Run a handler on the key's shard; the payload once its records are durable. Raises
        CoordinatorError(COORDINATOR_NOT_AVAILABLE) when the coordinator is not running."""
        if not self.active or self._loop is None:
            raise CoordinatorError(E.COORDINATOR_NOT_AVAILABLE)
        p = self.partition_for(key)
        shard = self.runtime.shards.get(p)
        if shard is None or shard.failed or (self.serving is not None and not self.serving(p)):
            raise CoordinatorError(E.NOT_COORDINATOR)
        if not shard.loaded:
            raise CoordinatorError(E.COORDINATOR_LOAD_IN_PROGRESS)
        future: asyncio.Future[Any] = self._loop.create_future()
        try:
            self.runtime.run(shard, key.group_id, handler, request, future)
        except Exception as exc:  # a bug in the rules: this request fails, the broker goes on
            log.exception("share-state %s of %s failed", handler.__name__, coordinator_key(key))
            raise CoordinatorError(E.UNKNOWN_SERVER_ERROR) from exc
        return await future

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> rules.Answer:
        try:
            answer: rules.Answer = await self._call(
                key, rules.initialize, rules.InitializeState(key, state_epoch, start_offset)
            )
            return answer
        except CoordinatorError as exc:
            return _failed(exc.code)

    async def read_state(self, key: SharePartitionKey, leader_epoch: int) -> ReadStateResult:
        try:
            result: ReadStateResult = await self._call(key, rules.read, rules.ReadState(key, leader_epoch))
            return result
        except CoordinatorError as exc:
            code = rules.write_error(exc.code)
            return ReadStateResult(code, rules.MESSAGES.get(code), 0, -1, ())

    async def write_state(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        batches: tuple[StateBatch, ...],
    ) -> rules.Answer:
        request = rules.WriteState(key, state_epoch, leader_epoch, start_offset, delivery_complete_count, batches)
        started = time.perf_counter()
        try:
            answer: rules.Answer = await self._call(key, rules.write, request)
        except CoordinatorError as exc:
            return _failed(exc.code)
        if self.on_write is not None and answer.error_code == E.NONE:
            self.on_write(time.perf_counter() - started)
        return answer

    async def delete_state(self, key: SharePartitionKey) -> rules.Answer:
        try:
            answer: rules.Answer = await self._call(key, rules.delete, rules.DeleteState(key))
            return answer
        except CoordinatorError as exc:
            return _failed(exc.code)

    async def read_state_summary(self, key: SharePartitionKey, leader_epoch: int) -> ReadSummaryResult:
        try:
            result: ReadSummaryResult = await self._call(
                key, rules.read_summary, rules.ReadStateSummary(key, leader_epoch)
            )
            return result
        except CoordinatorError as exc:
            code = rules.write_error(exc.code)
            return ReadSummaryResult(code, rules.MESSAGES.get(code), 0, 0, -1, -1)

    # ------------------------------------------------------------ the Persister (one key per call)

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> int:
        return (await self.initialize_state(key, state_epoch, start_offset)).error_code

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ReadStateResult:
        return await self.read_state(key, leader_epoch)

    async def write(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        batches: tuple[StateBatch, ...],
    ) -> int:
        return (
            await self.write_state(key, state_epoch, leader_epoch, start_offset, delivery_complete_count, batches)
        ).error_code

    async def delete(self, key: SharePartitionKey) -> int:
        return (await self.delete_state(key)).error_code

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ReadSummaryResult:
        return await self.read_state_summary(key, leader_epoch)

    # ------------------------------------------------------------ housekeeping

    def topics_deleted(self, topic_ids: frozenset[uuid.UUID]) -> None:
        """A topic is gone: every share-partition state of it is tombstoned (Kafka's onMetadataUpdate)."""
        if not self.active or self._loop is None:
            return
        for shard in list(self.runtime.shards.values()):
            if shard.loaded and any(k.topic_id in topic_ids for k in shard.state.offsets):
                self.runtime.run(shard, "", rules.topics_deleted, topic_ids, Then(_logged_failure))

    async def _every(self, interval_ms: int, job: Callable[[], Awaitable[Any]], what: str) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await job()
            except Exception:  # the job must outlive one bad pass
                log.exception("%s %s failed", what, SHARE_STATE_TOPIC)

    async def snapshot_cold(self) -> None:
        """Kafka's snapshotColdPartitions on every shard: share-partitions unsnapshotted for
        ``share.coordinator.cold.partition.snapshot.interval.ms`` are snapshotted again, so that an idle
        one does not hold back the pruning of its partition."""
        assert self._loop is not None
        waits = []
        for shard in self.runtime.shards.values():
            if shard.state.offsets and not shard.failed and shard.loaded:
                future: asyncio.Future[Any] = self._loop.create_future()
                self.runtime.run(shard, "", rules.snapshot_cold_partitions, None, future)
                waits.append(future)
        await asyncio.gather(*waits, return_exceptions=True)

    async def prune(self) -> int:
        """Delete each partition's records below the oldest last snapshot of its keys (Kafka's record
        pruning, every ``share.coordinator.state.topic.prune.interval.ms``); the number deleted."""
        deleted = 0
        for p, lg in list(self.logs.items()):
            shard = self.runtime.shards.get(p)
            if shard is None or not shard.loaded:
                continue
            below = rules.redundant_below(shard.state)
            if below is None or below <= lg.log_start_offset or shard.failed:
                continue
            # the snapshots that make the records below redundant are appended: durable before those go
            await self.broker.partitions.committer.durable(lg)
            if lg.log_start_offset < below:
                before = lg.log_start_offset
                lg.delete_records_before(below)
                deleted += lg.log_start_offset - before
                self.last_pruned[p] = below
                log.debug("%s-%d pruned below offset %d", SHARE_STATE_TOPIC, p, below)
        return deleted


def _failed(code: int) -> rules.Answer:
    code = rules.write_error(code)
    return rules.Answer(code, rules.MESSAGES.get(code))


def _logged_failure(_payload: Any, error: BaseException | None) -> None:
    if error is not None:
        log.error("tombstoning the share-partitions of a deleted topic failed: %s", error)
