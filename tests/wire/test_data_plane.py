"""Produce, Fetch and ListOffsets through a real socket: bytes kept, long polls woken, limits honoured."""

import asyncio
import time

import pytest

from protocol import codec
from protocol.errors import ErrorCode
from storage.batch import build_batch
from tests.harness import WireClient


def produce_body(topic, partition, records, acks=-1, version=9):
    cls = codec.request_class(0, version)
    t = codec.nested(cls, "TopicProduceData")
    p = codec.nested(cls, "PartitionProduceData")
    return codec.make(cls, transactional_id=None, acks=acks, timeout=5000, topic_data=(t(name=topic, partition_data=(p(index=partition, records=records),)),))


def fetch_body(topic, partition, offset, max_wait=0, min_bytes=1, max_bytes=1 << 20, partition_max=1 << 20, version=11):
    cls = codec.request_class(1, version)
    t = codec.nested(cls, "FetchTopic")
    p = codec.nested(cls, "FetchPartition")
    return codec.make(
        cls, replica_id=-1, max_wait=max_wait, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=0, session_id=0,
        session_epoch=-1, topics=(t(topic=topic, partitions=(p(partition=partition, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1, partition_max_bytes=partition_max),)),),
        forgotten_topics_data=(), rack_id="",
    )


def list_offsets_body(topic, partition, timestamp, version=7):
    cls = codec.request_class(2, version)
    t = codec.nested(cls, "ListOffsetsTopic")
    p = codec.nested(cls, "ListOffsetsPartition")
    return codec.make(cls, replica_id=-1, isolation_level=0, topics=(t(name=topic, partitions=(p(partition_index=partition, current_leader_epoch=-1, timestamp=timestamp),)),))


def part(resp):
    return resp.responses[0].partition_responses[0] if hasattr(resp.responses[0], "partition_responses") else resp.responses[0].partitions[0]


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


async def test_acks_zero_gets_no_response_and_the_next_request_is_answered(broker, wire):
    broker.create_topic("a0", 1, {})
    wire.send(0, 9, produce_body("a0", 0, build_batch([(None, b"v")], timestamp_ms=1), acks=0))
    wire._pending.pop()  # no response will come for it
    resp = await wire.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert resp.error_code == 0
    assert broker.partitions.get("a0", 0).log_end_offset == 1


@pytest.mark.parametrize("timestamp, expected", [(-2, (0, -1)), (-1, (3, -1)), (-3, (2, 300)), (150, (1, 200)), (999, (-1, -1))])
async def test_list_offsets(broker, wire, timestamp, expected):
    broker.create_topic("lo", 1, {})
    for ts in (100, 200, 300):
        await wire.call(0, 9, produce_body("lo", 0, build_batch([(None, b"v")], timestamp_ms=ts)))
    resp = await wire.call(2, 7, list_offsets_body("lo", 0, timestamp))
    p = resp.topics[0].partitions[0]
    assert (p.offset, p.timestamp) == expected


async def test_data_survives_restart(tmp_path):
    from broker.app import Broker
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
