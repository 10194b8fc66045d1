"""Errored answers carry empty values where Kafka puts empty ones, never null (issue 26, item 9).

Kafka answers a Fetch partition that failed in the log read (out of range, unknown partition, a newer
leader epoch) with ``MemoryRecords.EMPTY``: a records field of length 0. librdkafka refuses a null one
("invalid MessageSetSize -1"), so it never saw the error, never applied ``auto.offset.reset`` and
refetched at once, tens of thousands of times a second. Kafka's CreateTopics answer for a topic that
could not be created leaves ``Configs`` at its generated default, an empty array."""

import uuid

import pytest

from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch
from tests.wire.test_data_plane import produce_body

FETCH_VERSIONS = [4, 8, 11, 12, 13, 16, 18]  # legacy and compact records, topic names and topic ids


def fetch(version, topic_id, name, offset, current_epoch=-1):
    cls = codec.request_class(1, version)
    t_cls, p_cls = codec.nested(cls, "FetchTopic"), codec.nested(cls, "FetchPartition")
    part = codec.make(
        p_cls,
        partition=0,
        current_leader_epoch=current_epoch,
        fetch_offset=offset,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1 << 20,
    )
    return codec.make(
        cls,
        replica_id=-1,
        max_wait=3000,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(codec.make(t_cls, topic=name, topic_id=topic_id, partitions=(part,)),),
        forgotten_topics_data=(),
        rack_id="",
    )


async def _errored_partition(broker, wire, version, **kw):
    topic = broker.create_topic("e", 1, {})
    await wire.call(0, 9, produce_body("e", 0, build_batch([(None, b"v")], timestamp_ms=1)))
    args = {"topic_id": topic.topic_id, "name": "e", "offset": 0} | kw
    resp = await wire.call(1, version, fetch(version, **args))
    return resp.responses[0].partitions[0]


@pytest.mark.parametrize("version", FETCH_VERSIONS)
async def test_fetch_out_of_range_answers_empty_records(broker, wire, version):
    p = await _errored_partition(broker, wire, version, offset=99)
    assert p.error_code == ErrorCode.offset_out_of_range
    assert p.records == b"", "empty records, as Kafka's MemoryRecords.EMPTY, not null"


@pytest.mark.parametrize("version", FETCH_VERSIONS)
async def test_fetch_unknown_partition_answers_empty_records(broker, wire, version):
    p = await _errored_partition(broker, wire, version, name="missing", topic_id=uuid.uuid4())
    assert p.error_code == (ErrorCode.unknown_topic_id if version >= 13 else ErrorCode.unknown_topic_or_partition)
    assert p.records == b""


@pytest.mark.parametrize("version", [v for v in FETCH_VERSIONS if v >= 9])  # KIP-320: the fetcher's leader epoch
async def test_fetch_newer_leader_epoch_answers_empty_records(broker, wire, version):
    p = await _errored_partition(broker, wire, version, current_epoch=7)
    assert p.error_code == ErrorCode.unknown_leader_epoch
    assert p.records == b""


@pytest.mark.parametrize("version", [5, 7])  # Configs is in the answer from v5
async def test_create_topics_error_answers_empty_configs(broker, wire, version):
    broker.create_topic("exists", 1, {})
    cls = codec.request_class(19, version)
    topic = codec.make(
        codec.nested(cls, "CreatableTopic"),
        name="exists",
        num_partitions=1,
        replication_factor=1,
        assignments=(),
        configs=(),
    )
    resp = await wire.call(19, version, codec.make(cls, topics=(topic,), timeout=5000, validate_only=False))
    result = resp.topics[0]
    assert result.error_code == ErrorCode.topic_already_exists
    assert result.configs == (), "Kafka leaves Configs at its default, an empty array"
