"""Every listener of every node registered: a client is given the other nodes' endpoints on the listener its
request arrived on, as Kafka's brokers answer from their metadata cache. Two in-process nodes, each with two
listeners (PLAINTEXT and INTERNAL, both plaintext through listener.security.protocol.map), stepped by hand.

A kafka-python producer bootstrapped at either listener of node 1 writes to every partition (acks=all),
so it reached node 2 at node 2's address on that same listener.

Facts from Kafka 4.x (KRaftMetadataCache, KafkaApis), each asserted below:

- Metadata and DescribeCluster list the live brokers that have the request's listener, at their endpoint on
  it; a broker without that listener is left out;
- a partition whose live leader has no endpoint on the listener is answered leader -1 at the partition's
  leader epoch, with the leader among the offline replicas, and LISTENER_NOT_FOUND to Metadata v6+,
  LEADER_NOT_AVAILABLE to v0-5; DescribeTopicPartitions gives leader -1 with no error;
- FindCoordinator names the coordinator at its endpoint on the request's listener, COORDINATOR_NOT_AVAILABLE
  when it has none there;
- KIP-951's CurrentLeader names the leader (id and epoch) whatever its listeners; NodeEndpoints carries its
  endpoint on the request's listener only when it has one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from groupd.broker.app import Broker
from groupd.coordinator.partitioning import partition_for
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import OFFSETS_TOPIC
from tests.cluster.stepped import LONG_LEASE_MS, step, stepped
from tests.cluster.test_broker_nodes import SHARDS, find_coordinator, metadata, node_config
from tests.harness import WireClient
from tests.wire.test_data_plane import produce_body
from tests.wire.test_describe_apis import dtp_body
from tests.wire.test_leader_epochs import producer_batch

TWO_LISTENERS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
    "num.partitions": "4",
}
LISTENERS = ("PLAINTEXT", "INTERNAL")


@contextlib.asynccontextmanager
async def two_nodes(tmp_path: Path, url: str, advertised_by_two: str | None = None) -> AsyncIterator[dict[int, Broker]]:
    """Nodes 1 and 2 with both listeners, each stepped until the leases of topic ``t`` are spread;
    ``advertised_by_two``: node 2's advertised.listeners (its other listener then unregistered)."""
    two_more = {} if advertised_by_two is None else {"advertised.listeners": advertised_by_two}
    nodes = {
        1: stepped(node_config(tmp_path, url, 1, LONG_LEASE_MS, **TWO_LISTENERS)),
        2: stepped(node_config(tmp_path, url, 2, LONG_LEASE_MS, **TWO_LISTENERS, **two_more)),
    }
    await nodes[1].start()
    await nodes[2].start()
    try:
        await step(nodes[1], nodes[2])
        client = await WireClient.connect(nodes[1].port)
        await metadata(client, "t")  # created at node 1, followed by node 2 at its next step
        await client.close()
        await step(nodes[1], nodes[2], nodes[1], nodes[2])
        yield nodes
    finally:
        for n in (2, 1):
            await nodes[n].stop()


def port(node: Broker, listener: str) -> int:
    return node.port_of(listener)


def group_owned_by(node: Broker, owner: int) -> str:
    """A group whose coordinator (its __consumer_offsets partition's lease holder) is ``owner``."""
    assert node.cluster is not None
    for i in range(1000):
        group = f"g{i}"
        if node.cluster.leader(OFFSETS_TOPIC, partition_for(group, SHARDS)) == owner:
            return group
    raise AssertionError(f"no group of node {owner}")


def test_a_client_on_either_listener_is_given_that_listeners_endpoints_of_both_nodes(
    tmp_path: Path, postgresql_url: str
) -> None:
    async def scenario() -> None:
        async with two_nodes(tmp_path, postgresql_url) as nodes:
            for listener in LISTENERS:
                expected = [(n, "127.0.0.1", port(nodes[n], listener)) for n in (1, 2)]
                assert expected[0][2] != port(nodes[1], "PLAINTEXT" if listener == "INTERNAL" else "INTERNAL")
                for at in (1, 2):
                    client = await WireClient.connect(port(nodes[at], listener))
                    try:
                        meta = await metadata(client, "t")
                        assert [(b.node_id, b.host, b.port) for b in meta.brokers] == expected
                        assert {p.error_code for p in meta.topics[0].partitions} == {ErrorCode.none}
                        leaders = {p.leader_id for p in meta.topics[0].partitions}
                        assert leaders == {1, 2}  # both nodes lead some of t's four partitions
                        described = await client.call(
                            60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 1}
                        )
                        assert [(b.broker_id, b.host, b.port) for b in described.brokers] == expected
                        # FindCoordinator of a group the other node coordinates: its endpoint on this listener
                        other = 3 - at
                        found = await find_coordinator(client, group_owned_by(nodes[at], other))
                        assert (found.error_code, found.node_id, found.host, found.port) == (
                            ErrorCode.none,
                            *expected[other - 1],
                        )
                        # KIP-951: a Produce at the wrong node names the leader's endpoint on this listener
                        wrong = next(p.partition_index for p in meta.topics[0].partitions if p.leader_id == other)
                        resp = await client.call(0, 11, produce_body("t", wrong, producer_batch(1), version=11))
                        part = resp.responses[0].partition_responses[0]
                        assert part.error_code == ErrorCode.not_leader_or_follower
                        assert part.current_leader.leader_id == other
                        assert [(e.node_id, e.host, e.port) for e in resp.node_endpoints] == [expected[other - 1]]
                    finally:
                        await client.close()

    asyncio.run(scenario())


def test_a_node_without_the_requests_listener_is_left_out_and_its_partitions_have_no_reachable_leader(
    tmp_path: Path, postgresql_url: str
) -> None:
    async def scenario() -> None:
        # node 2 listens on INTERNAL too, but advertises PLAINTEXT only: it registers no INTERNAL endpoint
        async with two_nodes(tmp_path, postgresql_url, advertised_by_two="PLAINTEXT://127.0.0.1:0") as nodes:
            one = nodes[1]
            client = await WireClient.connect(port(one, "INTERNAL"))
            plain = await WireClient.connect(port(one, "PLAINTEXT"))
            try:
                meta = await metadata(client, "t")
                assert [(b.node_id, b.port) for b in meta.brokers] == [(1, port(one, "INTERNAL"))]
                on_plaintext = await metadata(plain, "t")
                assert [b.node_id for b in on_plaintext.brokers] == [1, 2]
                epochs = {p.partition_index: p.leader_epoch for p in on_plaintext.topics[0].partitions}
                led_by_two = [p.partition_index for p in on_plaintext.topics[0].partitions if p.leader_id == 2]
                assert led_by_two
                for p in meta.topics[0].partitions:
                    if p.partition_index in led_by_two:
                        assert p.error_code == ErrorCode.listener_not_found
                        assert (p.leader_id, p.leader_epoch) == (-1, epochs[p.partition_index])
                        assert tuple(p.offline_replicas) == (2,)
                    else:
                        assert (p.error_code, p.leader_id) == (ErrorCode.none, 1)
                # Metadata v5 and below: LEADER_NOT_AVAILABLE instead
                cls = codec.request_class(3, 5)
                body = codec.make(
                    cls, topics=(codec.nested(cls, "MetadataRequestTopic")(name="t"),), allow_auto_topic_creation=False
                )
                old = await client.call(3, 5, body)
                codes = {p.partition_index: p.error_code for p in old.topics[0].partitions}
                assert {codes[i] for i in led_by_two} == {ErrorCode.leader_not_available}
                # DescribeTopicPartitions: leader -1, no error
                described = await client.call(75, 0, dtp_body(["t"]))
                for p in described.topics[0].partitions:
                    assert p.error_code == ErrorCode.none
                    assert p.leader_id == (-1 if p.partition_index in led_by_two else 1)
                # DescribeCluster: node 1 alone on INTERNAL
                cluster = await client.call(60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 1})
                assert [b.broker_id for b in cluster.brokers] == [1]
                # FindCoordinator of a group node 2 coordinates: no endpoint of it on INTERNAL
                found = await find_coordinator(client, group_owned_by(one, 2))
                assert (found.error_code, found.node_id) == (ErrorCode.coordinator_not_available, -1)
                found = await find_coordinator(plain, group_owned_by(one, 2))
                assert (found.error_code, found.node_id, found.port) == (ErrorCode.none, 2, nodes[2].port)
                # KIP-951: the leader named (id, epoch), no endpoint of it on INTERNAL
                wrong = led_by_two[0]
                resp = await client.call(0, 11, produce_body("t", wrong, producer_batch(1), version=11))
                part = resp.responses[0].partition_responses[0]
                assert part.error_code == ErrorCode.not_leader_or_follower
                assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (2, epochs[wrong])
                assert resp.node_endpoints == ()
            finally:
                await client.close()
                await plain.close()

    asyncio.run(scenario())


def kafka_python_sends_everywhere(port: int, partitions: int) -> set[tuple[int, int]]:
    """kafka-python bootstrapped at ``port``: one acks=all record to each partition of ``t``; the brokers
    its metadata holds, as (node id, port)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", acks="all", request_timeout_ms=10_000)
    try:
        for p in range(partitions):
            producer.send("t", b"x", partition=p).get(timeout=20)
        return {(b.node_id, b.port) for b in producer._metadata.brokers()}
    finally:
        producer.close(timeout=5)


def test_a_real_client_on_either_listener_follows_both_nodes_there(tmp_path: Path, postgresql_url: str) -> None:
    async def scenario() -> None:
        async with two_nodes(tmp_path, postgresql_url) as nodes:
            for listener in LISTENERS:
                held = await asyncio.to_thread(kafka_python_sends_everywhere, port(nodes[1], listener), 4)
                assert held == {(n, port(nodes[n], listener)) for n in (1, 2)}

    asyncio.run(scenario())
