"""Produce, Fetch and ListOffsets through a real socket: bytes kept, long polls woken, limits honoured."""

import asyncio
import time
import uuid

import pytest

from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch
from tests.harness import WireClient

# the storage-touching wire tests run on both engines (tests/conftest.py)
pytestmark = pytest.mark.engines


def produce_body(topic, partition, records, acks=-1, version=9, topic_id=None):
    cls = codec.request_class(0, version)
    t = codec.nested(cls, "TopicProduceData")
    p = codec.nested(cls, "PartitionProduceData")
    named = {"topic_id": topic_id} if version >= 13 else {"name": topic}
    return codec.make(
        cls,
        transactional_id=None,
        acks=acks,
        timeout=5000,
        topic_data=(t(**named, partition_data=(p(index=partition, records=records),)),),
    )


def fetch_body(topic, partition, offset, max_wait=0, min_bytes=1, max_bytes=1 << 20, partition_max=1 << 20, version=11):
    cls = codec.request_class(1, version)
    t = codec.nested(cls, "FetchTopic")
    p = codec.nested(cls, "FetchPartition")
    return codec.make(
        cls,
        replica_id=-1,
        max_wait=max_wait,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            t(
                topic=topic,
                partitions=(
                    p(
                        partition=partition,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=partition_max,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def list_offsets_body(topic, partition, timestamp, version=7, partitions=None):
    cls = codec.request_class(2, version)
    t = codec.nested(cls, "ListOffsetsTopic")
    p = codec.nested(cls, "ListOffsetsPartition")
    parts = tuple(
        p(partition_index=i, current_leader_epoch=-1, timestamp=timestamp) for i in (partitions or [partition])
    )
    extra = {"timeout": 1000} if version >= 10 else {}
    return codec.make(cls, replica_id=-1, isolation_level=0, topics=(t(name=topic, partitions=parts),), **extra)


def part(resp):
    return (
        resp.responses[0].partition_responses[0]
        if hasattr(resp.responses[0], "partition_responses")
        else resp.responses[0].partitions[0]
    )


async def test_produce_then_fetch_returns_the_same_bytes(broker, wire):
    broker.create_topic("d", 1, {})
    batch = build_batch([(b"k1", b"v1"), (b"k2", b"v2")], timestamp_ms=1000)
    resp = await wire.call(0, 9, produce_body("d", 0, batch))
    assert part(resp).error_code == 0 and part(resp).base_offset == 0
    resp = await wire.call(0, 9, produce_body("d", 0, batch))
    assert part(resp).base_offset == 2
    fetched = await wire.call(1, 11, fetch_body("d", 0, 2))
    p = fetched.responses[0].partitions[0]
    assert p.error_code == 0 and p.high_watermark == 4
    stored = bytearray(batch)
    stored[0:8] = (2).to_bytes(8, "big")  # only the base offset differs: it is outside the CRC
    assert bytes(p.records) == bytes(stored)


@pytest.mark.parametrize("produce_v, fetch_v", [(11, 16), (12, 17), (13, 18)])
async def test_produce_and_fetch_newest_versions(broker, wire, produce_v, fetch_v):
    """Produce v12 is v11 again (KIP-890's transactions V2 are not offered); v13 names topics by id
    (KIP-516), and its answer carries the id. Fetch v17 and v18 add replica-only tagged fields."""
    topic = broker.create_topic("nv", 2, {})
    batch = build_batch([(b"k", b"v")], timestamp_ms=1000)
    resp = await wire.call(0, produce_v, produce_body("nv", 1, batch, version=produce_v, topic_id=topic.topic_id))
    (entry,) = resp.responses
    assert (entry.topic_id if produce_v >= 13 else entry.name) == (topic.topic_id if produce_v >= 13 else "nv")
    assert [(p.index, p.error_code, p.base_offset) for p in entry.partition_responses] == [(1, 0, 0)]
    cls = codec.request_class(1, fetch_v)
    t, p = codec.nested(cls, "FetchTopic"), codec.nested(cls, "FetchPartition")
    fetched = await wire.call(
        1,
        fetch_v,
        codec.make(
            cls,
            replica_id=-1,
            max_wait=0,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=(
                t(
                    topic_id=topic.topic_id,
                    partitions=(
                        p(
                            partition=1,
                            current_leader_epoch=-1,
                            fetch_offset=0,
                            log_start_offset=-1,
                            partition_max_bytes=1 << 20,
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            rack_id="",
        ),
    )
    (fp,) = fetched.responses[0].partitions
    assert fp.error_code == 0 and fp.high_watermark == 1 and bytes(fp.records)[8:] == bytes(batch)[8:]


async def test_produce_v13_unknown_topic_id_and_partition(broker, wire):
    """Kafka answers an id it does not know UNKNOWN_TOPIC_ID, and a known topic's missing partition
    UNKNOWN_TOPIC_OR_PARTITION."""
    topic = broker.create_topic("ids", 1, {})
    batch = build_batch([(None, b"v")], timestamp_ms=1)
    stranger = uuid.uuid4()
    resp = await wire.call(0, 13, produce_body("", 0, batch, version=13, topic_id=stranger))
    (entry,) = resp.responses
    assert entry.topic_id == stranger and [p.error_code for p in entry.partition_responses] == [100]
    resp = await wire.call(0, 13, produce_body("", 5, batch, version=13, topic_id=topic.topic_id))
    assert [p.error_code for p in resp.responses[0].partition_responses] == [3]
    assert broker.partitions.get("ids", 0).log_end_offset == 0


async def test_long_poll_wakes_on_produce(broker):
    broker.create_topic("lp", 1, {})
    fetcher, producer = await WireClient.connect(broker.port), await WireClient.connect(broker.port)
    started = time.monotonic()
    fetcher.send(1, 11, fetch_body("lp", 0, 0, max_wait=5000))
    await asyncio.sleep(0.2)
    await producer.call(0, 9, produce_body("lp", 0, build_batch([(None, b"x")], timestamp_ms=1)))
    resp = await asyncio.wait_for(fetcher.recv(), 5)
    waited = time.monotonic() - started
    assert resp.responses[0].partitions[0].records, "woken with the new data"
    assert waited < 2.0, f"returned after {waited:.2f}s: not woken by the produce"
    await fetcher.close()
    await producer.close()


async def test_long_poll_times_out_empty(broker, wire):
    broker.create_topic("empty", 1, {})
    started = time.monotonic()
    resp = await wire.call(1, 11, fetch_body("empty", 0, 0, max_wait=300))
    assert 0.25 <= time.monotonic() - started < 3
    assert not resp.responses[0].partitions[0].records


async def test_limits_out_of_range_and_unknown(broker, wire):
    broker.create_topic("lim", 1, {"max.message.bytes": "200"})
    for _ in range(5):
        await wire.call(0, 9, produce_body("lim", 0, build_batch([(None, b"y" * 50)], timestamp_ms=1)))
    one = await wire.call(1, 11, fetch_body("lim", 0, 0, partition_max=10))
    records = one.responses[0].partitions[0].records
    assert records and len(records) < 200, "at least one whole batch, even past the limit"
    bigger = await wire.call(1, 11, fetch_body("lim", 0, 0, partition_max=1 << 20))
    assert len(bigger.responses[0].partitions[0].records) == 5 * len(records)
    oor = await wire.call(1, 11, fetch_body("lim", 0, 99))
    assert oor.responses[0].partitions[0].error_code == ErrorCode.offset_out_of_range
    too_big = await wire.call(0, 9, produce_body("lim", 0, build_batch([(None, b"z" * 500)], timestamp_ms=1)))
    assert part(too_big).error_code == ErrorCode.message_too_large
    unknown = await wire.call(0, 9, produce_body("nope", 0, build_batch([(None, b"z")], timestamp_ms=1)))
    assert part(unknown).error_code == ErrorCode.unknown_topic_or_partition


async def test_corrupt_and_old_magic_refused(broker, wire):
    broker.create_topic("bad", 1, {})
    batch = bytearray(build_batch([(None, b"v")], timestamp_ms=1))
    batch[-1] ^= 0xFF
    resp = await wire.call(0, 9, produce_body("bad", 0, bytes(batch)))
    assert part(resp).error_code == ErrorCode.corrupt_message
    old = bytearray(build_batch([(None, b"v")], timestamp_ms=1))
    old[16] = 1
    resp = await wire.call(0, 9, produce_body("bad", 0, bytes(old)))
    assert part(resp).error_code == ErrorCode.unsupported_for_message_format
    assert broker.partitions.get("bad", 0).log_end_offset == 0


@pytest.mark.parametrize(
    ("version", "error"),
    [(3, ErrorCode.unsupported_compression_type), (6, ErrorCode.unsupported_compression_type), (7, ErrorCode.none)],
)
async def test_a_zstd_batch_needs_produce_v7(broker, wire, version, error):
    """Kafka's ProduceRequest.validateRecords: a zstd batch in Produce v3-6 is UNSUPPORTED_COMPRESSION_TYPE."""
    from groupd.storage.message_sets import compressed_batch

    broker.create_topic("z", 1, {})
    resp = await wire.call(
        0,
        version,
        produce_body("z", 0, compressed_batch(build_batch([(None, b"v")], timestamp_ms=1), 4), version=version),
    )
    assert part(resp).error_code == error
    assert broker.partitions.get("z", 0).log_end_offset == (1 if error == ErrorCode.none else 0)


async def test_acks_zero_gets_no_response_and_the_next_request_is_answered(broker, wire):
    broker.create_topic("a0", 1, {})
    wire.send(0, 9, produce_body("a0", 0, build_batch([(None, b"v")], timestamp_ms=1), acks=0))
    wire._pending.pop()  # no response will come for it
    resp = await wire.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert resp.error_code == 0
    assert broker.partitions.get("a0", 0).log_end_offset == 1


@pytest.mark.parametrize(
    "timestamp, expected", [(-2, (0, -1)), (-1, (3, -1)), (-3, (2, 300)), (150, (1, 200)), (999, (-1, -1))]
)
async def test_list_offsets(broker, wire, timestamp, expected):
    broker.create_topic("lo", 1, {})
    for ts in (100, 200, 300):
        await wire.call(0, 9, produce_body("lo", 0, build_batch([(None, b"v")], timestamp_ms=ts)))
    resp = await wire.call(2, 7, list_offsets_body("lo", 0, timestamp))
    p = resp.topics[0].partitions[0]
    assert (p.offset, p.timestamp) == expected


# Kafka's UnifiedLog.fetchOffsetByTimestamp for a topic without remote storage: -4 (earliest local) is
# the log start offset, -5 (latest tiered, KIP-1005) and -6 (earliest pending upload, KIP-1023) find no
# offset (-1, leader epoch -1). ReplicaManager answers UNSUPPORTED_VERSION for a negative timestamp that
# is no sentinel or that needs a later version (-3 from v7, -4 from v8, -5 from v9, -6 from v11), before
# looking at the partition; a partition named twice is answered once, INVALID_REQUEST.
@pytest.mark.parametrize(
    "version, timestamp, expected",
    [
        (8, -4, (0, 0, -1, 0)),
        (11, -4, (0, 0, -1, 0)),
        (9, -5, (0, -1, -1, -1)),
        (11, -5, (0, -1, -1, -1)),
        (11, -6, (0, -1, -1, -1)),
        (10, -1, (0, 3, -1, 0)),
        (11, -2, (0, 0, -1, 0)),
        (11, -3, (0, 2, 300, 0)),
        (11, 150, (0, 1, 200, 0)),
        (11, 999, (0, -1, -1, -1)),
        (6, -3, (35, -1, -1, -1)),
        (7, -4, (35, -1, -1, -1)),
        (8, -5, (35, -1, -1, -1)),
        (10, -6, (35, -1, -1, -1)),
        (11, -7, (35, -1, -1, -1)),
        (11, -100, (35, -1, -1, -1)),
    ],
)
async def test_list_offsets_sentinels_by_version(broker, wire, version, timestamp, expected):
    broker.create_topic("ls", 1, {})
    for ts in (100, 200, 300):
        await wire.call(0, 9, produce_body("ls", 0, build_batch([(None, b"v")], timestamp_ms=ts)))
    resp = await wire.call(2, version, list_offsets_body("ls", 0, timestamp, version))
    p = resp.topics[0].partitions[0]
    assert (p.error_code, p.offset, p.timestamp, p.leader_epoch) == expected


async def test_list_offsets_unsupported_sentinel_comes_before_an_unknown_partition(wire):
    resp = await wire.call(2, 8, list_offsets_body("nowhere", 0, -5, 8))
    assert resp.topics[0].partitions[0].error_code == 35
    resp = await wire.call(2, 9, list_offsets_body("nowhere", 0, -5, 9))
    assert resp.topics[0].partitions[0].error_code == 3


async def test_list_offsets_a_partition_named_twice_is_an_invalid_request(broker, wire):
    broker.create_topic("twice", 2, {})
    resp = await wire.call(2, 11, list_offsets_body("twice", 0, -1, 11, partitions=[0, 1, 0]))
    got = [(p.partition_index, p.error_code) for t in resp.topics for p in t.partitions]
    assert sorted(got) == [(0, 42), (1, 0)]  # one answer per partition, as Kafka's map of them gives


async def test_data_survives_restart(tmp_path):
    from groupd.broker.app import Broker
    from tests.conftest import broker_config

    b = Broker(broker_config(tmp_path))
    await b.start()
    b.create_topic("keep", 2, {})
    c = await WireClient.connect(b.port)
    await c.call(0, 9, produce_body("keep", 1, build_batch([(b"a", b"b")], timestamp_ms=5)))
    await c.close()
    await b.stop()
    b2 = Broker(broker_config(tmp_path))
    await b2.start()
    c2 = await WireClient.connect(b2.port)
    resp = await c2.call(1, 11, fetch_body("keep", 1, 0))
    assert resp.responses[0].partitions[0].high_watermark == 1
    await c2.close()
    await b2.stop()
