"""The transaction coordinator's shell: the ``__transaction_state`` partitions, markers, and timers around
the pure core in ``coordinator/transactions/rules.py``.

Each transition is persisted (Kafka's TransactionLog key and value formats) before it is acted on or
answered, so a restart finds every transactional id where it was. A transaction that had reached
PrepareCommit or PrepareAbort is finished at start-up (its markers written again: harmless, as in
Kafka); an open one is aborted when its timeout passes. Markers go to every data partition of the
transaction and, through the group coordinator, to the offsets partition of every group whose offsets
it carries. One transition per transactional id at a time: a request that finds one under way gets
CONCURRENT_TRANSACTIONS and retries, as Kafka's clients do.

As in Kafka, ``transaction.state.log.num.partitions`` partitions hold the ids, each in
``abs(javaHashCode(id)) % partitions``. A partition's log is opened at its first write (an empty broker
opens none); start-up replays every partition found on disk and moves an id found outside its own
partition (the single ``__transaction_state-0`` of earlier groupd versions, or a changed count) home.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from groupd.clock import wall_ms
from groupd.coordinator.internal_logs import InternalLogs
from groupd.coordinator.partitioning import partition_for
from groupd.coordinator.runtime.runtime import CoordinatorError
from groupd.coordinator.tasks import Tasks
from groupd.coordinator.transactions import rules as T
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import OFFSETS_TOPIC, TXN_STATE_TOPIC
from groupd.storage.batch import collect_latest
from groupd.storage.engine import Durability, LogConfig, PartitionLog, StorageEngine
from groupd.storage.errors import StorageError

if TYPE_CHECKING:
    from groupd.cluster.txn_verification import TxnVerifier
    from groupd.coordinator.service import GroupCoordinator


class Producers(Protocol):
    def allocate(self) -> int: ...


class DataPartitions(Protocol):
    """The data plane as the transaction coordinator writes to it (broker/dataplane/partitions.py)."""

    committer: Durability

    def write_marker(
        self, tp: T.TopicPartition, producer_id: int, producer_epoch: int, commit: bool
    ) -> PartitionLog | None: ...

    def appended(self, tp: tuple[str, int]) -> None: ...


class RemoteMarkers(Protocol):
    """In a cluster (docs/cluster.md): which partitions this node writes markers to itself, and the
    markers for the others, sent to their owners as Kafka's coordinator does (WriteTxnMarkers)."""

    def local(self, tp: T.TopicPartition) -> bool: ...

    async def write(
        self, tps: list[T.TopicPartition], producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
    ) -> None:
        """Every marker durable at its partition's owner; StorageError otherwise (retried later)."""
        ...


class Host(Protocol):
    """What the service is given by the broker that runs it: its config, producer ids, the data
    partitions its markers go to, the group coordinator (markers in the offsets partitions), metrics."""

    config: Any
    storage: StorageEngine
    producers: Producers
    partitions: DataPartitions
    coordinator: GroupCoordinator
    metrics: Any


log = logging.getLogger("groupd.transactions")
# A transaction log append that failed in storage (a full disk): Kafka's TransactionStateManager answers
# its KAFKA_STORAGE_ERROR as NOT_COORDINATOR, so the producer looks its coordinator up again and retries
STORAGE_FAILED = ErrorCode.not_coordinator


class TransactionCoordinator:
    """Broker service: every transactional id's state, its log, and its transactions' markers."""

    def __init__(self, broker: Host) -> None:
        self.broker = broker
        self.config = broker.config
        self.num_partitions: int = self.config["transaction.state.log.num.partitions"]
        self._logs = InternalLogs(
            broker.storage,
            TXN_STATE_TOPIC,
            LogConfig(cleanup_policy="compact", segment_bytes=self.config["transaction.state.log.segment.bytes"]),
        )
        self.logs: dict[int, PartitionLog] = self._logs.logs  # the partitions opened so far
        self.txns: dict[str, T.Txn] = {}
        self.by_producer: dict[int, str] = {}
        self._busy: set[str] = set()
        self._tasks = Tasks()
        # in a cluster (groupd/broker/clustering.py sets these): the lease epoch this node serves a partition
        # at (None: not served), the partitions loaded and loading, and the markers for other nodes' partitions
        self.serving: Callable[[int], int | None] | None = None
        self.owned: set[int] = set()
        self.loading: set[int] = set()
        self.remote: RemoteMarkers | None = None
        # asks another node to verify a transactional batch whose producer it coordinates (KIP-890)
        self.verifier: TxnVerifier | None = None

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self.serving is not None:  # a cluster node loads each partition when it takes its lease
            self._tasks.spawn(self._timers())
            return
        for p in self._logs.stored():  # those past the configured count too: their ids are moved home
            self.log_of(p)
        found: dict[int, dict[bytes, bytes | None]] = {}
        for p, lg in self.logs.items():
            latest = found[p] = {}
            for chunk in lg.chunks():
                collect_latest(chunk, latest)
        layout = T.settle_layout(found, self.num_partitions)
        for why in layout.skipped:
            log.warning("%s record skipped: partition %s", TXN_STATE_TOPIC, why)
        self._settle(layout)
        for txn in layout.txns.values():
            self._put(txn)
        if self.txns:
            log.info(
                "loaded %d transactional ids from %d %s partitions", len(self.txns), len(self.logs), TXN_STATE_TOPIC
            )
        for txn in self.txns.values():
            if txn.completing:  # the markers may not all have been written before the stop
                self._busy.add(txn.transactional_id)
                self._tasks.spawn(self._finish_guarded(txn))
        self._tasks.spawn(self._timers())

    async def stop(self) -> None:
        await self._tasks.cancel_all()
        self._logs.close()

    # ------------------------------------------------------------ ownership in a cluster

    async def acquire(self, partition: int) -> None:
        """This node took the lease of ``__transaction_state-<partition>``: read it afresh from the database
        (its ids answer COORDINATOR_LOAD_IN_PROGRESS meanwhile), then finish the transactions another node
        left prepared, as Kafka's coordinator does when it becomes a partition's leader."""
        self.release(partition)
        self.loading.add(partition)
        try:
            lg = self.log_of(partition)
            latest = await asyncio.to_thread(_latest, lg)
        except StorageError as exc:
            log.error("failed to load %s-%d after taking it over: %s", TXN_STATE_TOPIC, partition, exc)
            self.loading.discard(partition)
            return
        if partition not in self.loading:
            return  # released while it loaded
        self.loading.discard(partition)
        layout = T.settle_layout({partition: latest}, self.num_partitions)
        for why in layout.skipped:
            log.warning("%s record skipped: partition %s", TXN_STATE_TOPIC, why)
        home = {tid: txn for tid, txn in layout.txns.items() if self.partition_for(tid) == partition}
        for txn in home.values():
            self._put(txn)
        self.owned.add(partition)
        log.info("loaded %d transactional ids from %s-%d", len(home), TXN_STATE_TOPIC, partition)
        for txn in home.values():
            if txn.completing and txn.transactional_id not in self._busy:
                self._busy.add(txn.transactional_id)
                self._tasks.spawn(self._finish_guarded(txn))

    def release(self, partition: int) -> None:
        """This node lost (or handed over) the lease: its ids answer NOT_COORDINATOR at once and are
        forgotten here; a write still under way is refused by the engine's fence."""
        self.owned.discard(partition)
        self.loading.discard(partition)
        for txn in [t for tid, t in self.txns.items() if self.partition_for(tid) == partition]:
            self._forget(txn)
        lg = self.logs.pop(partition, None)
        if lg is not None:
            try:
                lg.close()
            except StorageError as exc:
                log.info("%s-%d closed with writes the new owner refused: %s", TXN_STATE_TOPIC, partition, exc)

    def route(self, tid: str) -> ErrorCode:
        """NONE when this node coordinates ``tid`` now; in a cluster NOT_COORDINATOR when another node
        does (or nobody), COORDINATOR_LOAD_IN_PROGRESS while its partition loads."""
        if self.serving is None:
            return ErrorCode.none
        partition = self.partition_for(tid)
        if self.serving(partition) is None:
            return ErrorCode.not_coordinator
        if partition in self.loading:
            return ErrorCode.coordinator_load_in_progress
        return ErrorCode.none if partition in self.owned else ErrorCode.not_coordinator

    # ------------------------------------------------------------ partitions

    def partition_for(self, tid: str) -> int:
        return partition_for(tid, self.num_partitions)

    def log_of(self, partition: int) -> PartitionLog:
        """A partition's log, opened (made, the first time) at its first use."""
        return self._logs.log_of(partition)

    def has_records(self) -> bool:
        return self._logs.has_records()

    def _settle(self, layout: T.Layout) -> None:
        """Write every id found outside its own partition there, durably, then tombstone it where it was."""
        clears: dict[int, list[tuple[bytes, bytes | None]]] = {
            p: [(key, None) for key in keys] for p, keys in layout.clears.items()
        }
        for step in (layout.moves, clears):
            logs = [self.log_of(p) for p in step]
            for lg, records in zip(logs, step.values(), strict=True):
                lg.append_records(records)
            for lg in logs:
                lg.flush()
        if layout.moves:
            moved = sum(len(records) for records in layout.moves.values())
            log.info(
                "moved %d transactional ids into their own %s partitions (of %d)",
                moved,
                TXN_STATE_TOPIC,
                self.num_partitions,
            )

    # ------------------------------------------------------------ requests

    async def init_producer_id(
        self, tid: str, timeout_ms: int, expected: tuple[int, int] | None
    ) -> tuple[ErrorCode, int, int]:
        if (routed := self.route(tid)) != ErrorCode.none:
            return routed, -1, -1
        if tid in self._busy:
            return ErrorCode.concurrent_transactions, -1, -1
        out = T.init_producer_id(
            self.txns.get(tid),
            tid,
            timeout_ms,
            expected,
            wall_ms(),
            self.broker.producers.allocate,
            self.config["transaction.max.timeout.ms"],
        )
        if isinstance(out, ErrorCode):
            return out, -1, -1
        self._busy.add(tid)
        try:
            if out.fence:  # an open transaction: aborted first, and the client asked to retry
                log.info(
                    "transactional id %s: fencing producer %d, aborting its open transaction", tid, out.txn.producer_id
                )
                await self._end(out.txn, "fenced")
                return ErrorCode.concurrent_transactions, -1, -1
            await self._persist(out.txn)
            log.info("transactional id %s: producer id %d epoch %d", tid, out.txn.producer_id, out.txn.producer_epoch)
            return ErrorCode.none, out.txn.producer_id, out.txn.producer_epoch
        except StorageError as exc:
            log.error("transaction log write for %s failed: %s", tid, exc)
            return STORAGE_FAILED, -1, -1
        finally:
            self._busy.discard(tid)

    async def add_partitions(
        self,
        tid: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[T.TopicPartition],
        groups: Iterable[str] = (),
    ) -> ErrorCode:
        if not tid:
            return ErrorCode.invalid_request
        if (routed := self.route(tid)) != ErrorCode.none:
            return routed
        if tid in self._busy:
            return T.while_pending(self.txns.get(tid), producer_id, producer_epoch)
        out = T.add_partitions(self.txns.get(tid), producer_id, producer_epoch, partitions, wall_ms(), groups)
        if isinstance(out, ErrorCode):
            return out
        self._busy.add(tid)
        try:
            await self._persist(out.txn)
            return ErrorCode.none
        except StorageError as exc:
            log.error("transaction log write for %s failed: %s", tid, exc)
            return STORAGE_FAILED
        finally:
            self._busy.discard(tid)

    async def end_txn(self, tid: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        if not tid:
            return ErrorCode.invalid_request
        if (routed := self.route(tid)) != ErrorCode.none:
            return routed
        if tid in self._busy:
            return T.while_pending(self.txns.get(tid), producer_id, producer_epoch)
        out = T.end_txn(self.txns.get(tid), producer_id, producer_epoch, commit, wall_ms())
        if isinstance(out, ErrorCode):
            return out
        self._busy.add(tid)
        try:
            await self._end(out.txn, "commit" if commit else "abort")
            return ErrorCode.none
        except StorageError as exc:
            log.error("ending the transaction of %s failed; it will be finished later: %s", tid, exc)
            return ErrorCode.none if self.txns[tid].completing else STORAGE_FAILED
        finally:
            self._busy.discard(tid)

    def verify_produce(self, tid: str | None, producer_id: int, producer_epoch: int, tp: T.TopicPartition) -> ErrorCode:
        """A transactional batch's verification when this node coordinates its transactional id: the answer
        Kafka's leader gets from its coordinator for it (``verify_partitions``), which the produce path
        translates as it translates another node's. The Produce's own transactional id is checked, as Kafka
        checks it: a producer id that is not the id's current one is INVALID_PRODUCER_ID_MAPPING whichever
        id it belongs to. A batch without one (a request Kafka would refuse before any append) is checked
        against the id that holds its producer id."""
        if tid is None:
            tid = self.by_producer.get(producer_id)
            if tid is None and self.serving is not None:
                # in a cluster the producer's coordinator may be another node: not verified here (Kafka's
                # transaction.partition.verification.enable=false); the markers end the transaction anyway
                return ErrorCode.none
            if tid is None:
                return ErrorCode.invalid_producer_id_mapping
        return self.verify_partitions(tid, producer_id, producer_epoch, (tp,))[tp]

    def verify_partitions(
        self, tid: str, producer_id: int, producer_epoch: int, tps: Iterable[T.TopicPartition]
    ) -> dict[T.TopicPartition, ErrorCode]:
        """AddPartitionsToTxn's ``verify_only`` from a partition leader: is each partition in the open
        transaction of this id (Kafka's handleVerifyPartitionsInTransaction)? Raw coordinator errors:
        NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when the id is not served here, PRODUCER_FENCED,
        INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS, TRANSACTION_ABORTABLE (not added)."""
        wanted = list(tps)
        if not tid:
            return dict.fromkeys(wanted, ErrorCode.invalid_request)
        if (routed := self.route(tid)) != ErrorCode.none:
            return dict.fromkeys(wanted, routed)
        txn = self.txns.get(tid)
        return {tp: _verification_answer(T.verify_partition(txn, producer_id, producer_epoch, tp)) for tp in wanted}

    # ------------------------------------------------------------ transitions

    def _put(self, txn: T.Txn) -> None:
        old = self.txns.get(txn.transactional_id)
        if old is not None and old.producer_id != txn.producer_id:
            self.by_producer.pop(old.producer_id, None)
        self.txns[txn.transactional_id] = txn
        self.by_producer[txn.producer_id] = txn.transactional_id

    def _forget(self, txn: T.Txn) -> None:
        self.txns.pop(txn.transactional_id, None)
        if self.by_producer.get(txn.producer_id) == txn.transactional_id:
            del self.by_producer[txn.producer_id]

    async def _persist(self, txn: T.Txn | None, tid: str | None = None) -> None:
        """Append the id's new state (None: a tombstone) to its partition and wait until it is durable;
        then it holds."""
        tid = txn.transactional_id if txn is not None else tid or ""
        partition = self.partition_for(tid)
        if self.serving is not None and (partition not in self.owned or self.serving(partition) is None):
            raise StorageError(f"{TXN_STATE_TOPIC}-{partition} is no longer coordinated by this node")
        lg = self.log_of(partition)
        lg.append_records([(T.encode_key(tid), None if txn is None else T.encode_value(txn))])
        await self.broker.partitions.committer.durable(lg)
        self.broker.partitions.appended((TXN_STATE_TOPIC, partition))  # fetchers long-polling it
        if txn is not None:
            self._put(txn)

    async def _end(self, prepared: T.Txn, why: str) -> None:
        """PrepareCommit/PrepareAbort persisted, then the markers, then CompleteCommit/CompleteAbort."""
        await self._persist(prepared)
        await self._finish(prepared, why)

    async def _finish(self, prepared: T.Txn, why: str) -> None:
        if self.remote is not None:
            return await self._finish_in_cluster(prepared, why, self.remote)
        commit = prepared.state == T.PREPARE_COMMIT
        pid, epoch = prepared.producer_id, prepared.producer_epoch
        partitions = self.broker.partitions
        logs = []
        for tp in sorted(prepared.partitions):
            if tp[0] == OFFSETS_TOPIC:
                continue
            lg = partitions.write_marker(tp, pid, epoch, commit)
            if lg is not None:
                logs.append(lg)
        coordinator = self.broker.coordinator
        # one marker per offsets partition ends the producer's pending offsets of all its groups there;
        # after a restart the groups come from the offsets store's pending transactional offsets
        by_partition: dict[int, str] = {}
        for group in (*sorted(prepared.groups), *coordinator.groups_with_pending_transaction(pid)):
            by_partition.setdefault(coordinator.partition_for(group), group)
        try:
            await asyncio.gather(
                *(partitions.committer.durable(lg) for lg in {id(lg): lg for lg in logs}.values()),
                *(coordinator.complete_transaction(g, pid, epoch, commit) for g in by_partition.values()),
            )
        except CoordinatorError as exc:
            raise StorageError(f"transaction marker for groups not written: error {exc.code}") from exc
        await self._completed(prepared, why, len(logs), len(by_partition))

    async def _finish_in_cluster(self, prepared: T.Txn, why: str, remote: RemoteMarkers) -> None:
        """As ``_finish``, each marker at its partition's owner: this node's own partitions (data and
        ``__consumer_offsets``) written here, the others' sent to them in one WriteTxnMarkers each, at this
        node's lease epoch of the id's partition (Kafka's coordinator epoch)."""
        commit = prepared.state == T.PREPARE_COMMIT
        pid, epoch = prepared.producer_id, prepared.producer_epoch
        coordinator = self.broker.coordinator
        offsets = {p for t, p in prepared.partitions if t == OFFSETS_TOPIC}
        offsets |= {coordinator.partition_for(g) for g in prepared.groups}
        offsets |= {coordinator.partition_for(g) for g in coordinator.groups_with_pending_transaction(pid)}
        targets = sorted(
            {tp for tp in prepared.partitions if tp[0] != OFFSETS_TOPIC} | {(OFFSETS_TOPIC, p) for p in offsets}
        )
        logs = []
        waits: list[Awaitable[None]] = []
        far = []
        for tp in targets:
            if not remote.local(tp):
                far.append(tp)
            elif tp[0] == OFFSETS_TOPIC:
                waits.append(coordinator.complete_transaction_in(tp[1], pid, epoch, commit))
            elif (lg := self.broker.partitions.write_marker(tp, pid, epoch, commit)) is not None:
                logs.append(lg)
        waits += [self.broker.partitions.committer.durable(lg) for lg in {id(lg): lg for lg in logs}.values()]
        if far:
            coordinator_epoch = self.serving(self.partition_for(prepared.transactional_id)) if self.serving else None
            waits.append(remote.write(far, pid, epoch, commit, coordinator_epoch or 0))
        try:
            await asyncio.gather(*waits)
        except CoordinatorError as exc:
            raise StorageError(f"transaction marker for groups not written: error {exc.code}") from exc
        await self._completed(prepared, why, len(targets) - len(offsets), len(offsets))

    async def _completed(self, prepared: T.Txn, why: str, partitions: int, groups: int) -> None:
        """Every marker is durable: CompleteCommit/CompleteAbort persisted."""
        commit = prepared.state == T.PREPARE_COMMIT
        await self._persist(T.complete(prepared, wall_ms()))
        self.broker.metrics.transaction_ended(why)
        log.info(
            "transactional id %s: %s (producer %d epoch %d, %d partitions, %d groups)",
            prepared.transactional_id,
            "committed" if commit else "aborted",
            prepared.producer_id,
            prepared.producer_epoch,
            partitions,
            groups,
        )

    async def _finish_guarded(self, prepared: T.Txn, why: str | None = None) -> None:
        """Finish a transaction found PrepareCommit/PrepareAbort (at start-up, or after a failed write)."""
        try:
            await self._finish(prepared, why or ("commit" if prepared.state == T.PREPARE_COMMIT else "abort"))
        except StorageError as exc:
            log.error("finishing the transaction of %s failed; retried later: %s", prepared.transactional_id, exc)
        finally:
            self._busy.discard(prepared.transactional_id)

    # ------------------------------------------------------------ timers

    async def _timers(self) -> None:
        """Abort transactions past their timeout, retry unfinished ends, forget expired ids."""
        abort_every = self.config["transaction.abort.timed.out.transaction.cleanup.interval.ms"] / 1000
        expire_every = self.config["transaction.remove.expired.transaction.cleanup.interval.ms"] / 1000
        next_expiry = time.monotonic() + expire_every
        while True:
            await asyncio.sleep(abort_every)
            now = wall_ms()
            for txn in T.timed_out(self.txns.values(), now):
                tid = txn.transactional_id
                if tid in self._busy:
                    continue
                log.info("transactional id %s: transaction open for more than %d ms, aborting it", tid, txn.timeout_ms)
                self._busy.add(tid)
                self._tasks.spawn(self._abort_guarded(T.fence_epoch(txn)))
            for txn in list(self.txns.values()):
                if txn.completing and txn.transactional_id not in self._busy:
                    self._busy.add(txn.transactional_id)
                    self._tasks.spawn(self._finish_guarded(txn))
            if time.monotonic() >= next_expiry:
                next_expiry = time.monotonic() + expire_every
                try:
                    await self._expire(now)
                except Exception:  # the timers must outlive one bad pass
                    log.exception("expiring transactional ids failed")

    async def _abort_guarded(self, fenced: T.Txn) -> None:
        try:
            await self._persist(fenced)
        except StorageError as exc:
            log.error("aborting the transaction of %s failed; retried later: %s", fenced.transactional_id, exc)
            self._busy.discard(fenced.transactional_id)
            return
        await self._finish_guarded(fenced, "timeout")

    async def _expire(self, now: int) -> None:
        for txn in T.expired(self.txns.values(), now, self.config["transactional.id.expiration.ms"]):
            tid = txn.transactional_id
            if tid in self._busy:
                continue
            try:
                await self._persist(None, tid)
            except StorageError as exc:
                log.error("expiring transactional id %s failed: %s", tid, exc)
                continue
            self._forget(txn)
            log.info("transactional id %s expired", tid)
        for lg in self.logs.values():
            with contextlib.suppress(StorageError):
                lg.compact(now)

    # ------------------------------------------------------------ describe

    def describe(self, tid: str) -> T.Txn | None:
        return self.txns.get(tid)

    def all(self) -> list[T.Txn]:
        return list(self.txns.values())


def _verification_answer(error: ErrorCode) -> ErrorCode:
    """Kafka's coordinator answers a verification of a partition not in the transaction TRANSACTION_ABORTABLE
    (the leader passes it on, or INVALID_TXN_STATE to clients too old for it)."""
    return ErrorCode.transaction_abortable if error == ErrorCode.invalid_txn_state else error


def _latest(lg: PartitionLog) -> dict[bytes, bytes | None]:
    """A partition's latest value per key (None: a tombstone), read in a thread."""
    latest: dict[bytes, bytes | None] = {}
    for chunk in lg.chunks():
        collect_latest(chunk, latest)
    return latest
