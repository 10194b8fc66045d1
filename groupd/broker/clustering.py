"""The broker's side of a cluster (``cluster.enabled=true``, docs/cluster.md): what this node leases, what
it does when it gains or loses a lease, and the answers routing needs (who leads a partition, which
nodes are live).

The resources are every data partition and every ``__consumer_offsets``, ``__transaction_state`` and
``__share_group_state`` partition. Gaining a data partition reopens its log from the database (another
node wrote meanwhile) and drops the share-partitions cached on it (their state is read again from their
share coordinator); gaining an offsets, transaction-state or share-state partition loads its shard, its
transactional ids or its share-partition states (COORDINATOR_LOAD_IN_PROGRESS until done); losing one
stops serving it at once. Share-partition state goes to the node holding its ``__share_group_state``
partition in the share coordinator's RPCs (groupd/cluster/share_state.py). Writes are fenced by the
engine whatever this node believes (groupd/storage/postgresql/fencing.py). A transaction's markers for
partitions another node owns go there in WriteTxnMarkers (``TxnMarkers``), as Kafka's coordinator sends
them to each partition's leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import TYPE_CHECKING

from kio.schema.types import ProducerId, TopicName
from kio.schema.write_txn_markers.v1.request import WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest
from kio.static.primitive import i16, i32

from groupd.broker.dataplane.leader_epochs import UNDEFINED_EPOCH, EpochCache, current_epoch_error
from groupd.broker.shared_documents import SharedDocuments
from groupd.cluster.assignment import Resource
from groupd.cluster.changes import METADATA, ClusterChanges
from groupd.cluster.member import ClusterMember
from groupd.cluster.peers import Peers
from groupd.cluster.share_state import ShareStateClient
from groupd.cluster.store import ClusterStore, ListenerEndpoint
from groupd.cluster.txn_verification import TxnVerifier
from groupd.coordinator.tasks import Tasks
from groupd.coordinator.transactions.rules import TopicPartition
from groupd.protocol.api_table import ApiKey
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_STATE_TOPIC
from groupd.storage.engine import PartitionLog
from groupd.storage.errors import StorageError
from groupd.storage.postgresql.connection import Database, resolve_url
from groupd.storage.postgresql.engine import PostgresEngine
from groupd.storage.postgresql.fencing import Fence
from groupd.storage.postgresql.log import PgPartitionLog
from groupd.storage.postgresql.metadata import PgMetadata

if TYPE_CHECKING:
    from groupd.broker.app import Broker

log = logging.getLogger("groupd.cluster")


EPOCH_HISTORY = "leader-epochs"  # the snapshot (PostgreSQL engine) a new owner saves its epoch history under


def _history(lg: PartitionLog) -> EpochCache:
    """A partition's leader epoch history: as the last owner saved it when it took the partition, else (a
    store from before that, or another engine) rebuilt from its stored batches' headers (every owner stamped
    its lease epoch on what it wrote, so a last batch of a newer epoch than the saved history's proves an owner
    did not save it), as Kafka's log recovery rebuilds its cache; the PostgreSQL engine
    sends only each batch's first bytes, still one row a batch: 200,000 batches took 355 ms, a cost a
    takeover pays once per partition, not at every takeover."""
    if lg.log_end_offset <= lg.log_start_offset:
        return EpochCache()  # no batch, no epoch (a new partition: nothing to read or keep)
    if isinstance(lg, PgPartitionLog):
        kept = lg.load_kept(EPOCH_HISTORY)
        if isinstance(kept, list) and all(isinstance(e, list) and len(e) == 2 for e in kept):
            cache = EpochCache([(int(epoch), int(start)) for epoch, start in kept])
            last = lg.last_header()
            # an owner that served without saving (its read or save failed) wrote a newer epoch than the history
            # names: then the headers say where it starts
            if last is None or last.partition_leader_epoch <= cache.latest_epoch:
                return cache
    return EpochCache.of_batches((h.partition_leader_epoch, h.base_offset) for h in lg.headers())


def _histories(logs: dict[Resource, PartitionLog], epochs: dict[Resource, int]) -> dict[Resource, EpochCache]:
    """The histories of partitions just reopened (on a worker thread), each with the epoch this node took it
    at added from the log end it found (Kafka's makeLeader: nothing is appended before it is served) and
    saved, before it is served, so the next owner reads the history instead of every batch's header; one
    that cannot be read now is left out, and read when first asked (``ClusterNode.epoch_cache``). A save
    that fails costs the next owner the read of the headers, nothing else."""
    out: dict[Resource, EpochCache] = {}
    for r, lg in logs.items():
        try:
            cache = _history(lg)
        except (StorageError, OSError) as exc:
            log.warning("%s-%d: its leader epochs could not be read (read when first asked): %s", *r, exc)
            continue
        cache.assign(epochs[r], lg.log_end_offset)
        out[r] = cache
        if isinstance(lg, PgPartitionLog) and lg.log_end_offset > lg.log_start_offset:  # an empty log has none
            try:
                lg.save_snapshot(EPOCH_HISTORY, [list(e) for e in cache.entries])
            except (StorageError, OSError) as exc:
                log.warning("%s-%d: its leader epochs could not be saved (the next owner reads them): %s", *r, exc)
    return out


class ClusterNode:
    def __init__(self, broker: Broker) -> None:
        storage = broker.storage
        if not isinstance(storage, PostgresEngine):
            raise TypeError("cluster.enabled needs the PostgreSQL engine")
        config = broker.config
        self.broker = broker
        self.node_id: int = config["node.id"]
        self.fence = storage.db.fence = Fence(self.node_id)
        url = resolve_url(config["storage.postgresql.url"], config.get("storage.postgresql.password.file"))
        store = ClusterStore(Database(url), self.node_id, uuid.uuid4().hex, config["cluster.lease.ms"])
        self.member = ClusterMember(store, self.fence, self.resources, on_acquired=self._acquired, on_lost=self._lost)
        # what other nodes change in the metadata, followed at once (changes.py); tests that step nodes by
        # hand turn it off before start, so that a node follows only when stepped
        self.follow_changes = True
        self.changes = ClusterChanges(url, f"groupd-node-{self.node_id}-changes", self._changed)
        self.offsets_partitions: int = config["offsets.topic.num.partitions"]
        self.txn_partitions: int = config["transaction.state.log.num.partitions"]
        self.share_state_partitions: int = config["share.coordinator.state.topic.num.partitions"]
        self._tasks = Tasks()
        inter_broker = config.inter_broker
        if inter_broker is None:
            raise TypeError("cluster.enabled needs a configuration read by build_config (the inter-broker listener)")
        # peers are reached on the inter-broker listener, with its security; a peer that has not answered
        # within a lease is taken for dead: the marker is retried later
        self.peers = Peers(
            lambda node: self.endpoint(node, inter_broker.listener),
            f"groupd-node-{self.node_id}",
            config["cluster.lease.ms"] / 1000,
            inter_broker,
        )
        transactions = broker.transactions
        transactions.serving = lambda p: self.member.serving((TXN_STATE_TOPIC, p))
        transactions.remote = TxnMarkers(self)
        transactions.verifier = TxnVerifier(
            self.peers, lambda tid: self.leader(TXN_STATE_TOPIC, transactions.partition_for(tid))
        )
        broker.coordinator.serving = lambda p: self.serves((OFFSETS_TOPIC, p))
        broker.partitions.leads = lambda topic, p: self.serves((topic, p))
        broker.partitions.leader_epoch = self.leader_epoch
        # per data partition this node leads: its leader epoch history (dataplane/leader_epochs.py), the
        # previous owners' epochs read from the stored batches at the takeover, then its own lease epoch from
        # the log end offset it found
        self._epochs: dict[Resource, EpochCache] = {}
        # data partitions taken and not yet reopened (not served until they are), by the epoch taken at
        self._reopening: dict[Resource, int] = {}
        self._reopener: asyncio.Task | None = None
        share = broker.share_coordinator
        share.serving = lambda p: self.serves((SHARE_STATE_TOPIC, p))
        self.share_state = ShareStateClient(
            self.node_id, share, share.partition_for, lambda p: self.leader(SHARE_STATE_TOPIC, p), self.peers
        )
        broker.share_persister = self.share_state
        broker.share_partitions.leader_epoch = self.leader_epoch
        assert isinstance(storage.metadata, PgMetadata)
        broker.producers.reserve = storage.metadata.reserve  # no two nodes hand out one producer id
        # the topics document: changed by compare-and-set, others' changes followed at every heartbeat
        broker.topics.compare_and_put = storage.metadata.compare_and_put
        broker.topics.claim = storage.metadata.claim_topic  # a creation clears its name's rows as it wins it
        broker.topics.on_configs.append(broker.partitions.reconfigure)
        self.documents = SharedDocuments.of(broker, storage.metadata)  # ACLs, SCRAM, group configs, quotas: alike

    def resources(self) -> list[Resource]:
        """What the cluster leases: topics created on other nodes are picked up here, every heartbeat."""
        topics = self.broker.topics
        topics.refresh()
        self.documents.refresh()
        data = [(t.name, p) for t in topics.all() for p in range(t.partitions)]
        return (
            data
            + [(OFFSETS_TOPIC, p) for p in range(self.offsets_partitions)]
            + [(TXN_STATE_TOPIC, p) for p in range(self.txn_partitions)]
            + [(SHARE_STATE_TOPIC, p) for p in range(self.share_state_partitions)]
        )

    def _acquired(self, r: Resource, epoch: int) -> None:
        log.info("node %d took %s-%d at lease epoch %d", self.node_id, r[0], r[1], epoch)
        if r[0] == OFFSETS_TOPIC:
            self._tasks.spawn(self.broker.coordinator.acquire(r[1]))
        elif r[0] == TXN_STATE_TOPIC:
            self._tasks.spawn(self.broker.transactions.acquire(r[1]))
        elif r[0] == SHARE_STATE_TOPIC:
            self._tasks.spawn(self.broker.share_coordinator.acquire(r[1]))
        else:  # served once reopened from the database, off the loop with the others taken this beat
            self.broker.partitions.close_stale(r)
            self._reopening[r] = epoch
            if self._reopener is None or self._reopener.done():
                self._reopener = self._tasks.spawn(self._reopen_taken())

    async def _reopen_taken(self) -> None:
        """Reopen the data partitions whose leases this node took (PartitionManager.open_off_loop: a slice at
        a time on the partition-files thread), then serve each: a takeover of many partitions at once keeps
        the loop free for the clients meanwhile (a Produce waits for it, handlers/data.py's ``_produce_reopened``;
        other requests hear a retriable error until then)."""
        while batch := dict(self._reopening):
            try:
                await self.broker.partitions.open_off_loop(list(batch), replace=True)
            except (StorageError, OSError) as exc:  # then opened when first asked (Broker.partition_log)
                log.warning("node %d could not reopen %d partition(s): %s", self.node_id, len(batch), exc)
            logs = {r: lg for r in batch if (lg := self.broker.partitions.logs.get(r)) is not None}
            histories = await asyncio.to_thread(_histories, logs, batch)  # off the loop
            for r, epoch in batch.items():
                if self._reopening.get(r) != epoch:
                    continue  # lost meanwhile, or taken again at another epoch (reopened again)
                del self._reopening[r]
                self.broker.share_partitions.partition_moved(*r)
                lg = self.broker.partitions.logs.get(r)
                cache = histories.get(r)
                if lg is not None and cache is not None and lg is logs[r]:
                    cache.assign(epoch, lg.log_end_offset)  # nothing was appended meanwhile: no change then
                    self._epochs[r] = cache

    def reopening_any(self) -> bool:
        return bool(self._reopening)

    def reopening(self, r: Resource) -> bool:
        """Whether a data partition this node took is still being reopened (not yet served)."""
        return r in self._reopening

    def reopening_error(self, r: Resource, current: int) -> ErrorCode | None:
        """What a request for a data partition this node took and still reopens gets (None: it is not being
        reopened): Kafka's answer for a partition it does not lead yet (Partition.getLocalLog), the
        client's current leader epoch (``current``, -1: none given) checked against the lease epoch first,
        then NOT_LEADER_OR_FOLLOWER; all retriable, where UNKNOWN_TOPIC_OR_PARTITION would not be."""
        epoch = self._reopening.get(r)
        if epoch is None:
            return None
        if current != UNDEFINED_EPOCH and current != epoch:
            return current_epoch_error(current, epoch)
        return ErrorCode.not_leader_or_follower

    async def reopened(self, timeout: float) -> None:
        """Until the reopening under way ends, or ``timeout`` seconds (a Produce for such a partition waits
        here, so an idempotent producer's pipelined batches are not split between a refusal and an append)."""
        task = self._reopener
        if task is not None and not task.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), timeout)

    async def opened(self) -> None:
        """Until every data partition followed or taken so far is open, and served if taken (tests that
        step by hand)."""
        await self.broker.partitions.all_opened()
        while self._reopener is not None and not self._reopener.done():
            await asyncio.shield(self._reopener)

    def _lost(self, r: Resource) -> None:
        log.info("node %d no longer owns %s-%d", self.node_id, *r)
        if r[0] == OFFSETS_TOPIC:
            self.broker.coordinator.release(r[1])
        elif r[0] == TXN_STATE_TOPIC:
            self.broker.transactions.release(r[1])
        elif r[0] == SHARE_STATE_TOPIC:
            self.broker.share_coordinator.release(r[1])
        else:
            self._reopening.pop(r, None)
            self.broker.share_partitions.partition_moved(*r)
            self._epochs.pop(r, None)

    # ------------------------------------------------------------ routing

    def serves(self, r: Resource) -> bool:
        return self.member.serving(r) is not None and r not in self._reopening

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The lease epoch this node serves the partition at (-1: it does not serve it)."""
        epoch = self.member.serving((topic, partition))
        return -1 if epoch is None else epoch

    def epoch_cache(self, topic: str, partition: int, lg: PartitionLog) -> EpochCache:
        """The leader epoch history of a partition this node leads, its lease epoch last. Built at the
        takeover (``_reopen_taken``); a partition that could not be reopened then, opened when first asked,
        reads its batches' headers here, once (its own batches carry its epoch, so where that epoch starts
        is right whatever was written before this); StorageError while they cannot be read."""
        r = (topic, partition)
        epoch = self.leader_epoch(topic, partition)
        cache = self._epochs.get(r)
        if cache is None:
            cache = self._epochs[r] = _history(lg)
        if epoch > cache.latest_epoch:  # the lease taken again at a newer epoch, the log end as it is now
            cache.assign(epoch, lg.log_end_offset)
        return cache

    def view_epoch(self, topic: str, partition: int) -> int:
        """The partition's leader epoch as Metadata names it: this node's lease epoch while it leads it,
        else the epoch of the lease the last view saw held (-1 when nobody holds it)."""
        r = (topic, partition)
        epoch = self.member.serving(r)
        if epoch is not None:
            return epoch
        view = self.member.view
        row = view.leases.get(r) if view is not None else None
        return row.epoch if row is not None and view is not None and view.holder(r) is not None else -1

    def leader(self, topic: str, partition: int) -> int | None:
        return self.member.owner((topic, partition))

    def listener(self, name: str | None) -> str:
        """A request's listener name (None: the first listener, as a context without a connection has)."""
        return name if name is not None else self.broker.config.listeners[0].name

    def endpoint(self, node_id: int, listener: str | None) -> tuple[str, int] | None:
        """Where a client of ``listener`` reaches the node (Kafka's ``getAliveBrokerNode(id, listener)``):
        this node's own advertised address, another live node's as it registered it; None when the node is
        not live in the last view or has no such listener."""
        if node_id == self.node_id:
            return self.broker.advertised_for(listener)
        info = self.member.node(node_id)
        return info.endpoint(self.listener(listener)) if info is not None else None

    def registered(self, node_id: int) -> bool:
        """Whether the node is live in the last view, whatever its listeners (a leader that is, without the
        request's listener, is Kafka's LISTENER_NOT_FOUND rather than LEADER_NOT_AVAILABLE)."""
        return node_id == self.node_id or self.member.node(node_id) is not None

    def live_nodes(self, listener: str | None) -> list[tuple[int, str, int, str | None]]:
        """The live nodes that have ``listener``, at their address on it, by id (Metadata's brokers: Kafka
        leaves out a broker without the request's listener)."""
        out = [
            (n.node_id, *address, n.rack)
            for n in self.member.nodes
            if n.node_id != self.node_id and (address := n.endpoint(self.listener(listener))) is not None
        ]
        own = self.broker.advertised_for(listener)
        if own is not None:
            out.append((self.node_id, *own, None))
        return sorted(out)

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Register every advertised listener at the address it was bound to (port 0 in tests)."""
        endpoints = [
            ListenerEndpoint(spec.name, *address)
            for spec in self.broker.config.listeners
            if (address := self.broker.advertised_for(spec.name)) is not None
        ]
        await self.member.start(endpoints)
        if self.follow_changes:
            self.changes.start()

    def _changed(self, channel: str | None, key: str | None) -> None:
        """Another node (or this one) changed something (changes.py; None: anything may have changed):
        follow a metadata key now; a topic change or a lease that changed hands also wakes the member, so
        that a new topic's partitions get owners and every node's view names the new owners at once."""
        topics = self.broker.topics
        try:
            if channel is None or (channel == METADATA and key == topics.document.key):
                topics.refresh()
            if channel is None or channel == METADATA:
                self.documents.refresh(key)
        except StorageError as exc:
            log.warning(
                "node %d: could not follow a change of %s (the next heartbeat does): %s", self.node_id, key, exc
            )
        if channel != METADATA or key == topics.document.key:
            self.member.wake()

    async def stop(self) -> None:
        """Controlled shutdown: the broker's services have written what they had; release every lease so
        the other nodes take over at their next heartbeat."""
        self.changes.stop()
        await self._tasks.cancel_all()
        await self.share_state.batches.close()
        self.peers.close()
        await self.member.stop()
        await asyncio.to_thread(self.changes.join)
        await asyncio.to_thread(self.member.store.db.close)


class TxnMarkers:
    """The transaction coordinator's markers in a cluster (coordinator/transactions/service.py
    RemoteMarkers): this node writes those of the partitions it owns; the others go to their owners, one
    WriteTxnMarkers per owner, and count only once every partition there answered NONE."""

    def __init__(self, node: ClusterNode) -> None:
        self.node = node

    def local(self, tp: TopicPartition) -> bool:
        return self.node.serves(tp)

    async def write(
        self, tps: list[TopicPartition], producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
    ) -> None:
        by_owner: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            owner = self.node.leader(*tp)
            if owner is None or owner == self.node.node_id:
                raise StorageError(f"{tp[0]}-{tp[1]} has no owner now: its transaction marker waits")
            by_owner.setdefault(owner, []).append(tp)
        await asyncio.gather(
            *(
                self._send(owner, mine, producer_id, producer_epoch, commit, coordinator_epoch)
                for owner, mine in by_owner.items()
            )
        )

    async def _send(
        self,
        owner: int,
        tps: list[TopicPartition],
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
    ) -> None:
        topics: dict[str, list[int]] = {}
        for topic, p in tps:
            topics.setdefault(topic, []).append(p)
        request = WriteTxnMarkersRequest(
            markers=(
                WritableTxnMarker(
                    producer_id=ProducerId(producer_id),
                    producer_epoch=i16(producer_epoch),
                    transaction_result=commit,
                    topics=tuple(
                        WritableTxnMarkerTopic(name=TopicName(t), partition_indexes=tuple(i32(p) for p in ps))
                        for t, ps in topics.items()
                    ),
                    coordinator_epoch=i32(coordinator_epoch),
                ),
            )
        )
        response = await self.node.peers.call(owner, ApiKey.WRITE_TXN_MARKERS, 1, request)
        failed = [
            f"{t.name}-{p.partition_index}: {ErrorCode(p.error_code).name}"
            for m in response.markers
            for t in m.topics
            for p in t.partitions
            if p.error_code != ErrorCode.none
        ]
        if failed:
            raise StorageError(f"node {owner} did not write transaction markers: {', '.join(failed)}")
