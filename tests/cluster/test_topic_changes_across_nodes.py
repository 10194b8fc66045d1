"""A topic's partitions are rows every node shares (docs/cluster.md), so a node that has not yet followed
another node's topic change must not remove them: a Metadata auto-creation at a node that lags behind a
creation finds the topic (it follows the document first), and a node that follows a deletion leaves the
rows to the node that deleted (the name may already be a new topic's), and a CreateTopics of a name another
node has just taken is refused TOPIC_ALREADY_EXISTS without touching its rows. Before, both removed the live
partitions' rows, and their owner's writes were refused for ever ("lost the lease": its rows were gone).

Two in-process nodes with a lease long enough that neither heartbeats by itself during the test: each
step is taken by hand, so "node 2 has not followed yet" is a fact, not a race."""

from __future__ import annotations

import asyncio
from pathlib import Path

from groupd.broker.app import Broker
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch
from tests.cluster.stepped import step, two_started
from tests.cluster.test_broker_nodes import metadata
from tests.harness import WireClient
from tests.wire.test_data_plane import produce_body
from tests.wire.test_quotas import create_topics_body


async def produce_to_leaders(clients: dict[int, WireClient], node: Broker, topic: str, partitions: int) -> list[int]:
    """One batch to each partition at its leader, as node ``node`` names it: the error codes, in order."""
    return [code for code, _ in await offsets_at_leaders(clients, node, topic, partitions)]


async def offsets_at_leaders(
    clients: dict[int, WireClient], node: Broker, topic: str, partitions: int
) -> list[tuple[int, int]]:
    """One batch to each partition at its leader, as node ``node`` names it: (error, base offset), in order."""
    assert node.cluster is not None
    out = []
    for p in range(partitions):
        leader = node.cluster.leader(topic, p)
        assert leader in clients, (topic, p, leader)
        answer = await clients[leader].call(0, 9, produce_body(topic, p, build_batch([(None, b"x")], timestamp_ms=1)))
        part = answer.responses[0].partition_responses[0]
        out.append((part.error_code, part.base_offset))
    return out


async def until_created(client: WireClient, topic: str):  # type: ignore[no-untyped-def]
    """Metadata with auto-creation until the topic is there (LEADER_NOT_AVAILABLE while a deleted topic of
    that name is still being removed): its entry."""
    for _ in range(100):
        answer = (await metadata(client, topic)).topics[0]
        if answer.error_code == ErrorCode.none:
            return answer
        assert answer.error_code == ErrorCode.leader_not_available, answer
        await asyncio.sleep(0.05)
    raise AssertionError(f"{topic} was not created")


def test_an_auto_creation_at_a_node_that_has_not_followed_the_creation_keeps_the_partitions(
    tmp_path: Path, postgresql_url: str
) -> None:
    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            one, two = both.nodes[1], both.nodes[2]
            clients = both.clients
            c1, c2 = clients[1], clients[2]
            await step(one, two)  # both registered and seen live: node 1 leaves node 2 its share
            created = await metadata(c1, "t")  # auto-created at node 1 (num.partitions)
            assert created.topics[0].error_code == ErrorCode.none
            count = len(created.topics[0].partitions)
            await step(one, two, one)  # both follow, each takes and opens its share of the partitions
            assert {one.cluster.leader("t", p) for p in range(count)} == {1, 2}  # type: ignore[union-attr]
            assert await produce_to_leaders(clients, one, "t", count) == [ErrorCode.none] * count
            # t is deleted and made again at node 1; node 2 has not followed either change
            old = one.delete_topic("t").topic_id
            again = await until_created(c1, "t")
            assert again.topic_id != old
            await step(one, two, one)  # node 2 follows the deletion and the new t; the shares are taken
            assert await produce_to_leaders(clients, one, "t", count) == [ErrorCode.none] * count
            # a topic node 2 has not heard of: created at node 1, asked of node 2 (auto-creation) at once
            u = await until_created(c1, "u")
            await step(one)  # node 1 takes and opens its share of u's partitions
            asked = await metadata(c2, "u")
            assert asked.topics[0].error_code == ErrorCode.none
            assert asked.topics[0].topic_id == u.topic_id
            await step(two, one)  # node 2 takes its share
            assert await produce_to_leaders(clients, one, "u", count) == [ErrorCode.none] * count
            # CreateTopics of a name node 1 just took, at node 2 before its heartbeat: TOPIC_ALREADY_EXISTS
            await until_created(c1, "v")
            await step(one)
            refused = await c2.call(19, 7, create_topics_body(7, [("v", 4)]))
            assert refused.topics[0].error_code == ErrorCode.topic_already_exists
            await step(two, one)
            assert await produce_to_leaders(clients, one, "v", count) == [ErrorCode.none] * count

    asyncio.run(scenario())
