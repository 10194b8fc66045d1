"""Share groups across two in-process cluster nodes (docs/cluster.md): each ``__share_group_state``
partition has a lease, FindCoordinator(SHARE) names its holder from either node, the share-state RPCs at
the other node answer NOT_COORDINATOR, and a share-partition whose data partition one node leads keeps its
state at the other node through those RPCs (groupd/cluster/share_state.py), across that node's stop.

Two nodes with a lease long enough that neither heartbeats by itself: each step is taken by hand."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from groupd.broker.app import Broker
from groupd.coordinator.share_state.keys import coordinator_key, state_partition
from groupd.coordinator.share_state.persister import ACKNOWLEDGED, AVAILABLE, ReadStateResult, SharePartitionKey
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import SHARE_STATE_TOPIC
from tests.cluster.stepped import STATE_SHARDS, settled, step, two_started
from tests.cluster.test_broker_nodes import find_coordinator, metadata
from tests.harness import WireClient
from tests.wire.test_share_fetch import SHARE_ACK, SHARE_FETCH, ack_body, acquired, fetch_body, part, produce
from tests.wire.test_share_groups import hb_body, parts, until_assigned
from tests.wire.test_share_state_apis import body, only

SHARE = 2  # FindCoordinator's key type for a share-partition (KIP-932)
READ_STATE = 84
ACCEPT, RELEASE = 1, 2


def split_pair(one: Broker, topic: str, tid: uuid.UUID, partitions: int) -> tuple[SharePartitionKey, int, int]:
    """A share-partition whose data partition and state partition two different nodes hold: (key, the
    data partition's leader, the state's owner)."""
    assert one.cluster is not None
    for g in range(50):
        for p in range(partitions):
            key = SharePartitionKey(f"g{g}", tid, p)
            leader = one.cluster.leader(topic, p)
            owner = one.cluster.leader(SHARE_STATE_TOPIC, state_partition(key, STATE_SHARDS))
            if leader is not None and owner is not None and leader != owner:
                return key, leader, owner
    raise AssertionError("every share-partition's state is held by its data partition's leader")


def by_offset(state: ReadStateResult) -> dict[int, int]:
    """The persisted delivery state of each offset at or past the start offset."""
    return {
        o: b.delivery_state
        for b in state.batches
        for o in range(max(b.first_offset, state.start_offset), b.last_offset + 1)
    }


async def find_share_coordinator(client: WireClient, key: SharePartitionKey):  # type: ignore[no-untyped-def]
    return (await client.call(10, 6, {"key_type": SHARE, "coordinator_keys": [coordinator_key(key)]})).coordinators[0]


def test_share_state_lives_at_the_holder_of_its_partition_and_the_leader_reaches_it(
    tmp_path: Path, postgresql_url: str
) -> None:
    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            nodes, clients = both.nodes, both.clients
            one, two, c1, c2 = nodes[1], nodes[2], clients[1], clients[2]
            created = await settled(both, "t")
            tid, count = created.topic_id, len(created.partitions)
            # every __share_group_state partition is leased, by one node or the other
            assert one.cluster is not None and two.cluster is not None
            owners = [one.cluster.leader(SHARE_STATE_TOPIC, p) for p in range(STATE_SHARDS)]
            assert set(owners) <= {1, 2} and None not in owners
            assert owners == [two.cluster.leader(SHARE_STATE_TOPIC, p) for p in range(STATE_SHARDS)]
            key, leader, owner = split_pair(one, "t", tid, count)
            # FindCoordinator(SHARE): the state's owner, from either node
            for c in (c1, c2):
                found = await find_share_coordinator(c, key)
                assert (found.error_code, found.node_id, found.port) == (ErrorCode.none, owner, nodes[owner].port)
            # the share-state RPCs: NOT_COORDINATOR at the node that does not hold the key's partition
            read = body(READ_STATE, 0, key.group_id, [(tid, [{"partition": key.partition, "leader_epoch": -1}])])
            assert only(await clients[leader].call(READ_STATE, 0, read)).error_code == ErrorCode.not_coordinator
            assert only(await clients[owner].call(READ_STATE, 0, read)).error_code != ErrorCode.not_coordinator
            # the group coordinator's initialization, from the data partition's leader: an RPC to the owner
            client = nodes[leader].cluster.share_state  # type: ignore[union-attr]
            sent = client.remote_calls
            assert await nodes[leader].share_persister.initialize(key, 0, 0) == ErrorCode.none
            assert client.remote_calls == sent + 1
            # a share fetch and acknowledgement at the leader: the state is written at the owner
            cl = clients[leader]
            await produce(cl, "t", 6, partition=key.partition)
            got = await cl.call(SHARE_FETCH, 1, fetch_body(1, tid, 0, partitions=(key.partition,), group=key.group_id))
            assert acquired(got) == [(0, 5, 1)]
            acked = await cl.call(
                SHARE_ACK, 1, ack_body(1, tid, 1, {key.partition: [(0, 2, [ACCEPT])]}, group=key.group_id)
            )
            assert part(acked, key.partition).error_code == ErrorCode.none
            assert client.remote_calls >= sent + 3  # the read at the partition's load, then the write
            state = await nodes[owner].share_coordinator.read(key, -1)
            assert state.error_code == ErrorCode.none
            assert by_offset(state) == {0: ACKNOWLEDGED, 1: ACKNOWLEDGED, 2: ACKNOWLEDGED}
            # the share-partition read its state with the data partition's lease epoch as leader epoch: the
            # coordinator now refuses a write of an older leader (Kafka's FENCED_LEADER_EPOCH, 74)
            epoch = nodes[leader].cluster.member.serving(("t", key.partition))  # type: ignore[union-attr]
            summary = await nodes[owner].share_coordinator.read_summary(key, -1)
            assert epoch is not None and summary.leader_epoch == epoch >= 1
            stale = await nodes[owner].share_coordinator.write(key, state.state_epoch, epoch - 1, -1, -1, ())
            assert stale == ErrorCode.fenced_leader_epoch
            # ShareFetch and ShareAcknowledge at the node that does not lead: NOT_LEADER_OR_FOLLOWER, naming the leader
            wrong = clients[owner]
            got = await wrong.call(
                SHARE_FETCH, 1, fetch_body(1, tid, 0, member="m2", partitions=(key.partition,), group=key.group_id)
            )
            refused = part(got, key.partition)
            assert refused.error_code == ErrorCode.not_leader_or_follower
            assert refused.current_leader.leader_id == leader
            assert [n.node_id for n in got.node_endpoints] == [leader]
            # the owner stops (controlled): the leader takes the state partition, loads what the owner wrote,
            # and the next write goes there
            await both.stop(owner)
            await step(nodes[leader])
            assert nodes[leader].cluster.serves(  # type: ignore[union-attr]
                (SHARE_STATE_TOPIC, state_partition(key, STATE_SHARDS))
            )
            for _ in range(100):  # the takeover's load runs on its own
                if nodes[leader].share_coordinator.owns(state_partition(key, STATE_SHARDS)):
                    shard = nodes[leader].share_coordinator.runtime.shards[state_partition(key, STATE_SHARDS)]
                    if shard.loaded:
                        break
                await asyncio.sleep(0.02)
            acked = await cl.call(
                SHARE_ACK,
                1,
                ack_body(1, tid, 2, {key.partition: [(3, 3, [ACCEPT]), (4, 5, [RELEASE])]}, group=key.group_id),
            )
            assert part(acked, key.partition).error_code == ErrorCode.none
            state = await nodes[leader].share_coordinator.read(key, -1)
            assert state.error_code == ErrorCode.none
            # what was accepted (0-3) is below the start offset or ACKNOWLEDGED; what was released is AVAILABLE
            done = by_offset(state)
            assert all(o < state.start_offset or done.get(o) == ACKNOWLEDGED for o in range(4)), state
            assert (done[4], done[5]) == (AVAILABLE, AVAILABLE)
            # what is left is offered again, at the next delivery
            got = await cl.call(
                SHARE_FETCH, 1, fetch_body(1, tid, 0, member="m3", partitions=(key.partition,), group=key.group_id)
            )
            assert acquired(got) == [(4, 5, 2)]

    asyncio.run(scenario())


def test_a_share_groups_assignment_covers_every_partition_wherever_it_is_led(
    tmp_path: Path, postgresql_url: str
) -> None:
    """ShareGroupHeartbeat at the group's coordinator assigns every partition of the subscribed topic, those
    the other node leads too (the topics are every node's), and the group coordinator initializes each
    share-partition's state at the holder of its state partition, through the share-state client."""

    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            nodes, clients = both.nodes, both.clients
            await step(nodes[1], nodes[2])
            created = (await metadata(clients[1], "wide")).topics[0]
            tid, count = created.topic_id, len(created.partitions)
            await step(nodes[1], nodes[2], nodes[1], nodes[2])
            assert nodes[1].cluster is not None
            leaders = {nodes[1].cluster.leader("wide", p) for p in range(count)}
            assert leaders == {1, 2}  # led by both nodes (the balanced target of two nodes stepped in turn)
            coordinator = (await find_coordinator(clients[1], "sg")).node_id
            c = clients[coordinator]
            r = await c.call(76, 1, hb_body("m1", 0, names=("wide",), group="sg"))
            assert r.error_code == ErrorCode.none
            r = await until_assigned(c, "m1", r.member_epoch, count, r, group="sg")
            assert parts(r) == [(tid, p) for p in range(count)]
            for p in range(count):  # initialized where the state lives, asked from either node
                for n in (1, 2):
                    summary = await nodes[n].share_persister.read_summary(SharePartitionKey("sg", tid, p), -1)
                    assert summary.error_code == ErrorCode.none and summary.state_epoch > 0, (n, p, summary)

    asyncio.run(scenario())
