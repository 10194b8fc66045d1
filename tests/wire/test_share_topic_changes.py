"""A share member's topics changing under it, through a real socket, as librdkafka's share-consumer tests
drive them against Kafka (0170's subscription before the topic exists, 0181's deletion, 0184's deletion
and re-creation under the same name): a subscription to a topic that does not exist yet gets nothing
until it is created, then its partitions once they are initialized; a topic deleted under the member
leaves its assignment and its share fetches answer UNKNOWN_TOPIC_OR_PARTITION; the same name created
again is a new topic id, initialized anew (share.auto.offset.reset applies again) and assigned."""

import pytest

from groupd.coordinator.share_state.persister import SharePartitionKey
from groupd.protocol import codec
from tests.harness import WireClient
from tests.wire.test_group_configs import GROUP, SET, incremental
from tests.wire.test_leader_epochs import produce
from tests.wire.test_share_fetch import SHARE_ACK, SHARE_FETCH, ack_body, acquired, fetch_body, part
from tests.wire.test_share_fetch import started as started_broker
from tests.wire.test_share_groups import FAST, hb_body, parts, until_assigned

# the storage-touching wire tests run on both engines (tests/conftest.py)
pytestmark = pytest.mark.engines

MEMBER = "member-" + "x" * 15


async def test_subscribed_before_it_exists_then_deleted_then_created_again(tmp_path):
    b = await started_broker(tmp_path, real=True, **FAST)
    try:
        c = await WireClient.connect(b.port)
        r = await c.call(44, 1, incremental([(GROUP, "g", [("share.auto.offset.reset", SET, "earliest")])]))
        assert r.responses[0].error_code == 0
        r = await c.call(76, 1, hb_body(MEMBER, 0, names=("later",)))
        assert (r.error_code, r.member_epoch, parts(r)) == (0, 2, [])
        r = await c.call(76, 1, hb_body(MEMBER, 2))
        assert (r.error_code, r.member_epoch) == (0, 2)  # nothing to assign, nothing to initialize

        old = b.create_topic("later", 1, {}).topic_id
        await produce(c, "later", 0, 3)
        r = await until_assigned(c, MEMBER, r.member_epoch, 1)
        assert parts(r) == [(old, 0)]
        got = await c.call(SHARE_FETCH, 1, fetch_body(1, old, 0, member=MEMBER, max_wait=500))
        assert acquired(got) == [(0, 2, 1)]

        b.delete_topic("later")
        gone = await c.call(SHARE_FETCH, 1, fetch_body(1, old, 1, member=MEMBER))
        assert part(gone).error_code == 3
        # acknowledging the records it holds: KafkaApis finds no such partition in the metadata
        acked = await c.call(SHARE_ACK, 1, ack_body(1, old, 2, {0: [(0, 2, [1])]}, member=MEMBER))
        assert (acked.error_code, part(acked).error_code) == (0, 3)
        r = await c.call(76, 1, hb_body(MEMBER, r.member_epoch))
        assert (r.error_code, parts(r)) == (0, [])  # the deleted topic's partition is taken away

        new = b.create_topic("later", 2, {}).topic_id
        assert new != old
        await produce(c, "later", 1, 2)
        r = await until_assigned(c, MEMBER, r.member_epoch, 2)
        assert parts(r) == sorted([(new, 0), (new, 1)])
        fetched = []
        for epoch in (0, 1):  # a new session on the new id; the partition that loads first comes first
            answer = await c.call(
                SHARE_FETCH, 1, fetch_body(1, new, epoch, member=MEMBER, partitions=(0, 1), max_wait=500)
            )
            assert answer.error_code == 0
            fetched += [(p.partition_index, acquired(answer)) for t in answer.responses for p in t.partitions]
        assert (1, [(0, 1, 1)]) in fetched  # earliest again: the new topic's records from its first offset
        left = await c.call(76, 1, hb_body(MEMBER, -1))
        assert (left.error_code, left.member_epoch) == (0, -1)
        await c.close()
    finally:
        await b.stop()


def delete_records_body(topic, partition, before):
    cls = codec.request_class(21, 2)
    t_cls, p_cls = codec.nested(cls, "DeleteRecordsTopic"), codec.nested(cls, "DeleteRecordsPartition")
    return codec.make(
        cls,
        topics=(t_cls(name=topic, partitions=(p_cls(partition_index=partition, offset=before),)),),
        timeout=5000,
    )


async def test_a_new_group_with_earliest_starts_at_the_log_start_delete_records_moved(tmp_path):
    """librdkafka's 0170 (DeleteRecords advances the log start): `earliest` is the log start offset, so a
    group whose share-partition loads after DeleteRecords sees only the records that remain."""
    b = await started_broker(tmp_path, real=True, **FAST)
    try:
        c = await WireClient.connect(b.port)
        tid = b.create_topic("t", 1, {}).topic_id
        await produce(c, "t", 0, 5)
        for group in ("before", "after"):
            r = await c.call(44, 1, incremental([(GROUP, group, [("share.auto.offset.reset", SET, "earliest")])]))
            assert r.responses[0].error_code == 0
            await b.share_persister.initialize(SharePartitionKey(group, tid, 0), 1, -1)
        got = await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 0, member=MEMBER, group="before", max_wait=500))
        assert acquired(got) == [(0, 4, 1)]
        deleted = await c.call(21, 2, delete_records_body("t", 0, 3))
        assert (deleted.topics[0].partitions[0].error_code, deleted.topics[0].partitions[0].low_watermark) == (0, 3)
        got = await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 0, member=MEMBER, group="after", max_wait=500))
        assert acquired(got) == [(3, 4, 1)]
        await c.close()
    finally:
        await b.stop()
