"""Two in-process brokers as cluster nodes over the test PostgreSQL, through a real socket: Metadata lists
both nodes and each partition's lease holder, the other node answers NOT_LEADER_OR_FOLLOWER and
NOT_COORDINATOR, FindCoordinator on either names the same node, and /metrics counts the leases."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from prometheus_client import generate_latest

from groupd.broker.app import Broker
from groupd.cli import cluster_cli
from groupd.coordinator.partitioning import partition_for
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import OFFSETS_TOPIC, TXN_STATE_TOPIC
from groupd.storage.batch import build_batch
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.wire.test_data_plane import produce_body
from tests.wire.test_metrics import samples
from tests.wire.test_transactions import init_body

SHARDS = 4
TXN_SHARDS = 3
SHARE_STATE_SHARDS = 2


def node_config(tmp_path: Path, url: str, node: int, lease_ms: int = 2000, **more: str):  # type: ignore[no-untyped-def]
    return broker_config(
        tmp_path / f"n{node}",
        **{
            "storage.engine": "postgresql",
            "storage.postgresql.url": url,
            "cluster.enabled": "true",
            "cluster.lease.ms": str(lease_ms),
            "node.id": str(node),
            "offsets.topic.num.partitions": str(SHARDS),
            "transaction.state.log.num.partitions": str(TXN_SHARDS),
            "share.coordinator.state.topic.num.partitions": str(SHARE_STATE_SHARDS),
            **more,
        },
    )


async def metadata(client: WireClient, topic: str):  # type: ignore[no-untyped-def]
    cls = codec.request_class(3, 12)
    body = codec.make(
        cls,
        topics=(codec.nested(cls, "MetadataRequestTopic")(name=topic, topic_id=codec.ZERO_UUID),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    return await client.call(3, 12, body)


GROUP, TRANSACTION = 0, 1  # FindCoordinator's key types


async def find_coordinator(client: WireClient, key: str, key_type: int = GROUP):  # type: ignore[no-untyped-def]
    cls = codec.request_class(10, 4)
    return (await client.call(10, 4, codec.make(cls, key_type=key_type, coordinator_keys=(key,)))).coordinators[0]


@contextlib.asynccontextmanager
async def two_nodes(
    tmp_path: Path, url: str, before_steps: Callable[[WireClient], Awaitable[object]] | None = None
) -> AsyncIterator[tuple[Broker, Broker, WireClient, WireClient]]:
    """Nodes 1 and 2 started, a client of each, and three heartbeats of both (their leases spread);
    ``before_steps`` runs first (a topic node 1 creates, which node 2 sees at its next beat)."""
    one = Broker(node_config(tmp_path, url, 1))
    two = Broker(node_config(tmp_path, url, 2))
    await one.start()
    await two.start()
    c1, c2 = await WireClient.connect(one.port), await WireClient.connect(two.port)
    try:
        if before_steps is not None:
            await before_steps(c1)
        for _ in range(3):
            for b in (one, two):
                assert b.cluster is not None
                await b.cluster.member.step()
                await b.cluster.opened()
        yield one, two, c1, c2
    finally:
        await c1.close()
        await c2.close()
        await two.stop()
        await one.stop()


def test_two_nodes_route_as_kafka_does(tmp_path: Path, postgresql_url: str) -> None:
    async def scenario() -> None:
        async with two_nodes(tmp_path, postgresql_url, before_steps=lambda c1: metadata(c1, "t")) as (one, two, c1, c2):
            m1, m2 = await metadata(c1, "t"), await metadata(c2, "t")
            assert sorted(b.node_id for b in m1.brokers) == [1, 2]
            assert {b.node_id: b.port for b in m1.brokers} == {1: one.port, 2: two.port}
            lead1 = {p.partition_index: p.leader_id for p in m1.topics[0].partitions}
            lead2 = {p.partition_index: p.leader_id for p in m2.topics[0].partitions}
            assert lead1 == lead2 and set(lead1.values()) <= {1, 2}
            clients = {1: c1, 2: c2}
            for p, leader in lead1.items():
                batch = build_batch([(None, b"x")], timestamp_ms=1_000)
                right = await clients[leader].call(0, 9, produce_body("t", p, batch))
                wrong = await clients[3 - leader].call(0, 9, produce_body("t", p, batch))
                assert right.responses[0].partition_responses[0].error_code == ErrorCode.none
                assert wrong.responses[0].partition_responses[0].error_code == ErrorCode.not_leader_or_follower
            # a group's coordinator: the same node from both, and the other one refuses its requests
            group = "g"
            f1, f2 = await find_coordinator(c1, group), await find_coordinator(c2, group)
            assert (f1.node_id, f1.port) == (f2.node_id, f2.port)
            owner = f1.node_id
            assert owner == one.cluster.leader(OFFSETS_TOPIC, partition_for(group, SHARDS))  # type: ignore[union-attr]
            other = two if owner == 1 else one
            assert not other.owns_offsets_partition(partition_for(group, SHARDS))
            # groupd-cluster: the same view, through either node
            nodes, leaders = await asyncio.to_thread(cluster_cli.ownership, f"127.0.0.1:{two.port}")
            assert nodes == {1: ("127.0.0.1", one.port), 2: ("127.0.0.1", two.port)}
            assert leaders["t"] == lead1 and len(leaders[OFFSETS_TOPIC]) == SHARDS
            table = cluster_cli.render(nodes, leaders)
            assert f"127.0.0.1:{one.port}" in table and f"127.0.0.1:{two.port}" in table
            # /metrics of each node: its leases by kind, the live nodes, renewals and takeovers
            total = {"data": 0.0, "offsets": 0.0, "transactions": 0.0, "share_state": 0.0}
            for b in (one, two):
                got = samples(generate_latest(b.metrics.registry).decode())
                assert got[("groupd_cluster_live_nodes", ())] == 2
                assert got[("groupd_cluster_lease_takeovers_total", ())] >= 1
                assert got[("groupd_cluster_lease_renewals_total", ())] >= 1
                for kind in total:
                    total[kind] += got[("groupd_cluster_owned_leases", (("kind", kind),))]
            assert total == {
                "data": len(lead1),
                "offsets": SHARDS,
                "transactions": TXN_SHARDS,
                "share_state": SHARE_STATE_SHARDS,
            }

    asyncio.run(scenario())


def test_two_nodes_route_transactional_ids_to_the_holder_of_their_partition(
    tmp_path: Path, postgresql_url: str
) -> None:
    """FindCoordinator(TRANSACTION) names the node holding ``__transaction_state-<partition of the id>``
    from either node; the other node answers the id's InitProducerId NOT_COORDINATOR (the client looks its
    coordinator up again), the holder gives it a producer id."""

    async def scenario() -> None:
        async with two_nodes(tmp_path, postgresql_url) as (one, two, c1, c2):
            ids = {partition_for(f"txn-{i}", TXN_SHARDS): f"txn-{i}" for i in range(50)}  # one id per partition
            assert len(ids) == TXN_SHARDS
            for tid in ids.values():
                f1, f2 = await find_coordinator(c1, tid, TRANSACTION), await find_coordinator(c2, tid, TRANSACTION)
                assert f1.error_code == f2.error_code == ErrorCode.none
                assert (f1.node_id, f1.port) == (f2.node_id, f2.port)
                owner = f1.node_id
                assert owner == one.cluster.leader(TXN_STATE_TOPIC, partition_for(tid, TXN_SHARDS))  # type: ignore[union-attr]
                right, wrong = (c1, c2) if owner == 1 else (c2, c1)
                refused = await wrong.call(22, 4, init_body(tid))
                assert refused.error_code == ErrorCode.not_coordinator
                given = await right.call(22, 4, init_body(tid))
                assert given.error_code == ErrorCode.none and given.producer_id >= 0

    asyncio.run(scenario())
