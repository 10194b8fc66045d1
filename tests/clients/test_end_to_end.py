"""kafka-python end to end: producer -> 6 partitions -> a group of 3 reads everything exactly once,
commits, and after a broker restart a new member reads nothing twice and misses nothing."""

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from tests.clients.kp import ChildConsumer, wait_until

pytestmark = pytest.mark.client


@pytest.mark.scenario('kafka-python', 3, 6)
@pytest.mark.parametrize("compression", [None, "gzip"])
@pytest.mark.engines  # storage: on both engines (tests/conftest.py)
def test_group_reads_everything_once_and_resumes_after_restart(broker_process, compression):
    bootstrap = broker_process.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("e2e", 6, 1)])
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type=compression, linger_ms=5)
    sent = [f"v{i}" for i in range(600)]
    for i, v in enumerate(sent):
        producer.send("e2e", key=str(i).encode(), value=v.encode())
    producer.flush(timeout=30)

    def member():
        return ChildConsumer(
            bootstrap, "e2e", commit=True, group_id="e2e-group", auto_offset_reset="earliest",
            enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=300,
        )

    members = [member() for _ in range(3)]
    wait_until(lambda: sum(len(m.values()) for m in members) >= 600, 60, "600 records across the group")
    wait_until(
        lambda: all(m.assignment for m in members) and sum(len(m.assignment) for m in members) == 6,
        30,
        "3 members with 6 partitions",
    )
    got = [v for m in members for v in m.values()]
    assert sorted(got) == sorted(sent), "every record exactly once"
    parts = [m.assignment for m in members]
    assert set().union(*parts) == set(range(6)) and sum(len(p) for p in parts) == 6
    for m in members:
        m.stop()

    broker_process.restart()
    producer.send("e2e", key=b"late", value=b"after-restart").get(timeout=30)
    late = member()
    wait_until(lambda: late.values(), 30, "the record produced after the restart")
    late.stop()
    assert late.values() == ["after-restart"], "nothing read twice, nothing missed"
    producer.close()
    admin.close()
