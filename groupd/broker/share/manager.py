"""The share-partitions of the broker and their event-loop shell (Kafka's SharePartitionManager,
DelayedShareFetch and ShareFetchUtils): loads each (group, topic id, partition) through the Persister,
reads the partition's log for ShareFetch, persists every acknowledgement before it is answered, runs
the acquisition-lock timers, and ends share sessions.

The rules live in ``partition.py`` and ``sessions.py`` (pure); this module holds the awaits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from groupd.broker.share.partition import (
    AckBatch,
    AcquiredRecords,
    Limits,
    LogBatch,
    ShareError,
    SharePartition,
    Update,
)
from groupd.broker.share.sessions import ShareSession, ShareSessionCache
from groupd.clock import wall_ms
from groupd.coordinator.share.config import ShareGroupConfig
from groupd.coordinator.share_state.persister import ARCHIVED, AVAILABLE, Persister, SharePartitionKey
from groupd.storage.batch import ABORT_MARKER, control_marker, iter_batches
from groupd.storage.engine import PartitionLog
from groupd.storage.errors import OffsetOutOfRange

if TYPE_CHECKING:
    from groupd.broker.app import Broker

log = logging.getLogger("groupd.share")

NONE, UNKNOWN_SERVER_ERROR, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER = 0, -1, 3, 6
COORDINATOR_NOT_AVAILABLE, GROUP_ID_NOT_FOUND, OFFSET_NOT_AVAILABLE = 15, 69, 78
# the errors after which Kafka drops a share-partition from its cache (NotLeaderOrFollower, from a fenced
# state or leader epoch; GroupIdNotFound; UnknownTopicOrPartition)
FENCED = frozenset((NOT_LEADER_OR_FOLLOWER, GROUP_ID_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION))
ACK_NAMES = {0: "gap", 1: "accept", 2: "release", 3: "reject", 4: "renew"}
LEADER_EPOCH = 0  # one node, never a new leader (groupd/broker/dataplane/leader_epochs.py)

PartKey = tuple[str, uuid.UUID, int]  # (group, topic id, partition)
TopicIdPartition = tuple[uuid.UUID, int]


def persister_error(code: int) -> int:
    """SharePartition.fetchPersisterError: what a partition answers for the share coordinator's error."""
    if code in (16, 15, 14):
        return COORDINATOR_NOT_AVAILABLE
    if code in (GROUP_ID_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION):
        return code
    if code in (74, 124):  # FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH
        return NOT_LEADER_OR_FOLLOWER
    return UNKNOWN_SERVER_ERROR


def limits_of(cfg: ShareGroupConfig) -> Limits:
    return Limits(
        cfg.delivery_count_limit,
        cfg.partition_max_record_locks,
        cfg.record_lock_duration_ms,
        cfg.renew_acknowledge_enable,
    )


_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def duration_ms(text: str) -> int | None:
    """An ISO-8601 duration as share.auto.offset.reset's by_duration takes it (PnDTnHnMnS)."""
    m = _DURATION.match(text.strip().upper())
    if m is None or text.strip().upper() in ("P", "PT"):
        return None
    d, h, mi, s = (float(x) if x else 0.0 for x in m.groups())
    return int(((d * 24 + h) * 60 + mi) * 60_000 + s * 1000)


@dataclass(slots=True)
class PartResult:
    """One partition of a ShareFetch answer."""

    error: int = NONE
    message: str | None = None
    records: bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)


@dataclass(slots=True)
class _Entry:
    key: SharePartitionKey
    topic: str
    sp: SharePartition
    leader_epoch: int = LEADER_EPOCH  # the partition's when the state was read: every write of it carries it
    timer: asyncio.TimerHandle | None = None
    deadline: int | None = None


class SharePartitionManager:
    def __init__(
        self,
        broker: Broker,
        persister_of: Callable[[], Persister | None],
        config_for: Callable[[str], ShareGroupConfig] | None = None,
        max_sessions: int = 2_000,
    ) -> None:
        self.broker = broker
        self._persister_of = persister_of
        self.config_for = config_for or (lambda _group: ShareGroupConfig())
        self.sessions = ShareSessionCache(max_sessions)
        self._entries: dict[PartKey, _Entry] = {}
        self._loading: dict[PartKey, asyncio.Future] = {}
        self._waiters: dict[PartKey, set[asyncio.Future]] = {}
        self._tasks: set[asyncio.Task] = set()
        # record counts for the metrics endpoint (Kafka's ShareGroupMetrics and SharePartitionMetrics)
        self.acquired = 0
        self.acknowledged: dict[str, int] = dict.fromkeys(ACK_NAMES.values(), 0)  # by type, as Kafka counts them
        self.lock_expired = 0
        self.archived_at_limit = 0  # released or expired on their last delivery
        # the data partition's leader epoch (in a cluster its lease's, docs/cluster.md): the share coordinator
        # fences the writes of a leader older than the last one that read the state, as Kafka's does
        self.leader_epoch: Callable[[str, int], int] = lambda _topic, _partition: LEADER_EPOCH

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        for entry in self._entries.values():
            if entry.timer is not None:
                entry.timer.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(task), 2)

    # ------------------------------------------------------------------ loading

    def _start_load(self, group: str, topic_id: uuid.UUID, topic: str, partition: int) -> asyncio.Future:
        """The share-partition's load from the persister on first use (Kafka's maybeInitialize), started
        once and shared by every fetch that wants it; the future's result is its error code. It runs on
        its own, so a fetch that answers before it is done leaves it to finish for the next."""
        pk = (group, topic_id, partition)
        fut = self._loading.get(pk)
        if fut is None:
            fut = self._loading[pk] = asyncio.get_running_loop().create_future()
            self._spawn(self._load(pk, fut, topic))
        return fut

    async def _load(self, pk: PartKey, fut: asyncio.Future, topic: str) -> None:
        code = UNKNOWN_SERVER_ERROR
        try:
            code = await self._read(pk[0], pk[1], topic, pk[2])
        finally:
            del self._loading[pk]
            fut.set_result(code)

    def _in_metadata(self, topic_id: uuid.UUID, partition: int) -> bool:
        """The partition is still the metadata's, under this id (Kafka's getPartitionOrException, which a
        share-partition's creation calls first)."""
        topic = self.broker.listed_topic_by_id(topic_id)
        return topic is not None and 0 <= partition < topic.partitions

    async def _read(self, group: str, topic_id: uuid.UUID, topic: str, partition: int) -> int:
        if not self._in_metadata(topic_id, partition):
            return UNKNOWN_TOPIC_OR_PARTITION
        if not self.broker.leads(topic, partition):
            return NOT_LEADER_OR_FOLLOWER  # in a cluster, its lease moved meanwhile
        persister = self._persister_of()
        if persister is None:
            return COORDINATOR_NOT_AVAILABLE
        key = SharePartitionKey(group, topic_id, partition)
        leader_epoch = self.leader_epoch(topic, partition)
        result = await persister.read(key, leader_epoch)
        if not self._in_metadata(topic_id, partition):
            return UNKNOWN_TOPIC_OR_PARTITION  # deleted while its state was read (and its state deleted)
        if self.leader_epoch(topic, partition) != leader_epoch:
            return NOT_LEADER_OR_FOLLOWER  # in a cluster, the lease moved while the state was read
        if result.error_code != NONE:
            log.warning(
                "share partition %s %s-%d not loaded: the share coordinator answered %d",
                group,
                topic,
                partition,
                result.error_code,
            )
            return persister_error(result.error_code)
        cfg = self.config_for(group)
        sp = SharePartition(limits_of(cfg))
        lg = self.broker.readable_log(topic, partition)
        if lg is None:
            return UNKNOWN_TOPIC_OR_PARTITION
        reset = self._reset_offset(cfg, lg) if result.start_offset < 0 else 0
        if reset is None:  # ShareFetchUtils.offsetForTimestamp: OffsetNotAvailableException, tried again next fetch
            return OFFSET_NOT_AVAILABLE
        try:
            sp.load(result.start_offset, result.state_epoch, result.batches, reset)
        except ValueError as exc:
            log.error("share partition %s %s-%d: %s", group, topic, partition, exc)
            return UNKNOWN_SERVER_ERROR
        if lg.log_start_offset > sp.start_offset:
            sp.log_start_moved(lg.log_start_offset)
        self._entries[(group, topic_id, partition)] = _Entry(key, topic, sp, leader_epoch)
        log.debug("share partition %s %s-%d loaded at start offset %d", group, topic, partition, sp.start_offset)
        return NONE

    def _reset_offset(self, cfg: ShareGroupConfig, lg: PartitionLog) -> int | None:
        """share.auto.offset.reset for a partition with no start offset yet: latest (the log end),
        earliest (the log start), by_duration:<ISO-8601> (the first record at or after now minus the
        duration; None when there is none, as Kafka's look-up by timestamp finds nothing)."""
        reset = cfg.auto_offset_reset.strip().lower()
        if reset == "earliest":
            return int(lg.log_start_offset)
        if reset.startswith("by_duration:"):
            span = duration_ms(reset.split(":", 1)[1])
            if span is not None:
                found = lg.offset_for_timestamp(wall_ms() - span)
                return None if found is None else int(found[0])
        return int(lg.high_watermark)

    # ------------------------------------------------------------------ fetch

    async def fetch(
        self,
        group: str,
        member: str,
        parts: list[tuple[uuid.UUID, str, int]],
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        max_records: int,
        batch_size: int,
        record_limit: bool,
        epoch: int = 0,
    ) -> dict[TopicIdPartition, PartResult]:
        """DelayedShareFetch: waits up to MaxWaitMs for MinBytes of acquirable data, then acquires up to
        MaxRecords over the partitions (shared) and answers the records with their acquired ranges.
        MaxRecords or MaxBytes 0 fetches nothing at once (a request that only acknowledges)."""
        if not parts or max_records == 0 or max_bytes == 0:
            return {}
        parts = rotated(parts, epoch)
        cfg = self.config_for(group)
        committed = cfg.isolation_level.strip().lower() == "read_committed"
        deadline = time.monotonic() + max_wait_ms / 1000
        per_partition = max(max_bytes // max(len(parts), 1), 1)
        # Kafka's DelayedShareFetch is tried once when it is made, with the share-partitions already
        # initialized, then again each time one of the others finishes initializing (processShareFetch:
        # completeDelayedShareFetchRequest), each try with the partitions initialized by then: so the
        # answer that ends a new member's wait holds the partition that loaded first, and the others come
        # with the next fetch. The loads completed, in order, become usable one per pass.
        loads: dict[PartKey, asyncio.Future] = {}
        completed: list[PartKey] = []

        def load(topic_id: uuid.UUID, topic: str, p: int) -> None:
            pk = (group, topic_id, p)
            loads[pk] = self._start_load(group, topic_id, topic, p)
            loads[pk].add_done_callback(lambda _f: completed.append(pk))

        for topic_id, topic, p in parts:
            if (group, topic_id, p) not in self._entries:
                load(topic_id, topic, p)
        usable: set[PartKey] = set()
        while True:
            if len(usable) < len(completed):
                usable.add(completed[len(usable)])
            results: dict[TopicIdPartition, PartResult] = {}
            entries: list[tuple[TopicIdPartition, _Entry]] = []
            for topic_id, topic, p in parts:
                pk = (group, topic_id, p)
                if pk in loads and pk not in usable:
                    continue
                entry = self._entries.get(pk)
                if entry is not None:
                    entries.append(((topic_id, p), entry))
                elif pk in loads and loads[pk].result() != NONE:
                    results[(topic_id, p)] = PartResult(loads[pk].result())
                else:  # dropped since it was loaded (fenced, its topic deleted): loaded again
                    usable.discard(pk)
                    load(topic_id, topic, p)
            loading = [f for pk, f in loads.items() if pk not in usable]
            # a fetch waits for at least one of its loads, whatever its MaxWaitMs
            timed_out = (time.monotonic() >= deadline or self.broker.stopping) and (bool(usable) or not loading)
            reads = [(tp, entry, self._read_log(entry, per_partition, committed)) for tp, entry in entries]
            ready = sum(len(r[0]) for _tp, _e, r in reads)
            if (ready and ready >= min_bytes) or timed_out or any(r.error for r in results.values()):
                now = wall_ms()
                left = max_records
                for tp, entry, (data, batches, fetch_offset, aborted) in reads:
                    result = results[tp] = PartResult()
                    if not batches or left <= 0:
                        continue
                    got, n = entry.sp.acquire(
                        member, batches, fetch_offset, left, batch_size, now, record_limit=record_limit, aborted=aborted
                    )
                    if got:
                        left -= n
                        self.acquired += n
                        result.acquired = got
                        result.records = _slice(data, got[0].first_offset, got[-1].last_offset)
                        log.debug(
                            "share fetch %s %s-%d: %s acquired %s",
                            group,
                            entry.topic,
                            tp[1],
                            member,
                            ", ".join(f"{a.first_offset}-{a.last_offset}#{a.delivery_count}" for a in got),
                        )
                        self._arm(entry)
                if any(r.acquired for r in results.values()) or timed_out or any(r.error for r in results.values()):
                    return results
            if len(usable) < len(completed):
                continue  # another load has finished: try again with it
            await self._wait(
                [(group, tp[0], tp[1]) for tp, _e in entries],
                [(e.topic, tp[1]) for tp, e in entries],
                max(deadline - time.monotonic(), 0.0) if usable or not loading else 30.0,
                loading,
            )

    def _read_log(self, entry: _Entry, max_bytes: int, committed: bool) -> tuple[bytes, list[LogBatch], int, list]:
        """The log from the share-partition's next fetch offset: (bytes, batch headers, fetch offset,
        aborted transactions for read_committed)."""
        sp = entry.sp
        lg = self.broker.readable_log(entry.topic, entry.key.partition)
        if lg is None or not sp.can_acquire():
            return b"", [], 0, []
        if lg.log_start_offset > sp.start_offset:
            sp.log_start_moved(lg.log_start_offset)
        offset = sp.next_fetch_offset()
        upto = None
        txns = self.broker.partitions.txn_state((entry.topic, entry.key.partition))
        if committed and txns is not None:
            upto = txns.last_stable_offset(lg.high_watermark)
        try:
            data = lg.read(offset, max_bytes, upto)
        except OffsetOutOfRange:
            # SFU: a fetch offset the log no longer has resets to the log start, quietly
            sp.log_start_moved(lg.log_start_offset)
            return b"", [], offset, []
        if not data:
            return b"", [], offset, []
        batches: list[LogBatch] = []
        for pos, h in iter_batches(data):
            abort = h.is_control and control_marker(memoryview(data)[pos : pos + h.size], h) == ABORT_MARKER
            batches.append(LogBatch(h.base_offset, h.last_offset, h.producer_id, h.is_transactional, abort))
        aborted = (
            txns.aborted_between(offset, upto if upto is not None else lg.high_watermark)
            if committed and txns is not None
            else []
        )
        return data, batches, offset, list(aborted)

    async def _wait(
        self, keys: list[PartKey], logs: list[tuple[str, int]], timeout: float, loading: list[asyncio.Future]
    ) -> None:
        """Until a produce to one of the logs, a release on one of the share-partitions, one of the loads
        finishing, or the timeout."""
        if timeout <= 0:
            return
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        for key in keys:
            self._waiters.setdefault(key, set()).add(fut)
        produced = asyncio.ensure_future(self.broker.partitions.wait_for_data(logs, timeout))
        try:
            await asyncio.wait([fut, produced, *loading], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            produced.cancel()
            for key in keys:
                ws = self._waiters.get(key)
                if ws is not None:
                    ws.discard(fut)
                    if not ws:
                        del self._waiters[key]

    def _wake(self, entry: _Entry) -> None:
        k = entry.key
        for fut in self._waiters.pop((k.group_id, k.topic_id, k.partition), ()):
            if not fut.done():
                fut.set_result(None)

    # ------------------------------------------------------------------ acknowledge, release

    async def acknowledge(
        self, group: str, member: str, acks: dict[TopicIdPartition, list[AckBatch]]
    ) -> dict[TopicIdPartition, tuple[int, str | None]]:
        """SharePartitionManager.acknowledge: each partition's acknowledgements, persisted, then answered."""
        results: dict[TopicIdPartition, tuple[int, str | None]] = {}
        jobs = []
        for tp, batches in acks.items():
            entry = self._entries.get((group, tp[0], tp[1]))
            if entry is None:
                results[tp] = (UNKNOWN_TOPIC_OR_PARTITION, "No share partition found")
                continue
            try:
                update = entry.sp.acknowledge(member, batches, wall_ms())
            except ShareError as exc:
                log.debug(
                    "share acknowledgement of %s in %s on %s-%d refused (%d): %s",
                    member,
                    group,
                    entry.topic,
                    tp[1],
                    exc.code,
                    exc,
                )
                results[tp] = (exc.code, str(exc))
                continue
            log.debug(
                "share acknowledgement of %s in %s on %s-%d: %s",
                member,
                group,
                entry.topic,
                tp[1],
                ", ".join(
                    f"{b.first_offset}-{b.last_offset}:{'/'.join(ACK_NAMES.get(t, '?') for t in b.types)}"
                    for b in batches
                ),
            )
            jobs.append((tp, entry, update))
        # shielded: a request cancelled by its connection's close must still end its transitions
        outcomes = await asyncio.shield(asyncio.gather(*(self._persist(entry, update) for _tp, entry, update in jobs)))
        for (tp, _entry, _update), code in zip(jobs, outcomes, strict=True):
            results[tp] = (code, None if code == NONE else "Failed to write the share group state")
            if code == NONE:
                for b in acks[tp]:
                    for t, n in (
                        ((b.types[0], b.last_offset - b.first_offset + 1),)
                        if len(b.types) == 1
                        else ((t, 1) for t in b.types)
                    ):
                        self.acknowledged[ACK_NAMES.get(t, "gap")] += n
        return results

    async def _persist(self, entry: _Entry, update: Update) -> int:
        """Writes a transition's state batches, then commits or rolls it back; its error code."""
        code = NONE
        if update.batches:
            persister = self._persister_of()
            if persister is None:
                code = COORDINATOR_NOT_AVAILABLE
            else:
                written = await persister.write(
                    entry.key,
                    entry.sp.state_epoch,
                    entry.leader_epoch,
                    update.start_offset,
                    update.delivery_complete_count,
                    update.batches,
                )
                code = NONE if written == NONE else persister_error(written)
        if entry.sp.complete(update, code == NONE, wall_ms()):
            self._wake(entry)
        self._arm(entry)
        if code in FENCED:
            self._fenced(entry, code)
        return code

    def _fenced(self, entry: _Entry, code: int) -> None:
        """SharePartitionManager's fenced-partition handler: the share-partition leaves the cache and the
        next fetch loads it again from the share coordinator."""
        k = entry.key
        if self._entries.get((k.group_id, k.topic_id, k.partition)) is entry:
            log.info(
                "share partition %s %s-%d fenced (%d): dropped, to be loaded again",
                k.group_id,
                entry.topic,
                k.partition,
                code,
            )
            del self._entries[(k.group_id, k.topic_id, k.partition)]
            if entry.timer is not None:
                entry.timer.cancel()
                entry.timer = None

    async def release_session(self, group: str, member: str, partitions: list[TopicIdPartition]) -> None:
        """SharePartitionManager.releaseSession: the member's acquired records on the session's
        partitions go back (a session closed with epoch -1, or its connection dropped)."""
        jobs = []
        for tp in partitions:
            entry = self._entries.get((group, tp[0], tp[1]))
            if entry is not None:
                update = entry.sp.release(member)
                self.archived_at_limit += _count(update, ARCHIVED)
                if update.batches:
                    log.info(
                        "share session of %s in %s closed: released %s of %s-%d",
                        member,
                        group,
                        ", ".join(f"{b.first_offset}-{b.last_offset}" for b in update.batches),
                        entry.topic,
                        tp[1],
                    )
                jobs.append(self._persist(entry, update))
        await asyncio.shield(asyncio.gather(*jobs))

    def connection_closed(self, connection: str) -> None:
        """ShareSessionCache's disconnect listener: the connection's session ends and its records go
        back; a group left with no session at all has its share-partitions dropped from the cache
        (SharePartitionManager's onGroupEmpty), to be loaded again when a member fetches."""
        group, session = self.sessions.disconnected(connection)
        if group is not None:
            self._spawn(self._disconnected(group, session))

    async def _disconnected(self, group: str, session: ShareSession | None) -> None:
        if session is not None:
            await self.release_session(group, session.key[1], list(session.partitions))
        if not self.sessions.group_has_sessions(group):
            for pk in [pk for pk in self._entries if pk[0] == group]:
                entry = self._entries.pop(pk)
                if entry.timer is not None:
                    entry.timer.cancel()

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ lock timers

    def _arm(self, entry: _Entry) -> None:
        """One timer per share-partition, at its earliest acquisition-lock deadline."""
        deadline = entry.sp.next_deadline()
        if deadline == entry.deadline and (entry.timer is not None or deadline is None):
            return
        if entry.timer is not None:
            entry.timer.cancel()
            entry.timer = None
        entry.deadline = deadline
        if deadline is not None:
            delay = max(deadline - wall_ms(), 0) / 1000
            entry.timer = asyncio.get_running_loop().call_later(delay, self._expire, entry)

    def _expire(self, entry: _Entry) -> None:
        entry.timer = entry.deadline = None
        update = entry.sp.expire_locks(wall_ms())
        if update is None:
            self._arm(entry)
            return
        self.lock_expired += _count(update, AVAILABLE) + _count(update, ARCHIVED)
        self.archived_at_limit += _count(update, ARCHIVED)
        log.info(
            "acquisition locks of %s %s-%d expired: %s",
            entry.key.group_id,
            entry.topic,
            entry.key.partition,
            ", ".join(f"{b.first_offset}-{b.last_offset}" for b in update.batches),
        )
        if update.released:
            self._wake(entry)
        self._spawn(self._persist(entry, update))

    def partition_moved(self, topic: str, partition: int) -> None:
        """In a cluster this node lost or took the lease of a data partition: its share-partitions leave the
        cache, their acquired records with them (never persisted, as in Kafka: a new leader reads the state
        and offers them again), and the next fetch here reads the state afresh from the share coordinator."""
        for pk, entry in [(pk, e) for pk, e in self._entries.items() if e.topic == topic and pk[2] == partition]:
            del self._entries[pk]
            if entry.timer is not None:
                entry.timer.cancel()
        for pk in [pk for pk in self._waiters if pk[2] == partition]:
            for fut in self._waiters[pk]:
                if not fut.done():
                    fut.set_result(None)

    def topic_deleted(self, topic_id: uuid.UUID) -> None:
        """A deleted topic's share-partitions leave the cache and the share fetches waiting on them are
        answered now (Kafka's partition listener: removeSharePartitionFromCache, which completes the
        delayed share fetches of the partition); they find it gone: UNKNOWN_TOPIC_OR_PARTITION."""
        for pk in [pk for pk in self._entries if pk[1] == topic_id]:
            entry = self._entries.pop(pk)
            if entry.timer is not None:
                entry.timer.cancel()
        for pk in [pk for pk in self._waiters if pk[1] == topic_id]:
            for fut in self._waiters.pop(pk):
                if not fut.done():
                    fut.set_result(None)

    # ------------------------------------------------------------------ facts for the handlers

    def lock_duration_ms(self, group: str) -> int:
        return self.config_for(group).record_lock_duration_ms

    def partition(self, group: str, topic_id: uuid.UUID, partition: int) -> SharePartition | None:
        entry = self._entries.get((group, topic_id, partition))
        return entry.sp if entry is not None else None


def _count(update: Update, state: int) -> int:
    return sum(b.last_offset - b.first_offset + 1 for b in update.batches if b.delivery_state == state)


def rotated(parts: list, epoch: int) -> list:
    """PartitionRotateStrategy.rotateRoundRobin: the session epoch picks which partition reads first, so
    MaxRecords does not always go to the same one."""
    if len(parts) <= 1 or epoch < 1 or epoch % len(parts) == 0:
        return parts
    k = epoch % len(parts)
    return parts[k:] + parts[:k]


def _slice(data: bytes, first: int, last: int) -> bytes:
    """ShareFetchUtils.maybeSliceFetchRecords: only the log batches that hold acquired offsets."""
    start = end = None
    for pos, h in iter_batches(data):
        if h.last_offset < first:
            continue
        if h.base_offset > last:
            break
        if start is None:
            start = pos
        end = pos + h.size
    if start is None or end is None:
        return b""
    return bytes(data[start:end])
