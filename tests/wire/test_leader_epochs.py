"""Leader epochs through a real socket (KIP-101, KIP-320): OffsetForLeaderEpoch, the epoch stamped on
produced batches, and the current-leader-epoch checks of Fetch and ListOffsets.

One node, never re-elected: every partition's leader epoch is 0 for its whole life, so Kafka's leader
epoch cache would hold the single entry (0, log start offset). The facts below are Kafka's answers
from that cache (LeaderEpochFileCache.endOffsetFor, Partition.checkCurrentLeaderEpoch,
Partition.readRecords, ReplicaManager.lastOffsetForLeaderEpoch)."""

from __future__ import annotations

import asyncio
import struct
import time

import pytest

from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch, iter_batches, parse_header
from tests.harness import WireClient
from tests.wire.test_data_plane import produce_body
from tests.wire.test_groups import commit_body, start_broker

# the storage-touching wire tests run on both engines (tests/conftest.py)
pytestmark = pytest.mark.engines

FENCED, UNKNOWN_EPOCH, UNKNOWN_TP = (
    ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch,
    ErrorCode.unknown_topic_or_partition,
)


def ofle_body(topics, version=4, replica_id=-1):
    """``topics``: [(name, [(partition, current_leader_epoch, leader_epoch), ...]), ...]"""
    cls = codec.request_class(23, version)
    t_cls, p_cls = codec.nested(cls, "OffsetForLeaderTopic"), codec.nested(cls, "OffsetForLeaderPartition")
    return codec.make(
        cls,
        replica_id=replica_id,
        topics=tuple(
            codec.make(
                t_cls,
                topic=name,
                partitions=tuple(
                    codec.make(p_cls, partition=p, current_leader_epoch=cur, leader_epoch=epoch)
                    for p, cur, epoch in parts
                ),
            )
            for name, parts in topics
        ),
    )


def answers(resp):
    return [
        (t.topic, p.partition, p.error_code, p.leader_epoch, p.end_offset) for t in resp.topics for p in t.partitions
    ]


def producer_batch(n, epoch=-1):
    """A batch as a producer sends it: partitionLeaderEpoch -1 (outside the CRC, so still valid)."""
    buf = bytearray(build_batch([(None, b"v%d" % i) for i in range(n)], timestamp_ms=1000 + n))
    struct.pack_into(">i", buf, 12, epoch)
    return bytes(buf)


async def produce(wire, topic, partition, n):
    resp = await wire.call(0, 9, produce_body(topic, partition, producer_batch(n)))
    assert resp.responses[0].partition_responses[0].error_code == 0


def fetch_request(topic, partition, offset, version=12, current=-1, last_fetched=-1, max_wait=0, topic_id=None):
    cls = codec.request_class(1, version)
    t_cls, p_cls = codec.nested(cls, "FetchTopic"), codec.nested(cls, "FetchPartition")
    part = codec.make(
        p_cls,
        partition=partition,
        current_leader_epoch=current,
        fetch_offset=offset,
        last_fetched_epoch=last_fetched,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    return codec.make(
        cls,
        replica_id=-1,
        max_wait=max_wait,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(codec.make(t_cls, topic=topic, topic_id=topic_id, partitions=(part,)),),
        forgotten_topics_data=(),
        rack_id="",
    )


def list_offsets_request(topic, partition, timestamp, current, version=7):
    cls = codec.request_class(2, version)
    t_cls, p_cls = codec.nested(cls, "ListOffsetsTopic"), codec.nested(cls, "ListOffsetsPartition")
    part = codec.make(p_cls, partition_index=partition, current_leader_epoch=current, timestamp=timestamp)
    return codec.make(
        cls, replica_id=-1, isolation_level=0, timeout=1000, topics=(codec.make(t_cls, name=topic, partitions=(part,)),)
    )


# ------------------------------------------------------------------ OffsetForLeaderEpoch


@pytest.mark.parametrize("version", [2, 3, 4])
async def test_epoch_zero_ends_at_the_log_end_offset(broker, wire, version):
    """The latest epoch's end offset is the leader's log end offset (Kafka's endOffsetFor returns the
    LEO for it, so a consumer's truncation check compares with the log end), an empty partition's 0."""
    broker.create_topic("e", 2, {})
    await produce(wire, "e", 0, 3)
    await produce(wire, "e", 0, 2)
    resp = await wire.call(23, version, ofle_body([("e", [(0, -1, 0), (1, -1, 0)])], version=version))
    assert codec.millis(resp.throttle_time) == 0
    assert answers(resp) == [("e", 0, 0, 0, 5), ("e", 1, 0, 0, 0)]


async def test_epochs_other_than_zero(broker, wire):
    """Newer than the leader's (1, 5) or UNDEFINED_EPOCH (-1): no error, epoch and offset undefined,
    which a consumer takes as truncation with no known diverging offset (it resets). Older than the
    first epoch (-2): the first epoch's start offset, under the asked number; that start follows the
    log start offset up."""
    broker.create_topic("e", 1, {})
    await produce(wire, "e", 0, 4)
    broker.partitions.get("e", 0).delete_records_before(2)
    resp = await wire.call(23, 4, ofle_body([("e", [(0, -1, 1), (0, -1, 5), (0, -1, -1), (0, -1, -2), (0, 0, 0)])]))
    assert answers(resp) == [
        ("e", 0, 0, -1, -1),
        ("e", 0, 0, -1, -1),
        ("e", 0, 0, -1, -1),
        ("e", 0, 0, -2, 2),
        ("e", 0, 0, 0, 4),
    ]


async def test_current_leader_epoch_is_checked_first(broker, wire):
    """-1 means no check; the leader's own epoch passes; a newer one is UNKNOWN_LEADER_EPOCH, an older
    one (any other negative) FENCED_LEADER_EPOCH, with no epoch or offset."""
    broker.create_topic("c", 1, {})
    await produce(wire, "c", 0, 1)
    resp = await wire.call(23, 4, ofle_body([("c", [(0, -1, 0), (0, 0, 0), (0, 1, 0), (0, 3, 0), (0, -2, 0)])]))
    assert answers(resp) == [
        ("c", 0, 0, 0, 1),
        ("c", 0, 0, 0, 1),
        ("c", 0, UNKNOWN_EPOCH, -1, -1),
        ("c", 0, UNKNOWN_EPOCH, -1, -1),
        ("c", 0, FENCED, -1, -1),
    ]


async def test_unknown_topic_or_partition_and_no_auto_creation(broker, wire):
    broker.create_topic("k", 1, {})
    resp = await wire.call(
        23,
        4,
        ofle_body([("k", [(0, -1, 0), (1, -1, 0), (-1, -1, 0)]), ("nope", [(0, 1, 0)]), ("bad/name", [(0, -1, 0)])]),
    )
    # the partition comes before the epoch check: an unknown one is unknown whatever epoch is given
    assert answers(resp) == [
        ("k", 0, 0, 0, 0),
        ("k", 1, UNKNOWN_TP, -1, -1),
        ("k", -1, UNKNOWN_TP, -1, -1),
        ("nope", 0, UNKNOWN_TP, -1, -1),
        ("bad/name", 0, UNKNOWN_TP, -1, -1),
    ]
    assert broker.topics.get("nope") is None, "OffsetForLeaderEpoch does not create topics (Metadata does)"


@pytest.mark.parametrize("replica_id", [-1, -2, 1, 7])
async def test_the_replica_id_does_not_change_the_answer(broker, wire, replica_id):
    """Consumer (-1), debug (-2) or a broker id: Kafka asks the leader's log for everyone (the id only
    chooses the ACL it checks, and groupd has no authorizer)."""
    broker.create_topic("r", 1, {})
    await produce(wire, "r", 0, 2)
    resp = await wire.call(23, 4, ofle_body([("r", [(0, -1, 0), (0, -1, 1)])], replica_id=replica_id))
    assert answers(resp) == [("r", 0, 0, 0, 2), ("r", 0, 0, -1, -1)]


async def test_no_topics_no_answers(wire):
    resp = await wire.call(23, 4, ofle_body([]))
    assert resp.topics == () and codec.millis(resp.throttle_time) == 0


async def test_a_topic_named_twice_is_answered_twice_in_order(broker, wire):
    """Kafka's request and response topic collections keep repeated names: one result per entry."""
    broker.create_topic("a", 2, {})
    resp = await wire.call(23, 4, ofle_body([("a", [(1, -1, 0)]), ("a", [(0, -1, 0)])]))
    assert [(t.topic, [p.partition for p in t.partitions]) for t in resp.topics] == [("a", [1]), ("a", [0])]


async def test_offsets_topic_answers_once_it_exists(tmp_path):
    """__consumer_offsets is answered like any partition (its log end), once a group lookup created it."""
    b = await start_broker(tmp_path, **{"offsets.topic.num.partitions": "3"})
    c = await WireClient.connect(b.port)
    try:
        b.create_topic("t", 1, {})
        partition = b.coordinator.partition_for("cg")
        before = await c.call(23, 4, ofle_body([("__consumer_offsets", [(partition, -1, 0)])]))
        assert answers(before) == [("__consumer_offsets", partition, UNKNOWN_TP, -1, -1)]
        assert (await c.call(10, 4, {"key_type": 0, "coordinator_keys": ("cg",)})).coordinators[0].error_code == 0
        assert (await c.call(8, 8, commit_body("cg", "t", 0, 42, "m"))).topics[0].partitions[0].error_code == 0
        end = b.readable_log("__consumer_offsets", partition).log_end_offset
        assert end >= 1
        resp = await c.call(23, 4, ofle_body([("__consumer_offsets", [(partition, 0, 0), (partition, -1, 1)])]))
        assert answers(resp) == [
            ("__consumer_offsets", partition, 0, 0, end),
            ("__consumer_offsets", partition, 0, -1, -1),
        ]
        # the offsets store's own batches carry epoch 0 too (built so, at no cost)
        epochs = {h.partition_leader_epoch for h, _ in b.readable_log("__consumer_offsets", partition).batches()}
        assert epochs == {0}
    finally:
        await c.close()
        await b.stop()


async def test_advertised_versions_reach_down_to_kafka_39s(broker, wire):
    """Kafka 4 serves 2-4 only, Kafka 3.9 0-4; groupd serves both generations (issue 32)."""
    resp = await wire.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    (entry,) = [k for k in resp.api_keys if k.api_key == 23]
    assert (entry.min_version, entry.max_version) == (0, 4)


# ------------------------------------------------------------------ the epoch on appended batches


async def test_produced_batches_are_stamped_with_the_leader_epoch(broker, wire):
    """Producers send partitionLeaderEpoch -1; the leader overwrites it with its epoch on append (the
    field is outside the CRC), and fetchers read it back: the epoch their positions then carry."""
    broker.create_topic("s", 1, {})
    sent = producer_batch(3)
    assert parse_header(sent).partition_leader_epoch == -1
    await produce(wire, "s", 0, 3)
    await wire.call(0, 9, produce_body("s", 0, producer_batch(2, epoch=17)))  # whatever a producer puts there
    fetched = (await wire.call(1, 12, fetch_request("s", 0, 0))).responses[0].partitions[0]
    data = bytes(fetched.records)
    headers = [h for _, h in iter_batches(data)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 0), (3, 0)]
    first = bytes(data[: headers[0].size])
    assert first[16:] == sent[16:] and first[8:12] == sent[8:12], "only base offset and leader epoch are rewritten"
    assert {h.partition_leader_epoch for h, _ in broker.partitions.get("s", 0).batches()} == {0}  # on disk too


# ------------------------------------------------------------------ Fetch


@pytest.mark.parametrize("current, expected", [(-1, 0), (-7, 0), (0, 0), (1, UNKNOWN_EPOCH), (9, UNKNOWN_EPOCH)])
async def test_fetch_checks_the_current_leader_epoch(broker, wire, current, expected):
    """Fetch (v9+) takes every negative epoch as absent, so only a newer epoch fails: UNKNOWN_LEADER_EPOCH,
    no data, no offsets, and no long poll."""
    broker.create_topic("f", 1, {})
    await produce(wire, "f", 0, 2)
    started = time.monotonic()
    resp = await wire.call(1, 12, fetch_request("f", 0, 2, current=current, max_wait=3000 if expected else 0))
    p = resp.responses[0].partitions[0]
    assert p.error_code == expected
    if expected:
        assert time.monotonic() - started < 2.0
        assert (p.high_watermark, p.last_stable_offset, p.log_start_offset) == (-1, -1, -1) and not p.records
    else:
        assert p.high_watermark == 2


@pytest.mark.parametrize("version", [9, 11, 16, 18])
async def test_fetch_unknown_epoch_across_versions_leaves_current_leader_unset(broker, wire, version):
    """Kafka fills CurrentLeader (v16+) only for NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH, which a
    fetcher can never get here (negative epochs are not checked, and none is older than 0)."""
    topic = broker.create_topic("fv", 1, {})
    await produce(wire, "fv", 0, 1)
    resp = await wire.call(1, version, fetch_request("fv", 0, 0, version=version, current=4, topic_id=topic.topic_id))
    p = resp.responses[0].partitions[0]
    assert p.error_code == UNKNOWN_EPOCH
    if version >= 12:
        assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (-1, -1)
    if version >= 16:
        assert resp.node_endpoints == ()
    ok = await wire.call(1, version, fetch_request("fv", 0, 0, version=version, current=0, topic_id=topic.topic_id))
    assert ok.responses[0].partitions[0].error_code == 0 and ok.responses[0].partitions[0].records


async def test_fetch_v8_has_no_epoch_to_check(broker, wire):
    broker.create_topic("old", 1, {})
    await produce(wire, "old", 0, 1)
    resp = await wire.call(1, 8, fetch_request("old", 0, 0, version=8))
    assert resp.responses[0].partitions[0].error_code == 0 and resp.responses[0].partitions[0].records


async def test_fetch_past_the_end_of_the_last_fetched_epoch_diverges(broker, wire):
    """A fetcher naming the epoch of the last batch it read (v12+) at an offset past that epoch's end
    gets no error and no data but the diverging epoch and its end offset, at once; a consumer then
    validates its position and truncates there. Without an epoch, the same offset is out of range."""
    broker.create_topic("d", 1, {})
    await produce(wire, "d", 0, 3)
    started = time.monotonic()
    resp = await wire.call(1, 12, fetch_request("d", 0, 10, last_fetched=0, max_wait=3000))
    p = resp.responses[0].partitions[0]
    assert time.monotonic() - started < 2.0, "a diverging answer does not wait for data"
    assert p.error_code == 0 and not p.records and p.high_watermark == 3
    assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (0, 3)
    plain = (await wire.call(1, 12, fetch_request("d", 0, 10))).responses[0].partitions[0]
    assert plain.error_code == ErrorCode.offset_out_of_range
    assert (plain.diverging_epoch.epoch, plain.diverging_epoch.end_offset) == (-1, -1)


async def test_fetch_within_the_last_fetched_epoch_reads_as_usual(broker, wire):
    broker.create_topic("w", 1, {})
    await produce(wire, "w", 0, 3)
    p = (await wire.call(1, 12, fetch_request("w", 0, 1, last_fetched=0))).responses[0].partitions[0]
    assert p.error_code == 0 and p.records and p.diverging_epoch.end_offset == -1
    # at the log end: nothing yet, no divergence, and the fetch long-polls until data comes
    waiter = await WireClient.connect(broker.port)
    waiter.send(1, 12, fetch_request("w", 0, 3, last_fetched=0, max_wait=5000))
    await asyncio.sleep(0.2)
    await produce(wire, "w", 0, 1)
    woken = (await asyncio.wait_for(waiter.recv(), 5)).responses[0].partitions[0]
    assert woken.error_code == 0 and woken.records and woken.diverging_epoch.end_offset == -1
    await waiter.close()


async def test_fetch_with_an_unknown_last_fetched_epoch_or_below_the_start_is_out_of_range(broker, wire):
    broker.create_topic("o", 1, {})
    await produce(wire, "o", 0, 4)
    p = (await wire.call(1, 12, fetch_request("o", 0, 1, last_fetched=2))).responses[0].partitions[0]
    assert p.error_code == ErrorCode.offset_out_of_range, "epoch 2 has no end offset"
    broker.partitions.get("o", 0).delete_records_before(3)
    p = (await wire.call(1, 12, fetch_request("o", 0, 1, last_fetched=0))).responses[0].partitions[0]
    assert p.error_code == ErrorCode.offset_out_of_range
    # the current-epoch check comes first
    p = (await wire.call(1, 12, fetch_request("o", 0, 1, current=1, last_fetched=2))).responses[0].partitions[0]
    assert p.error_code == UNKNOWN_EPOCH


# ------------------------------------------------------------------ ListOffsets


@pytest.mark.parametrize("current, expected", [(-1, 0), (0, 0), (1, UNKNOWN_EPOCH), (-2, FENCED)])
async def test_list_offsets_checks_the_current_leader_epoch(broker, wire, current, expected):
    """ListOffsets v4+: only -1 means no check (Kafka compares any other value)."""
    broker.create_topic("l", 1, {})
    await produce(wire, "l", 0, 2)
    p = (await wire.call(2, 7, list_offsets_request("l", 0, -1, current))).topics[0].partitions[0]
    assert p.error_code == expected
    if expected:
        assert (p.offset, p.timestamp, p.leader_epoch) == (-1, -1, -1)
    else:
        assert (p.offset, p.leader_epoch) == (2, 0)


async def test_list_offsets_check_order(broker, wire):
    """Kafka: an unsupported sentinel first, then the partition, then the epoch."""
    broker.create_topic("lo", 1, {})
    unsupported = (await wire.call(2, 6, list_offsets_request("lo", 0, -3, 5, version=6))).topics[0].partitions[0]
    assert unsupported.error_code == ErrorCode.unsupported_version
    unknown = (await wire.call(2, 7, list_offsets_request("lo", 3, -1, 5))).topics[0].partitions[0]
    assert unknown.error_code == UNKNOWN_TP
    v3 = await wire.call(2, 3, list_offsets_request("lo", 0, -1, 5, version=3))  # no epoch field before v4
    assert v3.topics[0].partitions[0].error_code == 0
