"""The request versions Kafka 3.9 accepted and Kafka 4 removed (KIP-896), one raw-protocol test each.

Kafka 3.9 facts (apache/kafka branch 3.9: message JSON, KafkaApis, UnifiedLog, Partition):
- ApiVersions advertises every API from v0 (tests/unit/test_old_versions_table.py holds the ranges).
- OffsetCommit v1 carries each partition's commit timestamp (-1: the broker's now) and a generation and
  member; v0 and OffsetFetch v0 are ZooKeeper's, which a KRaft 3.9 broker refuses with
  UNSUPPORTED_VERSION on every partition asked (``requireZkOrThrow``), after UNKNOWN_TOPIC_OR_PARTITION
  for a request naming only unknown partitions.
- ListOffsets v0 answers ``old_style_offsets``: LATEST -> [log end offset] (and segment bases after it
  when more are asked), EARLIEST -> [log start offset]; a timestamp below -2 is UNSUPPORTED_VERSION.
- OffsetForLeaderEpoch v0-1 carry no current leader epoch; v0's answer no leader epoch.
- CreateTopics v0-1, DeleteTopics v0, DescribeConfigs v0, the ACL APIs v0 and the log-dir APIs v0 are
  their successors without the later fields.
- Metadata v1+ names a controller: in KRaft a live broker, here this node.
"""

import pytest

from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch
from tests.harness import WireClient
from tests.legacy_sets import XxhashShim, legacy_set, read_legacy
from tests.wire.test_groups import wait_loaded

UNSUPPORTED_VERSION = ErrorCode.unsupported_version  # 35


@pytest.fixture
async def b(broker):
    await wait_loaded(broker)
    broker.create_topic("t", 2, {})
    return broker


def _req(api_key, version, **values):
    return codec.make(codec.request_class(api_key, version), **values)


def _nested(api_key, version, entity, **values):
    return codec.make(codec.nested(codec.request_class(api_key, version), entity), **values)


async def _produce(wire, topic, partition, n):
    body = _req(
        0,
        3,
        transactional_id=None,
        acks=-1,
        timeout=5000,
        topic_data=(
            _nested(
                0,
                3,
                "TopicProduceData",
                name=topic,
                partition_data=(
                    _nested(
                        0,
                        3,
                        "PartitionProduceData",
                        index=partition,
                        records=bytes(build_batch([(b"k", b"v")] * n, timestamp_ms=1000)),
                    ),
                ),
            ),
        ),
    )
    resp = await wire.call(0, 3, body)
    assert resp.responses[0].partition_responses[0].error_code == 0


async def test_api_versions_advertises_39_floors(b, wire):
    resp = await wire.call(18, 0, {})
    floors = {k.api_key: k.min_version for k in resp.api_keys}
    for key in (0, 1, 2, 8, 9, 19, 20, 23, 29, 30, 31, 32, 34, 35):
        assert floors[key] == 0, key


def commit_body(version, group, topic, parts, generation=-1, member=""):
    t = _nested(
        8,
        version,
        "OffsetCommitRequestTopic",
        name=topic,
        partitions=tuple(
            _nested(
                8,
                version,
                "OffsetCommitRequestPartition",
                partition_index=i,
                committed_offset=off,
                commit_timestamp=ts,
                committed_metadata="m",
                committed_leader_epoch=-1,
            )
            for i, off, ts in parts
        ),
    )
    return _req(8, version, group_id=group, generation_id_or_member_epoch=generation, member_id=member, topics=(t,))


def fetch_body(version, group, topic, partitions):
    t = _nested(9, version, "OffsetFetchRequestTopic", name=topic, partition_indexes=tuple(partitions))
    return _req(9, version, group_id=group, topics=(t,), require_stable=False)


def _partitions(resp):
    return [(t.name, p.partition_index, p.error_code) for t in resp.topics for p in t.partitions]


async def test_offset_commit_v1_commits_with_its_timestamps_and_fetch_v1_reads_them(b, wire):
    resp = await wire.call(8, 1, commit_body(1, "g1", "t", [(0, 42, -1), (1, 7, 1_600_000_000_000)]))
    assert _partitions(resp) == [("t", 0, 0), ("t", 1, 0)]
    fetched = await wire.call(9, 1, fetch_body(1, "g1", "t", [0, 1]))
    assert [
        (p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in fetched.topics[0].partitions
    ] == [(0, 42, "m", 0), (1, 7, "m", 0)]
    offsets = b.coordinator.shard_for("g1").state.offsets.of("g1")
    stamps = {i: v.commit_timestamp for i, v in offsets["t"].items()}
    assert stamps[1] == 1_600_000_000_000  # v1's own timestamp kept
    assert stamps[0] > 1_700_000_000_000  # -1: the broker's now


async def test_offset_commit_v1_of_a_member_checks_its_generation(b, wire):
    resp = await wire.call(8, 1, commit_body(1, "nogroup", "t", [(0, 1, -1)], generation=3, member="m-1"))
    assert _partitions(resp) == [("t", 0, ErrorCode.illegal_generation)]


async def test_offset_commit_v0_is_refused_as_kraft_39_refuses_it(b, wire):
    resp = await wire.call(8, 0, commit_body(0, "g0", "t", [(0, 5, -1), (9, 5, -1)]))
    assert _partitions(resp) == [("t", 0, UNSUPPORTED_VERSION), ("t", 9, UNSUPPORTED_VERSION)]
    resp = await wire.call(8, 0, commit_body(0, "g0", "nope", [(0, 5, -1)]))
    assert _partitions(resp) == [("nope", 0, ErrorCode.unknown_topic_or_partition)]


async def test_offset_fetch_v0_is_refused_as_kraft_39_refuses_it(b, wire):
    resp = await wire.call(9, 0, fetch_body(0, "g0", "t", [0, 1]))
    assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in resp.topics[0].partitions] == [
        (0, -1, "", UNSUPPORTED_VERSION),
        (1, -1, "", UNSUPPORTED_VERSION),
    ]


def list_offsets_v0(topic, parts, replica_id=-1):
    t = _nested(
        2,
        0,
        "ListOffsetsTopic",
        name=topic,
        partitions=tuple(
            _nested(2, 0, "ListOffsetsPartition", partition_index=i, timestamp=ts, max_num_offsets=n)
            for i, ts, n in parts
        ),
    )
    return _req(2, 0, replica_id=replica_id, topics=(t,))


async def test_list_offsets_v0_answers_the_old_offsets_array(b, wire):
    await _produce(wire, "t", 0, 5)
    resp = await wire.call(2, 0, list_offsets_v0("t", [(0, -1, 1), (1, -1, 1)]))
    got = {p.partition_index: (p.error_code, tuple(p.old_style_offsets)) for p in resp.topics[0].partitions}
    assert got == {0: (0, (5,)), 1: (0, (0,))}  # partition 1 is empty: only its segment base
    resp = await wire.call(2, 0, list_offsets_v0("t", [(0, -2, 1)]))
    assert tuple(resp.topics[0].partitions[0].old_style_offsets) == (0,)
    resp = await wire.call(2, 0, list_offsets_v0("t", [(0, -1, 10)]))
    assert tuple(resp.topics[0].partitions[0].old_style_offsets) == (5, 0)  # newest first, down to the segment base


async def test_list_offsets_v0_errors(b, wire):
    resp = await wire.call(2, 0, list_offsets_v0("t", [(0, -3, 1)]))
    assert resp.topics[0].partitions[0].error_code == UNSUPPORTED_VERSION
    resp = await wire.call(2, 0, list_offsets_v0("nope", [(0, -1, 1)]))
    assert resp.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition


async def test_list_offsets_v0_by_time(b, wire):
    await _produce(wire, "t", 0, 3)
    resp = await wire.call(2, 0, list_offsets_v0("t", [(0, 1, 5)]))  # before every segment was modified
    assert tuple(resp.topics[0].partitions[0].old_style_offsets) == ()
    resp = await wire.call(2, 0, list_offsets_v0("t", [(0, 4_000_000_000_000, 5)]))
    assert tuple(resp.topics[0].partitions[0].old_style_offsets) == (3, 0)


async def test_metadata_v0_and_v1_name_this_node_as_controller(b, wire):
    resp = await wire.call(3, 0, _req(3, 0, topics=()))
    assert {t.name for t in resp.topics} >= {"t"} and resp.brokers[0].node_id == b.node_id
    resp = await wire.call(3, 1, _req(3, 1, topics=None))
    assert resp.controller_id == b.node_id != -1


async def test_find_coordinator_v0(b, wire):
    resp = await wire.call(10, 0, _req(10, 0, key="g"))
    assert resp.error_code == 0 and resp.node_id == b.node_id and resp.port == b.port


async def test_classic_group_at_v0_versions_then_v1_commit(b):
    """JoinGroup v0 (rebalance timeout = session timeout), SyncGroup v0, Heartbeat v0, OffsetCommit v1
    with the generation, LeaveGroup v0: a whole group life at the versions Sarama's defaults use."""
    wire = await WireClient.connect(b.port)
    try:
        protocol = _nested(11, 0, "JoinGroupRequestProtocol", name="range", metadata=b"\x00\x00")
        join = await wire.call(
            11,
            0,
            _req(
                11,
                0,
                group_id="old",
                session_timeout=10000,
                member_id="",
                protocol_type="consumer",
                protocols=(protocol,),
            ),
        )
        assert join.error_code == 0 and join.generation_id == 1 and join.leader == join.member_id
        member = join.member_id
        assignment = _nested(14, 0, "SyncGroupRequestAssignment", member_id=member, assignment=b"\x00\x01")
        sync = await wire.call(
            14, 0, _req(14, 0, group_id="old", generation_id=1, member_id=member, assignments=(assignment,))
        )
        assert sync.error_code == 0 and bytes(sync.assignment) == b"\x00\x01"
        hb = await wire.call(12, 0, _req(12, 0, group_id="old", generation_id=1, member_id=member))
        assert hb.error_code == 0
        resp = await wire.call(8, 1, commit_body(1, "old", "t", [(0, 11, -1)], generation=1, member=member))
        assert _partitions(resp) == [("t", 0, 0)]
        leave = await wire.call(13, 0, _req(13, 0, group_id="old", member_id=member))
        assert leave.error_code == 0
        fetched = await wire.call(9, 1, fetch_body(1, "old", "t", [0]))
        assert fetched.topics[0].partitions[0].committed_offset == 11
    finally:
        await wire.close()


async def test_offset_for_leader_epoch_v0_v1(b, wire):
    await _produce(wire, "t", 0, 4)
    for version in (0, 1):
        t = _nested(
            23,
            version,
            "OffsetForLeaderTopic",
            topic="t",
            partitions=(_nested(23, version, "OffsetForLeaderPartition", partition=0, leader_epoch=0),),
        )
        resp = await wire.call(23, version, _req(23, version, topics=(t,)))
        p = resp.topics[0].partitions[0]
        assert p.error_code == 0 and p.end_offset == 4
        assert hasattr(p, "leader_epoch") == (version == 1)


async def test_create_and_delete_topics_v0_v1(b, wire):
    for version, name in ((0, "c0"), (1, "c1")):
        topic = _nested(
            19, version, "CreatableTopic", name=name, num_partitions=3, replication_factor=1, assignments=(), configs=()
        )
        resp = await wire.call(19, version, _req(19, version, topics=(topic,), timeout=5000, validate_only=False))
        assert [(t.name, t.error_code) for t in resp.topics] == [(name, 0)]
        assert b.topics.get(name).partitions == 3
    resp = await wire.call(20, 0, _req(20, 0, topic_names=("c0", "c1"), timeout=5000))
    assert sorted((r.name, r.error_code) for r in resp.responses) == [("c0", 0), ("c1", 0)]


async def test_describe_configs_v0(b, wire):
    res = _nested(
        32, 0, "DescribeConfigsResource", resource_type=2, resource_name="t", configuration_keys=("cleanup.policy",)
    )
    resp = await wire.call(32, 0, _req(32, 0, resources=(res,)))
    r = resp.results[0]
    assert r.error_code == 0 and [(c.name, c.value) for c in r.configs] == [("cleanup.policy", "delete")]


async def test_acl_apis_v0(b, wire):
    resp = await wire.call(
        29,
        0,
        _req(
            29,
            0,
            resource_type_filter=1,
            resource_name_filter=None,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        ),
    )
    assert resp.error_code in (0, ErrorCode.security_disabled)
    creation = _nested(
        30,
        0,
        "AclCreation",
        resource_type=2,
        resource_name="t",
        principal="User:a",
        host="*",
        operation=3,
        permission_type=3,
    )
    resp = await wire.call(30, 0, _req(30, 0, creations=(creation,)))
    assert len(resp.results) == 1
    f = _nested(
        31,
        0,
        "DeleteAclsFilter",
        resource_type_filter=2,
        resource_name_filter="t",
        principal_filter=None,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    resp = await wire.call(31, 0, _req(31, 0, filters=(f,)))
    assert len(resp.filter_results) == 1


async def test_log_dir_apis_v0(b, wire):
    resp = await wire.call(35, 0, _req(35, 0, topics=None))
    assert resp.results and resp.results[0].error_code == 0
    d = _nested(
        34,
        0,
        "AlterReplicaLogDir",
        path="/nowhere",
        topics=(_nested(34, 0, "AlterReplicaLogDirTopic", name="t", partitions=(0,)),),
    )
    resp = await wire.call(34, 0, _req(34, 0, dirs=(d,)))
    assert resp.results[0].partitions[0].error_code != 0  # not a log dir of this broker


def produce_old(version, topic, records, acks=-1):
    p = _nested(0, version, "PartitionProduceData", index=0, records=records)
    return _req(
        0,
        version,
        acks=acks,
        timeout=5000,
        topic_data=(_nested(0, version, "TopicProduceData", name=topic, partition_data=(p,)),),
    )


def fetch_old(version, topic, offset):
    p = _nested(
        1,
        version,
        "FetchPartition",
        partition=0,
        fetch_offset=offset,
        partition_max_bytes=1 << 20,
        current_leader_epoch=-1,
        log_start_offset=-1,
    )
    return _req(
        1,
        version,
        replica_id=-1,
        max_wait=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(_nested(1, version, "FetchTopic", topic=topic, partitions=(p,)),),
        forgotten_topics_data=(),
        rack_id="",
    )


ROWS = [(b"a", b"1", 1_700_000_000_000), (b"b", b"2", 1_700_000_000_001)]


@pytest.fixture(autouse=True)
def _kafka_python_xxhash(monkeypatch):
    import kafka.codec

    monkeypatch.setattr(kafka.codec, "xxhash", XxhashShim())


NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4


@pytest.mark.parametrize(
    ("version", "magic", "codec"),
    [
        (0, 0, NONE),
        (1, 0, GZIP),
        (2, 1, NONE),
        (2, 1, GZIP),
        (0, 0, SNAPPY),
        (1, 0, LZ4),
        (2, 1, SNAPPY),
        (2, 1, LZ4),
    ],
)
async def test_produce_v0_to_v2_message_sets_are_stored_as_v2_batches(b, wire, version, magic, codec):
    resp = await wire.call(0, version, produce_old(version, "t", legacy_set(magic, codec, ROWS)))
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == 0 and p.base_offset == 0
    resp = await wire.call(0, version, produce_old(version, "t", legacy_set(magic, codec, ROWS)))
    assert resp.responses[0].partition_responses[0].base_offset == 2
    from groupd.storage.batch import iter_batches, iter_records

    fetched = await wire.call(1, 12, fetch_old(12, "t", 0))
    data = bytes(fetched.responses[0].partitions[0].records)
    batches = list(iter_batches(data))
    assert [h.compression for _, h in batches] == [codec, codec]
    records = [r for pos, h in batches for r in iter_records(memoryview(data)[pos : pos + h.size], h)]
    stamp = (lambda ts: ts) if magic else (lambda ts: -1)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (i, k, v, stamp(ts)) for i, (k, v, ts) in enumerate(ROWS * 2)
    ]
    assert b.metrics._up_converted == 4


async def _stored(wire, topic):
    """(codec, records) of every batch of partition 0, read by Fetch v12 (no conversion)."""
    from groupd.storage.batch import iter_batches, iter_records

    fetched = await wire.call(1, 12, fetch_old(12, topic, 0))
    data = bytes(fetched.responses[0].partitions[0].records)
    return [
        (h.compression, [(r.key, r.value) for r in iter_records(memoryview(data)[pos : pos + h.size], h)])
        for pos, h in iter_batches(data)
    ]


async def test_produce_v2_of_a_set_into_a_compressed_topic_is_stored_with_the_topics_codec(b, wire):
    b.create_topic("g", 1, {"compression.type": "gzip"})
    b.create_topic("u", 1, {"compression.type": "uncompressed"})
    assert (await wire.call(0, 2, produce_old(2, "g", legacy_set(1, SNAPPY, ROWS)))).responses[0].partition_responses[
        0
    ].error_code == 0
    assert (await wire.call(0, 2, produce_old(2, "u", legacy_set(1, LZ4, ROWS)))).responses[0].partition_responses[
        0
    ].error_code == 0
    rows = [(k, v) for k, v, _ in ROWS]
    assert await _stored(wire, "g") == [(GZIP, rows)]
    assert await _stored(wire, "u") == [(NONE, rows)]


async def test_produce_v2_of_two_compressed_wrappers_is_invalid_record(b, wire):
    resp = await wire.call(0, 2, produce_old(2, "t", legacy_set(1, SNAPPY, ROWS) + legacy_set(1, LZ4, ROWS)))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.invalid_record


def _v2(codec, rows, base=0):
    from groupd.storage import message_sets

    batch = build_batch(
        [(k, v) for k, v, _ in rows], timestamp_ms=rows[0][2], timestamps=[t for *_, t in rows], base_offset=base
    )
    return batch if codec == NONE else message_sets.compressed_batch(batch, codec)


async def _produce_v3(wire, topic, records):
    body = _req(
        0,
        7,
        transactional_id=None,
        acks=-1,
        timeout=5000,
        topic_data=(
            _nested(
                0,
                7,
                "TopicProduceData",
                name=topic,
                partition_data=(_nested(0, 7, "PartitionProduceData", index=0, records=records),),
            ),
        ),
    )
    assert (await wire.call(0, 7, body)).responses[0].partition_responses[0].error_code == 0


@pytest.mark.parametrize(("version", "magic"), [(0, 0), (1, 0), (2, 1), (3, 1)])
@pytest.mark.parametrize("codec", [SNAPPY, LZ4])
async def test_fetch_v0_to_v3_down_converts_a_compressed_batch_to_one_wrapper_of_its_codec(
    b, wire, version, magic, codec
):
    from groupd.storage import message_sets

    await _produce_v3(wire, "t", _v2(codec, ROWS))
    p = (await wire.call(1, version, fetch_old(version, "t", 1))).responses[0].partitions[0]
    assert p.error_code == 0 and p.high_watermark == 2
    wrappers = list(message_sets.read_messages(bytes(p.records)))
    assert [(w.offset, w.magic, w.codec) for w in wrappers] == [(1, magic, codec)]
    got = read_legacy(p.records)  # kafka-python reads the wrapper; a compressed batch keeps all its records
    assert [(o, k, v) for o, _, k, v in got] == [(0, b"a", b"1"), (1, b"b", b"2")]
    assert [t for _, t, _, _ in got] == ([ts for *_, ts in ROWS] if magic else [None, None])


def _refused(p, error):
    """Kafka's FetchResponse.partitionResponse(tp, error): no records, high watermark -1."""
    assert (p.error_code, p.high_watermark, bytes(p.records or b"")) == (error, -1, b"")
    assert getattr(p, "last_stable_offset", -1) == -1 and getattr(p, "log_start_offset", -1) == -1  # v4+, v5+


@pytest.mark.parametrize("version", [0, 3, 4, 9])
async def test_a_zstd_topic_is_refused_below_fetch_v10_whatever_its_batches_hold(b, wire, version):
    b.create_topic("z", 1, {"compression.type": "zstd"})
    await _produce_v3(wire, "z", _v2(NONE, ROWS))
    _refused(
        (await wire.call(1, version, fetch_old(version, "z", 0))).responses[0].partitions[0],
        ErrorCode.unsupported_compression_type,
    )
    p = (await wire.call(1, 10, fetch_old(10, "z", 0))).responses[0].partitions[0]
    assert p.error_code == 0 and p.high_watermark == 2


async def test_a_stored_zstd_batch_refuses_a_v0_to_v3_fetch_where_it_comes_first(b, wire):
    await _produce_v3(wire, "t", _v2(GZIP, ROWS))
    await _produce_v3(wire, "t", _v2(ZSTD, ROWS))
    p = (await wire.call(1, 3, fetch_old(3, "t", 0))).responses[0].partitions[0]
    assert p.error_code == 0 and [o for o, *_ in read_legacy(p.records)] == [0, 1]  # up to the zstd batch
    _refused(
        (await wire.call(1, 3, fetch_old(3, "t", 2))).responses[0].partitions[0], ErrorCode.unsupported_compression_type
    )
    p = (await wire.call(1, 12, fetch_old(12, "t", 2))).responses[0].partitions[0]
    assert p.error_code == 0 and len(bytes(p.records)) > 0


async def test_message_downconversion_enable_false_refuses_fetch_v0_to_v3_only(b, wire):
    from tests.wire.test_admin_apis import _described

    b.create_topic("off", 1, {"message.downconversion.enable": "false"})
    await _produce_v3(wire, "off", _v2(NONE, ROWS))
    for version in (0, 3):
        _refused(
            (await wire.call(1, version, fetch_old(version, "off", 0))).responses[0].partitions[0], UNSUPPORTED_VERSION
        )
    assert (await wire.call(1, 4, fetch_old(4, "off", 0))).responses[0].partitions[0].error_code == 0
    assert (await _described(wire, "t"))["message.downconversion.enable"].value == "true"  # Kafka 3.9's default


async def test_the_brokers_log_message_downconversion_enable_is_every_topics_default(tmp_path):
    from groupd.broker.app import Broker
    from tests.conftest import broker_config

    broker = Broker(broker_config(tmp_path, **{"log.message.downconversion.enable": "false"}))
    await broker.start()
    try:
        await wait_loaded(broker)
        broker.create_topic("t", 1, {})
        broker.create_topic("on", 1, {"message.downconversion.enable": "true"})
        wire = await WireClient.connect(broker.port)
        try:
            _refused((await wire.call(1, 2, fetch_old(2, "t", 0))).responses[0].partitions[0], UNSUPPORTED_VERSION)
            assert (await wire.call(1, 2, fetch_old(2, "on", 0))).responses[0].partitions[0].error_code == 0
        finally:
            await wire.close()
    finally:
        await broker.stop()


@pytest.mark.parametrize(("version", "magic"), [(0, 0), (1, 0), (2, 1), (3, 1)])
async def test_fetch_v0_to_v3_down_converts_to_message_sets(b, wire, version, magic):
    await _produce(wire, "t", 0, 3)
    resp = await wire.call(1, version, fetch_old(version, "t", 1))
    p = resp.responses[0].partitions[0]
    assert p.error_code == 0 and p.high_watermark == 3
    got = read_legacy(p.records)
    assert [(o, k, v) for o, _, k, v in got] == [(1, b"k", b"v"), (2, b"k", b"v")]
    assert [t for _, t, _, _ in got] == ([1000, 1000] if magic else [None, None])
    assert b.metrics._down_converted == 2
    assert hasattr(resp, "throttle_time") == (version >= 1)
