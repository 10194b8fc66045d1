"""The group coordinator as a broker service: a thin facade over the runtime, its loader and its ports.

coordinator/runtime/ owns the shards (one per ``__consumer_offsets`` partition), tokens, ordered delivery
once records are durable, and the timer heap; coordinator/shard.py holds the rules it runs (dispatching
on the group's type); coordinator/runtime/loop.py puts the runtime on the event loop and the storage
engine's durability rounds; coordinator/runtime/loader.py loads the partitions through the engine's
replay reader. What is left here: which partitions are
owned and routing a group to its shard, the awaitable and callback forms of a request, transaction
markers, housekeeping (offset expiry, compaction, write-out), and the views metrics and tools read.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from groupd.clock import wall_ms
from groupd.coordinator import errors as E
from groupd.coordinator import group_types
from groupd.coordinator import shard as core
from groupd.coordinator.api import EndTxnMarker, GroupConfig, Result
from groupd.coordinator.observe import MEMBER_EVENTS, GroupObserver, logs_member_event, member_event
from groupd.coordinator.offsets.txn_guards import TxnOffsetGuards
from groupd.coordinator.partitioning import partition_for
from groupd.coordinator.records import OffsetCommitKey, OffsetCommitValue
from groupd.coordinator.runtime import loader as loading
from groupd.coordinator.runtime.loop import LoopWakeups, OffsetsLog
from groupd.coordinator.runtime.runtime import CoordinatorError, CoordinatorRuntime, Shard, Then, Waiter
from groupd.coordinator.tasks import Tasks
from groupd.protocol.topic_names import OFFSETS_TOPIC
from groupd.storage.engine import LogConfig, PartitionSet, StorageEngine
from groupd.storage.errors import StorageError

__all__ = ["CoordinatorError", "GroupCoordinator", "Shard"]

log = logging.getLogger("groupd.coordinator")


class GroupCoordinator:
    """Broker service: owns the offsets partitions, loads them, and runs the rules for every group API."""

    def __init__(
        self, config: Any, storage: StorageEngine, metrics: Any = None, *, now: Callable[[], int] = wall_ms
    ) -> None:
        self.config = config
        self.cfg = GroupConfig.from_broker_config(config)
        self.partitions: int = config["offsets.topic.num.partitions"]
        # every partition, or in a cluster (docs/cluster.md) none until the node's leases give them (acquire)
        self.clustered: bool = bool(config.get("cluster.enabled"))
        self.owned: set[int] = set() if self.clustered else set(range(self.partitions))
        # in a cluster: whether this node may serve a partition now (its lease, by its own clock)
        self.serving: Callable[[int], bool] | None = None
        self.storage = storage
        self.metrics = metrics
        self.now = now
        # the broker's topics (name -> entry with topic_id and partitions): consumer-protocol groups assign from it
        self.topics: Mapping[str, Any] = {}
        self.committer = storage.durability(
            flush_interval_messages=config["log.flush.interval.messages"],
            flush_interval_ms=config["log.flush.interval.ms"],
            shared=True,
        )
        if metrics is not None and hasattr(metrics, "store_fsync"):
            self.committer.observers.append(lambda seconds, _n: metrics.store_fsync(seconds))
        self.wakeups = LoopWakeups(None)  # type: ignore[arg-type]  # its loop is start()'s
        self.store = OffsetsLog(self.committer, now, metrics)
        self.txn_guards = TxnOffsetGuards()  # TxnOffsetCommits being verified (offsets/txn_guards.py)
        self.runtime = CoordinatorRuntime(
            OFFSETS_TOPIC,
            core.GroupShardRules(self.cfg),
            self.store,
            self.wakeups,
            now,
            context=self.cfg,
            observer=GroupObserver(metrics),
        )
        self.wakeups.runtime = self.runtime
        self.shards: dict[int, Shard] = self.runtime.shards
        self.loader = loading.Loader(OFFSETS_TOPIC, core.replay_walked, self._loaded, now)
        self._partition_of: dict[str, int] = {}  # group id -> offsets partition (a Java string hash each)
        self._tasks = Tasks()
        self.partition_set: PartitionSet | None = None  # the offsets partitions, opened by start()
        # the loop start() ran on: asyncio.get_running_loop() costs a getpid(2) per call on 3.11, and
        # a request took three
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]

    # ------------------------------------------------------------ lifecycle

    def _log_config(self) -> LogConfig:
        return LogConfig(
            segment_bytes=self.config["offsets.topic.segment.bytes"],
            cleanup_policy="compact",
            delete_retention_ms=self.config["log.cleaner.delete.retention.ms"],
            # Kafka's offsets topic takes the broker's message.max.bytes: the coordinator runtime's batch limit
            max_message_bytes=self.config["message.max.bytes"],
        )

    async def start(self) -> None:
        self.loop = self.wakeups.loop = asyncio.get_running_loop()
        log_config = self._log_config()
        self.loader.reader = self.storage.replay_reader(
            self.config["num.recovery.threads.per.data.dir"] - 1, self.storage.stored_bytes(OFFSETS_TOPIC, self.owned)
        )
        self.partition_set = self.storage.open_partition_set(OFFSETS_TOPIC, self.owned, log_config, self.committer)
        for p, shard_log in self.partition_set.logs.items():
            self.runtime.add_shard(p, shard_log).state.topics = self.topics
        # loading needs no helper (a round without one syncs from the flush thread): it runs while
        # the helper process starts
        self._tasks.spawn(self.loader.load_all(self.shards))
        self._tasks.spawn(self._housekeeping())
        if self.partition_set.maintenance_interval is not None:
            self._tasks.spawn(self._maintain_storage(self.partition_set.maintenance_interval))
        await self.committer.start()

    async def stop(self) -> None:
        await self._tasks.cancel_all()
        self.runtime.clear_timers()
        for _ in range(500):  # Results whose rounds are still running are answered first
            if not any(shard.queue for shard in self.shards.values()):
                break
            await asyncio.sleep(0.01)
        await self.committer.close()
        if self.partition_set is not None:
            self.partition_set.close()

    # ------------------------------------------------------------ ownership in a cluster

    async def acquire(self, partition: int) -> None:
        """This node took the lease of ``__consumer_offsets-<partition>``: open it afresh from the database
        and load it; its groups answer COORDINATOR_LOAD_IN_PROGRESS meanwhile, as Kafka's do."""
        self.release(partition)
        shard = self.runtime.add_shard(
            partition, self.storage.open_partition(OFFSETS_TOPIC, partition, self._log_config())
        )
        shard.state.topics = self.topics
        self.owned.add(partition)
        try:
            await self.loader.load(shard)
        except Exception as exc:  # noqa: BLE001 - one partition's failure answers NOT_COORDINATOR, as at start-up
            shard.failed = f"{type(exc).__name__}: {exc}"
            log.error("failed to load %s-%d after taking it over: %s", OFFSETS_TOPIC, partition, shard.failed)

    def release(self, partition: int) -> None:
        """This node lost (or handed over) the lease: its groups answer NOT_COORDINATOR at once; writes
        still in a round are refused by the engine's fence and answered with the error."""
        self.owned.discard(partition)
        shard = self.shards.pop(partition, None)
        if shard is None:
            return
        self.wakeups.cancel(shard)
        shard.deadlines.clear()
        shard.keys.clear()
        shard.heap.clear()
        try:
            shard.log.close()
        except StorageError as exc:
            log.info("%s-%d closed with batches the new owner refused: %s", OFFSETS_TOPIC, partition, exc)

    @property
    def on_append(self) -> Callable[[int], None] | None:
        return self.store.on_append

    @on_append.setter
    def on_append(self, callback: Callable[[int], None] | None) -> None:
        self.store.on_append = callback  # told each offsets partition appended to (long-polling fetchers)

    # ------------------------------------------------------------ loading

    def _loaded(self, shard: Shard) -> None:
        if self.shards.get(shard.partition) is not shard:
            return  # in a cluster, released while it loaded: nothing of it runs
        self.runtime.process(shard, core.on_loaded(shard.state, self.now(), self.cfg))

    @property
    def load_gate(self) -> asyncio.Event | None:
        return self.loader.gate

    @load_gate.setter
    def load_gate(self, gate: asyncio.Event | None) -> None:
        self.loader.gate = gate  # tests hold loading here

    @property
    def load_seconds(self) -> float | None:
        return self.loader.seconds

    @property
    def loaded_records(self) -> int:
        return self.loader.records

    def is_loaded(self) -> bool:
        """Loading is over: every partition loaded, or failed (see ``load_failures``)."""
        return all(s.loaded or s.failed for s in self.shards.values())

    def load_failures(self) -> dict[int, str]:
        return {p: s.failed for p, s in sorted(self.shards.items()) if s.failed}

    # ------------------------------------------------------------ routing

    def owns(self, partition: int) -> bool:
        return partition in self.owned and (self.serving is None or self.serving(partition))

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions)

    def shard_for(self, group_id: str) -> Shard:
        p = self._partition_of.get(group_id)
        if p is None:
            if len(self._partition_of) >= 200_000:
                self._partition_of.clear()
            p = self._partition_of[group_id] = partition_for(group_id, self.partitions)
        shard = self.shards.get(p)
        if shard is None or p not in self.owned or shard.failed or (self.serving is not None and not self.serving(p)):
            raise CoordinatorError(E.NOT_COORDINATOR)
        if not shard.loaded:
            raise CoordinatorError(E.COORDINATOR_LOAD_IN_PROGRESS)
        return shard

    def loaded_shards(self) -> list[Shard]:
        return [s for p, s in sorted(self.shards.items()) if s.loaded and p in self.owned]

    # ------------------------------------------------------------ requests

    def call(self, group_id: str, handler: Callable[..., Result], request: Any) -> Awaitable[Any]:
        """Apply a token-carrying rules handler; await what this returns for the payload addressed to
        this request.

        That is the payload's future itself, unless a member event is to be logged once it comes (a
        join, sync or leave, or anything at DEBUG): a commit or a heartbeat then costs no coroutine of
        its own. Its future is let go when its payload is delivered (or it fails), which for these is
        within the request's own flush round."""
        fut = self.loop.create_future()
        token = self.runtime.run(self.shard_for(group_id), group_id, handler, request, fut)
        if getattr(handler, "__name__", "") in MEMBER_EVENTS or log.isEnabledFor(logging.DEBUG):
            return self._logged(token, fut, handler, group_id, request)
        return fut

    def call_then(
        self,
        group_id: str,
        handler: Callable[..., Result],
        request: Any,
        then: Callable[[Any, BaseException | None], None],
    ) -> int:
        """Like ``call``, but the payload goes to ``then(payload, None)`` (or ``then(None, error)``) from
        the code that delivers it, with no future and no loop turn. ``then`` may come before this
        returns (an answer that needed no write). Returns the token, for ``abandon``."""
        if logs_member_event(handler):
            # member events are INFO lines: below that level (a bench's WARN) nothing wraps the answer
            then = self._logging_then(then, handler, group_id, request)
        return self.runtime.run(self.shard_for(group_id), group_id, handler, request, Then(then))

    def submit(self, group_id: str, handler: Callable[..., Result], request: Any, waiter: Waiter) -> int:
        """Like ``call_then``, for a caller that is itself a Waiter (broker/dispatch.py's Later): the
        runtime delivers to it directly. Returns the token, for ``abandon``."""
        if logs_member_event(handler):
            return self.call_then(
                group_id,
                handler,
                request,
                lambda payload, error: waiter.set_exception(error) if error is not None else waiter.set_result(payload),
            )
        return self.runtime.run(self.shard_for(group_id), group_id, handler, request, waiter)

    def call_sync(self, group_id: str, handler: Callable[..., Any], *args: Any) -> Any:
        """A read (describe, fetch): answered from the state as it is, no token, no records."""
        return handler(self.shard_for(group_id).state, *args)

    def abandon(self, token: int) -> None:
        """Nobody waits for this token's payload any more (its connection closed)."""
        self.runtime.abandon(token)

    @property
    def _waiting(self) -> dict[int, Any]:
        return self.runtime._waiting

    async def _logged(
        self, token: int, fut: asyncio.Future, handler: Callable[..., Any], group_id: str, request: Any
    ) -> Any:
        """Joins and syncs may stay parked in the rules for a whole rebalance: one whose connection
        goes away meanwhile is let go at once (the others are answered within a round)."""
        try:
            payload = await fut
        finally:
            self.runtime.abandon(token)
        member_event(handler, group_id, request, payload)
        return payload

    @staticmethod
    def _logging_then(
        then: Callable[[Any, BaseException | None], None], handler: Callable[..., Any], group_id: str, request: Any
    ) -> Callable[[Any, BaseException | None], None]:
        def logged(payload: Any, error: BaseException | None) -> None:
            if error is None:
                member_event(handler, group_id, request, payload)
            then(payload, error)

        return logged

    # ------------------------------------------------------------ transactions

    def complete_transaction(
        self, group_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> Awaitable[None]:
        """End a producer's transaction in the group's offsets partition (called from EndTxn): a COMMIT
        or ABORT marker is appended there, and once it is durable that producer's pending offsets
        in the partition (every group's, as Kafka's marker does) are applied or dropped. It runs in
        the shard's order like any request of its groups, and with nothing pending it only writes the
        marker. The awaitable fails with CoordinatorError (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
        KAFKA_STORAGE_ERROR) when the marker is not durable: the caller retries; with
        INVALID_PRODUCER_EPOCH when the producer already wrote here with a newer epoch (nothing written)."""
        self.txn_guards.marker(self.partition_for(group_id), producer_id)
        request = EndTxnMarker(producer_id, producer_epoch, commit)
        try:
            answer = self.call(group_id, core.end_transaction, request)
        except CoordinatorError as exc:
            return self._failed(exc)
        return self._marker_written(answer)

    def complete_transaction_in(
        self, partition: int, producer_id: int, producer_epoch: int, commit: bool
    ) -> Awaitable[None]:
        """End a producer's transaction in one offsets partition, as a WriteTxnMarkers for
        ``__consumer_offsets-<partition>`` asks (a cluster's transaction coordinator on another node): through
        a group of the partition holding the producer's pending offsets, nothing when none does. Fails with
        NOT_COORDINATOR when this node does not own the partition, COORDINATOR_LOAD_IN_PROGRESS while it
        loads (its pending offsets are not known yet)."""
        self.txn_guards.marker(partition, producer_id)
        shard = self.shards.get(partition)
        if not self.owns(partition) or shard is None or shard.failed:
            return self._failed(CoordinatorError(E.NOT_COORDINATOR))
        if not shard.loaded:
            return self._failed(CoordinatorError(E.COORDINATOR_LOAD_IN_PROGRESS))
        for group_id, producers in shard.state.offsets.open_txns.items():
            if producer_id in producers:
                return self.complete_transaction(group_id, producer_id, producer_epoch, commit)
        done: asyncio.Future[None] = self.loop.create_future()
        done.set_result(None)
        return done

    def _failed(self, exc: CoordinatorError) -> Awaitable[None]:
        failed: asyncio.Future[None] = self.loop.create_future()
        failed.set_exception(exc)
        return failed

    @staticmethod
    async def _marker_written(answer: Awaitable[Any]) -> None:
        error = await answer
        if error:
            raise CoordinatorError(error)  # INVALID_PRODUCER_EPOCH: an older epoch than the producer's

    def groups_with_pending_transaction(self, producer_id: int) -> list[str]:
        """Groups holding the producer's pending offsets, one per offsets partition (a marker there ends
        them all): how the transaction coordinator finds where to write after a restart."""
        found: dict[int, str] = {}
        for shard in self.loaded_shards():
            for group_id, producers in shard.state.offsets.open_txns.items():
                if producer_id in producers:
                    found.setdefault(shard.state.partition, group_id)
                    break
        return list(found.values())

    def has_pending_transactional_offsets(self, group_id: str) -> bool:
        """An open transaction holds offsets of the group (False where its partition is not loaded)."""
        try:
            shard = self.shard_for(group_id)
        except CoordinatorError:
            return False
        return bool(shard.state.offsets.open_txns.get(group_id))

    # ------------------------------------------------------------ housekeeping

    async def _maintain_storage(self, interval: float) -> None:
        """The engine's upkeep of the offsets partitions (the local engine writes their files out in
        slices, so they are current for readers such as pipeline/)."""
        assert self.partition_set is not None
        for tick in itertools.count():
            await asyncio.sleep(interval)
            self.partition_set.maintain(tick)

    async def _housekeeping(self) -> None:
        interval = self.config["offsets.retention.check.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            for shard in self.loaded_shards():
                try:
                    result = self.runtime.run_task(shard, "", self._expire)
                    if result.records and self.metrics is not None:
                        self.metrics.offsets_expired(
                            sum(1 for k, _ in result.records if isinstance(k, OffsetCommitKey))
                        )
                    shard.log.compact(self.now(), self.config["offsets.retain.uncompacted.hours"] * 3_600_000)
                except StorageError as exc:  # e.g. no room for a compacted segment: tried again next time
                    log.error("offsets housekeeping of partition %d failed: %s", shard.partition, exc)
                except Exception:
                    log.exception("offsets housekeeping of partition %d failed", shard.partition)

    def _expire(self, state: core.ShardState, now: int) -> Result:
        return core.expire_offsets(state, now, self.cfg)

    def topics_changed(self, names: set[str]) -> None:
        """Topics were created, deleted or grew: consumer-protocol groups subscribed to them (by name or
        regex) get a new assignment at their next heartbeat."""
        for shard in self.loaded_shards():
            self.runtime.process(shard, core.topics_changed(shard.state, names, self.now()))

    def share_topics_deleted(self, topic_ids: frozenset[Any]) -> None:
        """Deleted topics leave the share groups' initialized partitions (Kafka's maybeCleanupShareGroupState)."""
        for shard in self.loaded_shards():
            self.runtime.run_task(shard, "", lambda state, now: group_types.share_topics_deleted(state, topic_ids, now))

    def remove_topic(self, topic: str) -> None:
        """A deleted topic's committed offsets become tombstones (Kafka does this on topic deletion)."""
        for shard in self.loaded_shards():
            self.runtime.process(shard, core.remove_topic_offsets(shard.state, {topic}))

    # ------------------------------------------------------------ metrics sources

    def share_group_counts(self) -> dict[str, tuple[int, int]]:
        """Share groups by state: state -> (groups, members) (Kafka's share-group-count by state)."""
        counts = {"Empty": (0, 0), "Stable": (0, 0)}
        for shard in self.loaded_shards():
            for g in shard.state.groups.values():
                group_type = shard.state.type_of(g)
                if group_type.name == "share":
                    st = group_type.state_name(g)
                    n, members = counts.get(st, (0, 0))
                    counts[st] = (n + 1, members + group_type.member_count(g))
        return counts

    def metrics_snapshot(self) -> list[tuple[str, str, int, dict[tuple[str, int], int], str]]:
        rows = []
        for shard in self.loaded_shards():
            store = shard.state.offsets
            for g in shard.state.groups.values():
                group_type = shard.state.type_of(g)
                if group_type.keeps_offsets:
                    rows.append(
                        (
                            g.group_id,
                            group_type.state_name(g),
                            group_type.member_count(g),
                            _offsets_row(store.of(g.group_id)),
                            group_type.name,
                        )
                    )
        return rows


def _offsets_row(offsets: Mapping[str, Mapping[int, OffsetCommitValue]]) -> dict[tuple[str, int], int]:
    return {(t, p): v.offset for t, ps in offsets.items() for p, v in ps.items()}
