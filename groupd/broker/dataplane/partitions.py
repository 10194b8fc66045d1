"""Topic partitions: one storage-engine log per partition, opened, grown and deleted with the registry.

Produced batches are appended byte for byte; fetchers waiting for data are woken by appends (no
polling). Durability follows the same flush policy as the offsets store, through the engine's
Durability (storage/engine.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from groupd.broker.dataplane.producers import ProducerIds
from groupd.broker.dataplane.topic_configs import effective_topic_config
from groupd.broker.dataplane.topics import Topic, TopicRegistry
from groupd.broker.dataplane.txn_index import PartitionTxns, is_transactional, mark_transactional
from groupd.clock import wall_ms
from groupd.storage.batch import build_control_batch
from groupd.storage.engine import LogConfig, PartitionLog, StorageEngine
from groupd.storage.errors import StorageError, UnknownPartition

log = logging.getLogger("groupd.partitions")

TopicPartition = tuple[str, int]


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
        self._tasks: set[asyncio.Task] = set()
        topics.on_create.append(self._created)
        topics.on_delete.append(self._deleted)
        topics.on_grow.append(self._grown)

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        for topic in self.topics.all():
            self._open_topic(topic, 0)
        task = asyncio.get_running_loop().create_task(self._retention_loop())
        self._tasks.add(task)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.committer.close()
        for (name, p), lg in self.logs.items():
            with contextlib.suppress(StorageError, OSError):  # without a snapshot, the next start rebuilds
                lg.flush()
                if not lg.failed:
                    if self.producers is not None:
                        self.producers.save(name, p, lg)
                    txns = self.txns.get((name, p))
                    if txns is not None:
                        txns.save(lg)
            lg.close()
        self.logs.clear()

    def _open_topic(self, topic: Topic, first: int) -> None:
        cfg = log_config_for(self.config, topic.configs)
        for p in range(first, topic.partitions):
            lg = self.logs[(topic.name, p)] = self.storage.open_partition(topic.name, p, cfg)
            if is_transactional(lg):
                restored = PartitionTxns.restore(lg)
                self.txns[(topic.name, p)] = restored if restored is not None else PartitionTxns.rebuild(lg.batches())
            producers = self.producers
            if producers is not None and lg.log_end_offset and not producers.restore(topic.name, p, lg):
                producers.rebuild(topic.name, p, lg.headers(last_segments=1))

    def _created(self, topic: Topic) -> None:
        self._open_topic(topic, 0)

    def _grown(self, topic: Topic, old: int) -> None:
        self._open_topic(topic, old)

    def _deleted(self, topic: Topic) -> None:
        for key in [k for k in self.logs if k[0] == topic.name]:
            lg = self.logs.pop(key)
            self.txns.pop(key, None)
            lg.close()
            if self.producers is not None:
                self.producers.forget(topic.name)
            with contextlib.suppress(UnknownPartition):
                self.storage.delete_partition(*key)
            self._wake(key)

    def reconfigure(self, topic: Topic) -> None:
        cfg = log_config_for(self.config, topic.configs)
        for p in range(topic.partitions):
            lg = self.logs.get((topic.name, p))
            if lg is not None:
                lg.config = cfg

    async def _retention_loop(self) -> None:
        interval = self.config["log.retention.check.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            now = wall_ms()
            for key, lg in list(self.logs.items()):
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
        offset, _ = lg.append(build_control_batch(producer_id, producer_epoch, commit, timestamp_ms=wall_ms()))
        state.marker(producer_id, commit, offset)
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
