"""The broker's side of a cluster (``cluster.enabled=true``, docs/cluster.md): what this node leases, what
it does when it gains or loses a lease, and the answers routing needs (who leads a partition, which
nodes are live).

The resources are every data partition and every ``__consumer_offsets`` partition. Gaining a data
partition reopens its log from the database (another node wrote meanwhile); gaining an offsets partition
loads its shard (COORDINATOR_LOAD_IN_PROGRESS until done); losing one stops serving it at once. Writes
are fenced by the engine whatever this node believes (groupd/storage/postgresql/fencing.py).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from groupd.cluster.assignment import Resource
from groupd.cluster.member import ClusterMember
from groupd.cluster.store import ClusterStore
from groupd.coordinator.tasks import Tasks
from groupd.protocol.topic_names import OFFSETS_TOPIC
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
        self._tasks = Tasks()
        broker.coordinator.serving = lambda p: self.serves((OFFSETS_TOPIC, p))
        broker.partitions.leads = lambda topic, p: self.serves((topic, p))
        assert isinstance(storage.metadata, PgMetadata)
        broker.producers.reserve = storage.metadata.reserve  # no two nodes hand out one producer id

    def resources(self) -> list[Resource]:
        """What the cluster leases: topics created on other nodes are picked up here, every heartbeat."""
        topics = self.broker.topics
        topics.refresh()
        data = [(t.name, p) for t in topics.all() for p in range(t.partitions)]
        return data + [(OFFSETS_TOPIC, p) for p in range(self.offsets_partitions)]

    def _acquired(self, r: Resource, epoch: int) -> None:
        log.info("node %d took %s-%d at lease epoch %d", self.node_id, r[0], r[1], epoch)
        if r[0] == OFFSETS_TOPIC:
            self._tasks.spawn(self.broker.coordinator.acquire(r[1]))
        else:
            self.broker.partitions.reopen(*r)

    def _lost(self, r: Resource) -> None:
        log.info("node %d no longer owns %s-%d", self.node_id, *r)
        if r[0] == OFFSETS_TOPIC:
            self.broker.coordinator.release(r[1])

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
        await self.member.stop()
        await asyncio.to_thread(self.member.store.db.close)
