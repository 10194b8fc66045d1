"""ApiVersions, Metadata, FindCoordinator, CreateTopics and DeleteTopics through a real socket."""

import pytest

from groupd.coordinator.partitioning import partition_for
from groupd.protocol.api_table import API_TABLE
from groupd.protocol.errors import ErrorCode


def _md_request(version, names, auto):
    from groupd.protocol import codec

    cls = codec.request_class(3, version)
    topic = codec.nested(cls, "MetadataRequestTopic")
    return codec.make(
        cls,
        topics=tuple(codec.make(topic, name=n, topic_id=codec.ZERO_UUID) for n in names),
        allow_auto_topic_creation=auto,
        include_topic_authorized_operations=False,
        include_cluster_authorized_operations=False,
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
async def test_api_versions_lists_the_table(wire, version):
    body = {"client_software_name": "test", "client_software_version": "1"}
    resp = await wire.call(18, version, body)
    assert resp.error_code == ErrorCode.none
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert got == {k: (s.min_version, s.max_version) for k, s in API_TABLE.items()}


async def test_too_new_api_versions_gets_error_35_with_v0_body(broker):
    import asyncio
    import struct

    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    # ApiVersions v99, header v2 (flexible), correlation id 77, client id "x", no tagged fields
    payload = struct.pack(">hhih", 18, 99, 77, 1) + b"x" + b"\x00" + b"\x00\x00\x00"
    writer.write(struct.pack(">i", len(payload)) + payload)
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    data = await reader.readexactly(size)
    correlation_id, error = struct.unpack_from(">ih", data, 0)
    assert correlation_id == 77
    assert error == ErrorCode.unsupported_version == 35
    (count,) = struct.unpack_from(">i", data, 6)
    assert count == len(API_TABLE)
    writer.close()


@pytest.mark.parametrize("version", range(0, 14))
async def test_metadata_every_version(wire, broker, version):
    broker.create_topic("orders", 3, {})
    topics = None if version >= 1 else ()
    resp = await wire.call(
        3,
        version,
        {
            "topics": topics,
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
            "include_cluster_authorized_operations": False,
        },
    )
    assert [b.node_id for b in resp.brokers] == [broker.node_id]
    assert resp.brokers[0].port == broker.port
    (topic,) = resp.topics
    assert topic.name == "orders" and topic.error_code == ErrorCode.none
    assert [p.partition_index for p in topic.partitions] == [0, 1, 2]
    assert all(p.leader_id == broker.node_id for p in topic.partitions)
    if version >= 13:
        assert resp.error_code == ErrorCode.none  # the top-level error v13 added (KIP-1102)


async def test_metadata_unknown_and_invalid_topics(tmp_path):
    from groupd.broker.app import Broker
    from tests.conftest import broker_config
    from tests.harness import WireClient

    b = Broker(broker_config(tmp_path, **{"auto.create.topics.enable": "false"}))
    await b.start()
    try:
        c = await WireClient.connect(b.port)
        resp = await c.call(3, 9, _md_request(9, ["nope", "bad name!"], True))
        errors = {t.name: t.error_code for t in resp.topics}
        assert errors == {"nope": ErrorCode.unknown_topic_or_partition, "bad name!": ErrorCode.invalid_topic_exception}
        await c.close()
    finally:
        await b.stop()


async def test_metadata_auto_creates_when_enabled(wire, broker):
    resp = await wire.call(3, 9, _md_request(9, ["auto-made"], True))
    assert resp.topics[0].error_code == ErrorCode.none
    assert "auto-made" in broker.topics
    # a v4+ client that says no is not given a topic
    resp = await wire.call(3, 9, _md_request(9, ["not-made"], False))
    assert resp.topics[0].error_code == ErrorCode.unknown_topic_or_partition


@pytest.mark.parametrize("version", range(0, 7))
async def test_find_coordinator_every_version(wire, broker, version):
    if version >= 4:
        resp = await wire.call(10, version, {"key_type": 0, "coordinator_keys": ["my-group", "g2"]})
        assert [c.key for c in resp.coordinators] == ["my-group", "g2"]
        assert all(
            c.error_code == 0 and c.node_id == broker.node_id and c.port == broker.port for c in resp.coordinators
        )
    else:
        resp = await wire.call(10, version, {"key": "my-group", "key_type": 0})
        assert resp.error_code == 0 and resp.node_id == broker.node_id and resp.port == broker.port
        if version >= 1:
            assert resp.error_message == "NONE"
    assert partition_for("my-group", 50) == 12


async def test_find_coordinator_bad_key_type(wire):
    resp = await wire.call(10, 4, {"key_type": 7, "coordinator_keys": ["g"]})
    assert resp.coordinators[0].error_code == ErrorCode.invalid_request


async def test_create_topics_errors(wire, broker):
    topics = [
        {"name": "ok", "num_partitions": 2, "replication_factor": 1, "assignments": (), "configs": ()},
        {"name": "zero", "num_partitions": 0, "replication_factor": 1, "assignments": (), "configs": ()},
        {"name": "bad/name", "num_partitions": 1, "replication_factor": 1, "assignments": (), "configs": ()},
        {"name": "rf3", "num_partitions": 1, "replication_factor": 3, "assignments": (), "configs": ()},
        {
            "name": "cfg",
            "num_partitions": 1,
            "replication_factor": 1,
            "assignments": (),
            "configs": ({"name": "no.such", "value": "1"},),
        },
        {"name": "dflt", "num_partitions": -1, "replication_factor": -1, "assignments": (), "configs": ()},
    ]
    from groupd.protocol import codec

    cls = codec.request_class(19, 7)
    topic_cls = codec.nested(cls, "CreatableTopic")
    cfg_cls = codec.nested(cls, "CreatableTopicConfig")
    entities = tuple(topic_cls(**{**t, "configs": tuple(cfg_cls(**c) for c in t["configs"])}) for t in topics)
    resp = await wire.call(19, 7, {"topics": entities, "timeout": 1000, "validate_only": False})
    codes = {t.name: t.error_code for t in resp.topics}
    assert codes == {
        "ok": 0,
        "zero": ErrorCode.invalid_partitions,
        "bad/name": ErrorCode.invalid_topic_exception,
        "rf3": ErrorCode.invalid_replication_factor,
        "cfg": ErrorCode.invalid_config,
        "dflt": 0,
    }
    assert broker.topics.get("dflt").partitions == 1
    again = await wire.call(19, 7, {"topics": entities[:1], "timeout": 1000, "validate_only": False})
    assert again.topics[0].error_code == ErrorCode.topic_already_exists


async def test_create_topics_validate_only_creates_nothing(wire, broker):
    from groupd.protocol import codec

    topic_cls = codec.nested(codec.request_class(19, 5), "CreatableTopic")
    t = topic_cls(name="dry", num_partitions=4, replication_factor=1, assignments=(), configs=())
    resp = await wire.call(19, 5, {"topics": (t,), "timeout": 1000, "validate_only": True})
    assert resp.topics[0].error_code == 0 and resp.topics[0].num_partitions == 4
    assert "dry" not in broker.topics


async def test_delete_topics(wire, broker):
    broker.create_topic("gone", 1, {})
    resp = await wire.call(20, 4, {"topic_names": ("gone", "never"), "timeout": 1000})
    assert {r.name: r.error_code for r in resp.responses} == {"gone": 0, "never": ErrorCode.unknown_topic_or_partition}
    assert "gone" not in broker.topics


async def test_topic_registry_survives_restart(tmp_path):
    from groupd.broker.app import Broker
    from tests.conftest import broker_config

    b = Broker(broker_config(tmp_path))
    await b.start()
    created = b.create_topic("durable", 5, {"retention.ms": "1000"})
    await b.stop()
    b2 = Broker(broker_config(tmp_path))
    await b2.start()
    t = b2.topics.get("durable")
    assert t.partitions == 5 and t.topic_id == created.topic_id and t.configs == {"retention.ms": "1000"}
    await b2.stop()


# ---------------------------------------------------------------- authorized operations, DescribeCluster

TOPIC_OPS = sum(
    1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11)
)  # READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE/ALTER_CONFIGS
CLUSTER_OPS = sum(
    1 << op for op in (5, 7, 8, 9, 10, 11, 12)
)  # CREATE ALTER DESCRIBE CLUSTER_ACTION D/A_CONFIGS IDEMPOTENT_WRITE
GROUP_OPS = sum(1 << op for op in (3, 6, 8, 10, 11))  # READ DELETE DESCRIBE DESCRIBE/ALTER_CONFIGS
UNSET = -(1 << 31)


@pytest.mark.parametrize("version", [8, 10, 11, 13])
@pytest.mark.parametrize("asked", [True, False])
async def test_metadata_authorized_operations_without_an_authorizer(wire, broker, version, asked):
    """Kafka without an authorizer allows every operation a resource supports, and says so when asked;
    cluster operations moved to DescribeCluster in v11."""
    broker.create_topic("ops", 1, {})
    resp = await wire.call(
        3,
        version,
        {
            "topics": None,
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": asked,
            "include_cluster_authorized_operations": asked,
        },
    )
    assert resp.topics[0].topic_authorized_operations == (TOPIC_OPS if asked else UNSET)
    if version <= 10:
        assert resp.cluster_authorized_operations == (CLUSTER_OPS if asked else UNSET)


@pytest.mark.parametrize("version", [0, 1, 2])
@pytest.mark.parametrize("asked", [True, False])
async def test_describe_cluster(wire, broker, version, asked):
    resp = await wire.call(
        60,
        version,
        {"include_cluster_authorized_operations": asked, "endpoint_type": 1, "include_fenced_brokers": True},
    )
    assert resp.error_code == 0 and resp.error_message is None
    assert resp.cluster_id == broker.config["cluster.id"]
    assert resp.controller_id == broker.node_id
    assert [(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers] == [
        (broker.node_id, "127.0.0.1", broker.port, None)
    ]
    assert resp.cluster_authorized_operations == (CLUSTER_OPS if asked else UNSET)
    if version >= 2:
        assert [b.is_fenced for b in resp.brokers] == [False]


@pytest.mark.parametrize("version, endpoint_type, code", [(1, 2, 114), (2, 2, 114), (1, 3, 115), (1, 0, 115)])
async def test_describe_cluster_other_endpoint_types(wire, version, endpoint_type, code):
    """A broker asked for controllers: MISMATCHED_ENDPOINT_TYPE; an unknown type: UNSUPPORTED_ENDPOINT_TYPE
    (Kafka's AuthHelper.computeDescribeClusterResponse)."""
    resp = await wire.call(
        60,
        version,
        {
            "include_cluster_authorized_operations": False,
            "endpoint_type": endpoint_type,
            "include_fenced_brokers": False,
        },
    )
    assert resp.error_code == code and resp.error_message
    assert resp.brokers == ()
