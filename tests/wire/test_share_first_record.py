"""A new share consumer's path to its first record, through a real socket with Kafka's default share-group
settings (heartbeat interval 5000 ms, assignment interval 1000 ms), step by step as Kafka 4.3 takes it
(GroupMetadataManager.shareGroupHeartbeat, GroupCoordinatorService.persisterInitialize, SharePartitionManager):

1. the join answers at once: epoch 2, an empty assignment, HeartbeatIntervalMs 5000; the subscribed
   partitions are initialized in the share coordinator after the answer, without waiting for a heartbeat;
2. a heartbeat within the assignment interval of the first target bumps the group epoch (initialized
   partitions that no target holds) but keeps the old target: the member stays at epoch 2, no assignment;
3. the first heartbeat once the interval has passed gets every partition, at epoch 3;
4. a ShareFetch right after answers once the first of its share-partitions is loaded (initialized from
   the share coordinator's state), with that partition's records; the next one with the other's.

A client that heartbeats at the answered interval (librdkafka does) so gets its first records about 5 s
after it joined, as against Kafka; bench/share_first_record.py measures it. A second member joining once
the interval has passed gets its partitions in its first answer."""

import asyncio
import time

from groupd.protocol import codec
from tests.harness import WireClient
from tests.wire.test_group_configs import GROUP, SET, incremental
from tests.wire.test_leader_epochs import produce
from tests.wire.test_share_fetch import SHARE_FETCH, acquired, fetch_body
from tests.wire.test_share_fetch import started as started_broker
from tests.wire.test_share_groups import hb_body, initialized, parts


async def test_join_initialize_assign_and_fetch_follow_kafkas_steps_and_intervals(tmp_path):
    b = await started_broker(tmp_path, real=True)  # Kafka's defaults: assignment interval 1000 ms
    try:
        tid = b.create_topic("q", 2, {}).topic_id
        c = await WireClient.connect(b.port)
        r = await c.call(44, 1, incremental([(GROUP, "g", [("share.auto.offset.reset", SET, "earliest")])]))
        assert r.responses[0].error_code == 0
        for p in (0, 1):
            await produce(c, "q", p, 5)
        m = "member-one-" + "x" * 10
        joined = time.monotonic()
        r = await c.call(76, 1, hb_body(m, 0, names=("q",)))
        assert (r.error_code, r.member_epoch, codec.millis(r.heartbeat_interval)) == (0, 2, 5000)
        assert r.assignment is not None and parts(r) == []
        for _ in range(100):  # the share coordinator's initialization follows the answer, not a heartbeat
            if await initialized(b, "g", tid, (0, 1)) == [0, 1]:
                break
            await asyncio.sleep(0.01)
        assert await initialized(b, "g", tid, (0, 1)) == [0, 1]
        assert time.monotonic() - joined < 1.0
        r = await c.call(76, 1, hb_body(m, 2))
        assert (r.error_code, r.member_epoch, r.assignment) == (0, 2, None)  # the target waits for the interval
        await asyncio.sleep(max(0.0, joined + 1.05 - time.monotonic()))
        r = await c.call(76, 1, hb_body(m, 2))
        assert (r.error_code, r.member_epoch, parts(r)) == (0, 3, [(tid, 0), (tid, 1)])
        first = await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 0, member=m, partitions=(0, 1), max_wait=500))
        assert time.monotonic() - joined < 2.0
        # the answer comes once the first share-partition has loaded, with it alone (Kafka tries the delayed
        # share fetch each time one of its partitions finishes initializing); the other comes next
        assert [(p.partition_index, len(p.acquired_records)) for t in first.responses for p in t.partitions] == [
            (0, 1)
        ]
        assert acquired(first) == [(0, 4, 1)]
        second = await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 1, member=m, partitions=(0, 1), max_wait=500))
        assert [(p.partition_index, acquired(second)) for t in second.responses for p in t.partitions] == [
            (1, [(0, 4, 1)])
        ]

        await asyncio.sleep(1.05)  # the next target may be computed at once
        for p in (0, 1):
            await produce(c, "q", p, 2)
        second = "member-two-" + "x" * 10
        r = await c.call(76, 1, hb_body(second, 0, names=("q",)))
        assert (r.error_code, r.member_epoch, len(parts(r))) == (0, 4, 1)  # its partitions in its first answer
        (one,) = parts(r)
        got = acquired(await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 0, member=second, partitions=(one[1],))))
        assert got == [(5, 6, 1)]
        await c.close()
    finally:
        await b.stop()
