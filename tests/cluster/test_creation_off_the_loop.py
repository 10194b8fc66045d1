"""A cluster node creating a topic of 1,000 partitions keeps answering its other clients: the partitions
are opened off the event loop (on the partition-files thread, a slice at a time), as a single node opens
them, both when the creation is made here and when its lease-taking follows; a Produce for a partition
whose lease was just taken waits for its reopening rather than being refused.

Measured in the test: the latency of a classic group member's Heartbeat (ApiKey.HEARTBEAT) sent back to
back, from the CreateTopics until this node leads every new partition."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from groupd.broker.app import Broker
from groupd.protocol.api_table import ApiKey
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch
from tests.cluster.stepped import hold_reopening, settled, two_started
from tests.cluster.test_broker_nodes import node_config
from tests.harness import WireClient
from tests.wire.test_data_plane import produce_body
from tests.wire.test_groups import join_body, sync_body
from tests.wire.test_quotas import create_topics_body

PARTITIONS = 1_000
RETRIED = {ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available}


async def member_of(client: WireClient) -> tuple[str, int]:
    """Join group "g" alone (retried while its coordinator loads): (member id, generation)."""
    deadline = time.monotonic() + 20
    member = ""
    while True:
        joined = await client.call(ApiKey.JOIN_GROUP, 5, join_body(5, member))
        if joined.error_code == ErrorCode.member_id_required:
            member = joined.member_id
            continue
        if joined.error_code in RETRIED and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            continue
        assert joined.error_code == ErrorCode.none, joined
        synced = await client.call(ApiKey.SYNC_GROUP, 3, sync_body(3, joined.member_id, joined.generation_id))
        assert synced.error_code == ErrorCode.none
        return joined.member_id, joined.generation_id


def test_heartbeats_are_answered_while_a_thousand_partitions_are_created(tmp_path: Path, postgresql_url: str) -> None:
    async def scenario() -> None:
        config = node_config(tmp_path, postgresql_url, 1, 2000, **{"group.initial.rebalance.delay.ms": "0"})
        node = Broker(config)
        await node.start()
        admin, client = await WireClient.connect(node.port), await WireClient.connect(node.port)
        try:
            member, generation = await member_of(client)
            beat = {"group_id": "g", "generation_id": generation, "member_id": member, "group_instance_id": None}
            created = asyncio.ensure_future(
                admin.call(ApiKey.CREATE_TOPICS, 7, create_topics_body(7, [("big", PARTITIONS)]), timeout=120)
            )
            assert node.cluster is not None
            latencies: list[float] = []
            deadline = time.monotonic() + 120
            while not (created.done() and all(node.cluster.serves(("big", p)) for p in range(PARTITIONS))):
                assert time.monotonic() < deadline, "the topic was not created and led in time"
                started = time.perf_counter()
                answer = await client.call(ApiKey.HEARTBEAT, 3, beat)
                latencies.append(time.perf_counter() - started)
                assert answer.error_code == ErrorCode.none
                await asyncio.sleep(0.005)
            topic = (await created).topics[0]
            assert topic.error_code == ErrorCode.none and topic.num_partitions == PARTITIONS
            latencies.sort()
            p99, worst = latencies[int(len(latencies) * 0.99)], latencies[-1]
            print(
                f"{len(latencies)} heartbeats: p50 {latencies[len(latencies) // 2] * 1000:.1f} ms, "
                f"p99 {p99 * 1000:.1f} ms, max {worst * 1000:.1f} ms"
            )
            assert len(latencies) >= 10
            assert p99 < 0.050, latencies[-10:]
        finally:
            await admin.close()
            await client.close()
            await node.stop()

    asyncio.run(scenario())


def test_a_produce_waits_for_the_reopening_of_a_partition_just_taken(tmp_path: Path, postgresql_url: str) -> None:
    """Node 2 stops; node 1 takes its partitions at its next beat and reopens them off the loop: a Produce
    arriving meanwhile is answered once the partition is reopened (appended, not refused), so what an
    idempotent producer pipelined behind it keeps its order."""

    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            await settled(both, "t")
            one = both.nodes[1]
            assert one.cluster is not None
            taken = [p for p in range(4) if one.cluster.leader("t", p) == 2]
            assert taken
            await both.stop(2)  # controlled: its leases are released for node 1's next beat
            go_on = hold_reopening(one)
            await one.cluster.member.step()  # takes them; their reopening waits for the test
            p = taken[0]
            assert one.cluster.reopening(("t", p)) and not one.cluster.serves(("t", p))
            batch = build_batch([(None, b"x")], timestamp_ms=1)
            answer = asyncio.ensure_future(both.clients[1].call(ApiKey.PRODUCE, 9, produce_body("t", p, batch)))
            await asyncio.sleep(0.2)
            assert not answer.done()  # waiting, not refused
            go_on.set()
            part = (await asyncio.wait_for(answer, 10)).responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (ErrorCode.none, 0)
            assert one.cluster.serves(("t", p))

    asyncio.run(scenario())
