"""A consumer group's own configs (GROUP resources) in the core: GroupMetadataManager 4.3 reads, per group,
consumer.session.timeout.ms for the session timer it schedules at each heartbeat and at load,
consumer.heartbeat.interval.ms for the HeartbeatIntervalMs it answers, and consumer.assignment.interval.ms
between target assignments; a group without them runs with the broker's group.consumer.* values."""

from groupd.coordinator import group_types
from groupd.coordinator import shard as core
from groupd.coordinator.api import GroupConfig
from groupd.coordinator.consumer.api import ConsumerGroupHeartbeat
from groupd.coordinator.consumer.config import ConsumerConfig
from groupd.coordinator.consumer.group import consumer_groups

from .driver import Driver

OVERRIDES = {"slow": {"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "12000"}}


def cfg(overrides=OVERRIDES):
    return GroupConfig(group_overrides=lambda group_id: overrides.get(group_id, {}))


def setup():
    state = core.ShardState(0)
    d = Driver(groups=consumer_groups(state))
    state.topics = d.topics
    d.topic("T", 3)
    return state


def join(state, group, config, now=1000):
    hb = ConsumerGroupHeartbeat(group, "m1", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("T",), owned=())
    result = group_types.consumer_group_heartbeat(state, hb, 1, now, config)
    (_, resp), = result.responses
    return resp, {op.key: op.deadline_ms for op in result.timers}


def test_a_group_with_overrides_gets_its_heartbeat_interval_and_session_timeout():
    state = setup()
    resp, timers = join(state, "slow", cfg())
    assert resp.heartbeat_interval_ms == 12_000
    assert timers[("consumer-session", "slow", "m1")] == 1000 + 50_000


def test_a_group_without_overrides_gets_the_brokers():
    state = setup()
    resp, timers = join(state, "plain", cfg())
    assert resp.heartbeat_interval_ms == 5_000
    assert timers[("consumer-session", "plain", "m1")] == 1000 + 45_000


def test_only_the_keys_set_change_and_share_keys_are_not_the_consumers():
    base = GroupConfig(
        consumer=ConsumerConfig(session_timeout_ms=30_000, heartbeat_interval_ms=3_000, assignment_interval_ms=700)
    )
    base.group_overrides = lambda _g: {"consumer.heartbeat.interval.ms": "4000", "share.heartbeat.interval.ms": "9000"}
    got = base.consumer_for("g")
    assert (got.session_timeout_ms, got.heartbeat_interval_ms, got.assignment_interval_ms) == (30_000, 4_000, 700)
    base.group_overrides = lambda _g: {"share.session.timeout.ms": "50000"}
    assert base.consumer_for("g") is base.consumer
    base.group_overrides = lambda _g: {"consumer.assignment.interval.ms": "0"}
    assert base.consumer_for("g").assignment_interval_ms == 0


def test_an_override_set_later_applies_at_the_next_heartbeat():
    overrides: dict[str, dict[str, str]] = {}
    state = setup()
    resp, _ = join(state, "g", cfg(overrides))
    assert resp.heartbeat_interval_ms == 5_000
    overrides["g"] = {"consumer.heartbeat.interval.ms": "7000", "consumer.session.timeout.ms": "55000"}
    hb = ConsumerGroupHeartbeat("g", "m1", resp.member_epoch, owned=None)
    result = group_types.consumer_group_heartbeat(state, hb, 2, 2000, cfg(overrides))
    ((_, again),) = result.responses
    assert again.heartbeat_interval_ms == 7_000
    assert {op.key: op.deadline_ms for op in result.timers}[("consumer-session", "g", "m1")] == 2000 + 55_000


def test_loading_rearms_each_groups_session_with_its_own_timeout():
    state = setup()
    join(state, "slow", cfg())
    join(state, "plain", cfg())
    timers = {op.key: op.deadline_ms for op in core.on_loaded(state, 9000, cfg()).timers}
    assert timers[("consumer-session", "slow", "m1")] == 9000 + 50_000
    assert timers[("consumer-session", "plain", "m1")] == 9000 + 45_000
