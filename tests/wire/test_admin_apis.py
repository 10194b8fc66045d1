"""ACLs, DescribeLogDirs, ListPartitionReassignments and AlterConfigs through a real socket.

groupd answers them as a single-node PLAINTEXT Kafka without an authorizer does.
"""

import os
from pathlib import Path

import pytest

from groupd.protocol import codec
from groupd.protocol.api_table import API_TABLE
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch
from tests.harness import WireClient
from tests.wire.test_data_plane import produce_body

SECURITY_DISABLED = 54
TOPIC, BROKER = 2, 4
DESCRIBE_MESSAGE = "No Authorizer is configured on the broker"  # DescribeAcls' own sentence in Kafka
ALTER_MESSAGE = "No Authorizer is configured."  # CreateAcls and DeleteAcls


def test_the_new_apis_are_in_the_table():
    got = {k: (API_TABLE[k].min_version, API_TABLE[k].max_version) for k in (29, 30, 31, 33, 35, 46)}
    # from v0: Kafka 3.9's floors (issue 32; Kafka 4 starts the ACL APIs and DescribeLogDirs at v1)
    assert got == {29: (0, 3), 30: (0, 3), 31: (0, 3), 33: (0, 2), 35: (0, 4), 46: (0, 0)}


async def test_api_versions_advertises_them(wire):
    resp = await wire.call(18, 3, {"client_software_name": "test", "client_software_version": "1"})
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert got[29] == (0, 3) and got[30] == (0, 3) and got[31] == (0, 3)
    assert got[33] == (0, 2) and got[35] == (0, 4) and got[46] == (0, 0)


# ---------------------------------------------------------------- ACLs


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_describe_acls_is_security_disabled(wire, version):
    resp = await wire.call(29, version, {
        "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1, "principal_filter": None,
        "host_filter": None, "operation": 1, "permission_type": 1,
    })
    assert resp.error_code == SECURITY_DISABLED
    assert resp.error_message == DESCRIBE_MESSAGE
    assert resp.resources == ()


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_create_acls_answers_each_creation_security_disabled(wire, version):
    cls = codec.request_class(30, version)
    creation = codec.nested(cls, "AclCreation")
    creations = tuple(
        codec.make(creation, resource_type=TOPIC, resource_name=name, resource_pattern_type=3, principal="User:alice",
                   host="*", operation=3, permission_type=3)
        for name in ("t1", "t2", "t3")
    )
    resp = await wire.call(30, version, {"creations": creations})
    assert [(r.error_code, r.error_message) for r in resp.results] == [(SECURITY_DISABLED, ALTER_MESSAGE)] * 3


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_delete_acls_answers_each_filter_security_disabled(wire, version):
    cls = codec.request_class(31, version)
    flt = codec.nested(cls, "DeleteAclsFilter")
    filters = tuple(
        codec.make(
            flt,
            resource_type_filter=rt,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        )
        for rt in (1, TOPIC)
    )
    resp = await wire.call(31, version, {"filters": filters})
    assert len(resp.filter_results) == 2
    for result in resp.filter_results:
        assert result.error_code == SECURITY_DISABLED
        assert result.error_message == ALTER_MESSAGE
        assert result.matching_acls == ()


async def test_create_acls_with_no_creations_gets_no_results(wire):
    resp = await wire.call(30, 3, {"creations": ()})
    assert resp.results == ()


# ---------------------------------------------------------------- DescribeLogDirs


def _log_dirs_request(version, topics):
    cls = codec.request_class(35, version)
    if topics is None:
        return codec.make(cls, topics=None)
    t = codec.nested(cls, "DescribableLogDirTopic")
    return codec.make(cls, topics=tuple(t(topic=name, partitions=tuple(parts)) for name, parts in topics))


def _on_disk(broker, topic, partition):
    directory = Path(broker.config["log.dirs"]) / f"{topic}-{partition}"
    return sum(f.stat().st_size for f in directory.glob("*.log"))


def _sizes(result):
    return {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}


@pytest.mark.parametrize("version", [1, 2, 3, 4])
async def test_describe_log_dirs_lists_every_partition_with_its_size(broker, wire, version):
    broker.create_topic("ld", 2, {})
    batch = build_batch([(b"k", b"v" * 500)] * 3, timestamp_ms=1000)
    for _ in range(2):
        resp = await wire.call(0, 9, produce_body("ld", 0, batch))
        assert resp.responses[0].partition_responses[0].error_code == 0
    resp = await wire.call(35, version, _log_dirs_request(version, None))
    if version >= 3:
        assert resp.error_code == ErrorCode.none
    (result,) = resp.results
    assert result.error_code == ErrorCode.none
    assert result.log_dir == os.path.abspath(broker.config["log.dirs"])
    assert os.path.isabs(result.log_dir)
    sizes = _sizes(result)
    assert sizes[("ld", 0)] == 2 * len(batch) == _on_disk(broker, "ld", 0)
    assert sizes[("ld", 1)] == 0 == _on_disk(broker, "ld", 1)
    # the offsets partitions live in the same directory and are listed too, as Kafka lists them
    offsets = {p for (t, p) in sizes if t == "__consumer_offsets"}
    assert offsets == set(range(broker.config["offsets.topic.num.partitions"]))
    assert set(sizes) == {("ld", 0), ("ld", 1)} | {("__consumer_offsets", p) for p in offsets}
    for t in result.topics:
        assert t.partitions, "a topic is listed only with partitions"
        for p in t.partitions:
            assert p.offset_lag == 0 and p.is_future_key is False
    if version >= 4:
        st = os.statvfs(result.log_dir)
        assert result.total_bytes == st.f_blocks * st.f_frsize
        assert 0 < result.usable_bytes <= result.total_bytes


async def test_describe_log_dirs_honours_the_topics_filter(broker, wire):
    broker.create_topic("lf", 3, {})
    batch = build_batch([(b"k", b"v")], timestamp_ms=1000)
    await wire.call(0, 9, produce_body("lf", 2, batch))
    resp = await wire.call(35, 4, _log_dirs_request(4, [("lf", [2, 0, 9]), ("nope", [0])]))
    (result,) = resp.results
    assert result.error_code == ErrorCode.none
    assert _sizes(result) == {("lf", 0): 0, ("lf", 2): len(batch)}
    # a topic whose requested partitions are not stored here is left out, not listed empty
    resp = await wire.call(35, 4, _log_dirs_request(4, [("lf", [7])]))
    assert resp.results[0].topics == ()
    # an empty list asks for nothing (null asks for everything)
    resp = await wire.call(35, 4, _log_dirs_request(4, []))
    assert resp.results[0].topics == ()
    assert resp.results[0].log_dir == os.path.abspath(broker.config["log.dirs"])


async def test_describe_log_dirs_forgets_a_deleted_topic(broker, wire):
    broker.create_topic("brief", 1, {})
    broker.delete_topic("brief")
    resp = await wire.call(35, 4, _log_dirs_request(4, [("brief", [0])]))
    assert resp.results[0].topics == ()


# ---------------------------------------------------------------- ListPartitionReassignments


async def test_list_partition_reassignments_all_is_empty(broker, wire):
    broker.create_topic("ra", 2, {})
    resp = await wire.call(46, 0, {"timeout": 1000, "topics": None})
    assert resp.error_code == ErrorCode.none and resp.error_message is None
    assert resp.topics == ()


async def test_list_partition_reassignments_named_topics_unknown_ones_left_out(broker, wire):
    broker.create_topic("rb", 2, {})
    cls = codec.request_class(46, 0)
    t = codec.nested(cls, "ListPartitionReassignmentsTopics")
    topics = (t(name="rb", partition_indexes=(0, 1, 5)), t(name="never-made", partition_indexes=(0,)))
    resp = await wire.call(46, 0, {"timeout": 1000, "topics": topics})
    assert resp.error_code == ErrorCode.none and resp.error_message is None
    assert resp.topics == ()


# ---------------------------------------------------------------- AlterConfigs (legacy) and IncrementalAlterConfigs


def _alter_request(version, resources, validate_only=False):
    cls = codec.request_class(33, version)
    res_cls = codec.nested(cls, "AlterConfigsResource")
    cfg_cls = codec.nested(cls, "AlterableConfig")
    entities = tuple(
        res_cls(
            resource_type=rt, resource_name=name, configs=tuple(cfg_cls(name=k, value=v) for k, v in configs.items())
        )
        for rt, name, configs in resources
    )
    return codec.make(cls, resources=entities, validate_only=validate_only)


def _results(resp):
    return {(r.resource_type, r.resource_name): (r.error_code, r.error_message) for r in resp.responses}


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_alter_configs_replaces_the_topic_configs(broker, wire, version):
    broker.create_topic("ac", 2, {"retention.ms": "1000", "cleanup.policy": "compact"})
    resp = await wire.call(
        33, version, _alter_request(version, [(TOPIC, "ac", {"segment.bytes": "1048576", "retention.bytes": "5000"})])
    )
    assert _results(resp) == {(TOPIC, "ac"): (ErrorCode.none, None)}
    # keys left out are gone: the request's set is the topic's whole set of overrides
    assert broker.topics.get("ac").configs == {"segment.bytes": "1048576", "retention.bytes": "5000"}
    for p in range(2):
        cfg = broker.partitions.get("ac", p).config
        assert cfg.segment_bytes == 1048576 and cfg.retention_bytes == 5000
        assert cfg.retention_ms == broker.config["log.retention.ms"] and cfg.cleanup_policy == "delete"
    # DescribeConfigs sees the change
    described = await wire.call(
        32,
        4,
        {
            "resources": (
                codec.nested(codec.request_class(32, 4), "DescribeConfigsResource")(
                    resource_type=TOPIC, resource_name="ac", configuration_keys=None
                ),
            ),
            "include_synonyms": False,
            "include_documentation": False,
        },
    )
    values = {c.name: (c.value, c.config_source) for c in described.results[0].configs}
    assert values["segment.bytes"] == ("1048576", 1)  # DYNAMIC_TOPIC_CONFIG
    assert values["retention.ms"] == (
        str(broker.config["log.retention.ms"]),
        5,
    )  # DEFAULT_CONFIG, no longer the topic's
    # an empty set clears every override
    resp = await wire.call(33, version, _alter_request(version, [(TOPIC, "ac", {})]))
    assert _results(resp) == {(TOPIC, "ac"): (ErrorCode.none, None)}
    assert broker.topics.get("ac").configs == {}


async def test_alter_configs_validate_only_changes_nothing(broker, wire):
    broker.create_topic("vo", 1, {"retention.ms": "1000"})
    resp = await wire.call(33, 2, _alter_request(2, [(TOPIC, "vo", {"segment.bytes": "1048576"})], validate_only=True))
    assert _results(resp) == {(TOPIC, "vo"): (ErrorCode.none, None)}
    assert broker.topics.get("vo").configs == {"retention.ms": "1000"}
    assert broker.partitions.get("vo", 0).config.retention_ms == 1000
    # validation still runs
    resp = await wire.call(33, 2, _alter_request(2, [(TOPIC, "vo", {"segment.bytes": "1"})], validate_only=True))
    assert _results(resp)[(TOPIC, "vo")][0] == ErrorCode.invalid_config


async def test_alter_configs_refusals(broker, wire):
    broker.create_topic("rf", 1, {"retention.ms": "1000"})
    resp = await wire.call(
        33,
        2,
        _alter_request(
            2,
            [
                (TOPIC, "rf", {"retention.ms": "2000", "no.such.key": "1"}),
                (TOPIC, "missing", {"retention.ms": "2000"}),
                (BROKER, str(broker.node_id), {"log.retention.ms": "1"}),
                (TOPIC, "rf", {"segment.bytes": "-5"}),
                (TOPIC, "rf", {"retention.ms": None}),
            ],
        ),
    )
    codes = [(r.resource_name, r.error_code) for r in resp.responses]
    assert codes == [
        ("rf", ErrorCode.invalid_config),
        ("missing", ErrorCode.unknown_topic_or_partition),
        (str(broker.node_id), ErrorCode.invalid_request),
        ("rf", ErrorCode.invalid_config),
        ("rf", ErrorCode.invalid_config),
    ]
    assert "no.such.key" in resp.responses[0].error_message
    assert "static" in resp.responses[2].error_message
    # nothing refused was applied
    assert broker.topics.get("rf").configs == {"retention.ms": "1000"}


async def test_alter_configs_survive_a_restart(tmp_path):
    from groupd.broker.app import Broker
    from tests.conftest import broker_config

    b = Broker(broker_config(tmp_path))
    await b.start()
    try:
        b.create_topic("kept", 1, {"retention.ms": "1000"})
        c = await WireClient.connect(b.port)
        resp = await c.call(33, 2, _alter_request(2, [(TOPIC, "kept", {"max.message.bytes": "2048"})]))
        assert _results(resp) == {(TOPIC, "kept"): (ErrorCode.none, None)}
        await c.close()
    finally:
        await b.stop()
    b2 = Broker(broker_config(tmp_path))
    await b2.start()
    try:
        assert b2.topics.get("kept").configs == {"max.message.bytes": "2048"}
        assert b2.partitions.get("kept", 0).config.max_message_bytes == 2048
    finally:
        await b2.stop()


def _incremental_request(resources, validate_only=False):
    cls = codec.request_class(44, 1)
    res_cls = codec.nested(cls, "AlterConfigsResource")
    cfg_cls = codec.nested(cls, "AlterableConfig")
    entities = tuple(
        res_cls(
            resource_type=rt,
            resource_name=name,
            configs=tuple(cfg_cls(name=k, config_operation=op, value=v) for k, op, v in configs),
        )
        for rt, name, configs in resources
    )
    return codec.make(cls, resources=entities, validate_only=validate_only)


async def test_incremental_alter_configs_still_merges(broker, wire):
    broker.create_topic("inc", 1, {"retention.ms": "1000", "cleanup.policy": "delete"})
    resp = await wire.call(
        44,
        1,
        _incremental_request(
            [
                (
                    TOPIC,
                    "inc",
                    [("segment.bytes", 0, "1048576"), ("retention.ms", 1, None), ("cleanup.policy", 2, "compact")],
                ),
                (BROKER, "", [("log.retention.ms", 0, "1")]),
            ]
        ),
    )
    assert [(r.resource_name, r.error_code) for r in resp.responses] == [
        ("inc", ErrorCode.none),
        ("", ErrorCode.invalid_request),
    ]
    assert broker.topics.get("inc").configs == {"segment.bytes": "1048576", "cleanup.policy": "delete,compact"}
    assert broker.partitions.get("inc", 0).config.segment_bytes == 1048576
    resp = await wire.call(
        44, 1, _incremental_request([(TOPIC, "inc", [("segment.bytes", 0, "2097152")])], validate_only=True)
    )
    assert resp.responses[0].error_code == ErrorCode.none
    assert broker.topics.get("inc").configs["segment.bytes"] == "1048576"


# ---------------------------------------------------------------- the topic config catalogue (Kafka 4.2's LogConfig)

KAFKA_TOPIC_CONFIGS = {  # name: (default, DescribeConfigs type)
    "cleanup.policy": ("delete", 7),
    "compression.gzip.level": ("-1", 3),
    "compression.lz4.level": ("9", 3),
    "compression.type": ("producer", 2),
    "compression.zstd.level": ("3", 3),
    "delete.retention.ms": ("86400000", 5),
    "file.delete.delay.ms": ("60000", 5),
    "flush.messages": ("9223372036854775807", 5),
    "flush.ms": ("9223372036854775807", 5),
    "follower.replication.throttled.replicas": ("", 7),
    "index.interval.bytes": ("4096", 3),
    "leader.replication.throttled.replicas": ("", 7),
    "local.retention.bytes": ("-2", 5),
    "local.retention.ms": ("-2", 5),
    "max.compaction.lag.ms": ("9223372036854775807", 5),
    "max.message.bytes": ("1048588", 3),
    "message.downconversion.enable": ("true", 1),  # Kafka 3.9's (gone in 4.0 with Fetch v0-3), served here
    "message.timestamp.after.max.ms": ("3600000", 5),
    "message.timestamp.before.max.ms": ("9223372036854775807", 5),
    "message.timestamp.type": ("CreateTime", 2),
    "min.cleanable.dirty.ratio": ("0.5", 6),
    "min.compaction.lag.ms": ("0", 5),
    "min.insync.replicas": ("1", 3),
    "preallocate": ("false", 1),
    "remote.log.copy.disable": ("false", 1),
    "remote.log.delete.on.disable": ("false", 1),
    "remote.storage.enable": ("false", 1),
    "retention.bytes": ("-1", 5),
    "retention.ms": ("604800000", 5),
    "segment.bytes": ("1073741824", 3),
    "segment.index.bytes": ("10485760", 3),
    "segment.jitter.ms": ("0", 5),
    "segment.ms": ("604800000", 5),
    "unclean.leader.election.enable": ("false", 1),
}


async def _described(wire, name, synonyms=False):
    described = await wire.call(
        32,
        4,
        {
            "resources": (
                codec.nested(codec.request_class(32, 4), "DescribeConfigsResource")(
                    resource_type=TOPIC, resource_name=name, configuration_keys=None
                ),
            ),
            "include_synonyms": synonyms,
            "include_documentation": False,
        },
    )
    return {c.name: c for c in described.results[0].configs}


async def test_describe_configs_lists_every_topic_config_kafka_has(tmp_path):
    from groupd.broker.app import Broker
    from tests.conftest import broker_config

    # a broker whose log.* settings are Kafka's own defaults, so each value is the catalogue's default
    b = Broker(broker_config(tmp_path, **{"log.retention.ms": 604800000, "log.roll.ms": 604800000}))
    await b.start()
    try:
        b.create_topic("every", 1, {})
        c = await WireClient.connect(b.port)
        got = await _described(c, "every", synonyms=True)
        await c.close()
    finally:
        await b.stop()
    assert {
        k: (e.value, e.config_type)
        for k, e in got.items()
        if k not in ("segment.bytes", "retention.bytes", "max.message.bytes", "delete.retention.ms")
    } == {
        k: v
        for k, v in KAFKA_TOPIC_CONFIGS.items()
        if k not in ("segment.bytes", "retention.bytes", "max.message.bytes", "delete.retention.ms")
    }
    assert set(got) == set(KAFKA_TOPIC_CONFIGS)
    # Kafka 4.1+ (KIP-966) keeps a cluster-wide min.insync.replicas: a dynamic broker default, not a default
    mir = got["min.insync.replicas"]
    assert mir.config_source == 3  # not 5, DEFAULT_CONFIG: clients count it among the non-defaults
    assert [(s.value, s.source) for s in mir.synonyms] == [("1", 3), ("1", 5)]
    assert got["preallocate"].config_source == 5


@pytest.mark.parametrize(
    "key, value, ok",
    [
        ("file.delete.delay.ms", "1000", True),
        ("segment.index.bytes", "4096", True),
        ("preallocate", "TRUE", True),
        ("min.cleanable.dirty.ratio", "0.9", True),
        ("min.cleanable.dirty.ratio", "1.5", False),
        ("unclean.leader.election.enable", "maybe", False),
        ("compression.gzip.level", "9", True),
        ("compression.gzip.level", "-1", True),
        ("compression.gzip.level", "0", False),
        ("compression.zstd.level", "-5", True),
        ("compression.lz4.level", "18", False),
        ("compression.type", "brotli", False),
        ("message.timestamp.type", "LogAppendTime", True),
        ("leader.replication.throttled.replicas", "0:1,1:1", True),
        ("leader.replication.throttled.replicas", "*", True),
        ("follower.replication.throttled.replicas", "zero", False),
        ("segment.bytes", "1048575", False),  # Kafka 4.0 (KIP-1030): at least 1 MiB
        ("remote.storage.enable", "true", False),
        ("remote.storage.enable", "false", True),  # no tiered storage here
        ("max.compaction.lag.ms", "0", False),
        ("index.interval.bytes", "2147483648", False),  # an INT
    ],
)
async def test_topic_config_values_are_checked_as_kafka_checks_them(broker, wire, key, value, ok):
    broker.create_topic("chk", 1, {})
    resp = await wire.call(44, 1, _incremental_request([(TOPIC, "chk", [(key, 0, value)])]))
    assert resp.responses[0].error_code == (ErrorCode.none if ok else ErrorCode.invalid_config), resp.responses[
        0
    ].error_message
    assert (broker.topics.get("chk").configs.get(key) == value) == ok


async def test_an_empty_cleanup_policy_keeps_every_record(broker, wire):
    """Kafka 4 takes cleanup.policy down to nothing (an incremental SUBTRACT of delete): no deletion and
    no compaction. The confluent-kafka-python suite does exactly this against Kafka 4.1+."""
    broker.create_topic("keep", 1, {"compression.type": "gzip"})
    resp = await wire.call(
        44, 1, _incremental_request([(TOPIC, "keep", [("cleanup.policy", 3, "delete"), ("retention.ms", 0, "5000")])])
    )
    assert resp.responses[0].error_code == ErrorCode.none, resp.responses[0].error_message
    cfg = broker.partitions.get("keep", 0).config
    assert cfg.cleanup_policy == "" and not cfg.delete and not cfg.compact
    got = await _described(wire, "keep")
    assert sorted(f"{k}={e.value}" for k, e in got.items() if e.config_source != 5) == [
        "cleanup.policy=",
        "compression.type=gzip",
        "min.insync.replicas=1",
        "retention.ms=5000",
    ]
