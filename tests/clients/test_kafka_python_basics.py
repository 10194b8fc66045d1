"""kafka-python connects, negotiates versions and lists topics against a broker process."""

import pytest

pytestmark = pytest.mark.client


@pytest.mark.scenario('kafka-python', 1, 2)
def test_admin_and_consumer_connect(broker_process):
    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker_process.bootstrap, request_timeout_ms=10000)
    admin.create_topics([NewTopic("basics", 3, 1)])
    assert "basics" in admin.list_topics()
    consumer = KafkaConsumer(bootstrap_servers=broker_process.bootstrap)
    assert consumer.partitions_for_topic("basics") == {0, 1, 2}
    consumer.close()
    admin.delete_topics(["basics"])
    assert "basics" not in admin.list_topics()
    admin.close()


def test_sigterm_exits_zero(tmp_path):
    from tests.harness import BrokerProcess

    proc = BrokerProcess(tmp_path / "data").start()
    assert proc.stop() == 0


def test_invalid_config_refused_at_start(tmp_path):
    import subprocess
    import sys


    out = subprocess.run(
        [sys.executable, "-m", "groupd", "--override", "group.max.size=-3"],
        capture_output=True, text=True, timeout=30,
    )
    assert out.returncode == 2
    assert "group.max.size" in out.stderr
