"""The coordinator's shell: shards on disk, tokens, timers and durability around the pure core.

One shard per ``__consumer_offsets`` partition holds a ShardState (the core's data) and a Log. A request
is applied to the core synchronously on the event loop, so requests and timer firings of a group are
applied one at a time in arrival order, and a parked JoinGroup is just an unanswered token: nothing
waits on it. A Result's records are appended at once and made durable by the GroupCommitter (shared
fsyncs); its responses are delivered only after its records AND every earlier Result of the same shard
are durable, which keeps answers in write order (Kafka 4.x's runtime does the same).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
import itertools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clock import wall_ms
from coordinator import errors as E
from coordinator import shard as core
from coordinator.api import EndTxnMarker, GroupConfig, Result
from coordinator.consumer import runtime as consumer_runtime
from coordinator.group import COMPLETING, PREPARING, STABLE
from coordinator.logfields import group_event, log_member_event, log_transition
from coordinator.partitioning import partition_for
from coordinator.records import (
    RecordFormatError,
    decode_key,
    decode_offset_commit,
    decode_value,
    encode_key,
    encode_value,
)
from coordinator.tasks import Tasks
from protocol.topic_names import OFFSETS_TOPIC
from storage.batch import TRANSACTIONAL, TxnWalk, build_control_batch, collect_latest
from storage.committer import GroupCommitter
from storage.errors import RecordTooLarge, StorageError
from storage.journal import Journal
from storage.log import Log, LogConfig, Segment, syncfs_errno
from storage.walkhelper import WalkHelpers, split_by_bytes

log = logging.getLogger("groupd.coordinator")

# Start-up walk helpers are started when the offsets store holds at least this much (below it, a
# helper's start, ~0.2 s, costs more than it saves), and share a partition's walk from this size.
WALK_HELPERS_FROM_BYTES = 32 << 20
SHARE_WALK_FROM_BYTES = 4 << 20


def _reads(ranges: Iterable[tuple[Segment, int, int]]) -> Iterator[memoryview]:
    """The bytes of ``Log.chunk_ranges`` ranges, read one at a time as the walk needs them."""
    for seg, start, end in ranges:
        yield memoryview(seg.pread(start, end))


def replay_walked(state: core.ShardState, latest: dict[bytes, bytes | None], txn: TxnWalk, now: int, partition: int = -1) -> int:
    """Replay what a load's walk kept: the last value of every key, then the offsets of transactions
    without a marker yet (pending until complete_transaction). Returns how many are pending."""
    pending = txn.finish(latest)
    state.producer_epochs.update(txn.epochs)
    replay, replay_offset = core.replay, core.replay_offset
    names: dict[bytes, tuple[str, str] | None] = {}
    for raw_key, raw_value in latest.items():
        offset = decode_offset_commit(raw_key, raw_value, names)
        if offset is not None:
            replay_offset(state, *offset, now)
            continue
        try:
            key = decode_key(raw_key)
            if key is not None:
                replay(state, key, decode_value(key, raw_value), now)
        except RecordFormatError as exc:
            log.warning("%s-%d: skipping unreadable record: %s", OFFSETS_TOPIC, partition, exc)
    for producer_id, raw_key, raw_value, superseded in pending:
        offset = decode_offset_commit(raw_key, raw_value, names)
        if offset is not None:
            core.replay_txn_offset(state, producer_id, *offset, now, superseded=superseded)
    return len(pending)


class CoordinatorError(Exception):
    """A request the shell answers without the core (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@dataclass
class Shard:
    partition: int
    state: core.ShardState
    log: Log
    loaded: bool = False
    failed: str | None = None  # why its load failed: its groups then answer NOT_COORDINATOR, as Kafka's FAILED
    # Results waiting to be delivered, in the order the core made them: each waits for its own flush
    # round and for every Result before it (see _Waiting)
    queue: collections.deque[_Waiting] = field(default_factory=collections.deque)
    # The core's timers. Each live one has an entry, an int: its deadline << 64 | a sequence number, so
    # entries sort by deadline and are unique. ``deadlines`` maps key -> entry and ``keys`` entry -> key;
    # the heap holds entries, stale ones (moved or cancelled: no longer in ``keys``) skipped when popped,
    # and one event-loop timer is armed for the earliest (a deadline already due is fired by a call_soon
    # instead, leaving that timer armed). A heartbeat re-arms its member's session timer: two dict
    # writes and a heappush instead of cancelling and creating an event-loop timer. Entries are ints,
    # not tuples, so that a stale one is no GC-tracked survivor and holds no old key: with tuples, a
    # rebalance left 27 tracked tuples a group behind and gen-0 passes came twice as often.
    deadlines: dict[tuple, int] = field(default_factory=dict)
    keys: dict[int, tuple] = field(default_factory=dict)
    heap: list[int] = field(default_factory=list)
    wakeup: asyncio.TimerHandle | None = None
    wakeup_at: int | None = None
    due_soon: bool = False  # a call_soon is queued for deadlines already due (the armed timer stays)
    phase_started: dict[str, float] = field(default_factory=dict)


class _Waiting:
    """A Result whose records are appended and not yet known durable. Called by the committer when
    its round is over (with None or the round's error), from the code that learns it: delivery then
    takes no loop turn of its own, where a future per Result and a callback per link took two."""

    __slots__ = ("coordinator", "shard", "result", "flushed", "error")

    def __init__(self, coordinator: GroupCoordinator, shard: Shard, result: Result) -> None:
        self.coordinator, self.shard, self.result = coordinator, shard, result
        self.flushed = False
        self.error: BaseException | None = None

    def __call__(self, error: BaseException | None) -> None:
        self.flushed, self.error = True, error
        self.coordinator._drain(self.shard)


class _Then:
    """A callback standing where ``call`` keeps a future (see ``call_then``)."""

    __slots__ = ("then", "called")

    def __init__(self, then: Callable[[Any, BaseException | None], None]) -> None:
        self.then, self.called = then, False

    def done(self) -> bool:
        return self.called

    def set_result(self, payload: Any) -> None:
        self.called = True
        self.then(payload, None)

    def set_exception(self, error: BaseException) -> None:
        self.called = True
        self.then(None, error)


# The once-a-second write-out runs in slices: every 1/_WRITE_OUT_SLICES s, the partitions whose number
# is that slice's modulo. All of them at once, under load, held the event loop 4-8 ms (44 pwritevs).
_WRITE_OUT_SLICES = 10


def write_out_slice(shards: Iterable[Shard], tick: int) -> None:
    """Write out what waits in this tick's slice of the journaled partitions: each partition's file is
    current within a second, and no loop turn writes more than a tenth of them."""
    turn = tick % _WRITE_OUT_SLICES
    for shard in shards:
        if shard.partition % _WRITE_OUT_SLICES == turn and shard.log.unwritten_batches:
            try:
                shard.log.write_pending()
            except StorageError as exc:
                log.error("writing %s-%d out failed: %s", OFFSETS_TOPIC, shard.partition, exc)


class GroupCoordinator:
    """Broker service: owns the offsets partitions, loads them, and runs the core for every group API."""

    def __init__(self, config: Any, metrics: Any = None, *, now: Callable[[], int] = wall_ms) -> None:
        self.config = config
        self.cfg = GroupConfig.from_broker_config(config)
        self.partitions: int = config["offsets.topic.num.partitions"]
        self.owned: set[int] = set(range(self.partitions))
        self.log_dir = Path(config["log.dirs"])
        self.metrics = metrics
        self.now = now
        self.shards: dict[int, Shard] = {}
        self.on_append: Callable[[int], None] | None = None  # told each offsets partition appended to
        # the broker's topics (name -> entry with topic_id and partitions): consumer-protocol groups assign from it
        self.topics: Mapping[str, Any] = {}
        self.committer = GroupCommitter(
            flush_interval_messages=config["log.flush.interval.messages"],
            flush_interval_ms=config["log.flush.interval.ms"],
            shared=True,
        )
        if metrics is not None and hasattr(metrics, "store_fsync"):
            self.committer.observers.append(lambda seconds, _n: metrics.store_fsync(seconds))
        self._waiting: dict[int, asyncio.Future | _Then] = {}
        self._partition_of: dict[str, int] = {}  # group id -> offsets partition (a Java string hash each)
        self._tokens = itertools.count(1)
        self._timer_seq = itertools.count()
        self._tasks = Tasks()
        self.load_gate: asyncio.Event | None = None  # tests hold loading here
        self.load_seconds: float | None = None
        self.loaded_records = 0
        self._walk_helpers: asyncio.Future[WalkHelpers | None] | None = None
        # the loop start() ran on: asyncio.get_running_loop() costs a getpid(2) per call on 3.11, and
        # a request took three
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        log_config = LogConfig(
            segment_bytes=self.config["offsets.topic.segment.bytes"],
            cleanup_policy="compact",
            delete_retention_ms=self.config["log.cleaner.delete.retention.ms"],
            # Kafka's offsets topic takes the broker's message.max.bytes: the coordinator runtime's batch limit
            max_message_bytes=self.config["message.max.bytes"],
        )
        helpers = self.config["num.recovery.threads.per.data.dir"] - 1
        if helpers > 0 and self._stored_bytes() >= WALK_HELPERS_FROM_BYTES:
            # they start while the segments are scanned below
            self._walk_helpers = self.loop.run_in_executor(None, WalkHelpers.spawn, helpers)
        for p in sorted(self.owned):
            d = self.log_dir / f"{OFFSETS_TOPIC}-{p}"
            shard_log = Log.open(d, log_config)
            # every append is followed by a flush: let the flush thread do the write too
            shard_log.write_behind = self.committer.synchronous
            self.shards[p] = Shard(p, core.ShardState(p), shard_log)
            self.shards[p].state.topics = self.topics
        self._open_journal()
        # loading needs no helper (a round without one syncs from the flush thread): it runs while
        # the helper process starts
        self._tasks.spawn(self._load_all())
        self._tasks.spawn(self._housekeeping())
        if self.committer.journal is not None:
            self._tasks.spawn(self._write_out_journaled())
        await self.committer.start_helper(self.log_dir)

    def _open_journal(self) -> None:
        """Restore what the journal holds and the partitions lack, make it durable in them, and start
        the journal over; rounds use it only under the fsync-per-message policy."""
        journal = Journal(self.log_dir)
        logs = {p: shard.log for p, shard in self.shards.items()}
        if any(path.stat().st_size for path in journal.paths):
            restored = journal.recover(logs)
            for lg in logs.values():
                lg.write_pending()
            err = syncfs_errno(self.log_dir)
            if err:
                journal.close()
                raise StorageError(f"syncfs of {self.log_dir} failed after reading the offsets journal: {os.strerror(err)}")
            if journal.damaged:  # the lines above say what and how much; start-up goes on (docs/operations.md)
                log.error("offsets journal read: %d batches restored, but it was damaged where it had been synced: "
                          "acknowledged commits are lost, and their groups go back to older offsets", restored)
            else:
                log.info("offsets journal read: %d batches restored", restored)
        journal.reset(prefill=self.committer.synchronous)
        if not self.committer.synchronous:
            journal.close()
            return
        for p, lg in logs.items():
            lg.journal_partition = p
        self.committer.journal = journal

    async def stop(self) -> None:
        await self._tasks.cancel_all()
        for shard in self.shards.values():
            if shard.wakeup is not None:
                shard.wakeup.cancel()
                shard.wakeup = None
            shard.deadlines.clear()
            shard.keys.clear()
            shard.heap.clear()
        for _ in range(500):  # Results whose rounds are still running are answered first
            if not any(shard.queue for shard in self.shards.values()):
                break
            await asyncio.sleep(0.01)
        await self.committer.close()
        flushed = True
        for shard in self.shards.values():
            try:
                shard.log.flush()
            except StorageError:
                flushed = False
            shard.log.close()
        journal, self.committer.journal = self.committer.journal, None
        if journal is not None:
            if flushed:
                journal.reset(prefill=False)  # every partition is durable on its own: nothing to restore next time
            journal.close()

    # ------------------------------------------------------------ loading

    def _stored_bytes(self) -> int:
        total = 0
        for p in self.owned:
            with contextlib.suppress(OSError):
                total += sum(f.stat().st_size for f in (self.log_dir / f"{OFFSETS_TOPIC}-{p}").glob("*.log"))
        return total

    async def _load_all(self) -> None:
        started = time.perf_counter()
        try:
            if self.load_gate is not None:
                await self.load_gate.wait()
            for p in sorted(self.shards):
                try:
                    await self._load(self.shards[p])
                except Exception as exc:  # noqa: BLE001 - one partition's damage must not stop the others
                    self.shards[p].failed = f"{type(exc).__name__}: {exc}"
                    log.error(
                        "failed to load %s-%d (%s): its groups answer NOT_COORDINATOR until the store is repaired and the broker restarted",
                        OFFSETS_TOPIC, p, self.shards[p].failed,
                    )
        finally:
            await self._close_walk_helpers()
        self.load_seconds = time.perf_counter() - started
        log.info(
            "loaded %d offsets partitions (%d records) in %.0f ms",
            len(self.shards), self.loaded_records, self.load_seconds * 1000,
        )

    async def _load(self, shard: Shard) -> None:
        """Replay the partition through the same ``replay`` the runtime uses.

        Like Kafka's loader, only the last record of each key matters: keys are collected as raw bytes
        first (a later record supersedes an earlier one), and only the survivors are decoded and
        replayed. Their order does not matter (an offset creates its group if needed, group metadata
        keeps the offsets of the group it replaces, a group tombstone leaves live offsets their
        group): tests/unit/coordinator/test_replay.py checks it over random histories. Transactional
        batches and markers are followed in log order by a TxnWalk (storage/batch.py), which leaves
        in ``latest`` what readers see; the offsets of transactions still open are replayed last, as
        pending (tests/unit/coordinator/test_txn_replay.py checks load against runtime).
        """
        txn = TxnWalk()
        latest = await self._collect(shard, txn)
        pending = replay_walked(shard.state, latest, txn, self.now(), shard.partition)
        if txn.batches:
            log.info(
                "%s-%d: %d transactional batches replayed, %d offsets of open transactions pending",
                OFFSETS_TOPIC, shard.partition, txn.batches, pending,
            )
        shard.loaded = True
        self._process(shard, core.on_loaded(shard.state, self.now(), self.cfg))

    async def _collect(self, shard: Shard, txn: TxnWalk) -> dict[bytes, bytes | None]:
        """The last value of every key in the partition. A big partition's later chunks go to the
        walk helpers (storage/walkhelper.py) while this process walks the first; their answers are
        laid over its own in order, as one walk would have. A helper that fails is given up for the
        rest of the load, and its part is walked here; so is a part holding transactional batches
        (``txn`` follows transactions across the whole walk)."""
        latest: dict[bytes, bytes | None] = {}
        helpers = await self._ready_walk_helpers()
        ranges = shard.log.chunk_ranges() if helpers is not None else None
        if ranges is None:
            await self._walk_here(shard.log.chunks(), latest, txn)
            return latest
        if helpers is None or sum(e - s for _, s, e in ranges) < SHARE_WALK_FROM_BYTES:
            await self._walk_here(_reads(ranges), latest, txn)
            return latest
        mine, *theirs = split_by_bytes(ranges, helpers.count + 1)
        try:
            helpers.send([[(str(seg.path), s, e) for seg, s, e in part] for part in theirs])
        except OSError as exc:
            await self._give_up_walk_helpers(shard, exc)
            mine, theirs = ranges, []
        await self._walk_here(_reads(mine), latest, txn)
        if not theirs:
            return latest
        try:
            answers = await asyncio.to_thread(helpers.receive)
        except OSError as exc:
            await self._give_up_walk_helpers(shard, exc)
            await self._walk_here(_reads([r for part in theirs for r in part]), latest, txn)
            return latest
        for part, answer in zip(theirs, answers, strict=True):
            if answer is None:  # transactional batches: walked here, in order
                await self._walk_here(_reads(part), latest, txn)
                continue
            seen, found = answer
            latest.update(found)
            self.loaded_records += seen
        return latest

    async def _ready_walk_helpers(self) -> WalkHelpers | None:
        if self._walk_helpers is None:
            return None
        try:
            return await self._walk_helpers
        except Exception as exc:  # noqa: BLE001 - the broker walks alone then
            log.warning("no start-up walk helpers (%s): the broker walks alone", exc)
            self._walk_helpers = None
            return None

    async def _give_up_walk_helpers(self, shard: Shard, exc: OSError) -> None:
        log.warning("%s-%d: %s; walking the rest of the store in the broker", OFFSETS_TOPIC, shard.partition, exc)
        await self._close_walk_helpers()

    async def _close_walk_helpers(self) -> None:
        if self._walk_helpers is None:
            return
        helpers, self._walk_helpers = self._walk_helpers, None
        with contextlib.suppress(Exception):
            if (ready := await helpers) is not None:
                await asyncio.to_thread(ready.close)

    async def _walk_here(self, chunks: Iterable[memoryview], latest: dict[bytes, bytes | None], txn: TxnWalk) -> None:
        count = 0
        for chunk in chunks:
            count += collect_latest(chunk, latest, txn)
            if count >= 200_000:
                self.loaded_records += count
                count = 0
                await asyncio.sleep(0)  # let other partitions' clients be answered meanwhile
        self.loaded_records += count

    def is_loaded(self) -> bool:
        """Loading is over: every partition loaded, or failed (see ``load_failures``)."""
        return all(s.loaded or s.failed for s in self.shards.values())

    def load_failures(self) -> dict[int, str]:
        return {p: s.failed for p, s in sorted(self.shards.items()) if s.failed}

    # ------------------------------------------------------------ routing

    def owns(self, partition: int) -> bool:
        return partition in self.owned

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions)

    def shard_for(self, group_id: str) -> Shard:
        p = self._partition_of.get(group_id)
        if p is None:
            if len(self._partition_of) >= 200_000:
                self._partition_of.clear()
            p = self._partition_of[group_id] = partition_for(group_id, self.partitions)
        shard = self.shards.get(p)
        if shard is None or p not in self.owned or shard.failed:
            raise CoordinatorError(E.NOT_COORDINATOR)
        if not shard.loaded:
            raise CoordinatorError(E.COORDINATOR_LOAD_IN_PROGRESS)
        return shard

    def loaded_shards(self) -> list[Shard]:
        return [s for p, s in sorted(self.shards.items()) if s.loaded and p in self.owned]

    # ------------------------------------------------------------ running the core

    def call(self, group_id: str, handler: Callable[..., Result], request: Any) -> Awaitable[Any]:
        """Apply a token-carrying core handler; await what this returns for the payload addressed to
        this request.

        That is the payload's future itself, unless a member event is to be logged once it comes (a
        join, sync or leave, or anything at DEBUG): a commit or a heartbeat then costs no coroutine of
        its own. Its future leaves ``_waiting`` when its payload is delivered (or it fails), which for
        these is within the request's own flush round."""
        fut = self.loop.create_future()
        token = self._apply(group_id, handler, request, fut)
        if getattr(handler, "__name__", "") in self._EVENTS or log.isEnabledFor(logging.DEBUG):
            return self._logged(token, fut, handler, group_id, request)
        return fut

    def call_then(self, group_id: str, handler: Callable[..., Result], request: Any, then: Callable[[Any, BaseException | None], None]) -> int:
        """Like ``call``, but the payload goes to ``then(payload, None)`` (or ``then(None, error)``) from
        the code that delivers it, with no future and no loop turn. ``then`` may come before this
        returns (an answer that needed no write). Returns the token, for ``abandon``."""
        if log.isEnabledFor(logging.INFO) and (getattr(handler, "__name__", "") in self._EVENTS or log.isEnabledFor(logging.DEBUG)):
            # member events are INFO lines: below that level (a bench's WARN) nothing wraps the answer
            then = self._logging_then(then, handler, group_id, request)
        return self._apply(group_id, handler, request, _Then(then))

    def complete_transaction(self, group_id: str, producer_id: int, producer_epoch: int, commit: bool) -> Awaitable[None]:
        """End a producer's transaction in the group's offsets partition (called from EndTxn): a COMMIT
        or ABORT marker is appended there, and once it is durable that producer's pending offsets
        in the partition (every group's, as Kafka's marker does) are applied or dropped. It runs in
        the shard's order like any request of its groups, and with nothing pending it only writes the
        marker. The awaitable fails with CoordinatorError (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
        KAFKA_STORAGE_ERROR) when the marker is not durable: the caller retries; with
        INVALID_PRODUCER_EPOCH when the producer already wrote here with a newer epoch (nothing written)."""
        request = EndTxnMarker(producer_id, producer_epoch, commit)
        try:
            answer = self.call(group_id, core.end_transaction, request)
        except CoordinatorError as exc:
            failed = self.loop.create_future()
            failed.set_exception(exc)
            return failed
        return self._marker_written(answer)

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
            for group_id, producers in shard.state.open_txns.items():
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
        return bool(shard.state.open_txns.get(group_id))

    def abandon(self, token: int) -> None:
        """Nobody waits for this token's payload any more (its connection closed)."""
        self._waiting.pop(token, None)

    def _apply(self, group_id: str, handler: Callable[..., Result], request: Any, waiter: Any) -> int:
        """Run the core handler under a new token whose payload goes to ``waiter`` (a future or a _Then)."""
        shard = self.shard_for(group_id)
        token = next(self._tokens)
        self._waiting[token] = waiter
        try:
            group = shard.state.groups.get(group_id)
            before = group.state if group is not None else None
            result = handler(shard.state, request, token, self.now(), self.cfg)
            self._observe(shard, group_id, before)
            self._process(shard, result)
        except BaseException:
            self._waiting.pop(token, None)
            raise
        return token

    def _logging_then(self, then: Callable[[Any, BaseException | None], None], handler: Callable[..., Any], group_id: str, request: Any) -> Callable[[Any, BaseException | None], None]:
        def logged(payload: Any, error: BaseException | None) -> None:
            if error is None:
                self._log_member_event(handler, group_id, request, payload)
            then(payload, error)

        return logged

    async def _logged(self, token: int, fut: asyncio.Future, handler: Callable[..., Any], group_id: str, request: Any) -> Any:
        """Joins and syncs may stay parked in the core for a whole rebalance: one whose connection
        goes away meanwhile leaves ``_waiting`` at once (the others are answered within a round)."""
        try:
            payload = await fut
        finally:
            self._waiting.pop(token, None)
        self._log_member_event(handler, group_id, request, payload)
        return payload

    _EVENTS = {
        "join_group": "member joined", "sync_group": "member synced", "leave_group": "members left",
        "consumer_group_heartbeat": "",  # joins, leaves and refusals only (see _log_consumer_heartbeat)
    }
    _CONSUMER_EPOCHS = {0: "consumer member joined", -1: "consumer member left", -2: "static consumer member left"}
    _CONSUMER_REFUSALS = frozenset((E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID, E.UNRELEASED_INSTANCE_ID, E.FENCED_INSTANCE_ID, E.GROUP_MAX_SIZE_REACHED))

    def _log_consumer_heartbeat(self, group_id: str, request: Any, payload: Any) -> None:
        """A consumer-protocol heartbeat is an event when it joins, leaves or is refused as stale."""
        event = self._CONSUMER_EPOCHS.get(request.member_epoch)
        if payload.error in self._CONSUMER_REFUSALS:
            event = "consumer member refused"
        if event is None:
            return
        group_event(
            log, event, group_id, payload.member_id or request.member_id, error=payload.error or None,
            epoch=payload.member_epoch, request_epoch=request.member_epoch, instance=request.instance_id,
        )

    def _log_member_event(self, handler: Callable[..., Any], group_id: str, request: Any, payload: Any) -> None:
        """Join, sync and leave as structured events: group, member, generation, error."""
        name = getattr(handler, "__name__", "")
        event = self._EVENTS.get(name)
        if event is None:
            if log.isEnabledFor(logging.DEBUG):
                group_event(log, name, group_id, getattr(request, "member_id", None), level=logging.DEBUG, error=getattr(payload, "error", None))
            return
        if not log.isEnabledFor(logging.INFO):
            return
        if name == "consumer_group_heartbeat":
            self._log_consumer_heartbeat(group_id, request, payload)
            return
        if name == "leave_group":
            for m in getattr(payload, "members", ()) or getattr(request, "members", ()):
                log_member_event(log, event, group_id, m.member_id, None, getattr(m, "error", 0), m.group_instance_id)
            return
        member = getattr(payload, "member_id", None) or getattr(request, "member_id", None)
        generation = getattr(payload, "generation_id", None)
        if generation is None:
            generation = getattr(request, "generation_id", None)
        log_member_event(log, event, group_id, member, generation, payload.error, getattr(request, "group_instance_id", None))

    def call_sync(self, group_id: str, handler: Callable[..., Any], *args: Any) -> Any:
        """A read (describe, fetch): answered from the state as it is, no token, no records."""
        shard = self.shard_for(group_id)
        return handler(shard.state, *args)

    def _process(self, shard: Shard, result: Result) -> None:
        if result.timers:
            self._apply_timers(shard, result.timers)
        if result.records or result.marker is not None:
            try:
                started = time.perf_counter()
                if result.marker is not None:
                    producer_id, producer_epoch, commit = result.marker
                    shard.log.append(build_control_batch(producer_id, producer_epoch, commit, timestamp_ms=self.now()))
                elif result.producer is not None:
                    shard.log.append_records(
                        [(encode_key(k), encode_value(v)) for k, v in result.records], self.now(),
                        producer_id=result.producer[0], producer_epoch=result.producer[1], attributes=TRANSACTIONAL,
                    )
                else:
                    shard.log.append_records(
                        [(encode_key(k), encode_value(v)) for k, v in result.records], self.now()
                    )
                if self.metrics is not None:
                    self.metrics.store_append(time.perf_counter() - started, len(result.records) or 1)
                if self.on_append is not None:
                    self.on_append(shard.partition)
            except RecordTooLarge as exc:
                # the request's own doing (Kafka: RecordTooLargeException, answered -1): the log is fine
                log.warning("%s-%d: a group record was refused: %s", OFFSETS_TOPIC, shard.partition, exc)
                self._failed(shard, result, E.MESSAGE_TOO_LARGE)
                return
            except StorageError as exc:
                log.error("append to %s-%d failed: %s", OFFSETS_TOPIC, shard.partition, exc)
                self._failed(shard, result)
                return
            waiting = _Waiting(self, shard, result)
            if self.committer.when_durable(shard.log, waiting):
                shard.queue.append(waiting)
                return
        if not shard.queue:
            self._deliver(shard, result)
            return
        waiting = _Waiting(self, shard, result)
        waiting.flushed = True
        shard.queue.append(waiting)

    def _drain(self, shard: Shard) -> None:
        """Deliver the shard's Results from the front while their rounds are over: in the order the
        core made them. Delivery may queue more (a failed write's follow-up): they wait their turn."""
        queue = shard.queue
        while queue and queue[0].flushed:
            w = queue.popleft()
            try:
                self._settled(shard, w.error, w.result)
            except Exception:
                log.exception("delivering answers of %s-%d failed", OFFSETS_TOPIC, shard.partition)

    def _settled(self, shard: Shard, error: BaseException | None, result: Result) -> None:
        """Every earlier Result of the shard is answered and this one's flush round is over."""
        if error is not None:
            log.error("fsync of %s-%d failed: %s", OFFSETS_TOPIC, shard.partition, error)
            self._failed(shard, result)
            return
        self._deliver(shard, result)

    def _failed(self, shard: Shard, result: Result, error: int = E.KAFKA_STORAGE_ERROR) -> None:
        """Never acknowledge what is not durable: the core maps the failure (``error``, Kafka's append
        error) into each answer."""
        follow_up = core.on_write_failed(shard.state, result.write_ref, error, self.now(), self.cfg)
        if follow_up.responses or follow_up.records or follow_up.timers:
            self._process_unordered(shard, follow_up)
        # anything the core did not answer must not hang with a success it never got
        for token, _payload in result.responses:
            if any(t == token for t, _ in follow_up.responses):
                continue
            fut = self._waiting.pop(token, None)
            if fut is not None and not fut.done():
                fut.set_exception(CoordinatorError(error))

    def _process_unordered(self, shard: Shard, result: Result) -> None:
        if result.timers:
            self._apply_timers(shard, result.timers)
        if result.records:
            self._process(shard, Result(records=result.records, timers=(), replay=result.replay))
        self._deliver(shard, Result(responses=result.responses, replay=False))

    def _deliver(self, shard: Shard, result: Result) -> None:
        if result.replay and (result.records or result.marker is not None):
            if result.producer is None and result.marker is None:
                now = self.now()
                for key, value in result.records:
                    core.replay(shard.state, key, value, now)
            else:
                core.replay_result(shard.state, result, self.now())
        for token, payload in result.responses:
            fut = self._waiting.pop(token, None)
            if fut is not None and not fut.done():
                fut.set_result(payload)

    # ------------------------------------------------------------ timers

    def _apply_timers(self, shard: Shard, ops: Any) -> None:
        deadlines, keys, heap, seq = shard.deadlines, shard.keys, shard.heap, self._timer_seq
        earliest = shard.wakeup_at
        for op in ops:
            key, deadline = op.key, op.deadline_ms
            old = deadlines.pop(key, None)
            if old is not None:
                del keys[old]  # its heap entry goes stale
            if deadline is None:
                continue
            entry = deadline << 64 | next(seq)  # a count that 64 bits hold for ever: no two alike
            deadlines[key] = entry
            keys[entry] = key
            heapq.heappush(heap, entry)
            if earliest is None or deadline < earliest:
                earliest = deadline
        if len(heap) > 2 * len(keys) + 1024:  # mostly stale entries: rebuild from the live ones
            shard.heap = heap = list(keys)
            heapq.heapify(heap)
        if earliest is not None and earliest != shard.wakeup_at:
            self._arm_wakeup(shard, earliest)

    def _arm_wakeup(self, shard: Shard, deadline: int) -> None:
        delay = (deadline - self.now()) / 1000
        if delay <= 0:
            # due already (a 0 ms initial join phase): fire next loop turn, keeping any later timer armed
            if not shard.due_soon:
                shard.due_soon = True
                asyncio.get_running_loop().call_soon(self._wake_soon, shard)
            return
        if shard.wakeup is not None:
            shard.wakeup.cancel()
        shard.wakeup_at = deadline
        shard.wakeup = asyncio.get_running_loop().call_later(delay, self._wake, shard)

    def _wake(self, shard: Shard) -> None:
        """The loop timer: fire every due timer of the shard, in deadline order, then re-arm."""
        # asyncio may run a timer up to one clock tick early; what it was armed for is due regardless
        now = max(self.now(), shard.wakeup_at or 0)
        shard.wakeup = shard.wakeup_at = None
        self._fire_due(shard, now)

    def _wake_soon(self, shard: Shard) -> None:
        shard.due_soon = False
        self._fire_due(shard, self.now())

    def _fire_due(self, shard: Shard, now: int) -> None:
        heap, keys = shard.heap, shard.keys
        bound = (now + 1) << 64  # every entry of a deadline <= now is below it
        while heap and heap[0] < bound:
            entry = heapq.heappop(heap)
            key = keys.pop(entry, None)
            if key is None:
                continue  # cancelled or moved since
            del shard.deadlines[key]
            self._fire(shard, key, entry >> 64)
            heap = shard.heap  # a firing may have rebuilt it
        while heap and heap[0] not in keys:
            heapq.heappop(heap)  # drop stale entries at the top before choosing the next wake-up
        if heap and (shard.wakeup_at is None or heap[0] >> 64 < shard.wakeup_at):
            self._arm_wakeup(shard, heap[0] >> 64)  # firings above may have armed it for a later one

    def _fire(self, shard: Shard, key: tuple, deadline_ms: int) -> None:
        # the core must see its deadline reached, or it would take the firing for a stale one
        now = max(self.now(), deadline_ms)
        group_id = key[1] if len(key) > 1 and isinstance(key[1], str) else None
        group = shard.state.groups.get(group_id) if group_id is not None else None
        before = group.state if group is not None else None
        try:
            result = core.on_timer(shard.state, key, now, self.cfg)
        except Exception:
            log.exception("timer %s failed", key)
            return
        if group_id is not None:
            self._observe(shard, group_id, before)
        if key[0] in (consumer_runtime.SESSION, consumer_runtime.REBALANCE) and result.records:
            group_event(log, "consumer member removed", key[1], key[2], reason=key[0].removeprefix("consumer-") + " timeout")
        self._process(shard, result)

    # ------------------------------------------------------------ housekeeping

    async def _write_out_journaled(self) -> None:
        """Journaled partitions write their files in runs (storage/journal.py); what waits is written
        too within a second, a slice of the partitions at a time, so that the files are current for
        readers such as pipeline/ (durable in them at the next checkpoint, in the journal already)."""
        for tick in itertools.count():
            await asyncio.sleep(1 / _WRITE_OUT_SLICES)
            write_out_slice(self.shards.values(), tick)

    async def _housekeeping(self) -> None:
        interval = self.config["offsets.retention.check.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            for shard in self.loaded_shards():
                try:
                    result = core.expire_offsets(shard.state, self.now(), self.cfg)
                    if result.records and self.metrics is not None:
                        self.metrics.offsets_expired(sum(1 for k, v in result.records if v is None))
                    self._process(shard, result)
                    shard.log.compact(self.now(), self.config["offsets.retain.uncompacted.hours"] * 3_600_000)
                except StorageError as exc:  # e.g. no room for a compacted segment: tried again next time
                    log.error("offsets housekeeping of partition %d failed: %s", shard.partition, exc)
                except Exception:
                    log.exception("offsets housekeeping of partition %d failed", shard.partition)

    def topics_changed(self, names: set[str]) -> None:
        """Topics were created, deleted or grew: consumer-protocol groups subscribed to them (by name or
        regex) get a new assignment at their next heartbeat."""
        for shard in self.loaded_shards():
            self._process(shard, consumer_runtime.topics_changed(shard.state, names, self.now()))

    def remove_topic(self, topic: str) -> None:
        """A deleted topic's committed offsets become tombstones (Kafka does this on topic deletion)."""
        for shard in self.loaded_shards():
            self._process(shard, core.remove_topic_offsets(shard.state, {topic}))

    # ------------------------------------------------------------ observation (metrics, logs)

    def _observe(self, shard: Shard, group_id: str, before: str | None) -> None:
        group = shard.state.groups.get(group_id)
        if group is None and before is None:
            return  # no classic group before or after (a consumer-protocol group's request)
        after = group.state if group is not None else "Dead"
        if after == before:
            return
        now = time.perf_counter()
        metrics = self.metrics
        if metrics is not None:
            metrics.group_state_changed(group_id, before, after)
        if after == PREPARING:
            shard.phase_started[group_id] = now
            if metrics is not None:
                metrics.rebalance_started(group_id, (group.rebalance_cause if group else "") or "join")
        elif after == COMPLETING:
            started = shard.phase_started.get(group_id)
            if metrics is not None and started is not None:
                metrics.join_phase(now - started)
            shard.phase_started[group_id + "\0sync"] = now
        elif after == STABLE and group is not None:
            started = shard.phase_started.pop(group_id + "\0sync", None)
            began = shard.phase_started.pop(group_id, None)
            if metrics is not None:
                if started is not None:
                    metrics.sync_phase(now - started)
                metrics.rebalance_completed(group_id, group.generation, None if began is None else now - began)
        if after in ("Dead", "Empty"):
            shard.phase_started.pop(group_id, None)
            shard.phase_started.pop(group_id + "\0sync", None)
            if after == "Dead" and metrics is not None:
                metrics.group_removed(group_id)
        if log.isEnabledFor(logging.INFO):
            log_transition(log, group_id, before, after, group)

    # ------------------------------------------------------------ metrics sources

    def metrics_snapshot(self) -> list[tuple[str, str, int, dict[tuple[str, int], int]]]:
        rows = []
        for shard in self.loaded_shards():
            consumer_groups = shard.state.consumer_groups
            for g in shard.state.groups.values():
                offsets = {(t, p): v.offset for t, ps in g.offsets.items() for p, v in ps.items()}
                cg = consumer_groups.get(g.group_id)
                if cg is not None:  # the member-less holder of a consumer-protocol group's offsets
                    rows.append((g.group_id, cg.state(), len(cg.members), offsets))
                else:
                    rows.append((g.group_id, g.state, len(g.members), offsets))
            for cg in consumer_groups.values():
                if cg.group_id not in shard.state.groups:
                    rows.append((cg.group_id, cg.state(), len(cg.members), {}))
        return rows
