"""The share coordinator as a broker service (Kafka's ``ShareCoordinatorService``): the shell around the
rules in ``coordinator/share_state/rules.py``, and the broker's in-process ``Persister``.

It runs the rules on the coordinator runtime (coordinator/runtime/), as the group coordinator does:
one shard per ``__share_group_state`` partition (``share.coordinator.state.topic.num.partitions``, 50),
a share-partition's state in partition ``abs(javaHash("<group>:<topic id>:<partition>")) % 50`` (Kafka's
SharePartitionKey.asCoordinatorKey, the topic id in Kafka's base64 form). Each answer leaves once its
record is durable (the broker's group committer, as the transaction coordinator's writes). A partition's
log is opened at its first write, as the transaction state's are; start-up replays every partition found
on disk, record by record (an update is a delta over the snapshot before it), so a restart keeps every
state. Every ``share.coordinator.state.topic.prune.interval.ms`` (5 minutes) share-partitions not
snapshotted for ``share.coordinator.cold.partition.snapshot.interval.ms`` are snapshotted again and each
partition's records below the oldest last snapshot are deleted (the topic's cleanup.policy is delete,
retention -1: nothing else removes them).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from clock import wall_ms
from coordinator import errors as E
from coordinator.api import Result
from coordinator.partitioning import partition_for
from coordinator.runtime.loop import LoopWakeups
from coordinator.runtime.runtime import CoordinatorError, CoordinatorRuntime, Shard, WriteFailed
from coordinator.share_state import records as R
from coordinator.share_state import rules
from coordinator.share_state.persister import (
    ReadStateResult,
    ReadSummaryResult,
    SharePartitionKey,
    StateBatch,
)
from coordinator.tasks import Tasks
from protocol.topic_names import SHARE_STATE_TOPIC
from storage.batch import iter_records
from storage.committer import GroupCommitter
from storage.errors import RecordTooLarge, StorageError
from storage.log import Log, LogConfig

log = logging.getLogger("groupd.share_coordinator")

_PARTITION_DIR = re.compile(rf"{SHARE_STATE_TOPIC}-(\d+)")


def topic_id_string(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def coordinator_key(key: SharePartitionKey) -> str:
    return f"{key.group_id}:{topic_id_string(key.topic_id)}:{key.partition}"


def parse_coordinator_key(text: str) -> SharePartitionKey | None:
    """Kafka's SharePartitionKey.getInstance(String): ``group:topicId:partition``, the group id itself
    may hold colons; None where Kafka throws (FindCoordinator answers INVALID_REQUEST)."""
    tokens = text.split(":")
    while tokens and tokens[-1] == "":
        tokens.pop()  # Java's String.split drops trailing empty strings
    if len(tokens) < 3:
        return None
    group_id = ":".join(tokens[:-2])
    if not group_id.strip():
        return None
    raw = tokens[-2]
    if len(raw) > 24 or not re.fullmatch(r"[A-Za-z0-9_-]*={0,2}", raw):
        return None
    try:
        data = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
    except ValueError:
        return None
    if len(data) != 16:
        return None
    partition = _java_parse_int(tokens[-1])
    if partition is None:
        return None
    return SharePartitionKey(group_id, uuid.UUID(bytes=data), partition)


def _java_parse_int(s: str) -> int | None:
    """Integer.parseInt: an optional sign and ASCII digits, within 32 bits."""
    if not re.fullmatch(r"[+-]?[0-9]+", s):
        return None
    n = int(s)
    return n if -(2**31) <= n < 2**31 else None


class DataPartitions(Protocol):
    committer: GroupCommitter

    def appended(self, tp: tuple[str, int]) -> None: ...


class Host(Protocol):
    """What the broker gives the service: its config, the committer and long-poll wake-ups of the data
    plane, and the topics (a topic id's partition count, Kafka's metadata image check)."""

    config: Any
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
        except RecordTooLarge as exc:
            log.warning("%s-%d: a share-state record was refused: %s", SHARE_STATE_TOPIC, shard.partition, exc)
            raise WriteFailed(str(exc), E.MESSAGE_TOO_LARGE) from exc
        except StorageError as exc:
            log.error("append to %s-%d failed: %s", SHARE_STATE_TOPIC, shard.partition, exc)
            raise WriteFailed(str(exc)) from exc
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
        self.root = Path(config["log.dirs"])
        self.num_partitions: int = config["share.coordinator.state.topic.num.partitions"]
        self.prune_interval_ms: int = config["share.coordinator.state.topic.prune.interval.ms"]
        self.cfg = rules.ShareStateConfig(
            snapshot_update_records_per_snapshot=config["share.coordinator.snapshot.update.records.per.snapshot"],
            cold_partition_snapshot_interval_ms=config["share.coordinator.cold.partition.snapshot.interval.ms"],
            partitions_of=self._partitions_of,
        )
        self._log_config = LogConfig(
            cleanup_policy="delete", retention_ms=-1, segment_bytes=config["share.coordinator.state.topic.segment.bytes"],
            max_message_bytes=config["message.max.bytes"],
        )
        self.now = now
        self.wakeups = LoopWakeups(None)  # type: ignore[arg-type]  # its loop is start()'s
        self.runtime = CoordinatorRuntime(SHARE_STATE_TOPIC, rules.ShareShardRules(self.cfg), _StateLog(self), self.wakeups, now, context=self.cfg)
        self.wakeups.runtime = self.runtime
        self.logs: dict[int, Log] = {}  # the partitions opened so far
        self.active = False
        self.records_written = 0
        self.loaded_records = 0
        self._tasks = Tasks()
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._loop = self.wakeups.loop = asyncio.get_running_loop()
        for p in range(self.num_partitions):
            self.runtime.add_shard(p)
        for p in self._stored_partitions():
            if p >= self.num_partitions:
                log.warning("%s-%d is past share.coordinator.state.topic.num.partitions (%d): not loaded",
                            SHARE_STATE_TOPIC, p, self.num_partitions)
                continue
            self._load(self.runtime.shards[p], self.log_of(p))
        for shard in self.runtime.shards.values():
            shard.loaded = True
        states = sum(len(s.state.offsets) for s in self.runtime.shards.values())
        if states:
            log.info("loaded %d share-partition states (%d records) from %d %s partitions",
                     states, self.loaded_records, len(self.logs), SHARE_STATE_TOPIC)
        self.active = True
        if self.prune_interval_ms > 0:
            self._tasks.spawn(self._periodic())

    async def stop(self) -> None:
        self.active = False
        await self._tasks.cancel_all()
        for _ in range(500):  # answers whose flush rounds are still running go first
            if not any(shard.queue for shard in self.runtime.shards.values()):
                break
            await asyncio.sleep(0.01)
        for lg in self.logs.values():
            with contextlib.suppress(StorageError):
                lg.flush()
            lg.close()
        self.logs.clear()
        for shard in self.runtime.shards.values():
            shard.log = None

    def _load(self, shard: Shard, lg: Log) -> None:
        """Replay the partition record by record: a snapshot replaces a key's state, an update merges
        into it, a tombstone removes it; a damaged record stops the partition's load (logged)."""
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
            log.error("%s-%d: load stopped at a damaged record: %s", SHARE_STATE_TOPIC, shard.partition, exc)

    # ------------------------------------------------------------ partitions

    def partition_for(self, key: SharePartitionKey) -> int:
        return partition_for(coordinator_key(key), self.num_partitions)

    def log_of(self, partition: int) -> Log:
        """A partition's log, opened (made, the first time) at its first use."""
        lg = self.logs.get(partition)
        if lg is None:
            try:
                lg = Log.open(self.root / f"{SHARE_STATE_TOPIC}-{partition}", self._log_config)
            except OSError as exc:
                raise StorageError(f"{SHARE_STATE_TOPIC}-{partition}: {exc}") from exc
            self.logs[partition] = lg
            shard = self.runtime.shards.get(partition)
            if shard is not None:
                shard.log = lg
        return lg

    def has_records(self) -> bool:
        return any(lg.log_end_offset for lg in self.logs.values())

    def _stored_partitions(self) -> list[int]:
        if not self.root.is_dir():
            return []
        with os.scandir(self.root) as entries:
            return sorted(int(m[1]) for e in entries if (m := _PARTITION_DIR.fullmatch(e.name)) and e.is_dir())

    def _partitions_of(self, topic_id: uuid.UUID) -> int | None:
        topic = self.broker.topics.by_id(topic_id)
        return topic.partitions if topic is not None else None

    # ------------------------------------------------------------ requests

    async def _call(self, key: SharePartitionKey, handler: Callable[..., Result], request: Any) -> Any:
        """Run a handler on the key's shard; the payload once its records are durable. Raises
        CoordinatorError(COORDINATOR_NOT_AVAILABLE) when the coordinator is not running."""
        if not self.active or self._loop is None:
            raise CoordinatorError(E.COORDINATOR_NOT_AVAILABLE)
        shard = self.runtime.shards[self.partition_for(key)]
        future: asyncio.Future[Any] = self._loop.create_future()
        self.runtime.run(shard, key.group_id, handler, request, future)
        return await future

    async def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> rules.Answer:
        try:
            answer: rules.Answer = await self._call(key, rules.initialize, rules.InitializeState(key, state_epoch, start_offset))
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
        self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
        delivery_complete_count: int, batches: tuple[StateBatch, ...],
    ) -> rules.Answer:
        request = rules.WriteState(key, state_epoch, leader_epoch, start_offset, delivery_complete_count, batches)
        try:
            answer: rules.Answer = await self._call(key, rules.write, request)
            return answer
        except CoordinatorError as exc:
            return _failed(exc.code)

    async def delete_state(self, key: SharePartitionKey) -> rules.Answer:
        try:
            answer: rules.Answer = await self._call(key, rules.delete, rules.DeleteState(key))
            return answer
        except CoordinatorError as exc:
            return _failed(exc.code)

    async def read_state_summary(self, key: SharePartitionKey, leader_epoch: int) -> ReadSummaryResult:
        try:
            result: ReadSummaryResult = await self._call(key, rules.read_summary, rules.ReadStateSummary(key, leader_epoch))
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
        self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
        delivery_complete_count: int, batches: tuple[StateBatch, ...],
    ) -> int:
        return (await self.write_state(key, state_epoch, leader_epoch, start_offset, delivery_complete_count, batches)).error_code

    async def delete(self, key: SharePartitionKey) -> int:
        return (await self.delete_state(key)).error_code

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ReadSummaryResult:
        return await self.read_state_summary(key, leader_epoch)

    # ------------------------------------------------------------ housekeeping

    def topics_deleted(self, topic_ids: frozenset[uuid.UUID]) -> None:
        """A topic is gone: every share-partition state of it is tombstoned (Kafka's onMetadataUpdate)."""
        if not self.active or self._loop is None:
            return
        for shard in self.runtime.shards.values():
            if any(k.topic_id in topic_ids for k in shard.state.offsets):
                self.runtime.run(shard, "", rules.topics_deleted, topic_ids, self._loop.create_future())

    async def _periodic(self) -> None:
        while True:
            await asyncio.sleep(self.prune_interval_ms / 1000)
            try:
                await self.prune()
            except Exception:  # the job must outlive one bad pass
                log.exception("pruning %s failed", SHARE_STATE_TOPIC)

    async def prune(self) -> int:
        """Snapshot cold share-partitions, then delete each partition's records below the oldest last
        snapshot of its keys; the number of records deleted."""
        assert self._loop is not None
        waits = []
        for shard in self.runtime.shards.values():
            if shard.state.offsets:
                future: asyncio.Future[Any] = self._loop.create_future()
                self.runtime.run(shard, "", rules.snapshot_cold_partitions, None, future)
                waits.append(future)
        await asyncio.gather(*waits, return_exceptions=True)
        deleted = 0
        for p, lg in list(self.logs.items()):
            below = rules.redundant_below(self.runtime.shards[p].state)
            if below is not None and below > lg.log_start_offset:
                before = lg.log_start_offset
                lg.delete_records_before(below)
                deleted += lg.log_start_offset - before
                log.debug("%s-%d pruned below offset %d", SHARE_STATE_TOPIC, p, below)
        return deleted


def _failed(code: int) -> rules.Answer:
    code = rules.write_error(code)
    return rules.Answer(code, rules.MESSAGES.get(code))
