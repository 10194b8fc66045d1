"""Topic partitions: one storage-engine log per partition, opened, grown and deleted with the registry.

Produced batches are appended byte for byte; fetchers waiting for data are woken by appends (no
polling). Durability follows the same flush policy as the offsets store, through the engine's
Durability (storage/engine.py).

Creating or deleting thousands of partitions is file work proportional to their number (a mkdir and an
open each, a millisecond or more on a busy disk, and one slow call can block for far longer), so it runs
on one worker thread, ``CHUNK`` partitions per call, while the event loop serves other clients'
heartbeats and commits. A creation opens its partitions before the registry names the topic
(``prepare``); a deletion closes them at once and removes their files in the background, and a creation
of the same name waits for that removal. One thread: the engine sees one such call at a time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import functools
import logging
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from groupd.broker.dataplane.producers import ProducerIds
from groupd.broker.dataplane.topic_configs import effective_topic_config
from groupd.broker.dataplane.topics import Topic, TopicRegistry
from groupd.broker.dataplane.txn_index import PartitionTxns, is_transactional, mark_transactional
from groupd.broker.dataplane.verification_guards import VerificationGuards
from groupd.clock import wall_ms
from groupd.storage.batch import build_control_batch
from groupd.storage.engine import LogConfig, PartitionLog, StorageEngine
from groupd.storage.errors import StorageError, UnknownPartition

log = logging.getLogger("groupd.partitions")

TopicPartition = tuple[str, int]
CHUNK = 64  # partitions opened or removed per call on the worker thread
_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


def out_of_descriptors(exc: BaseException) -> bool:
    """Whether ``exc`` (or the OSError an engine wrapped in it) is EMFILE or ENFILE."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in _OUT_OF_DESCRIPTORS:
            return True
        seen = seen.__cause__
    return False


class RateLimitedLine:
    """One log line per ``interval_s`` for a recurring condition, counting the ones held back."""

    def __init__(self, logger: logging.Logger, interval_s: float = 10.0) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self._last = -interval_s
        self._missed = 0

    def error(self, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._last < self.interval_s:
            self._missed += 1
            return
        missed, self._last, self._missed = self._missed, now, 0
        suffix = f" ({missed} more since the last such line)" if missed else ""
        self.logger.error(message + suffix, *args)


def log_config_for(broker_config: Any, topic_configs: dict[str, str]) -> LogConfig:
    """Per-topic overrides on top of the broker's log.* defaults (Kafka's precedence)."""

    def pick(key: str) -> str:
        return effective_topic_config(broker_config, topic_configs, key)[0]

    return LogConfig(
        segment_bytes=int(pick("segment.bytes")),
        segment_ms=int(pick("segment.ms")),
        retention_ms=int(pick("retention.ms")),
        retention_bytes=int(pick("retention.bytes")),
        cleanup_policy=pick("cleanup.policy"),
        delete_retention_ms=int(pick("delete.retention.ms")),
        max_message_bytes=int(pick("max.message.bytes")),
        index_interval_bytes=int(pick("index.interval.bytes")),
    )


class PartitionManager:
    """Broker service owning every data partition's Log."""

    def __init__(
        self, config: Any, storage: StorageEngine, topics: TopicRegistry, producers: ProducerIds | None = None
    ) -> None:
        self.config = config
        self.storage = storage
        self.producers = producers
        self.topics = topics
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self.committer = storage.durability(
            flush_interval_messages=config["log.flush.interval.messages"],
            flush_interval_ms=config["log.flush.interval.ms"],
            shared=True,
        )
        self._watchers: dict[TopicPartition, set[asyncio.Future]] = {}
        self.txns: dict[TopicPartition, PartitionTxns] = {}  # partitions that have held transactional batches
        self.guards = VerificationGuards()  # produce-time verifications under way (KIP-890)
        self._tasks: set[asyncio.Task] = set()
        self._prepared: dict[TopicPartition, PartitionLog] = {}  # opened by prepare, not yet in the registry
        self._deleting: dict[str, asyncio.Task] = {}  # topics whose files are being removed
        self._work: set[asyncio.Task] = set()  # creations under way (see run)
        self._opening: dict[str, asyncio.Task] = {}
        self._started = False  # in a cluster: a topic's new partitions being opened
        self._files = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="partition-files")
        self.descriptor_errors = RateLimitedLine(log)
        self.read_errors = RateLimitedLine(log)  # a Fetch's log that cannot be read (handlers/data.py)
        # in a cluster (docs/cluster.md): whether this node holds a partition's lease; None alone
        self.leads: Callable[[str, int], bool] | None = None
        # in a cluster: the leader epoch (the lease's) this node writes a partition's batches with; None alone (0)
        self.leader_epoch: Callable[[str, int], int] | None = None
        topics.on_create.append(self._created)
        topics.on_delete.append(self._deleted)
        topics.on_grow.append(self._grown)

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        for topic in self.topics.all():
            self._open_topic(topic, 0)
        self._started = True  # from now on a cluster opens new partitions off the loop
        for loop in (self._retention_loop(), self._producer_expiration_loop()):
            self._tasks.add(asyncio.get_running_loop().create_task(loop))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for task in [*self._work, *self._deleting.values(), *self._opening.values()]:
            with contextlib.suppress(asyncio.CancelledError, StorageError, OSError):
                await task
        for lg in self._prepared.values():
            lg.close()
        self._prepared.clear()
        self._files.shutdown(wait=True)
        await self.committer.close()
        for (name, p), lg in self.logs.items():
            with contextlib.suppress(StorageError, OSError):  # without a snapshot, the next start rebuilds
                lg.flush()
                if not lg.failed:
                    if self.producers is not None and lg.log_end_offset:  # an empty log restores nothing
                        self.producers.save(name, p, lg)
                    txns = self.txns.get((name, p))
                    if txns is not None:
                        txns.save(lg)
            lg.close()
        self.logs.clear()

    def _open_topic(self, topic: Topic, first: int) -> None:
        cfg = log_config_for(self.config, topic.configs)
        later = []
        for p in range(first, topic.partitions):
            prepared = self._prepared.pop((topic.name, p), None)
            if prepared is not None:  # new and empty: nothing to restore
                self.logs[(topic.name, p)] = prepared
            elif self.topics.shared and self._started:
                later.append((topic.name, p))
            else:
                self._open_one(topic.name, p, cfg)
        if later:  # in a cluster, created here after its claim or followed: off the loop, as prepare opens
            previous = self._opening.get(topic.name)
            task = asyncio.get_running_loop().create_task(self._open_later(later, previous))
            self._opening[topic.name] = task
            task.add_done_callback(functools.partial(self._opened, topic.name))

    def _opened(self, name: str, task: asyncio.Task) -> None:
        if self._opening.get(name) is task:
            del self._opening[name]

    async def _open_later(self, keys: list[TopicPartition], previous: asyncio.Task | None) -> None:
        if previous is not None:  # an earlier growth of the same topic first
            with contextlib.suppress(Exception):
                await asyncio.shield(previous)
        try:
            await self.open_off_loop(keys, replace=False)
        except (StorageError, OSError) as exc:  # its partitions open when first asked (Broker.partition_log)
            self.descriptor_errors.error("opening partitions of %s failed: %s", keys[0][0], exc)

    async def opened(self, name: str) -> None:
        """Until the partitions of ``name`` being opened off the loop are open (in a cluster)."""
        task = self._opening.get(name)
        if task is not None:
            await asyncio.shield(task)

    async def all_opened(self) -> None:
        """Until nothing is being opened off the loop (in a cluster)."""
        while pending := [t for t in self._opening.values() if not t.done()]:
            await asyncio.wait(pending)

    async def open_off_loop(self, keys: list[TopicPartition], replace: bool) -> None:
        """Open these partitions on the partition-files thread, ``CHUNK`` at a time, each taken into the
        registry on the loop as its slice is open (with its transactions and producers restored): what a
        cluster node does for a topic created or followed (``replace`` False: one opened meanwhile stays)
        and for the partitions whose lease it took (``reopen``, True: the stale log is replaced). A
        partition whose topic was deleted, or deleted and created again, meanwhile is closed unused."""
        loop = asyncio.get_running_loop()
        for start in range(0, len(keys), CHUNK):
            wanted = []
            for name, p in keys[start : start + CHUNK]:
                topic = self.topics.get(name)
                if topic is not None and p < topic.partitions:
                    wanted.append((name, p, topic.topic_id, log_config_for(self.config, topic.configs)))
            if not wanted:
                continue
            opened = await loop.run_in_executor(self._files, self._open_shared_chunk, wanted)
            for (name, p, topic_id, _cfg), lg in zip(wanted, opened, strict=True):
                topic = self.topics.get(name)
                key = (name, p)
                if (
                    topic is None
                    or topic.topic_id != topic_id
                    or p >= topic.partitions
                    or (not replace and key in self.logs)
                ):
                    lg.close()
                    continue
                self.close_stale(key)  # one opened meanwhile (a reopening replaces it)
                self._adopt(name, p, lg)
                self._wake(key)

    def _open_shared_chunk(self, wanted: list[tuple[str, int, uuid.UUID, LogConfig]]) -> list[PartitionLog]:
        """On the worker thread: open these partitions, all or (closing them, never removing: their rows
        are the cluster's) none."""
        opened: list[PartitionLog] = []
        try:
            for name, p, _topic_id, cfg in wanted:
                opened.append(self.storage.open_partition(name, p, cfg))
                time.sleep(0)  # let the event loop's thread take the GIL between partitions
        except BaseException:
            for lg in opened:
                with contextlib.suppress(StorageError, OSError):
                    lg.close()
            raise
        return opened

    def _open_one(self, name: str, p: int, cfg: LogConfig) -> None:
        """Open a partition's log and restore its transactions and producers from it."""
        self._adopt(name, p, self.storage.open_partition(name, p, cfg))

    def _adopt(self, name: str, p: int, lg: PartitionLog) -> None:
        self.logs[(name, p)] = lg
        if is_transactional(lg):
            restored = PartitionTxns.restore(lg)
            self.txns[(name, p)] = restored if restored is not None else PartitionTxns.rebuild(lg.batches())
        producers = self.producers
        if producers is not None and lg.log_end_offset and not producers.restore(name, p, lg):
            producers.rebuild(name, p, lg.headers(last_segments=1))

    def close_stale(self, key: TopicPartition) -> None:
        """In a cluster, this node took the partition's lease: its log here is stale. Closed at once, before
        the partition is opened again (``open_off_loop``), so what the close still writes is there to read."""
        old = self.logs.pop(key, None)
        self.txns.pop(key, None)
        self.guards.drop(key)
        if old is not None:
            with contextlib.suppress(StorageError, OSError):  # its unwritten batches were never acknowledged
                old.close()

    def _created(self, topic: Topic) -> None:
        self._open_topic(topic, 0)

    def _grown(self, topic: Topic, old: int) -> None:
        self._open_topic(topic, old)

    def run(self, work: Coroutine[Any, Any, None]) -> asyncio.Future[None]:
        """Run a creation to its end even if the client that asked goes away (as Kafka's controller
        does); the answer waits on the future returned, whose cancellation leaves the work running."""
        task = asyncio.get_running_loop().create_task(work)
        self._work.add(task)
        task.add_done_callback(self._work.discard)
        return asyncio.shield(task)

    def deleting(self, name: str) -> bool:
        """Whether a deleted topic of this name still has files being removed."""
        return name in self._deleting

    async def prepare(self, name: str, first: int, last: int, configs: dict[str, str]) -> None:
        """Open partitions ``first`` to ``last - 1`` of ``name`` before the registry holds them, on the
        worker thread; the registry's create or grow then adopts them. A new topic's leftover files (a
        deletion a crash interrupted) are removed first. On any failure what this call opened is closed
        and removed, and the error raised."""
        pending = self._deleting.get(name)
        if pending is not None:
            with contextlib.suppress(StorageError, OSError):
                await asyncio.shield(pending)
        loop = asyncio.get_running_loop()
        cfg = log_config_for(self.config, configs)
        try:
            if first == 0:
                await loop.run_in_executor(self._files, self._remove_leftovers, name)
            for start in range(first, last, CHUNK):
                numbers = range(start, min(start + CHUNK, last))
                opened = await loop.run_in_executor(self._files, self._open_chunk, name, numbers, cfg)
                for p, lg in zip(numbers, opened, strict=True):
                    self._prepared[(name, p)] = lg
        except BaseException:
            self.discard(name, first, last)
            raise

    def _remove_leftovers(self, name: str) -> None:
        for _, p in self.storage.partitions(name):
            with contextlib.suppress(UnknownPartition):
                self.storage.delete_partition(name, p)

    def _open_chunk(self, name: str, numbers: range, cfg: LogConfig) -> list[PartitionLog]:
        """On the worker thread: open these partitions, all or (closing and removing them) none."""
        opened: list[PartitionLog] = []
        try:
            for p in numbers:
                opened.append(self.storage.open_partition(name, p, cfg))
                time.sleep(0)  # let the event loop's thread take the GIL between partitions
        except BaseException:
            for p, lg in zip(numbers, opened, strict=False):
                lg.close()
                with contextlib.suppress(StorageError, OSError):
                    self.storage.delete_partition(name, p)
            with contextlib.suppress(StorageError, OSError):  # the one whose opening failed, if it got a directory
                self.storage.delete_partition(name, numbers[len(opened)])
            raise
        return opened

    def discard(self, name: str, first: int, last: int) -> None:
        """Close and remove what ``prepare`` opened and the registry did not adopt. In a cluster, when the
        name is a topic now (another node created or grew it first), the partitions are that topic's rows,
        shared by name: they are closed here, not removed."""
        taken = self.topics.shared and name in self.topics
        for p in range(first, last):
            lg = self._prepared.pop((name, p), None)
            if lg is None:
                continue
            lg.close()
            if not taken:
                with contextlib.suppress(StorageError, OSError):
                    self.storage.delete_partition(name, p)

    def _deleted(self, topic: Topic) -> None:
        keys = [k for k in self.logs if k[0] == topic.name]
        for key in keys:
            lg = self.logs.pop(key)
            self.txns.pop(key, None)
            self.guards.drop(key)
            lg.close()
            self._wake(key)
        if self.producers is not None:
            self.producers.forget(topic.name)
        if self.topics.following:
            # another node deleted it and removes its rows, which this node shares (docs/cluster.md); the
            # name may already be a new topic's, made since, whose rows are the same rows by name
            return
        previous = self._deleting.get(topic.name)
        task = asyncio.get_running_loop().create_task(self._remove(topic.name, keys, previous))
        self._deleting[topic.name] = task

    async def _remove(self, name: str, keys: list[TopicPartition], previous: asyncio.Task | None) -> None:
        """Remove a deleted topic's partitions' files on the worker thread, ``CHUNK`` at a time."""
        try:
            if previous is not None:
                with contextlib.suppress(StorageError, OSError):
                    await previous
            loop = asyncio.get_running_loop()
            for start in range(0, len(keys), CHUNK):
                await loop.run_in_executor(self._files, self._remove_chunk, keys[start : start + CHUNK])
        finally:
            if self._deleting.get(name) is asyncio.current_task():
                del self._deleting[name]

    def _remove_chunk(self, keys: list[TopicPartition]) -> None:
        for key in keys:
            try:
                self.storage.delete_partition(*key)
            except UnknownPartition:
                pass
            except (StorageError, OSError) as exc:
                self.descriptor_errors.error("removing %s-%d failed: %s", *key, exc)

    def reconfigure(self, topic: Topic) -> None:
        cfg = log_config_for(self.config, topic.configs)
        for p in range(topic.partitions):
            lg = self.logs.get((topic.name, p))
            if lg is not None:
                lg.config = cfg

    async def _producer_expiration_loop(self) -> None:
        """Kafka's PeriodicProducerExpirationCheck: verification guards no append followed go after
        ``producer.id.expiration.ms`` (verification_guards.py)."""
        interval = self.config["producer.id.expiration.check.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            gone = self.guards.expire(wall_ms(), self.config["producer.id.expiration.ms"])
            if gone:
                log.info("%d transaction verification guards expired (producer.id.expiration.ms)", gone)

    async def _retention_loop(self) -> None:
        interval = self.config["log.retention.check.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            now = wall_ms()
            for key, lg in list(self.logs.items()):
                if self.leads is not None and not self.leads(*key):
                    continue  # in a cluster, another node's: its owner cleans it
                try:
                    if lg.config.delete:
                        lg.apply_retention(now)
                        txns = self.txns.get(key)
                        if txns is not None:
                            txns.forget_before(lg.log_start_offset)
                    if lg.config.compact:
                        lg.compact(now)
                except StorageError as exc:  # e.g. no room for a compacted segment: tried again next time
                    log.error("retention of %s-%d failed: %s", *key, exc)
                except Exception:
                    log.exception("retention of %s-%d failed", *key)

    # ------------------------------------------------------------ data

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def txn_state(self, key: TopicPartition) -> PartitionTxns | None:
        return self.txns.get(key)

    def txn_state_for_write(self, key: TopicPartition, lg: PartitionLog) -> PartitionTxns:
        """The partition's transaction state, flagged on disk before its first transactional batch."""
        state = self.txns.get(key)
        if state is None:
            mark_transactional(lg)
            state = self.txns[key] = PartitionTxns()
        return state

    def write_marker(
        self, key: TopicPartition, producer_id: int, producer_epoch: int, commit: bool
    ) -> PartitionLog | None:
        """Append a COMMIT or ABORT marker for the producer's transaction (not yet durable); None when
        the partition is gone (its topic deleted meanwhile), as Kafka's marker writer skips it."""
        lg = self.logs.get(key)
        if lg is None:
            return None
        state = self.txn_state_for_write(key, lg)
        marker = build_control_batch(producer_id, producer_epoch, commit, timestamp_ms=wall_ms())
        offset, _ = lg.append(marker, None if self.leader_epoch is None else self.leader_epoch(*key))
        state.marker(producer_id, commit, offset)
        self.guards.clear(key, producer_id)  # a verification under way for the ended transaction is void
        self._wake(key)
        return lg

    def appended(self, key: TopicPartition) -> None:
        self._wake(key)

    def _wake(self, key: TopicPartition) -> None:
        waiters = self._watchers.pop(key, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    async def wait_for_data(self, keys: list[TopicPartition], timeout: float) -> None:
        """Until a produce touches one of ``keys`` or the timeout passes."""
        if timeout <= 0:
            return
        fut = asyncio.get_running_loop().create_future()
        for key in keys:
            self._watchers.setdefault(key, set()).add(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass
        finally:
            for key in keys:
                ws = self._watchers.get(key)
                if ws is not None:
                    ws.discard(fut)
                    if not ws:
                        del self._watchers[key]

    def metrics_rows(self) -> list[tuple[str, int, int, int, int]]:
        return [(t, p, lg.log_start_offset, lg.high_watermark, lg.size_bytes) for (t, p), lg in self.logs.items()]
