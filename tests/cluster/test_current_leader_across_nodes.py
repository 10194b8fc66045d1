"""KIP-951 in a cluster: an answer that sends a client to another node names that node, so the client
redirects without asking Metadata first. Facts from Kafka's KafkaApis (4.x), each asserted below:

- Produce v10+: a partition answered NOT_LEADER_OR_FOLLOWER carries CurrentLeader (the leader's id and
  epoch), and the answer's NodeEndpoints the leader's endpoint on the request's listener; below v10 the
  answer has neither;
- Fetch v16+: the same for NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH (a FENCED_LEADER_EPOCH at the
  leader names the leader itself); Fetch v12-15 carry no CurrentLeader for them (Kafka fills it only at
  v16+) and no NodeEndpoints;
- a partition answered without these errors carries the default CurrentLeader (-1, -1).
Two in-process nodes stepped by hand (tests/cluster/stepped.py), through a real socket."""

from __future__ import annotations

import asyncio
from pathlib import Path

from groupd.protocol.errors import ErrorCode
from tests.cluster.stepped import settled, two_started
from tests.cluster.test_leader_epochs_across_nodes import epochs_in_metadata
from tests.wire.test_data_plane import produce_body
from tests.wire.test_leader_epochs import fetch_request, producer_batch


def test_produce_and_fetch_at_the_wrong_node_name_the_leader_and_its_endpoint(
    tmp_path: Path, postgresql_url: str
) -> None:
    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            nodes, clients = both.nodes, both.clients
            await settled(both, "t")
            leader, epoch = (await epochs_in_metadata(clients[1], "t"))[0]
            other = 3 - leader
            endpoint = (leader, "127.0.0.1", nodes[leader].port)
            wrong, right = clients[other], clients[leader]

            # Produce v10+ at the wrong node: the leader and where to reach it
            for version in (10, 11):
                resp = await wrong.call(0, version, produce_body("t", 0, producer_batch(1), version=version))
                part = resp.responses[0].partition_responses[0]
                assert part.error_code == ErrorCode.not_leader_or_follower
                assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (leader, epoch)
                assert [(n.node_id, n.host, n.port) for n in resp.node_endpoints] == [endpoint]
            # Produce v9 has neither field: the error alone
            resp = await wrong.call(0, 9, produce_body("t", 0, producer_batch(1)))
            assert resp.responses[0].partition_responses[0].error_code == ErrorCode.not_leader_or_follower
            assert not hasattr(resp, "node_endpoints") or resp.node_endpoints == ()
            # at the leader: no error, the default CurrentLeader, no endpoint
            resp = await right.call(0, 11, produce_body("t", 0, producer_batch(1), version=11))
            part = resp.responses[0].partition_responses[0]
            assert part.error_code == ErrorCode.none
            assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (-1, -1)
            assert resp.node_endpoints == ()

            # Fetch v16 at the wrong node, and with a fenced epoch at the leader (which names itself)
            topic_id = nodes[leader].listed_topic("t").topic_id  # type: ignore[union-attr]
            for client, current, error in (
                (wrong, epoch, ErrorCode.not_leader_or_follower),
                (right, epoch - 1, ErrorCode.fenced_leader_epoch),
            ):
                resp = await client.call(
                    1, 16, fetch_request("t", 0, 0, version=16, current=current, topic_id=topic_id)
                )
                part = resp.responses[0].partitions[0]
                assert part.error_code == error
                assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (leader, epoch)
                assert [(n.node_id, n.host, n.port) for n in resp.node_endpoints] == [endpoint]
            # Fetch v12 (CurrentLeader exists from v12, filled by Kafka from v16 only) and a good fetch
            resp = await wrong.call(1, 12, fetch_request("t", 0, 0, current=epoch))
            part = resp.responses[0].partitions[0]
            assert part.error_code == ErrorCode.not_leader_or_follower
            assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (-1, -1)
            resp = await right.call(1, 16, fetch_request("t", 0, 0, version=16, current=epoch, topic_id=topic_id))
            part = resp.responses[0].partitions[0]
            assert part.error_code == ErrorCode.none and resp.node_endpoints == ()
            assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (-1, -1)

    asyncio.run(scenario())
