"""``__consumer_offsets`` as a topic: listed once it exists, readable, not writable.

Kafka lists its offsets topic in Metadata (internal) once it has been created, which happens at the
first group coordinator lookup; consumers that do not exclude internal topics see it, and tools read
it with Fetch and ListOffsets. Clients may not produce to it: INVALID_TOPIC_EXCEPTION."""

from __future__ import annotations

import uuid

import pytest

from groupd.coordinator.records import OffsetCommitKey, decode_key
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch, iter_records, split_batches
from tests.harness import WireClient
from tests.wire.test_data_plane import fetch_body, list_offsets_body, produce_body
from tests.wire.test_groups import commit_body, start_broker

# the storage-touching wire tests run on both engines (tests/conftest.py)
pytestmark = pytest.mark.engines

OFFSETS = "__consumer_offsets"


async def _all_topics(c, version=12):
    resp = await c.call(
        3, version, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    )
    return {t.name: t for t in resp.topics}


async def test_listed_once_a_group_used_it_then_read_but_not_written(tmp_path):
    b = await start_broker(tmp_path, **{"offsets.topic.num.partitions": "3"})
    try:
        b.create_topic("t", 1, {})
        c = await WireClient.connect(b.port)
        assert OFFSETS not in await _all_topics(c)  # no group yet: Kafka has not created it either
        found = await c.call(10, 4, {"key_type": 0, "coordinator_keys": ("cg",)})
        assert found.coordinators[0].error_code == 0
        topics = await _all_topics(c)
        entry = topics[OFFSETS]
        assert entry.is_internal and entry.error_code == 0 and len(entry.partitions) == 3
        assert not topics["t"].is_internal
        resp = await c.call(8, 8, commit_body("cg", "t", 0, 42, "m"))
        assert resp.topics[0].partitions[0].error_code == 0
        partition = b.coordinator.partition_for("cg")
        # ListOffsets and Fetch read the offsets partition as Kafka's own records
        latest = await c.call(2, 7, list_offsets_body(OFFSETS, partition, -1))
        end = latest.topics[0].partitions[0].offset
        assert latest.topics[0].partitions[0].error_code == 0 and end >= 1
        fetched = await c.call(1, 11, fetch_body(OFFSETS, partition, 0))
        fp = fetched.responses[0].partitions[0]
        assert fp.error_code == 0 and fp.high_watermark == end
        keys = [decode_key(r.key) for batch in split_batches(fp.records) for r in iter_records(batch)]
        assert OffsetCommitKey("cg", "t", 0) in keys
        # by topic id too (Fetch v13+), the id Metadata gave
        by_id = await c.call(1, 13, _fetch_by_id(entry.topic_id, partition))
        assert by_id.responses[0].partitions[0].high_watermark == end
        # clients may not write to it
        refused = await c.call(0, 9, produce_body(OFFSETS, partition, build_batch([(b"k", b"v")], timestamp_ms=1)))
        assert refused.responses[0].partition_responses[0].error_code == ErrorCode.invalid_topic_exception
        # named by its id (Produce v13), the same refusal, not UNKNOWN_TOPIC_ID
        by_id_produce = await c.call(
            0,
            13,
            produce_body(
                None, partition, build_batch([(b"k", b"v")], timestamp_ms=1), version=13, topic_id=entry.topic_id
            ),
        )
        assert by_id_produce.responses[0].partition_responses[0].error_code == ErrorCode.invalid_topic_exception
        assert (await c.call(2, 7, list_offsets_body(OFFSETS, partition, -1))).topics[0].partitions[0].offset == end
        topic_id = entry.topic_id
        await c.close()
    finally:
        await b.stop()
    b2 = await start_broker(tmp_path, **{"offsets.topic.num.partitions": "3"})
    try:
        c = await WireClient.connect(b2.port)
        again = (await _all_topics(c))[OFFSETS]  # it has records: listed from the start, with the same id
        assert again.topic_id == topic_id and topic_id != uuid.UUID(int=0)
        await c.close()
    finally:
        await b2.stop()


async def test_a_long_poll_on_it_wakes_on_a_commit(tmp_path):
    import asyncio
    import time

    b = await start_broker(tmp_path, **{"offsets.topic.num.partitions": "1"})
    try:
        b.create_topic("t", 1, {})
        fetcher, committer = await WireClient.connect(b.port), await WireClient.connect(b.port)
        await committer.call(8, 8, commit_body("cg", "t", 0, 1, ""))
        end = (await committer.call(2, 7, list_offsets_body(OFFSETS, 0, -1))).topics[0].partitions[0].offset
        started = time.monotonic()
        fetcher.send(1, 11, fetch_body(OFFSETS, 0, end, max_wait=5000))
        await asyncio.sleep(0.2)
        await committer.call(8, 8, commit_body("cg", "t", 0, 2, ""))
        resp = await asyncio.wait_for(fetcher.recv(), 5)
        assert resp.responses[0].partitions[0].records and time.monotonic() - started < 4
        await fetcher.close()
        await committer.close()
    finally:
        await b.stop()


def _fetch_by_id(topic_id, partition):
    cls = codec.request_class(1, 13)
    t, p = codec.nested(cls, "FetchTopic"), codec.nested(cls, "FetchPartition")
    return codec.make(
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
                topic_id=topic_id,
                partitions=(
                    p(
                        partition=partition,
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
    )


async def test_no_data_topic_may_take_its_name_and_its_configs_are_kafkas(tmp_path):
    """Its partitions' directories are the offsets store's: CreateTopics answers that it exists (and
    that a name differing only by '.' for '_' collides), whatever a group has done yet. Described,
    it has the configs Kafka creates it with."""
    b = await start_broker(tmp_path, **{"offsets.topic.num.partitions": "2"})
    try:
        c = await WireClient.connect(b.port)
        cls = codec.request_class(19, 5)
        topic_cls = codec.nested(cls, "CreatableTopic")
        made = await c.call(
            19,
            5,
            codec.make(
                cls,
                timeout=5000,
                validate_only=False,
                topics=tuple(
                    topic_cls(name=n, num_partitions=1, replication_factor=1, assignments=(), configs=())
                    for n in (OFFSETS, "__consumer.offsets")
                ),
            ),
        )
        assert [(t.name, t.error_code) for t in made.topics] == [
            (OFFSETS, ErrorCode.topic_already_exists),
            ("__consumer.offsets", ErrorCode.invalid_topic_exception),
        ]
        assert b.topics.get(OFFSETS) is None
        await c.call(10, 4, {"key_type": 0, "coordinator_keys": ("cg",)})
        req = codec.request_class(32, 4)
        described = await c.call(
            32,
            4,
            {
                "resources": (
                    codec.nested(req, "DescribeConfigsResource")(
                        resource_type=2, resource_name=OFFSETS, configuration_keys=None
                    ),
                ),
                "include_synonyms": False,
                "include_documentation": False,
            },
        )
        # the other listings of topics have it too, as Kafka's do
        dtp = await c.call(75, 0, {"topics": (), "response_partition_limit": 2000, "cursor": None})
        assert [(t.name, t.is_internal, len(t.partitions)) for t in dtp.topics] == [(OFFSETS, True, 2)]
        lcr = await c.call(74, 1, {"resource_types": (2,)})
        assert [r.resource_name for r in lcr.config_resources] == [OFFSETS]
        result = described.results[0]
        own = {e.name: e.value for e in result.configs if e.config_source == 1}
        assert result.error_code == 0
        assert own == {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(b.config["offsets.topic.segment.bytes"]),
        }
        await c.close()
    finally:
        await b.stop()
