"""ShareFetch (78) and ShareAcknowledge (79) through a real socket, on the in-memory persister: spec
scenarios 37-46 (sessions, acquisition, acknowledgement, locks, bad input), long polls woken by produce,
and a restart of the share-partitions that keeps acknowledged state."""

from __future__ import annotations

import asyncio

import pytest

from groupd.broker.app import Broker
from groupd.coordinator.share_state.persister import ACKNOWLEDGED, SharePartitionKey
from groupd.protocol import codec
from groupd.storage.batch import build_batch
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.share.fake_persister import FakePersister
from tests.wire.test_data_plane import produce_body
from tests.wire.test_groups import wait_loaded

# the storage-touching wire tests run on both engines (tests/conftest.py)
pytestmark = pytest.mark.engines

SHARE_FETCH, SHARE_ACK = 78, 79


async def started(tmp_path, persister=None, real=False, **overrides):
    b = Broker(broker_config(tmp_path, **overrides))
    if not real:  # the share coordinator's own persister when real
        b.share_persister = persister or FakePersister()
    await b.start()
    await wait_loaded(b)
    return b


async def topic_with_state(b, name="t", partitions=1, start_offset=-1):
    topic = b.create_topic(name, partitions, {})
    for p in range(partitions):
        await b.share_persister.initialize(SharePartitionKey("g", topic.topic_id, p), 0, start_offset)
    return topic


async def produce(c, topic, n, partition=0, per_batch=None, timestamp_ms=1000):
    per_batch = per_batch or n
    for i in range(0, n, per_batch):
        batch = build_batch(
            [(None, f"v{j}".encode()) for j in range(i, min(n, i + per_batch))], timestamp_ms=timestamp_ms
        )
        r = await c.call(0, 9, produce_body(topic, partition, bytes(batch)))
        assert r.responses[0].partition_responses[0].error_code == 0


def fetch_body(
    version,
    tid,
    epoch,
    member="m1",
    partitions=(0,),
    acks=None,
    max_wait=0,
    min_bytes=1,
    max_records=500,
    batch_size=500,
    forgotten=(),
    group="g",
    renew=False,
    max_bytes=1 << 20,
    mode=0,
):
    cls = codec.request_class(SHARE_FETCH, version)
    topic_cls, part_cls, ack_cls = (
        codec.nested(cls, n) for n in ("FetchTopic", "FetchPartition", "AcknowledgementBatch")
    )
    forgot_cls = codec.nested(cls, "ForgottenTopic")
    acks = acks or {}
    parts = tuple(
        part_cls(
            partition_index=p,
            acknowledgement_batches=tuple(
                ack_cls(first_offset=f, last_offset=last, acknowledge_types=tuple(ts))
                for f, last, ts in acks.get(p, ())
            ),
        )
        for p in partitions
    )
    topics = (topic_cls(topic_id=tid, partitions=parts),) if partitions else ()
    return codec.make(
        cls,
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait=max_wait,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        max_records=max_records,
        batch_size=batch_size,
        share_acquire_mode=mode,
        is_renew_ack=renew,
        topics=topics,
        forgotten_topics_data=tuple(forgot_cls(topic_id=tid, partitions=tuple(ps)) for ps in forgotten),
    )


def ack_body(version, tid, epoch, acks, member="m1", group="g", renew=False):
    cls = codec.request_class(SHARE_ACK, version)
    topic_cls, part_cls, ack_cls = (
        codec.nested(cls, n) for n in ("AcknowledgeTopic", "AcknowledgePartition", "AcknowledgementBatch")
    )
    parts = tuple(
        part_cls(
            partition_index=p,
            acknowledgement_batches=tuple(
                ack_cls(first_offset=f, last_offset=last, acknowledge_types=tuple(ts)) for f, last, ts in batches
            ),
        )
        for p, batches in acks.items()
    )
    return codec.make(
        cls,
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        is_renew_ack=renew,
        topics=(topic_cls(topic_id=tid, partitions=parts),),
    )


def acquired(resp):
    return [
        (a.first_offset, a.last_offset, a.delivery_count)
        for t in resp.responses
        for p in t.partitions
        for a in p.acquired_records
    ]


def part(resp, index=0):
    return next(p for t in resp.responses for p in t.partitions if p.partition_index == index)


@pytest.mark.parametrize("version", [1, 2])
async def test_acquire_accept_and_session_epochs(tmp_path, version):
    b = await started(tmp_path)
    try:
        tid = (await topic_with_state(b)).topic_id
        c = await WireClient.connect(b.port)
        # scenario 37: epoch 0 with acks -> 42; no session -> 122
        r = await c.call(SHARE_FETCH, version, fetch_body(version, tid, 0, acks={0: [(0, 0, [1])]}))
        assert r.error_code == 42
        r = await c.call(SHARE_FETCH, version, fetch_body(version, tid, 3))
        assert r.error_code == 122
        # scenario 39: latest on an empty log; 10 records come with count 1 and the lock duration
        r = await c.call(SHARE_FETCH, version, fetch_body(version, tid, 0))
        assert (r.error_code, acquired(r)) == (0, [])
        await produce(c, "t", 10)
        r = await c.call(SHARE_FETCH, version, fetch_body(version, tid, 2))
        assert r.error_code == 123  # the session is at 1
        r = await c.call(SHARE_FETCH, version, fetch_body(version, tid, 1))
        assert acquired(r) == [(0, 9, 1)]
        assert codec.millis(r.acquisition_lock_timeout) == 30_000
        assert part(r).records
        # scenario 40: ACCEPT 0-9 piggy-backed, persisted, SPSO 10
        r = await c.call(SHARE_FETCH, version, fetch_body(version, tid, 2, acks={0: [(0, 9, [1])]}))
        assert (r.error_code, part(r).acknowledge_error_code, acquired(r)) == (0, 0, [])
        sp = b.share_partitions.partition("g", tid, 0)
        assert sp.start_offset == 10
        state = b.share_persister.states[SharePartitionKey("g", tid, 0)]
        assert state[4][9] == (ACKNOWLEDGED, 1)
        # acking 0-9 again: below SPSO, ignored
        r = await c.call(SHARE_ACK, version, ack_body(version, tid, 3, {0: [(0, 9, [1])]}))
        assert (r.error_code, r.responses[0].partitions[0].error_code) == (0, 0)
        # scenario 38: ShareAcknowledge epoch 0 -> 123
        r = await c.call(SHARE_ACK, version, ack_body(version, tid, 0, {0: [(0, 9, [1])]}))
        assert r.error_code == 123
        await c.close()
    finally:
        await b.stop()


async def test_release_redelivers_with_a_higher_count_to_another_member(tmp_path):
    b = await started(tmp_path)
    try:
        tid = (await topic_with_state(b)).topic_id
        a, m2 = await WireClient.connect(b.port), await WireClient.connect(b.port)
        await a.call(SHARE_FETCH, 1, fetch_body(1, tid, 0, member="A"))
        await m2.call(SHARE_FETCH, 1, fetch_body(1, tid, 0, member="B"))
        await produce(a, "t", 10)
        r = await a.call(SHARE_FETCH, 1, fetch_body(1, tid, 1, member="A"))
        assert acquired(r) == [(0, 9, 1)]
        r = await m2.call(SHARE_FETCH, 1, fetch_body(1, tid, 1, member="B", max_wait=50))
        assert acquired(r) == []  # nothing is held by two
        # scenario 44: B acks A's records -> 121
        r = await m2.call(SHARE_ACK, 1, ack_body(1, tid, 2, {0: [(0, 9, [1])]}, member="B"))
        assert r.responses[0].partitions[0].error_code == 121
        # scenario 41: A releases 0-4; B gets them with count 2
        r = await a.call(SHARE_ACK, 1, ack_body(1, tid, 2, {0: [(0, 4, [2])]}, member="A"))
        assert r.responses[0].partitions[0].error_code == 0
        r = await m2.call(SHARE_FETCH, 1, fetch_body(1, tid, 3, member="B"))
        assert acquired(r) == [(0, 4, 2)]
        # reject archives 0-4 for good
        r = await m2.call(SHARE_ACK, 1, ack_body(1, tid, 4, {0: [(0, 4, [3])]}, member="B"))
        assert r.responses[0].partitions[0].error_code == 0
        assert b.share_partitions.partition("g", tid, 0).record_state(3)[0] == 4
        m = b.share_partitions
        assert (m.acquired, m.acknowledged["release"], m.acknowledged["reject"]) == (15, 5, 5)
        from prometheus_client import generate_latest

        text = generate_latest(b.metrics.registry).decode()
        assert "groupd_share_records_acquired_total 15.0" in text
        assert 'groupd_share_acknowledgements_total{type="reject"} 5.0' in text
        await a.close()
        await m2.close()
    finally:
        await b.stop()


async def test_bad_acknowledgements_get_kafkas_codes_per_partition(tmp_path):
    b = await started(tmp_path)
    try:
        tid = (await topic_with_state(b, partitions=2)).topic_id
        c = await WireClient.connect(b.port)
        await c.call(SHARE_FETCH, 2, fetch_body(2, tid, 0, partitions=(0, 1)))
        await produce(c, "t", 10, partition=0)
        await produce(c, "t", 10, partition=1)
        r = await c.call(SHARE_FETCH, 2, fetch_body(2, tid, 1, partitions=()))
        assert sorted(acquired(r)) == [(0, 9, 1), (0, 9, 1)]
        epoch = 2
        # scenario 43: First > Last; 2 types for 3 offsets; type 5; type 4 without IsRenewAck -> 42 on that partition
        for batches in (
            [(5, 4, [1])],
            [(0, 2, [1, 1])],
            [(0, 0, [5])],
            [(0, 0, [4])],
            [(0, 3, [1]), (2, 5, [1])],
            [(0, 0, [])],
        ):
            r = await c.call(
                SHARE_ACK, 2, ack_body(2, tid, epoch, {0: batches, 1: [(9, 9, [1])]} if epoch == 2 else {0: batches})
            )
            epoch += 1
            assert r.error_code == 0
            assert part(r, 0).error_code == 42, batches
            if epoch == 3:
                assert part(r, 1).error_code == 0  # the other partition is unaffected
        # past the last cached batch -> 42; unknown partition -> 3
        r = await c.call(SHARE_ACK, 2, ack_body(2, tid, epoch, {0: [(5, 12, [1])], 7: [(0, 0, [1])]}))
        assert (part(r, 0).error_code, part(r, 7).error_code) == (42, 3)
        await c.close()
    finally:
        await b.stop()


async def test_renew_keeps_the_lock_and_fetches_nothing(tmp_path):
    b = await started(tmp_path)
    try:
        tid = (await topic_with_state(b)).topic_id
        c = await WireClient.connect(b.port)
        await c.call(SHARE_FETCH, 2, fetch_body(2, tid, 0))
        await produce(c, "t", 5)
        r = await c.call(SHARE_FETCH, 2, fetch_body(2, tid, 1))
        assert acquired(r) == [(0, 4, 1)]
        # scenario 45: non-zero MaxBytes etc. with IsRenewAck -> 42
        r = await c.call(SHARE_FETCH, 2, fetch_body(2, tid, 2, acks={0: [(0, 4, [4])]}, renew=True))
        assert r.error_code == 42
        r = await c.call(
            SHARE_FETCH,
            2,
            fetch_body(
                2, tid, 2, acks={0: [(0, 4, [4])]}, renew=True, max_wait=0, min_bytes=0, max_bytes=0, max_records=0
            ),
        )
        assert (r.error_code, part(r).acknowledge_error_code, acquired(r)) == (0, 0, [])
        sp = b.share_partitions.partition("g", tid, 0)
        assert sp.record_state(0)[0] == 1
        # v1 does not know type 4
        r = await c.call(SHARE_ACK, 1, ack_body(1, tid, 3, {0: [(0, 4, [4])]}))
        assert part(r).error_code == 42
        await c.close()
    finally:
        await b.stop()


async def test_fetch_long_polls_until_a_produce(tmp_path):
    b = await started(tmp_path)
    try:
        tid = (await topic_with_state(b)).topic_id
        c, p = await WireClient.connect(b.port), await WireClient.connect(b.port)
        await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 0))
        c.send(SHARE_FETCH, 1, fetch_body(1, tid, 1, max_wait=5000))
        await asyncio.sleep(0.1)
        await produce(p, "t", 3)
        r = await asyncio.wait_for(c.recv(), 2)
        assert acquired(r) == [(0, 2, 1)]
        await c.close()
        await p.close()
    finally:
        await b.stop()


async def test_lock_expiry_redelivers_to_another_member(tmp_path):
    b = await started(tmp_path)
    b.share_partitions.config_for = lambda g: __import__(
        "groupd.coordinator.share.config", fromlist=["x"]
    ).ShareGroupConfig(record_lock_duration_ms=200)
    try:
        tid = (await topic_with_state(b)).topic_id
        a, m2 = await WireClient.connect(b.port), await WireClient.connect(b.port)
        await a.call(SHARE_FETCH, 1, fetch_body(1, tid, 0, member="A"))
        await m2.call(SHARE_FETCH, 1, fetch_body(1, tid, 0, member="B"))
        await produce(a, "t", 4)
        r = await a.call(SHARE_FETCH, 1, fetch_body(1, tid, 1, member="A"))
        assert acquired(r) == [(0, 3, 1)]
        # B waits; the lock runs out and wakes it (scenario 42)
        r = await m2.call(SHARE_FETCH, 1, fetch_body(1, tid, 1, member="B", max_wait=3000))
        assert acquired(r) == [(0, 3, 2)]
        # A's late acknowledgement is refused
        r = await a.call(SHARE_ACK, 1, ack_body(1, tid, 2, {0: [(0, 3, [1])]}, member="A"))
        assert part(r).error_code == 121
        await a.close()
        await m2.close()
    finally:
        await b.stop()


async def test_session_close_and_disconnect_release_records(tmp_path):
    b = await started(tmp_path)
    try:
        tid = (await topic_with_state(b)).topic_id
        a = await WireClient.connect(b.port)
        await a.call(SHARE_FETCH, 1, fetch_body(1, tid, 0, member="A"))
        await produce(a, "t", 6, per_batch=3)
        r = await a.call(SHARE_FETCH, 1, fetch_body(1, tid, 1, member="A"))
        assert acquired(r) == [(0, 5, 1)]
        # scenario 46: epoch -1 with acks: applied, nothing fetched, the rest released, session gone
        r = await a.call(SHARE_FETCH, 1, fetch_body(1, tid, -1, member="A", acks={0: [(0, 2, [1])]}))
        assert (r.error_code, part(r).acknowledge_error_code, acquired(r)) == (0, 0, [])
        sp = b.share_partitions.partition("g", tid, 0)
        assert sp.record_state(4)[0] == 0
        r = await a.call(SHARE_FETCH, 1, fetch_body(1, tid, 2, member="A"))
        assert r.error_code == 122
        r = await a.call(SHARE_FETCH, 1, fetch_body(1, tid, -1, member="A"))
        assert r.error_code == 122
        # a disconnect ends the session and releases what it held
        r = await a.call(SHARE_FETCH, 1, fetch_body(1, tid, 0, member="A"))
        assert acquired(r) == [(3, 5, 2)]  # an initial fetch fetches too
        await a.close()
        for _ in range(100):
            if sp.record_state(4)[0] == 0:
                break
            await asyncio.sleep(0.01)
        assert sp.record_state(4) == (0, 2, "")
        assert b.share_partitions.sessions.get(("g", "A")) is None
        # the group's last session is gone: its share-partitions leave the cache (Kafka's onGroupEmpty)
        for _ in range(100):
            if b.share_partitions.partition("g", tid, 0) is None:
                break
            await asyncio.sleep(0.01)
        assert b.share_partitions.partition("g", tid, 0) is None
    finally:
        await b.stop()


async def test_unknown_topic_id_and_partition_and_bad_member_ids(tmp_path):
    b = await started(tmp_path)
    try:
        tid = (await topic_with_state(b)).topic_id
        c = await WireClient.connect(b.port)
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 0, member="x" * 37))
        assert r.error_code == 42
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 0, member=""))
        assert r.error_code == 42
        # an unknown topic id: not in the metadata at the session's start (3), UNKNOWN_TOPIC_ID once it is a
        # session partition whose id never resolved (Kafka's ShareSessionContext)
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, __import__("uuid").UUID(int=5), 0))
        assert part(r).error_code == 3
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, __import__("uuid").UUID(int=5), 1))
        assert part(r).error_code == 100
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 0, partitions=(3,)))
        assert part(r, 3).error_code == 3
        await c.close()
    finally:
        await b.stop()


async def test_uninitialized_state_and_failed_writes(tmp_path):
    b = await started(tmp_path)
    try:
        topic = b.create_topic("t", 1, {})  # the group never initialized its state
        c = await WireClient.connect(b.port)
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, topic.topic_id, 0))
        assert part(r).error_code == -1  # INVALID_REQUEST from Read -> UNKNOWN_SERVER_ERROR, as Kafka maps it
        await b.share_persister.initialize(SharePartitionKey("g", topic.topic_id, 0), 0, -1)
        await produce(c, "t", 2)
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, topic.topic_id, 0))
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, topic.topic_id, 1))
        assert acquired(r) == []  # latest: the two records came before the partition loaded
        await produce(c, "t", 2)
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, topic.topic_id, 2))
        assert acquired(r) == [(2, 3, 1)]
        b.share_persister.fail_writes_with = 124
        r = await c.call(SHARE_ACK, 1, ack_body(1, topic.topic_id, 3, {0: [(2, 3, [1])]}))
        assert part(r).error_code == 6  # FENCED_STATE_EPOCH -> NOT_LEADER_OR_FOLLOWER, with the leader
        assert part(r).current_leader.leader_id == b.node_id
        assert [n.node_id for n in r.node_endpoints] == [b.node_id]
        assert b.share_partitions.partition("g", topic.topic_id, 0) is None  # fenced: dropped from the cache
        b.share_persister.fail_writes_with = 0
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, topic.topic_id, 4))
        assert (r.error_code, acquired(r)) == (0, [])
        # loaded again; no write ever succeeded, so the start offset is still unset and `latest` applies
        # anew (as in Kafka, where a reset start offset is persisted by the first state write)
        assert b.share_partitions.partition("g", topic.topic_id, 0).start_offset == 4
        await c.close()
    finally:
        await b.stop()


async def test_max_records_0_only_acknowledges_and_answers_at_once(tmp_path):
    b = await started(tmp_path)
    try:
        tid = (await topic_with_state(b)).topic_id
        c = await WireClient.connect(b.port)
        await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 0))
        await produce(c, "t", 4)
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 1))
        assert acquired(r) == [(0, 3, 1)]
        await produce(c, "t", 4)
        # what librdkafka sends when it only has acknowledgements: MaxRecords 0, its usual MaxWaitMs
        r = await c.call(
            SHARE_FETCH, 1, fetch_body(1, tid, 2, acks={0: [(0, 3, [1])]}, max_records=0, max_wait=5000), timeout=2
        )
        assert (r.error_code, part(r).acknowledge_error_code, acquired(r)) == (0, 0, [])
        await c.close()
    finally:
        await b.stop()


@pytest.mark.parametrize(
    ("real", "acks", "expected"),
    [
        # the in-memory persister; the stop closed m1's connection, which released 2-3 (persisted AVAILABLE,
        # count 1), so their next delivery is the second
        (False, [(0, 1, [1]), (4, 5, [1])], [(2, 3, 2)]),
        # the share coordinator's __share_group_state: 2-3 rejected, 4-5 released by the disconnect
        (True, [(0, 1, [1]), (2, 3, [3])], [(4, 5, 2)]),
    ],
)
async def test_restart_keeps_acknowledged_state(tmp_path, real, acks, expected):
    """Nothing acknowledged comes back after a restart, nothing unacknowledged is lost."""
    persister = None if real else FakePersister()
    b = await started(tmp_path, persister, real=real)
    try:
        tid = (await topic_with_state(b, start_offset=0)).topic_id
        c = await WireClient.connect(b.port)
        await produce(c, "t", 6, per_batch=2)
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 0))
        assert acquired(r) == [(0, 5, 1)]
        r = await c.call(SHARE_ACK, 1, ack_body(1, tid, 1, {0: acks}))
        assert part(r).error_code == 0
        await c.close()
    finally:
        await b.stop()
    b = await started(tmp_path, persister, real=real)
    try:
        c = await WireClient.connect(b.port)
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 0, member="m2"))
        assert acquired(r) == expected
        await c.close()
    finally:
        await b.stop()


@pytest.mark.parametrize(
    ("reset", "expected"),
    [("earliest", [(0, 2, 1)]), ("by_duration:PT1H", [(0, 2, 1)]), ("by_duration:P1D", [(0, 2, 1)])],
)
async def test_share_auto_offset_reset(tmp_path, reset, expected):
    from groupd.coordinator.share.config import ShareGroupConfig

    b = await started(tmp_path)
    b.share_partitions.config_for = lambda g: ShareGroupConfig(auto_offset_reset=reset)
    try:
        topic = b.create_topic("t", 1, {})
        c = await WireClient.connect(b.port)
        cls = codec.request_class(0, 9)
        from groupd.clock import wall_ms

        batch = build_batch([(None, b"a"), (None, b"b"), (None, b"c")], timestamp_ms=wall_ms() - 60_000)
        t = codec.nested(cls, "TopicProduceData")
        p = codec.nested(cls, "PartitionProduceData")
        await c.call(
            0,
            9,
            codec.make(
                cls,
                transactional_id=None,
                acks=-1,
                timeout=5000,
                topic_data=(t(name="t", partition_data=(p(index=0, records=bytes(batch)),)),),
            ),
        )
        await b.share_persister.initialize(SharePartitionKey("g", topic.topic_id, 0), 0, -1)
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, topic.topic_id, 0))
        assert acquired(r) == expected
        await c.close()
    finally:
        await b.stop()


async def test_by_duration_with_no_record_that_recent_is_offset_not_available(tmp_path):
    from groupd.coordinator.share.config import ShareGroupConfig

    b = await started(tmp_path)
    b.share_partitions.config_for = lambda g: ShareGroupConfig(auto_offset_reset="by_duration:PT1S")
    try:
        topic = await topic_with_state(b)
        c = await WireClient.connect(b.port)
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, topic.topic_id, 0))
        assert part(r).error_code == 78  # OFFSET_NOT_AVAILABLE: Kafka's look-up by timestamp found nothing
        from groupd.clock import wall_ms

        await produce(c, "t", 2, timestamp_ms=wall_ms())
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, topic.topic_id, 1))
        assert (part(r).error_code, acquired(r)) == (0, [(0, 1, 1)])
        await c.close()
    finally:
        await b.stop()


async def test_a_deleted_topic_leaves_the_share_partitions(tmp_path):
    b = await started(tmp_path)
    try:
        tid = (await topic_with_state(b)).topic_id
        c = await WireClient.connect(b.port)
        await produce(c, "t", 2)
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 0))
        assert b.share_partitions.partition("g", tid, 0) is not None
        b.delete_topic("t")
        assert b.share_partitions.partition("g", tid, 0) is None
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 1))
        assert part(r).error_code == 3  # known when it joined the session: gone from the metadata now
        await c.close()
    finally:
        await b.stop()


async def test_a_long_poll_on_a_topic_deleted_under_it_answers_unknown_topic_at_once(tmp_path):
    """Kafka drops a deleted topic's share-partitions and completes the share fetches waiting on them
    (SharePartitionManager's listener: removeSharePartitionFromCache, then completeDelayedShareFetchRequest);
    the partition, gone from the metadata, is UNKNOWN_TOPIC_OR_PARTITION (ReplicaManager's
    getPartitionOrException), never the share coordinator's answer for the state it has just deleted."""
    b = await started(tmp_path, real=True)
    try:
        tid = (await topic_with_state(b)).topic_id
        c = await WireClient.connect(b.port)
        await produce(c, "t", 2)
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 0))
        assert acquired(r) == []  # latest: the session is open, the share-partition loaded
        started_at = asyncio.get_running_loop().time()
        poll = asyncio.ensure_future(c.call(SHARE_FETCH, 1, fetch_body(1, tid, 1, max_wait=5000)))
        await asyncio.sleep(0.3)
        b.delete_topic("t")
        r = await asyncio.wait_for(poll, 10)
        assert (r.error_code, part(r).error_code) == (0, 3)
        assert asyncio.get_running_loop().time() - started_at < 2  # woken by the deletion, not by MaxWaitMs
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 2))
        assert part(r).error_code == 3
        await c.close()
    finally:
        await b.stop()


async def test_share_version_0_answers_unsupported_version(tmp_path):
    b = await started(tmp_path, **{"share.version": "0"})
    try:
        tid = (await topic_with_state(b)).topic_id
        c = await WireClient.connect(b.port)
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 0))
        assert (r.error_code, r.responses) == (35, ())
        r = await c.call(SHARE_ACK, 1, ack_body(1, tid, 1, {0: [(0, 0, [1])]}))
        assert r.error_code == 35
        await c.close()
    finally:
        await b.stop()


async def test_share_session_limit_answers_after_max_wait(tmp_path):
    b = await started(tmp_path)
    b.share_partitions.sessions.max_sessions = 1
    try:
        tid = (await topic_with_state(b)).topic_id
        c = await WireClient.connect(b.port)
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 0, member="A"))
        assert r.error_code == 0
        started_at = asyncio.get_running_loop().time()
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 0, member="B", max_wait=300))
        assert r.error_code == 133  # SHARE_SESSION_LIMIT_REACHED, after MaxWaitMs (Kafka's idle timer)
        assert asyncio.get_running_loop().time() - started_at >= 0.25
        await c.close()
    finally:
        await b.stop()


@pytest.mark.parametrize(
    ("isolation", "expected"),
    [
        # read_committed: the aborted batch (0-1) is archived, never delivered; the markers' offsets come
        # within the acquired ranges, as Kafka acquires whole batches (clients acknowledge them as gaps)
        ("read_committed", [(2, 4, 1)]),
        ("read_uncommitted", [(0, 4, 1)]),
    ],
)
async def test_isolation_level_read_committed_archives_aborted_records(tmp_path, isolation, expected):
    from groupd.coordinator.share.config import ShareGroupConfig
    from tests.wire.test_transactions import begin, end_body, txn_batch
    from tests.wire.test_transactions import produce as produce_one

    b = await started(tmp_path)
    b.share_partitions.config_for = lambda g: ShareGroupConfig(isolation_level=isolation)
    try:
        tid = (await topic_with_state(b, start_offset=0)).topic_id
        c = await WireClient.connect(b.port)
        pid, epoch = await begin(c, "tx1", {"t": [0]})
        assert await produce_one(c, "t", 0, txn_batch(pid, epoch, 0, [b"a1", b"a2"])) == (0, 0)
        assert (await c.call(26, 3, end_body("tx1", pid, epoch, False))).error_code == 0  # ABORT marker at 2
        await produce(c, "t", 2)  # 3-4
        r = await c.call(SHARE_FETCH, 1, fetch_body(1, tid, 0))
        assert acquired(r) == expected
        if isolation == "read_committed":
            sp = b.share_partitions.partition("g", tid, 0)
            assert [sp.record_state(o)[0] for o in (0, 1)] == [4, 4]  # ARCHIVED
        await c.close()
    finally:
        await b.stop()
