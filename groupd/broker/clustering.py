"""The broker's side of a cluster (``cluster.enabled=true``, docs/cluster.md): what this node leases, what
it does when it gains or loses a lease, and the answers routing needs (who leads a partition, which
nodes are live).

The resources are every data partition and every ``__consumer_offsets`` and ``__transaction_state``
partition. Gaining a data partition reopens its log from the database (another node wrote meanwhile);
gaining an offsets or transaction-state partition loads its shard or its transactional ids
(COORDINATOR_LOAD_IN_PROGRESS until done); losing one stops serving it at once. Writes are fenced by the
engine whatever this node believes (groupd/storage/postgresql/fencing.py). A transaction's markers for
partitions another node owns go there in WriteTxnMarkers (``TxnMarkers``), as Kafka's coordinator sends
them to each partition's leader.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from kio.schema.types import ProducerId, TopicName
from kio.schema.write_txn_markers.v1.request import WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest
from kio.static.primitive import i16, i32

from groupd.broker.shared_documents import SharedDocuments
from groupd.cluster.assignment import Resource
from groupd.cluster.member import ClusterMember
from groupd.cluster.peers import Peers
from groupd.cluster.store import ClusterStore
from groupd.coordinator.tasks import Tasks
from groupd.coordinator.transactions.rules import TopicPartition
from groupd.protocol.api_table import ApiKey
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import OFFSETS_TOPIC, TXN_STATE_TOPIC
from groupd.storage.errors import StorageError
from groupd.storage.postgresql.connection import Database, resolve_url
from groupd.storage.postgresql.engine import PostgresEngine
from groupd.storage.postgresql.fencing import Fence
from groupd.storage.postgresql.metadata import PgMetadata

if TYPE_CHECKING:
    from groupd.broker.app import Broker

log = logging.getLogger("groupd.cluster")


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
        self.offsets_partitions: int = config["offsets.topic.num.partitions"]
        self.txn_partitions: int = config["transaction.state.log.num.partitions"]
        self._tasks = Tasks()
        # a peer that has not answered within a lease is taken for dead: the marker is retried later
        self.peers = Peers(self.address, f"groupd-node-{self.node_id}", config["cluster.lease.ms"] / 1000)
        transactions = broker.transactions
        transactions.serving = lambda p: self.member.serving((TXN_STATE_TOPIC, p))
        transactions.remote = TxnMarkers(self)
        broker.coordinator.serving = lambda p: self.serves((OFFSETS_TOPIC, p))
        broker.partitions.leads = lambda topic, p: self.serves((topic, p))
        assert isinstance(storage.metadata, PgMetadata)
        broker.producers.reserve = storage.metadata.reserve  # no two nodes hand out one producer id
        # the topics document: changed by compare-and-set, others' changes followed at every heartbeat
        broker.topics.compare_and_put = storage.metadata.compare_and_put
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
        )

    def _acquired(self, r: Resource, epoch: int) -> None:
        log.info("node %d took %s-%d at lease epoch %d", self.node_id, r[0], r[1], epoch)
        if r[0] == OFFSETS_TOPIC:
            self._tasks.spawn(self.broker.coordinator.acquire(r[1]))
        elif r[0] == TXN_STATE_TOPIC:
            self._tasks.spawn(self.broker.transactions.acquire(r[1]))
        else:
            self.broker.partitions.reopen(*r)

    def _lost(self, r: Resource) -> None:
        log.info("node %d no longer owns %s-%d", self.node_id, *r)
        if r[0] == OFFSETS_TOPIC:
            self.broker.coordinator.release(r[1])
        elif r[0] == TXN_STATE_TOPIC:
            self.broker.transactions.release(r[1])

    # ------------------------------------------------------------ routing

    def serves(self, r: Resource) -> bool:
        return self.member.serving(r) is not None

    def leader(self, topic: str, partition: int) -> int | None:
        return self.member.owner((topic, partition))

    def address(self, node_id: int) -> tuple[str, int] | None:
        return self.member.address(node_id)

    def live_nodes(self) -> list[tuple[int, str, int, str | None]]:
        return [(n.node_id, n.host, n.port, n.rack) for n in self.member.nodes]

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        host, port = self.broker.advertised
        await self.member.start(host, port)

    async def stop(self) -> None:
        """Controlled shutdown: the broker's services have written what they had; release every lease so
        the other nodes take over at their next heartbeat."""
        await self._tasks.cancel_all()
        self.peers.close()
        await self.member.stop()
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
