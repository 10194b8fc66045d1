"""Group configs with real clients: confluent-kafka's AdminClient (librdkafka sends its GROUP resource
type 3 as ConfigResource type 32) sets and describes them, a consumer-protocol member of a group with
consumer.heartbeat.interval.ms set heartbeats at that interval, and groupd-configs --entity-type groups
prints what kafka-configs.sh prints."""

import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from groupd.cli.configs_cli import main as configs
from tests.clients.test_consumer_protocol import CONSUMER_PROTOCOL, consumer
from tests.harness import BrokerProcess, free_port

pytestmark = pytest.mark.client


@pytest.fixture
def metered(tmp_path):
    """A broker with the consumer-protocol test intervals (300 ms heartbeats) and its /metrics."""
    mport = free_port()
    proc = BrokerProcess(tmp_path / "data", {**CONSUMER_PROTOCOL, "metrics.listener": f"127.0.0.1:{mport}"}).start()
    proc.metrics_port = mport
    yield proc
    proc.kill()


def admin(bootstrap):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def heartbeats(mport):
    with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return sum(
        s.value for f in text_string_to_metric_families(text) for s in f.samples
        if s.name == "groupd_requests_total" and s.labels.get("api") == "ConsumerGroupHeartbeat"
    )


def alter(a, group, **configs):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entries = [
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    (future,) = a.incremental_alter_configs([resource]).values()
    return future.result(timeout=15)


def describe(a, group):
    from confluent_kafka.admin import ConfigResource, ResourceType

    (future,) = a.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    return future.result(timeout=15)


def test_admin_client_sets_and_describes_group_configs(broker_process):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigSource

    a = admin(broker_process.bootstrap)
    alter(a, "cfg-group", share_auto_offset_reset="earliest", share_record_lock_duration_ms="20000")
    entries = describe(a, "cfg-group")
    assert entries["share.auto.offset.reset"].value == "earliest"
    assert entries["share.auto.offset.reset"].source == ConfigSource.GROUP_CONFIG.value
    assert entries["share.record.lock.duration.ms"].value == "20000"
    assert entries["share.delivery.count.limit"].value == "5"
    assert entries["share.delivery.count.limit"].source == ConfigSource.DEFAULT_CONFIG.value
    assert len(entries) == 17
    with pytest.raises(KafkaException) as err:
        alter(a, "cfg-group", share_record_lock_duration_ms="61000")
    assert err.value.args[0].code() == 40  # INVALID_CONFIG
    assert "group.share.max.record.lock.duration.ms" in err.value.args[0].str()
    assert describe(a, "cfg-group")["share.record.lock.duration.ms"].value == "20000"


def test_a_consumer_protocol_member_heartbeats_at_its_groups_interval(metered):
    """The broker's interval is 300 ms; the group's consumer.heartbeat.interval.ms of 3000 is what its member
    is told (ConsumerGroupHeartbeat's HeartbeatIntervalMs) and how often librdkafka then heartbeats."""
    bs = metered.bootstrap
    a = admin(bs)
    from confluent_kafka.admin import NewTopic

    a.create_topics([NewTopic("hb-topic", 1, 1)])["hb-topic"].result(timeout=15)
    alter(a, "slow-hb", consumer_heartbeat_interval_ms="3000")

    def beats_while_stable(group):
        c = consumer(bs, group, ["hb-topic"])
        try:
            deadline = time.monotonic() + 20
            while not c.assignment() and time.monotonic() < deadline:
                c.poll(0.1)
            assert c.assignment(), "no assignment"
            for _ in range(10):
                c.poll(0.1)  # past the acknowledging heartbeat
            before = heartbeats(metered.metrics_port)
            end = time.monotonic() + 6
            while time.monotonic() < end:
                c.poll(0.1)
            return heartbeats(metered.metrics_port) - before
        finally:
            c.close()

    fast = beats_while_stable("fast-hb")
    slow = beats_while_stable("slow-hb")
    assert fast >= 10, fast  # every 300 ms for 6 s
    assert slow <= 4, slow  # every 3 s


def run(capsys, *args):
    code = configs(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_groupd_configs_groups(broker_process, capsys):
    bs = broker_process.bootstrap
    code, out, err = run(
        capsys, "--bootstrap-server", bs, "--entity-type", "groups", "--entity-name", "cli-g", "--describe"
    )
    assert (code, out.strip()) == (0, "The group 'cli-g' doesn't exist and doesn't have dynamic config."), err
    code, out, err = run(
        capsys,
        "--bootstrap-server",
        bs,
        "--entity-type",
        "groups",
        "--entity-name",
        "cli-g",
        "--alter",
        "--add-config",
        "share.auto.offset.reset=earliest,share.delivery.count.limit=7",
    )
    assert (code, out.strip()) == (0, "Completed updating config for group cli-g."), err
    code, out, err = run(
        capsys, "--bootstrap-server", bs, "--entity-type", "groups", "--entity-name", "cli-g", "--describe"
    )
    assert code == 0, err
    assert out.splitlines() == [
        "Dynamic configs for group cli-g are:",
        "  share.auto.offset.reset=earliest sensitive=false "
        "synonyms={DYNAMIC_GROUP_CONFIG:share.auto.offset.reset=earliest, "
        "DEFAULT_CONFIG:share.auto.offset.reset=latest}",
        "  share.delivery.count.limit=7 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:share.delivery.count.limit=7, "
        "DEFAULT_CONFIG:group.share.delivery.count.limit=5}",
    ]
    code, out, err = run(capsys, "--bootstrap-server", bs, "--group", "cli-g", "--describe", "--all")
    assert code == 0 and out.splitlines()[0] == "All configs for group cli-g are:" and len(out.splitlines()) == 18
    assert (
        "  consumer.session.timeout.ms=45000 sensitive=false "
        "synonyms={DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}"
        in out
    )
    code, out, err = run(
        capsys,
        "--bootstrap-server",
        bs,
        "--entity-type",
        "groups",
        "--entity-name",
        "cli-g",
        "--alter",
        "--delete-config",
        "share.delivery.count.limit",
        "--add-config",
        "share.isolation.level=read_committed",
    )
    assert code == 0, err
    code, out, _ = run(
        capsys, "--bootstrap-server", bs, "--entity-type", "groups", "--describe"
    )  # every group with configs
    assert [line.split("=")[0].strip() for line in out.splitlines()[1:]] == [
        "share.auto.offset.reset",
        "share.isolation.level",
    ]
    code, out, err = run(
        capsys,
        "--bootstrap-server",
        bs,
        "--group",
        "cli-g",
        "--alter",
        "--add-config",
        "share.isolation.level=serializable",
    )
    assert code == 1 and err.startswith(
        "Error: INVALID_CONFIG: Invalid value serializable for configuration share.isolation.level"
    )
