"""GROUP config resources (type 32) through a real socket: IncrementalAlterConfigs, AlterConfigs,
DescribeConfigs and ListConfigResources, as Kafka 4.3's broker and controller answer them.

Facts from Kafka 4.3 (ConfigHelper.createGroupConfigEntry, ConfigAdminManager.preprocess,
ConfigurationControlManager, ControllerConfigurationValidator, GroupConfig.validate, KafkaApis):
a group need not exist to be configured; DescribeConfigs lists every group config, the group's own
as GROUP_CONFIG (8), the others as the broker's value named by the broker key; DeleteGroups leaves the
configs; ListConfigResources lists the groups that have configs, first.
"""

from datetime import timedelta

import pytest

from groupd.broker.app import Broker
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.wire.test_groups import commit_body, wait_loaded

# the storage-touching wire tests run on both engines (tests/conftest.py)
pytestmark = pytest.mark.engines

GROUP, TOPIC = 32, 2
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
SOURCE_STATIC_BROKER, SOURCE_DEFAULT, SOURCE_GROUP = 4, 5, 8
INT, STRING, BOOLEAN = 3, 2, 1
EVERY_KEY = sorted([
    "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "consumer.assignment.interval.ms",
    "share.session.timeout.ms", "share.heartbeat.interval.ms", "share.record.lock.duration.ms",
    "share.delivery.count.limit", "share.partition.max.record.locks", "share.auto.offset.reset",
    "share.isolation.level", "share.renew.acknowledge.enable", "share.assignment.interval.ms",
    "streams.session.timeout.ms", "streams.heartbeat.interval.ms", "streams.num.standby.replicas",
    "streams.initial.rebalance.delay.ms", "streams.assignment.interval.ms",
])


def incremental(resources, validate_only=False):
    cls = codec.request_class(44, 1)
    res_cls, cfg_cls = codec.nested(cls, "AlterConfigsResource"), codec.nested(cls, "AlterableConfig")
    return codec.make(
        cls,
        validate_only=validate_only,
        resources=tuple(
            res_cls(
                resource_type=rt,
                resource_name=name,
                configs=tuple(cfg_cls(name=k, config_operation=op, value=v) for k, op, v in ops),
            )
            for rt, name, ops in resources
        ),
    )


def legacy(resources, version=2, validate_only=False):
    cls = codec.request_class(33, version)
    res_cls, cfg_cls = codec.nested(cls, "AlterConfigsResource"), codec.nested(cls, "AlterableConfig")
    return codec.make(
        cls,
        validate_only=validate_only,
        resources=tuple(
            res_cls(
                resource_type=rt,
                resource_name=name,
                configs=tuple(cfg_cls(name=k, value=v) for k, v in configs.items()),
            )
            for rt, name, configs in resources
        ),
    )


def describe(names, keys=None, synonyms=False, documentation=False, version=4):
    cls = codec.request_class(32, version)
    res_cls = codec.nested(cls, "DescribeConfigsResource")
    body = {"resources": tuple(res_cls(resource_type=GROUP, resource_name=n, configuration_keys=keys) for n in names)}
    if version >= 1:
        body["include_synonyms"] = synonyms
    if version >= 3:
        body["include_documentation"] = documentation
    return codec.make(cls, **body)


def outcomes(resp):
    return [(r.resource_name, r.error_code, r.error_message) for r in resp.responses]


async def set_configs(wire, group, **configs):
    resp = await wire.call(
        44, 1, incremental([(GROUP, group, [(k.replace("_", "."), SET, v) for k, v in configs.items()])])
    )
    return outcomes(resp)[0][1:]


async def described(wire, group, **kwargs):
    resp = await wire.call(32, 4, describe([group], **kwargs))
    (result,) = resp.results
    assert result.error_code == ErrorCode.none, result.error_message
    return {c.name: c for c in result.configs}


# ---------------------------------------------------------------- IncrementalAlterConfigs


async def test_a_group_that_does_not_exist_takes_configs(broker, wire):
    resp = await wire.call(
        44,
        1,
        incremental(
            [
                (
                    GROUP,
                    "nobody-yet",
                    [("share.auto.offset.reset", SET, "earliest"), ("consumer.session.timeout.ms", SET, "50000")],
                )
            ]
        ),
    )
    assert outcomes(resp) == [("nobody-yet", ErrorCode.none, None)]
    assert resp.responses[0].resource_type == GROUP
    assert dict(broker.group_configs.overrides("nobody-yet")) == {
        "share.auto.offset.reset": "earliest",
        "consumer.session.timeout.ms": "50000",
    }
    assert broker.group_configs.overrides("other") == {}


async def test_set_then_delete_merges_with_what_the_group_has(broker, wire):
    assert await set_configs(wire, "g", share_auto_offset_reset="earliest", share_delivery_count_limit="7") == (
        ErrorCode.none,
        None,
    )
    resp = await wire.call(
        44,
        1,
        incremental(
            [
                (
                    GROUP,
                    "g",
                    [("share.delivery.count.limit", DELETE, None), ("share.isolation.level", SET, "read_committed")],
                )
            ]
        ),
    )
    assert outcomes(resp) == [("g", ErrorCode.none, None)]
    assert broker.group_configs.stored("g") == {
        "share.auto.offset.reset": "earliest",
        "share.isolation.level": "read_committed",
    }
    # deleting a key the group does not have, even an unknown name, changes nothing and is no error
    resp = await wire.call(44, 1, incremental([(GROUP, "g", [("no.such.key", DELETE, None)])]))
    assert outcomes(resp) == [("g", ErrorCode.none, None)]


async def test_deleting_every_key_removes_the_resource(broker, wire):
    await set_configs(wire, "gone", share_auto_offset_reset="earliest")
    resp = await wire.call(74, 1, {"resource_types": (GROUP,)})
    assert [(r.resource_type, r.resource_name) for r in resp.config_resources] == [(GROUP, "gone")]
    await wire.call(44, 1, incremental([(GROUP, "gone", [("share.auto.offset.reset", DELETE, None)])]))
    resp = await wire.call(74, 1, {"resource_types": (GROUP,)})
    assert resp.config_resources == ()
    assert broker.group_configs.group_ids() == []


@pytest.mark.parametrize(
    "ops, error, message",
    [
        ([("no.such.key", SET, "1")], ErrorCode.invalid_config, "Unknown group config name: no.such.key"),
        # consumer.assignor.offload.enable is a constant in 4.3's GroupConfig but not a defined key
        (
            [("consumer.assignor.offload.enable", SET, "true")],
            ErrorCode.invalid_config,
            "Unknown group config name: consumer.assignor.offload.enable",
        ),
        (
            [("consumer.session.timeout.ms", SET, "soon")],
            ErrorCode.invalid_config,
            "Invalid value soon for configuration consumer.session.timeout.ms: Not a number of type INT",
        ),
        (
            [("consumer.session.timeout.ms", SET, "30000")],
            ErrorCode.invalid_config,
            "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
        ),
        (
            [("consumer.heartbeat.interval.ms", SET, "16000")],
            ErrorCode.invalid_config,
            "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms",
        ),
        (
            [("share.record.lock.duration.ms", SET, "500")],
            ErrorCode.invalid_config,
            "Invalid value 500 for configuration share.record.lock.duration.ms: Value must be at least 1000",
        ),
        (
            [("share.auto.offset.reset", SET, "none")],
            ErrorCode.invalid_config,
            "Invalid value none for configuration share.auto.offset.reset: Invalid value `none` for configuration "
            "share.auto.offset.reset. "
            "The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
        ),
        (
            [("share.auto.offset.reset", APPEND, "earliest")],
            ErrorCode.invalid_config,
            "Can't APPEND to key share.auto.offset.reset because its type is not LIST.",
        ),
        (
            [("share.isolation.level", SUBTRACT, "x")],
            ErrorCode.invalid_config,
            "Can't SUBTRACT to key share.isolation.level because its type is not LIST.",
        ),
        (
            [("share.delivery.count.limit", SET, "3"), ("share.delivery.count.limit", SET, "4")],
            ErrorCode.invalid_request,
            "Error due to duplicate config keys",
        ),
        (
            [("share.delivery.count.limit", SET, None)],
            ErrorCode.invalid_request,
            "Null value not supported for : share.delivery.count.limit",
        ),
        # the controller refuses a record value over Short.MAX_VALUE before validating it
        (
            [("share.auto.offset.reset", SET, "x" * 32768)],
            ErrorCode.invalid_config,
            "The configuration value cannot be added because it exceeds the maximum value size of 32767 bytes.",
        ),
    ],
)
async def test_refusals_carry_kafkas_code_and_sentence(broker, wire, ops, error, message):
    await set_configs(wire, "r", share_delivery_count_limit="6")
    resp = await wire.call(44, 1, incremental([(GROUP, "r", ops)]))
    assert outcomes(resp) == [("r", error, message)]
    assert broker.group_configs.stored("r") == {"share.delivery.count.limit": "6"}  # nothing refused was applied


async def test_the_whole_set_is_validated_so_a_later_change_can_break_an_earlier_one(broker, wire):
    """The controller checks the merged set: a heartbeat longer than the group's session is refused."""
    await set_configs(wire, "hb", consumer_session_timeout_ms="46000")
    resp = await wire.call(44, 1, incremental([(GROUP, "hb", [("consumer.heartbeat.interval.ms", SET, "14000")])]))
    assert outcomes(resp) == [("hb", ErrorCode.none, None)]
    resp = await wire.call(
        44,
        1,
        incremental(
            [
                (
                    GROUP,
                    "hb",
                    [("consumer.session.timeout.ms", SET, "45000"), ("consumer.heartbeat.interval.ms", SET, "15000")],
                )
            ]
        ),
    )
    assert outcomes(resp) == [("hb", ErrorCode.none, None)]
    # a group's share session at the broker's 45000 and a heartbeat of 15000: fine; and the equal case is refused
    resp = await wire.call(
        44,
        1,
        incremental(
            [(GROUP, "hb", [("share.session.timeout.ms", SET, "45000"), ("share.heartbeat.interval.ms", SET, "15000")])]
        ),
    )
    assert outcomes(resp)[0][1] == ErrorCode.none


async def test_an_empty_group_name_and_a_group_named_twice_are_invalid_request(broker, wire):
    resp = await wire.call(
        44,
        1,
        incremental(
            [
                (GROUP, "", [("share.auto.offset.reset", SET, "earliest")]),
                (GROUP, "twice", [("share.auto.offset.reset", SET, "earliest")]),
                (GROUP, "twice", [("share.isolation.level", SET, "read_committed")]),
                (GROUP, "once", [("share.auto.offset.reset", SET, "earliest")]),
            ]
        ),
    )
    assert outcomes(resp) == [
        ("", ErrorCode.invalid_request, "Default group resources are not allowed."),
        ("twice", ErrorCode.invalid_request, "Each resource must appear at most once."),
        ("twice", ErrorCode.invalid_request, "Each resource must appear at most once."),
        ("once", ErrorCode.none, None),
    ]
    assert broker.group_configs.group_ids() == ["once"]


async def test_validate_only_checks_and_changes_nothing(broker, wire):
    resp = await wire.call(
        44, 1, incremental([(GROUP, "vo", [("share.auto.offset.reset", SET, "earliest")])], validate_only=True)
    )
    assert outcomes(resp) == [("vo", ErrorCode.none, None)]
    resp = await wire.call(
        44, 1, incremental([(GROUP, "vo", [("share.auto.offset.reset", SET, "first")])], validate_only=True)
    )
    assert outcomes(resp)[0][1] == ErrorCode.invalid_config
    assert broker.group_configs.group_ids() == []


async def test_topics_and_groups_in_one_request(broker, wire):
    broker.create_topic("t", 1, {})
    resp = await wire.call(
        44,
        1,
        incremental(
            [
                (TOPIC, "t", [("retention.ms", SET, "1000")]),
                (GROUP, "t", [("share.auto.offset.reset", SET, "earliest")]),
            ]
        ),
    )
    assert [(r.resource_type, r.resource_name, r.error_code) for r in resp.responses] == [
        (TOPIC, "t", 0),
        (GROUP, "t", 0),
    ]
    assert broker.topics.get("t").configs == {"retention.ms": "1000"}
    assert broker.group_configs.stored("t") == {"share.auto.offset.reset": "earliest"}


# ---------------------------------------------------------------- AlterConfigs (legacy)


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_legacy_alter_configs_replaces_the_groups_set(broker, wire, version):
    await set_configs(wire, "lg", share_auto_offset_reset="earliest", share_delivery_count_limit="6")
    resp = await wire.call(33, version, legacy([(GROUP, "lg", {"share.isolation.level": "read_committed"})], version))
    assert outcomes(resp) == [("lg", ErrorCode.none, None)]
    assert broker.group_configs.stored("lg") == {"share.isolation.level": "read_committed"}
    resp = await wire.call(33, version, legacy([(GROUP, "lg", {"share.isolation.level": None})], version))
    assert outcomes(resp) == [("lg", ErrorCode.invalid_request, "Null value not supported for : share.isolation.level")]
    resp = await wire.call(33, version, legacy([(GROUP, "lg", {"share.isolation.level": "serializable"})], version))
    assert outcomes(resp)[0][1] == ErrorCode.invalid_config
    resp = await wire.call(33, version, legacy([(GROUP, "lg", {})], version))
    assert outcomes(resp) == [("lg", ErrorCode.none, None)]
    assert broker.group_configs.group_ids() == []


# ---------------------------------------------------------------- DescribeConfigs


async def test_describe_lists_every_group_config_with_its_source(broker, wire):
    await set_configs(wire, "d", share_auto_offset_reset="by_duration:PT1H", consumer_heartbeat_interval_ms=" +6000 ")
    configs = await described(wire, "d")
    assert sorted(configs) == EVERY_KEY
    got = {name: (c.value, c.config_source, c.read_only, c.is_sensitive, c.config_type) for name, c in configs.items()}
    assert got["share.auto.offset.reset"] == ("by_duration:PT1H", SOURCE_GROUP, False, False, STRING)
    # shown as Kafka parses it back: trimmed, a plain integer
    assert got["consumer.heartbeat.interval.ms"] == ("6000", SOURCE_GROUP, False, False, INT)
    assert got["consumer.session.timeout.ms"] == ("45000", SOURCE_DEFAULT, False, False, INT)
    assert got["share.renew.acknowledge.enable"] == ("true", SOURCE_DEFAULT, False, False, BOOLEAN)
    assert got["share.isolation.level"] == ("read_uncommitted", SOURCE_DEFAULT, False, False, STRING)
    assert got["streams.num.standby.replicas"] == ("0", SOURCE_DEFAULT, False, False, INT)
    assert all(c.synonyms == () and c.documentation is None for c in configs.values())


async def test_describe_a_group_without_configs_and_named_keys(broker, wire):
    configs = await described(wire, "never-configured", keys=("share.delivery.count.limit", "no.such.key"))
    assert [(c.name, c.value, c.config_source) for c in configs.values()] == [
        ("share.delivery.count.limit", "5", SOURCE_DEFAULT)
    ]


async def test_describe_synonyms_name_the_broker_keys(broker, wire):
    await set_configs(wire, "s", consumer_session_timeout_ms="50000")
    configs = await described(wire, "s", synonyms=True)
    syn = {name: [(s.name, s.value, s.source) for s in c.synonyms] for name, c in configs.items()}
    assert syn["consumer.session.timeout.ms"] == [
        ("consumer.session.timeout.ms", "50000", SOURCE_GROUP),
        ("group.consumer.session.timeout.ms", "45000", SOURCE_DEFAULT),
    ]
    assert syn["share.record.lock.duration.ms"] == [("group.share.record.lock.duration.ms", "30000", SOURCE_DEFAULT)]
    # keys without a broker synonym fall back to GroupConfig's own default
    assert syn["share.auto.offset.reset"] == [("share.auto.offset.reset", "latest", SOURCE_DEFAULT)]


async def test_a_broker_value_set_in_its_config_is_a_static_broker_config(tmp_path):
    b = Broker(broker_config(tmp_path, **{"group.consumer.heartbeat.interval.ms": "6000"}))
    await b.start()
    try:
        wire = await WireClient.connect(b.port)
        configs = await described(wire, "any", synonyms=True)
        hb = configs["consumer.heartbeat.interval.ms"]
        assert (hb.value, hb.config_source) == ("6000", SOURCE_STATIC_BROKER)
        assert [(s.name, s.value, s.source) for s in hb.synonyms] == [
            ("group.consumer.heartbeat.interval.ms", "6000", SOURCE_STATIC_BROKER),
            ("group.consumer.heartbeat.interval.ms", "5000", SOURCE_DEFAULT),
        ]
        await wire.close()
    finally:
        await b.stop()


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
async def test_describe_every_version_and_documentation_from_v3(broker, wire, version):
    resp = await wire.call(32, version, describe(["g"], documentation=True, version=version))
    configs = {c.name: c for c in resp.results[0].configs}
    assert sorted(configs) == EVERY_KEY
    docs = [getattr(c, "documentation", None) for c in configs.values()]  # a v3+ field
    assert all(docs) if version >= 3 else docs == [None] * len(docs)


async def test_describe_an_empty_group_name_is_invalid_request(broker, wire):
    resp = await wire.call(32, 4, describe(["", "ok"]))
    got = [(r.resource_name, r.error_code, r.error_message, len(r.configs)) for r in resp.results]
    assert got == [
        ("", ErrorCode.invalid_request, "Group name must not be empty", 0),
        ("ok", ErrorCode.none, None, len(EVERY_KEY)),
    ]


# ---------------------------------------------------------------- consumer groups honour them


async def test_a_consumer_group_heartbeat_answers_the_groups_interval(broker, wire):
    """GroupMetadataManager answers HeartbeatIntervalMs from the group's consumer.heartbeat.interval.ms."""
    from tests.wire.test_consumer_groups import hb_body

    broker.create_topic("orders", 1, {})
    await wait_loaded(broker)
    await set_configs(wire, "tuned", consumer_heartbeat_interval_ms="7000")
    tuned = await wire.call(68, 1, hb_body(1, "m1", 0, names=("orders",), owned=(), timeout=30_000, group="tuned"))
    plain = await wire.call(68, 1, hb_body(1, "m1", 0, names=("orders",), owned=(), timeout=30_000, group="plain"))
    assert (tuned.error_code, tuned.heartbeat_interval) == (ErrorCode.none, timedelta(milliseconds=7000))
    assert (plain.error_code, plain.heartbeat_interval) == (ErrorCode.none, timedelta(milliseconds=5000))
    await set_configs(wire, "tuned", consumer_heartbeat_interval_ms="9000")
    again = await wire.call(68, 1, hb_body(1, "m1", tuned.member_epoch, group="tuned"))
    assert again.heartbeat_interval == timedelta(milliseconds=9000)


# ---------------------------------------------------------------- lifetime


async def test_deleting_the_group_keeps_its_configs(broker, wire):
    """Kafka 4.3's DeleteGroups does not touch the group's config resource."""
    broker.create_topic("t", 1, {})
    await wait_loaded(broker)
    assert (await wire.call(8, 8, commit_body("dg", "t", 0, 5, ""))).topics[0].partitions[
        0
    ].error_code == ErrorCode.none
    await set_configs(wire, "dg", share_auto_offset_reset="earliest")
    resp = await wire.call(42, 2, {"groups_names": ("dg",)})
    assert resp.results[0].error_code == ErrorCode.none
    assert broker.group_configs.stored("dg") == {"share.auto.offset.reset": "earliest"}
    listed = await wire.call(74, 1, {"resource_types": (GROUP,)})
    assert [r.resource_name for r in listed.config_resources] == ["dg"]


async def test_configs_survive_a_restart(tmp_path):
    b = Broker(broker_config(tmp_path))
    await b.start()
    try:
        wire = await WireClient.connect(b.port)
        assert await set_configs(
            wire, "kept", share_auto_offset_reset="earliest", consumer_heartbeat_interval_ms="6000"
        ) == (ErrorCode.none, None)
        await wire.close()
    finally:
        await b.stop()
    b2 = Broker(broker_config(tmp_path))
    await b2.start()
    try:
        assert dict(b2.group_configs.overrides("kept")) == {
            "share.auto.offset.reset": "earliest",
            "consumer.heartbeat.interval.ms": "6000",
        }
        wire = await WireClient.connect(b2.port)
        configs = await described(wire, "kept")
        assert (configs["share.auto.offset.reset"].value, configs["share.auto.offset.reset"].config_source) == (
            "earliest",
            SOURCE_GROUP,
        )
        listed = await wire.call(74, 1, {"resource_types": ()})
        assert (listed.config_resources[0].resource_type, listed.config_resources[0].resource_name) == (GROUP, "kept")
        await wire.close()
    finally:
        await b2.stop()


async def test_a_restart_under_narrower_bounds_clamps_what_applies_not_what_is_shown(tmp_path):
    """GroupConfig.evaluate: configs read at start-up are capped into the broker's current bounds."""
    b = Broker(broker_config(tmp_path))
    await b.start()
    try:
        wire = await WireClient.connect(b.port)
        assert await set_configs(wire, "c", consumer_heartbeat_interval_ms="14000") == (ErrorCode.none, None)
        await wire.close()
    finally:
        await b.stop()
    b2 = Broker(broker_config(tmp_path, **{"group.consumer.max.heartbeat.interval.ms": "10000"}))
    await b2.start()
    try:
        assert b2.group_configs.overrides("c")["consumer.heartbeat.interval.ms"] == "10000"
        assert b2.group_configs.stored("c") == {"consumer.heartbeat.interval.ms": "14000"}
    finally:
        await b2.stop()
