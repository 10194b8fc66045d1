"""Leader epochs in a cluster (docs/cluster.md): a partition's leader epoch is its lease epoch, which every
takeover raises, as Kafka raises the leader epoch at every election (with a single replica too). Two
in-process nodes stepped by hand, through a real socket:

- Metadata from either node names the lease epoch as the partition's leader epoch;
- the leader stamps produced batches (and transaction markers) with it (Kafka's leader overwrites the
  producer's partitionLeaderEpoch on append);
- Fetch, ListOffsets and OffsetForLeaderEpoch check a client's current leader epoch against it, as Kafka's
  Partition.checkCurrentLeaderEpoch: older is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH;
- OffsetForLeaderEpoch answers from the new leader's cache entry (its epoch from the log end offset it
  found at the takeover, as Kafka's makeLeader assigns it): the previous owner's epoch ends exactly where
  the new one starts, so a consumer validating its position after the takeover finds no truncation;
- OffsetForLeaderEpoch at the node that does not lead answers NOT_LEADER_OR_FOLLOWER."""

from __future__ import annotations

import asyncio
from pathlib import Path

from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import iter_batches
from tests.cluster.stepped import settled, step, two_started
from tests.cluster.test_broker_nodes import metadata
from tests.harness import WireClient
from tests.wire.test_data_plane import produce_body
from tests.wire.test_leader_epochs import answers, fetch_request, list_offsets_request, ofle_body, producer_batch

FENCED, UNKNOWN_EPOCH = ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch
LATEST = -1


async def epochs_in_metadata(client: WireClient, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (leader, leader epoch), as this node's Metadata names them."""
    m = (await metadata(client, topic)).topics[0]
    return {p.partition_index: (p.leader_id, p.leader_epoch) for p in m.partitions}


async def fetch_error(client: WireClient, topic: str, partition: int, offset: int, current: int, last: int = -1):  # type: ignore[no-untyped-def]
    resp = await client.call(1, 12, fetch_request(topic, partition, offset, current=current, last_fetched=last))
    return resp.responses[0].partitions[0]


def test_the_lease_epoch_is_the_leader_epoch_and_a_takeover_raises_it(tmp_path: Path, postgresql_url: str) -> None:
    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            nodes, clients = both.nodes, both.clients
            c1, c2 = clients[1], clients[2]
            await settled(both, "t")
            seen = await epochs_in_metadata(c1, "t")
            assert seen == await epochs_in_metadata(c2, "t")  # one view from either node
            p = 0
            leader, epoch = seen[p]
            other = 3 - leader
            assert nodes[leader].cluster.member.serving(("t", p)) == epoch >= 1  # type: ignore[union-attr]
            cl = clients[leader]
            # produced batches carry the lease epoch, whatever the producer put there
            resp = await cl.call(0, 9, produce_body("t", p, producer_batch(3, epoch=-1)))
            assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
            got = await fetch_error(cl, "t", p, 0, current=epoch)
            assert got.error_code == ErrorCode.none
            assert [h.partition_leader_epoch for _, h in iter_batches(bytes(got.records))] == [epoch]
            # the current leader epoch of Fetch, ListOffsets and OffsetForLeaderEpoch
            assert (await fetch_error(cl, "t", p, 0, current=epoch - 1)).error_code == FENCED
            assert (await fetch_error(cl, "t", p, 0, current=epoch + 1)).error_code == UNKNOWN_EPOCH
            assert (await fetch_error(cl, "t", p, 0, current=-1)).error_code == ErrorCode.none  # none given
            listed = await cl.call(2, 7, list_offsets_request("t", p, LATEST, epoch))
            row = listed.topics[0].partitions[0]
            assert (row.error_code, row.offset, row.leader_epoch) == (ErrorCode.none, 3, epoch)
            listed = await cl.call(2, 7, list_offsets_request("t", p, LATEST, epoch - 1))
            assert listed.topics[0].partitions[0].error_code == FENCED
            ofle = await cl.call(23, 4, ofle_body([("t", [(p, epoch, epoch), (p, epoch, epoch + 1)])]))
            assert answers(ofle) == [("t", p, 0, epoch, 3), ("t", p, 0, -1, -1)]
            ofle = await cl.call(23, 4, ofle_body([("t", [(p, epoch - 1, epoch)])]))
            assert answers(ofle)[0][2] == FENCED
            ofle = await clients[other].call(23, 4, ofle_body([("t", [(p, -1, epoch)])]))
            assert answers(ofle)[0][2] == ErrorCode.not_leader_or_follower
            # the leader stops: the other node takes the partition at the next epoch
            await both.stop(leader)
            await step(nodes[other])
            co = clients[other]
            after = (await epochs_in_metadata(co, "t"))[p]
            assert after[0] == other and after[1] > epoch
            new = after[1]
            # a client still on the old epoch is fenced and refreshes its metadata; the old epoch ends where
            # the new one starts (the log end found at the takeover): a consumer at 3 has nothing to truncate
            assert (await fetch_error(co, "t", p, 3, current=epoch)).error_code == FENCED
            ofle = await co.call(23, 4, ofle_body([("t", [(p, new, epoch), (p, new, new)])]))
            assert answers(ofle) == [("t", p, 0, epoch, 3), ("t", p, 0, new, 3)]
            resumed = await fetch_error(co, "t", p, 3, current=new, last=epoch)
            assert (resumed.error_code, resumed.diverging_epoch.epoch) == (ErrorCode.none, -1)
            resp = await co.call(0, 9, produce_body("t", p, producer_batch(2)))
            assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
            got = await fetch_error(co, "t", p, 0, current=new)
            assert [h.partition_leader_epoch for _, h in iter_batches(bytes(got.records))] == [epoch, new]
            ofle = await co.call(23, 4, ofle_body([("t", [(p, new, epoch), (p, new, new)])]))
            assert answers(ofle) == [("t", p, 0, epoch, 3), ("t", p, 0, new, 5)]
            # a fetcher past the end of the old epoch (it never read there) is told where it ended
            diverged = await fetch_error(co, "t", p, 4, current=new, last=epoch)
            assert (diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (epoch, 3)

    asyncio.run(scenario())
