"""The broker: wiring of config, topics, coordinator and data plane behind one listening socket."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from groupd.broker import coordinator_partitions
from groupd.broker.config import Config
from groupd.broker.dataplane.group_configs import GroupConfigStore
from groupd.broker.dataplane.internal_topics import InternalTopic
from groupd.broker.dataplane.leader_epochs import LEADER_EPOCH, ONE_NODE, UNDEFINED_EPOCH, EpochCache
from groupd.broker.dataplane.partition_limits import PartitionLimits
from groupd.broker.dataplane.partitions import PartitionManager
from groupd.broker.dataplane.producers import ProducerIds
from groupd.broker.dataplane.topics import Topic, TopicRegistry
from groupd.broker.network.acceptor import Acceptor, Admission
from groupd.broker.network.connection import Connection
from groupd.broker.ops import log_end_history, quotas
from groupd.broker.ops.metrics import Metrics
from groupd.broker.ops.metrics_http import MetricsServer
from groupd.broker.security.access import Access
from groupd.broker.security.listeners import Listener
from groupd.broker.security.sasl import SaslGate, mechanism_factories
from groupd.broker.security.scram_store import ScramStore
from groupd.broker.security.tls import server_context
from groupd.broker.share.manager import SharePartitionManager
from groupd.broker.share_groups import ShareGroupShell
from groupd.coordinator.service import GroupCoordinator
from groupd.coordinator.share.config import ShareGroupConfig
from groupd.coordinator.share_state.persister import Persister
from groupd.coordinator.share_state.service import ShareCoordinator
from groupd.coordinator.transactions.service import TransactionCoordinator
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_STATE_TOPIC
from groupd.storage import engines
from groupd.storage.engine import PartitionLog, StorageEngine
from groupd.storage.errors import StorageError

if TYPE_CHECKING:
    from groupd.broker.clustering import ClusterNode

log = logging.getLogger("groupd.broker")


class Service(Protocol):
    """A part of the broker with a lifecycle (coordinator, data plane, metrics endpoint)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class Broker:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.node_id: int = config["node.id"]
        # the one place the storage engine is chosen: everything durable goes through it (storage/engine.py)
        self.storage: StorageEngine = engines.build(config)
        self.topics = TopicRegistry(self.storage.metadata)
        self.partition_limits = PartitionLimits(config, self.topics)
        self.metrics = Metrics(config["metrics.max.group.series"])
        self.metrics.bind(self)
        self.services: list[Service] = []
        self.metrics_server: MetricsServer | None = None
        if config["metrics.listener"]:
            self.metrics_server = MetricsServer(self, *config["metrics.listener"])
            self.services.append(self.metrics_server)
        self.stopping = False
        self.started_at: float | None = None
        self._server: Acceptor | None = None  # the first listener's
        self._servers: dict[str, Acceptor] = {}
        self.admission = Admission(config, self.metrics)  # max.connections, per ip, out of descriptors
        self._idle_timer: asyncio.TimerHandle | None = None
        self._listeners: dict[str, Listener] = {spec.name: spec for spec in config.listeners}
        self._connections: set[Connection] = set()
        self._unflushed: list[Connection] = []
        self._loop: asyncio.AbstractEventLoop  # set by start(); what reads it runs once the broker listens
        self.topics.reserved = (
            OFFSETS_TOPIC,
            TXN_STATE_TOPIC,
            SHARE_STATE_TOPIC,
        )  # the coordinators' own logs: never a data topic's
        self.scram = ScramStore(self.storage.metadata)
        # authorizer.class.name: ACLs decide what each principal may do (security/access.py), or nothing is checked
        self.access = Access.of(config, self.storage.metadata)
        self.group_configs = GroupConfigStore(self.storage.metadata, config)  # GROUP resources' configs
        self.producers = ProducerIds(self.storage.metadata)
        self.quotas = quotas.Quotas(config["quota.window.num"], config["quota.window.size.seconds"] * 1000)
        self.quota_store = quotas.QuotaStore(self.storage.metadata, self.quotas)
        self.quota_store.load()
        self.partitions = PartitionManager(config, self.storage, self.topics, self.producers)
        self.services.append(self.partitions)
        self.services.append(log_end_history.for_broker(self))  # after partitions: it stops first, sampling last
        # the share coordinator: the durable state of share-partitions, the broker's in-process Persister
        # (groupd/coordinator/share_state/persister.py), which share partitions and the group coordinator call;
        # started before the group coordinator and stopped after it, which calls it
        # (ignored: the Host protocols declare plain attributes, which mypy holds invariant, so the broker's
        # PartitionManager and ProducerIds, which implement DataPartitions and Producers, do not match)
        self.share_coordinator = ShareCoordinator(self)  # type: ignore[arg-type]
        self.share_persister: Persister = self.share_coordinator
        self.share_coordinator.on_write = self.metrics.share_state_write
        self.services.append(self.share_coordinator)
        self.coordinator = GroupCoordinator(config, self.storage, self.metrics)
        self.coordinator.on_append = lambda partition: self.partitions.appended(
            (OFFSETS_TOPIC, partition)
        )  # long polls
        self.coordinator.cfg.group_overrides = self.group_configs.overrides  # consumer.* group configs
        self.services.append(self.coordinator)
        # share groups (KIP-932): their settings, the share coordinator's port and the async work of their rules
        self.share_groups = ShareGroupShell(self)
        self.coordinator.cfg.share_config = self.share_group_config
        self.services.append(self.share_groups)
        self.transactions = TransactionCoordinator(self)  # type: ignore[arg-type]  # as ShareCoordinator's
        self.services.append(self.transactions)
        # KIP-932 share-partitions and sessions, over the persister (read at each use: tests swap it)
        self.share_partitions = SharePartitionManager(
            self,
            lambda: self.share_persister,
            self.share_group_config,
            config.get("group.share.max.share.sessions", 2_000),
        )
        self.services.append(self.share_partitions)
        # several nodes over one PostgreSQL (docs/cluster.md): started after the services, stopped after them
        # (after the share-partitions: it gives them the leader epochs and the persister of the cluster)
        self.cluster: ClusterNode | None = None
        if config["cluster.enabled"]:
            from groupd.broker.clustering import ClusterNode  # psycopg is imported only by those who need it

            self.cluster = ClusterNode(self)
        cluster = config["cluster.id"]
        self.internal_topics = {
            t.name: t
            for t in (
                # the configs Kafka creates them with (GroupCoordinator's and TransactionStateManager's)
                InternalTopic.of(
                    cluster,
                    OFFSETS_TOPIC,
                    config["offsets.topic.num.partitions"],
                    {
                        "cleanup.policy": "compact",
                        "compression.type": "producer",
                        "segment.bytes": str(config["offsets.topic.segment.bytes"]),
                    },
                    lambda: any(s.log.log_end_offset for s in self.coordinator.shards.values()),
                ),
                InternalTopic.of(
                    cluster,
                    TXN_STATE_TOPIC,
                    config["transaction.state.log.num.partitions"],
                    {
                        "cleanup.policy": "compact",
                        "compression.type": "uncompressed",
                        "segment.bytes": str(config["transaction.state.log.segment.bytes"]),
                    },
                    self.transactions.has_records,
                ),
                # ShareCoordinatorService.shareGroupStateTopicConfigs (KIP-932)
                InternalTopic.of(
                    cluster,
                    SHARE_STATE_TOPIC,
                    config["share.coordinator.state.topic.num.partitions"],
                    {
                        "cleanup.policy": "delete",
                        "compression.type": "producer",
                        "retention.ms": "-1",
                        "segment.bytes": str(config["share.coordinator.state.topic.segment.bytes"]),
                    },
                    self.share_coordinator.has_records,
                ),
            )
        }
        self.topics.on_delete.append(lambda topic: self.coordinator.remove_topic(topic.name))
        self.topics.on_delete.append(lambda topic: self.coordinator.share_topics_deleted(frozenset({topic.topic_id})))
        self.topics.on_delete.append(lambda topic: self.share_coordinator.topics_deleted(frozenset({topic.topic_id})))
        self.topics.on_delete.append(lambda topic: self.share_partitions.topic_deleted(topic.topic_id))
        # consumer-protocol groups assign from the topics and follow their changes
        self.coordinator.topics = self.topics.by_name
        self.topics.on_create.append(lambda topic: self.coordinator.topics_changed({topic.name}))
        self.topics.on_delete.append(lambda topic: self.coordinator.topics_changed({topic.name}))
        self.topics.on_grow.append(lambda topic, _old: self.coordinator.topics_changed({topic.name}))

    def share_group_config(self, group_id: str) -> ShareGroupConfig:
        """A share group's settings: the broker's group.share.* keys with the group's share.* overrides."""
        return self.share_groups.config_for(group_id)

    # topic changes go through here so every part of the broker hears about them
    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        return self.topics.create(name, partitions, configs)

    def delete_topic(self, name: str) -> Topic:
        return self.topics.delete(name)

    def partition_metrics(self) -> list[tuple[str, int, int, int, int]]:
        return self.partitions.metrics_rows()

    # ------------------------------------------------------------ the coordinators' logs as topics

    def internal_topic(self, name: str | None, topic_id: uuid.UUID | None = None) -> InternalTopic | None:
        """``__consumer_offsets``, ``__transaction_state`` or ``__share_group_state``, by name (or, without one, by id),
        created or not."""
        if name is None:
            return next((t for t in self.internal_topics.values() if t.topic_id == topic_id), None)
        return self.internal_topics.get(name)

    def listed_topic(self, name: str) -> Topic | None:
        """A topic clients can describe: a data topic, or an internal one once it exists."""
        internal = self.internal_topics.get(name)
        return self.topics.get(name) or (internal.topic() if internal is not None else None)

    def listed_topic_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        """The same, by topic id (Produce v13+, Fetch v13+, OffsetCommit and OffsetFetch v10)."""
        topic = self.topics.by_id(topic_id)
        if topic is None and (internal := self.internal_topic(None, topic_id)) is not None:
            return internal.topic()
        return topic

    def listed_topics(self) -> list[Topic]:
        """Every topic Metadata lists: the data topics, then the internal ones that exist."""
        return self.topics.all() + [t for i in self.internal_topics.values() if (t := i.topic()) is not None]

    def readable_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The log Fetch and ListOffsets read: a data partition's, an offsets partition this node owns
        (loaded), or a ``__transaction_state`` or ``__share_group_state`` partition. Produce, DeleteRecords and
        retention only ever see the data partitions."""
        if topic == OFFSETS_TOPIC:
            shard = self.coordinator.shards.get(partition)
            if (
                shard is None
                or not shard.loaded
                or not self.coordinator.owns(partition)
                or not self.internal_topics[topic].exists()
            ):
                return None
            return shard.log
        if topic in (TXN_STATE_TOPIC, SHARE_STATE_TOPIC):
            owner = self.transactions if topic == TXN_STATE_TOPIC else self.share_coordinator
            if not 0 <= partition < owner.num_partitions or not self.internal_topics[topic].exists():
                return None
            try:
                return owner.log_of(partition)
            except StorageError:
                log.exception("%s-%d cannot be opened", topic, partition)
                return None
        return self.partitions.get(topic, partition)

    def leads(self, topic: str, partition: int) -> bool:
        """This node may serve the partition now: always alone; in a cluster while it holds the lease."""
        return self.cluster is None or self.cluster.serves((topic, partition))

    def reopening_error(self, topic: str, partition: int, current: int = UNDEFINED_EPOCH) -> ErrorCode | None:
        """In a cluster, what a data partition whose lease this node just took answers until it is reopened
        (ClusterNode.reopening_error; ``current``: the client's current leader epoch, -1 none); None when it
        is not being reopened."""
        cluster = self.cluster
        if cluster is None or not cluster.reopening_any():
            return None
        return cluster.reopening_error((topic, partition), current)

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The partition's leader epoch as this node leads it: alone 0; in a cluster the lease epoch."""
        return LEADER_EPOCH if self.cluster is None else self.cluster.leader_epoch(topic, partition)

    def epoch_cache(self, topic: str, partition: int, lg: PartitionLog) -> EpochCache:
        """The partition's leader epoch history (dataplane/leader_epochs.py): alone epoch 0 from the log
        start; in a cluster every owner's epoch from where it started writing, the held one last."""
        return ONE_NODE if self.cluster is None else self.cluster.epoch_cache(topic, partition, lg)

    def owns_offsets_partition(self, partition: int) -> bool:
        if self.coordinator is None:
            return True
        return self.coordinator.owns(partition)

    @property
    def advertised(self) -> tuple[str, int]:
        """host:port given to clients of the first listener (``advertised_for`` names the listener)."""
        return self.advertised_for(None) or (self.config.listener[0], self.port)

    def advertised_for(self, listener: str | None) -> tuple[str, int] | None:
        """The address Metadata and FindCoordinator give a client of ``listener`` (None: the first),
        as Kafka answers each listener with its own advertised endpoint; None when advertised.listeners
        leaves that listener out. Port 0 (tests) advertises the port bound."""
        spec = self._listeners[listener] if listener is not None else self.config.listeners[0]
        if spec.advertised is None:
            return None
        host, port = spec.advertised
        if port == 0 and spec.port == 0 and spec.name in self._servers:
            port = self.port_of(spec.name)
        return host, port

    @property
    def port(self) -> int:
        """The port the first listener bound."""
        return self.port_of(self.config.listeners[0].name)

    def port_of(self, listener: str) -> int:
        return self._servers[listener.upper()].sockets[0].getsockname()[1]

    def _connection_factory(self, listener: Listener) -> Callable[[], Connection]:
        if listener.protocol == "PLAINTEXT":
            return lambda: Connection(self, listener.name)
        from groupd.broker.network.secure_connection import SaslConnection, TlsConnection

        if not listener.sasl:
            return lambda: TlsConnection(self, listener.name)
        mechanisms = mechanism_factories(listener, self.scram.credentials_of)
        return lambda: SaslConnection(self, listener.name, SaslGate(listener.mechanisms, mechanisms))

    async def start(self) -> None:
        began = time.perf_counter()
        self.storage.open()
        # before anything is loaded: with a changed count every key would be read from the wrong partition
        coordinator_partitions.check(
            self.storage,
            {
                OFFSETS_TOPIC: self.config["offsets.topic.num.partitions"],
                TXN_STATE_TOPIC: self.config["transaction.state.log.num.partitions"],
                SHARE_STATE_TOPIC: self.config["share.coordinator.state.topic.num.partitions"],
            },
            coordinator_partitions.refused(clustered=self.cluster is not None),
        )
        self.topics.load()
        self.scram.load()
        self.access.load()
        self.group_configs.load()
        for service in self.services:
            await service.start()
        self._loop = asyncio.get_running_loop()  # kept: get_running_loop() is a getpid(2) on 3.11
        self.admission.quotas.resolve_overrides()
        try:
            for listener in self.config.listeners:
                connection = self._connection_factory(listener)
                factory: Callable[[], asyncio.BaseProtocol] = connection
                if listener.tls:
                    from groupd.broker.network.secure_connection import TlsServer

                    assert listener.ssl is not None  # resolve() gave every SSL and SASL_SSL listener its settings
                    factory = functools.partial(
                        TlsServer, self, listener.name, server_context(listener.ssl), connection
                    )
                server = self.admission.listen(listener.name, listener.host, listener.port, factory)
                self._servers[listener.name] = server
                self._server = self._server or server
        except OSError:
            self.admission.close()
            raise
        if self.cluster is not None:  # registers the address just bound (port 0 in tests), then takes a share
            await self.cluster.start()
        if self.config["connections.max.idle.ms"] >= 0:
            self._idle_timer = self._loop.call_later(self._idle_sweep_s(), self._close_idle)
        self.started_at = time.perf_counter()
        bound = ", ".join(
            f"{name}://{s.sockets[0].getsockname()[0]}:{s.sockets[0].getsockname()[1]}"
            for name, s in self._servers.items()
        )
        log.info(
            "groupd listening on %s (node.id=%d, log.dirs=%s) started in %.0f ms",
            bound,
            self.node_id,
            self.config["log.dirs"],
            (self.started_at - began) * 1000,
        )
        for listener in self.config.listeners:
            if listener.advertised is None:
                log.warning(
                    "listener %s is not in advertised.listeners: Metadata gives its clients no address of this node",
                    listener.name,
                )

    def connection_opened(self, conn: Connection) -> None:
        if self.stopping:
            conn.stop_reading()
        self._connections.add(conn)

    def connection_closed(self, conn: Connection) -> None:
        self._connections.discard(conn)
        self.share_partitions.connection_closed(conn.id)

    def _idle_sweep_s(self) -> float:
        """How often idle connections are looked for: a tenth of connections.max.idle.ms, within
        50 ms and 30 s (Kafka's own check runs on every poll; a connection is closed that much late
        at most)."""
        return min(max(self.config["connections.max.idle.ms"] / 10_000, 0.05), 30.0)

    def _close_idle(self) -> None:
        """Kafka's connections.max.idle.ms: a connection that neither read nor wrote for that long is
        closed. One whose request is still outstanding (a long poll, a parked join) is not idle."""
        now = self._loop.time()
        limit = self.config["connections.max.idle.ms"] / 1000
        for conn in list(self._connections):
            if conn.active or conn.busy:
                conn.active = False
                conn.quiet_since = now
            elif now - conn.quiet_since >= limit:
                log.debug(
                    "connection %s closed: idle for %.0f ms (connections.max.idle.ms %d)",
                    conn.peer,
                    (now - conn.quiet_since) * 1000,
                    limit * 1000,
                )
                self.metrics.connection_closed_idle()
                conn.close_idle()
        self._idle_timer = self._loop.call_later(self._idle_sweep_s(), self._close_idle)

    def flush_soon(self, conn: Connection) -> None:
        """``conn`` has answers queued: send them, with every other connection's, after this loop turn."""
        if not self._unflushed:
            self._loop.call_soon(self._flush)
        self._unflushed.append(conn)

    def _flush(self) -> None:
        conns, self._unflushed = self._unflushed, []
        for conn in conns:
            conn.flush()

    async def stop(self) -> None:
        """Stop accepting, let in-flight requests finish, stop services (which flush), close."""
        self.stopping = True
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        self.admission.close()
        if self._connections:
            # Idle connections close at once; busy ones answer what they have read, within a moment.
            conns = list(self._connections)
            for conn in conns:
                conn.stop_reading()
            _, pending = await asyncio.wait([c.closed for c in conns], timeout=5)
            if pending:
                for conn in conns:
                    if not conn.closed.done():
                        conn.abort()
                await asyncio.wait(pending, timeout=1)
        for service in reversed(self.services):
            try:
                await service.stop()
            except Exception:
                log.exception("stopping %s failed", type(service).__name__)
        if self.cluster is not None:
            await self.cluster.stop()
        log.info("groupd stopped")
