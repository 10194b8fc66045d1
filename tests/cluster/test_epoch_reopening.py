"""What a partition answers at its new owner while it is reopened after a takeover (docs/cluster.md "Leader
epochs"): the node holds the lease at its new epoch but does not serve the partition yet. Kafka answers a
partition this broker is not (yet) leader of through Partition.getLocalLog: the client's current leader
epoch is checked first (Partition.checkCurrentLeaderEpoch: older FENCED_LEADER_EPOCH, newer
UNKNOWN_LEADER_EPOCH; none given, or -1, skips it), then NOT_LEADER_OR_FOLLOWER: all three retriable,
where UNKNOWN_TOPIC_OR_PARTITION would tell a client the partition may not exist. Fetch reads every negative
epoch as none given; ListOffsets (v4+) and OffsetForLeaderEpoch (v2+) only -1. A Produce (no epoch in it)
waits for the reopening, then gets NOT_LEADER_OR_FOLLOWER if it is still under way.

The reopening is held by the test (as tests/cluster/test_creation_off_the_loop.py holds it), so "in between"
is a fact, not a race."""

from __future__ import annotations

import asyncio
from pathlib import Path

from groupd.protocol.errors import ErrorCode
from tests.cluster.stepped import hold_reopening, settled, two_started
from tests.cluster.test_leader_epochs_across_nodes import epochs_in_metadata, fetch_error
from tests.wire.test_data_plane import produce_body
from tests.wire.test_leader_epochs import answers, list_offsets_request, ofle_body, producer_batch

NOT_LEADER, FENCED, UNKNOWN_EPOCH = (
    ErrorCode.not_leader_or_follower,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch,
)
LATEST = -1


def test_a_partition_being_reopened_answers_as_a_leader_not_yet_ready(tmp_path: Path, postgresql_url: str) -> None:
    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            await settled(both, "t")
            one, c1 = both.nodes[1], both.clients[1]
            assert one.cluster is not None
            seen = await epochs_in_metadata(c1, "t")
            p = next(q for q, (leader, _epoch) in seen.items() if leader == 2)
            old = seen[p][1]
            await both.stop(2)  # controlled: its leases are released for node 1's next beat
            go_on = hold_reopening(one)
            await one.cluster.member.step()  # takes the partition; its reopening waits for the test
            new = one.cluster.member.serving(("t", p))
            assert new is not None and new > old
            assert one.cluster.reopening(("t", p)) and not one.cluster.serves(("t", p))

            fetched = {
                current: (await fetch_error(c1, "t", p, 0, current=current)).error_code
                for current in (-1, -2, old, new, new + 1)
            }
            assert fetched == {-1: NOT_LEADER, -2: NOT_LEADER, old: FENCED, new: NOT_LEADER, new + 1: UNKNOWN_EPOCH}

            listed = {}
            for current in (-1, old, new, new + 1):
                resp = await c1.call(2, 7, list_offsets_request("t", p, LATEST, current))
                listed[current] = resp.topics[0].partitions[0].error_code
            assert listed == {-1: NOT_LEADER, old: FENCED, new: NOT_LEADER, new + 1: UNKNOWN_EPOCH}

            asked = [(p, current, old) for current in (-1, old, new, new + 1)]
            ofle = await c1.call(23, 4, ofle_body([("t", asked)]))
            assert [a[2] for a in answers(ofle)] == [NOT_LEADER, FENCED, NOT_LEADER, UNKNOWN_EPOCH]

            # a Produce waits for the reopening (a lease at most; shortened here), then is refused, not stored
            waited = one.cluster.reopened
            one.cluster.reopened = lambda _timeout: waited(0.2)  # type: ignore[method-assign]
            resp = await c1.call(0, 9, produce_body("t", p, producer_batch(2)))
            assert resp.responses[0].partition_responses[0].error_code == NOT_LEADER

            go_on.set()
            await one.cluster.opened()
            assert one.cluster.serves(("t", p))
            assert (await fetch_error(c1, "t", p, 0, current=new)).error_code == ErrorCode.none
            ofle = await c1.call(23, 4, ofle_body([("t", [(p, new, new)])]))
            assert answers(ofle) == [("t", p, ErrorCode.none, new, 0)]

    asyncio.run(scenario())
