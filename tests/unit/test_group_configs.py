"""Group configs' validation as Kafka 4.3's GroupConfig.validate does it (every key's type and floor,
the broker's min/max keys, session over heartbeat, Kafka's sentences), GroupConfig.evaluate's clamping,
java.time.Duration's grammar for share.auto.offset.reset, and the store's persistence."""

import json

import pytest

from groupd.broker.config import default_config
from groupd.broker.dataplane.group_configs import (
    FILE,
    GROUP_CONFIG_KEYS,
    GROUP_CONFIGS,
    GroupConfigStore,
    InvalidRequest,
    evaluate,
    iso_duration_ms,
    validate,
)
from groupd.broker.dataplane.topic_configs import BOOLEAN, INT, STRING, InvalidConfig
from groupd.storage.local import LocalEngine

BROKER = default_config()


def refusal(configs, broker=BROKER, group="g"):
    with pytest.raises(InvalidConfig) as err:
        validate(group, configs, broker)
    return str(err.value)


def test_the_keys_are_kafka_4_3s_seventeen_in_definition_order():
    assert [k.name for k in GROUP_CONFIG_KEYS] == [
        "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "consumer.assignment.interval.ms",
        "share.session.timeout.ms", "share.heartbeat.interval.ms", "share.record.lock.duration.ms",
        "share.delivery.count.limit", "share.partition.max.record.locks", "share.auto.offset.reset",
        "share.isolation.level", "share.renew.acknowledge.enable", "share.assignment.interval.ms",
        "streams.session.timeout.ms", "streams.heartbeat.interval.ms", "streams.num.standby.replicas",
        "streams.initial.rebalance.delay.ms", "streams.assignment.interval.ms",
    ]
    types = {k.name: k.type for k in GROUP_CONFIG_KEYS}
    assert types["share.auto.offset.reset"] == STRING and types["share.isolation.level"] == STRING
    assert types["share.renew.acknowledge.enable"] == BOOLEAN
    assert {t for n, t in types.items() if n.endswith((".ms", ".limit", ".locks", ".replicas"))} == {INT}


# every key: its default (the broker's value) passes, a value in range passes, and its floor and bounds
@pytest.mark.parametrize(
    "key, good, floor_message, low, high",
    [
        (
            "consumer.session.timeout.ms",
            "60000",
            "at least 1",
            ("44999", "group.consumer.min.session.timeout.ms"),
            ("60001", "group.consumer.max.session.timeout.ms"),
        ),
        (
            "consumer.heartbeat.interval.ms",
            "15000",
            "at least 1",
            ("4999", "group.consumer.min.heartbeat.interval.ms"),
            ("15001", "group.consumer.max.heartbeat.interval.ms"),
        ),
        (
            "consumer.assignment.interval.ms",
            "0",
            "at least 0",
            None,
            ("15001", "group.consumer.max.assignment.interval.ms"),
        ),
        (
            "share.session.timeout.ms",
            "45000",
            "at least 1",
            ("44999", "group.share.min.session.timeout.ms"),
            ("60001", "group.share.max.session.timeout.ms"),
        ),
        (
            "share.heartbeat.interval.ms",
            "5000",
            "at least 1",
            ("4999", "group.share.min.heartbeat.interval.ms"),
            ("15001", "group.share.max.heartbeat.interval.ms"),
        ),
        (
            "share.record.lock.duration.ms",
            "15000",
            "at least 1000",
            ("14999", "group.share.min.record.lock.duration.ms"),
            ("60001", "group.share.max.record.lock.duration.ms"),
        ),
        ("share.delivery.count.limit", "10", "at least 2", None, ("11", "group.share.max.delivery.count.limit")),
        (
            "share.partition.max.record.locks",
            "4000",
            "at least 100",
            None,
            ("4001", "group.share.max.partition.max.record.locks"),
        ),
        (
            "share.assignment.interval.ms",
            "15000",
            "at least 0",
            None,
            ("15001", "group.share.max.assignment.interval.ms"),
        ),
        (
            "streams.session.timeout.ms",
            "50000",
            "at least 1",
            ("44999", "group.streams.min.session.timeout.ms"),
            ("60001", "group.streams.max.session.timeout.ms"),
        ),
        (
            "streams.heartbeat.interval.ms",
            "6000",
            "at least 1",
            ("4999", "group.streams.min.heartbeat.interval.ms"),
            ("15001", "group.streams.max.heartbeat.interval.ms"),
        ),
        ("streams.num.standby.replicas", "2", "at least 0", None, ("3", "group.streams.max.standby.replicas")),
        ("streams.initial.rebalance.delay.ms", "0", "at least 0", None, None),
        (
            "streams.assignment.interval.ms",
            "0",
            "at least 0",
            None,
            ("15001", "group.streams.max.assignment.interval.ms"),
        ),
    ],
)
def test_every_int_key(key, good, floor_message, low, high):
    assert validate("g", {key: good}, BROKER) == {key: good}
    floor = int(floor_message.split()[-1])
    assert (
        refusal({key: str(floor - 1)})
        == f"Invalid value {floor - 1} for configuration {key}: Value must be {floor_message}"
    )
    assert refusal({key: "ten"}) == f"Invalid value ten for configuration {key}: Not a number of type INT"
    assert refusal({key: "2147483648"}) == f"Invalid value 2147483648 for configuration {key}: Not a number of type INT"
    assert refusal({key: "1_000"}).endswith("Not a number of type INT")  # Integer.parseInt takes no underscores
    if low is not None:
        assert refusal({key: low[0]}) == f"{key} must be greater than or equal to {low[1]}"
    if high is not None:
        assert refusal({key: high[0]}) == f"{key} must be less than or equal to {high[1]}"


def test_share_delivery_count_limit_below_its_floor_names_the_floor_before_the_bound():
    # ConfigDef's atLeast(2) fires while parsing, before validateValues' broker minimum (also 2)
    assert refusal({"share.delivery.count.limit": "1"}).endswith("Value must be at least 2")
    assert refusal({"share.partition.max.record.locks": "99"}).endswith("Value must be at least 100")


def test_ints_are_trimmed_and_signed_as_java_parses_them():
    assert validate("g", {"share.delivery.count.limit": " +6\t"}, BROKER) == {"share.delivery.count.limit": " +6\t"}
    assert refusal({"share.delivery.count.limit": "6.0"}).endswith("Not a number of type INT")


@pytest.mark.parametrize(
    "value",
    [
        "latest",
        "earliest",
        "by_duration:PT0S",
        "by_duration:P1D",
        "by_duration:PT1H30M",
        "by_duration:pt1.5s",
        "by_duration:P1DT-1H",
        "by_duration:-PT0S",
        " earliest ",
    ],
)
def test_share_auto_offset_reset_accepts(value):
    validate("g", {"share.auto.offset.reset": value}, BROKER)


@pytest.mark.parametrize(
    "value",
    [
        "none",
        "EARLIEST",
        "by_duration",
        "by_duration:",
        "by_duration:PT",
        "by_duration:P",
        "by_duration:-PT1S",
        "by_duration:PT-1S",
        "by_duration:1H",
        "by_duration:P1H",
        "smallest",
        "",
    ],
)
def test_share_auto_offset_reset_refuses(value):
    trimmed = value.strip()
    assert refusal({"share.auto.offset.reset": value}) == (
        f"Invalid value {trimmed} for configuration share.auto.offset.reset: Invalid value `{trimmed}` for "
        "configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format "
        "'by_duration:<PnDTnHnMn.nS>'."
    )


def test_iso_durations_as_java_reads_them():
    assert iso_duration_ms("PT1.5S") == 1500
    assert iso_duration_ms("P2D") == 2 * 86_400_000
    assert iso_duration_ms("PT-0.5S") == -500
    assert iso_duration_ms("-PT1M") == -60_000
    assert iso_duration_ms("P1DT-1H") == 23 * 3_600_000
    assert iso_duration_ms("PT,5S") is None and iso_duration_ms("PT0,5S") == 500
    assert iso_duration_ms("PT") is None and iso_duration_ms("P") is None and iso_duration_ms("1H") is None


def test_share_isolation_level_and_renew_acknowledge():
    validate("g", {"share.isolation.level": "read_committed", "share.renew.acknowledge.enable": "FALSE"}, BROKER)
    assert refusal({"share.isolation.level": "READ_COMMITTED"}) == (
        "Invalid value READ_COMMITTED for configuration share.isolation.level: String must be one of: read_committed, "
        "read_uncommitted"
    )
    assert refusal({"share.renew.acknowledge.enable": "yes"}) == (
        "Invalid value yes for configuration share.renew.acknowledge.enable: Expected value to be either true or false"
    )


def test_unknown_names_and_the_empty_group():
    assert refusal({"share.auto.offset.reset": "earliest", "group.consumer.session.timeout.ms": "50000"}) == (
        "Unknown group config name: group.consumer.session.timeout.ms"
    )
    assert (
        refusal({"consumer.assignor.offload.enable": "true"})
        == "Unknown group config name: consumer.assignor.offload.enable"
    )
    with pytest.raises(InvalidRequest, match="Default group resources are not allowed."):
        validate("", {"share.auto.offset.reset": "earliest"}, BROKER)


def test_the_session_must_exceed_the_heartbeat_over_the_merged_set():
    narrow = default_config(
        **{"group.consumer.min.heartbeat.interval.ms": "1", "group.consumer.min.session.timeout.ms": "1"}
    )
    assert (
        refusal({"consumer.session.timeout.ms": "5000"}, narrow)
        == "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
    )
    validate("g", {"consumer.session.timeout.ms": "5001"}, narrow)
    assert refusal({"consumer.heartbeat.interval.ms": "45000"}, narrow) == (
        "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"
    )
    # the share pair with the broker's 45000 session: a heartbeat of 15000 is within the bounds and shorter
    validate("g", {"share.heartbeat.interval.ms": "15000"}, BROKER)


def test_assignment_intervals_are_bounded_only_when_set():
    """4.3 checks consumer/share/streams.assignment.interval.ms against the bounds only if the group sets it."""
    tight = default_config(
        **{"group.consumer.min.assignment.interval.ms": "500", "group.consumer.assignment.interval.ms": "1000"}
    )
    validate("g", {"share.auto.offset.reset": "earliest"}, tight)
    assert refusal({"consumer.assignment.interval.ms": "100"}, tight) == (
        "consumer.assignment.interval.ms must be greater than or equal to group.consumer.min.assignment.interval.ms"
    )


def test_the_brokers_bounds_move_what_groups_may_set():
    wide = default_config(**{"group.consumer.max.session.timeout.ms": "90000"})
    validate("g", {"consumer.session.timeout.ms": "90000"}, wide)
    assert refusal({"consumer.session.timeout.ms": "90000"}) == (
        "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"
    )
    # a share bound the broker does not define (yet) is Kafka's default; one it defines is read from it
    assert refusal({"share.record.lock.duration.ms": "70000"}).endswith("group.share.max.record.lock.duration.ms")
    assert validate(
        "g", {"share.record.lock.duration.ms": "70000"}, {**BROKER, "group.share.max.record.lock.duration.ms": 80_000}
    )


def test_evaluate_canonicalises_and_clamps_into_the_current_bounds(caplog):
    assert evaluate(
        "g",
        {
            "share.delivery.count.limit": " +7 ",
            "share.renew.acknowledge.enable": "TRUE",
            "share.auto.offset.reset": " earliest",
        },
        BROKER,
    ) == {
        "share.delivery.count.limit": "7",
        "share.renew.acknowledge.enable": "true",
        "share.auto.offset.reset": "earliest",
    }
    narrow = {
        **BROKER,
        "group.share.max.delivery.count.limit": 6,
        "group.consumer.min.session.timeout.ms": 50_000,
        "group.consumer.session.timeout.ms": 50_000,
    }
    got = evaluate(
        "g", {"share.delivery.count.limit": "9", "consumer.session.timeout.ms": "46000", "no.longer.a.key": "1"}, narrow
    )
    assert got == {"share.delivery.count.limit": "6", "consumer.session.timeout.ms": "50000"}
    assert "outside the broker's bounds" in caplog.text


def test_every_key_has_documentation():
    assert all(k.doc for k in GROUP_CONFIG_KEYS)
    assert GROUP_CONFIGS["share.auto.offset.reset"].default == "latest"


# ---------------------------------------------------------------- the store


def test_the_store_persists_replaces_and_forgets(tmp_path):
    store = GroupConfigStore(LocalEngine(tmp_path).metadata, BROKER)
    store.load()  # nothing yet
    assert store.overrides("g") == {} and store.group_ids() == []
    store.set("g", {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "+6"})
    store.set("h", {"consumer.heartbeat.interval.ms": "6000"})
    assert dict(store.overrides("g")) == {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "6"}
    assert store.stored("g") == {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "+6"}
    with pytest.raises(TypeError):
        store.overrides("g")["x"] = "y"  # type: ignore[index]  # read-only to its readers
    again = GroupConfigStore(LocalEngine(tmp_path).metadata, BROKER)
    again.load()
    assert again.group_ids() == ["g", "h"] and again.stored("g") == store.stored("g")
    again.set("g", {})
    assert again.group_ids() == ["h"]
    assert json.loads((tmp_path / FILE).read_text())["groups"] == {"h": {"consumer.heartbeat.interval.ms": "6000"}}


def test_a_damaged_file_stops_start_up_with_its_name(tmp_path):
    (tmp_path / FILE).write_text("{not json")
    with pytest.raises(RuntimeError, match=FILE):
        GroupConfigStore(LocalEngine(tmp_path).metadata, BROKER).load()


# ---------------------------------------------------------------- the broker's own bounds (GroupCoordinatorConfig)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"group.consumer.session.timeout.ms": "6000"},
            "group.consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
        ),
        (
            {"group.consumer.session.timeout.ms": "70000"},
            "group.consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms",
        ),
        (
            {"group.consumer.heartbeat.interval.ms": "300"},
            "group.consumer.heartbeat.interval.ms must be greater than or equal to "
            "group.consumer.min.heartbeat.interval.ms",
        ),
        (
            {"group.consumer.max.heartbeat.interval.ms": "4000"},
            "group.consumer.max.heartbeat.interval.ms must be greater than or equal to "
            "group.consumer.min.heartbeat.interval.ms",
        ),
        (
            {"group.consumer.assignment.interval.ms": "20000"},
            "group.consumer.assignment.interval.ms must be less than or equal to "
            "group.consumer.max.assignment.interval.ms",
        ),
        (
            {"group.consumer.min.session.timeout.ms": "1", "group.consumer.session.timeout.ms": "5000"},
            "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms",
        ),
    ],
)
def test_the_brokers_consumer_keys_must_lie_within_their_bounds(overrides, message):
    from groupd.broker.config import ConfigError

    with pytest.raises(ConfigError, match=message):
        default_config(**overrides)


def test_lowered_bounds_allow_short_test_intervals():
    cfg = default_config(
        **{
            "group.consumer.heartbeat.interval.ms": "300",
            "group.consumer.session.timeout.ms": "6000",
            "group.consumer.min.heartbeat.interval.ms": "300",
            "group.consumer.min.session.timeout.ms": "6000",
        }
    )
    assert cfg["group.consumer.heartbeat.interval.ms"] == 300


def test_the_coordinator_reads_the_store_and_follows_its_changes(tmp_path):
    from groupd.coordinator.api import GroupConfig

    store = GroupConfigStore(LocalEngine(tmp_path).metadata, BROKER)
    cfg = GroupConfig()
    cfg.group_overrides = store.overrides
    assert cfg.consumer_for("g") is cfg.consumer
    store.set("g", {"consumer.heartbeat.interval.ms": "6000", "share.auto.offset.reset": "earliest"})
    first = cfg.consumer_for("g")
    assert (first.heartbeat_interval_ms, first.session_timeout_ms) == (6000, 45_000)
    assert cfg.consumer_for("g") is first  # made once per change
    store.set("g", {"consumer.heartbeat.interval.ms": "7000"})
    assert cfg.consumer_for("g").heartbeat_interval_ms == 7000
    store.set("g", {"share.auto.offset.reset": "earliest"})
    assert cfg.consumer_for("g") == cfg.consumer
    store.set("g", {})
    assert cfg.consumer_for("g") is cfg.consumer
