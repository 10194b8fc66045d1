"""Three kafka-python consumers in one group: disjoint assignments covering every partition; a member
that closes (LeaveGroup) or is killed (session expiry) hands its partitions to the others."""

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from tests.clients.kp import ChildConsumer, wait_until

pytestmark = pytest.mark.client
SESSION_MS = 2000


def make_member(bootstrap, topic, group):
    return ChildConsumer(
        bootstrap,
        topic,
        group_id=group,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=200,
        enable_auto_commit=False,
    )


def covered(members, n=6):
    parts = [m.assignment for m in members]
    return all(parts) and sum(len(p) for p in parts) == n and set().union(*parts) == set(range(n))


def setup_topic(bootstrap, name):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(name, 6, 1)])
    admin.close()


@pytest.mark.scenario("kafka-python", 3, 4)
def test_three_members_then_one_closes(broker_process):
    setup_topic(broker_process.bootstrap, "g3")
    members = [make_member(broker_process.bootstrap, "g3", "grp-close") for _ in range(3)]
    wait_until(lambda: covered(members), 30, "three disjoint assignments covering 6 partitions")
    members[0].stop()  # close() sends LeaveGroup
    rest = members[1:]
    wait_until(lambda: covered(rest), 15, "the two remaining members to take over all partitions")
    for m in rest:
        m.stop()


@pytest.mark.scenario("kafka-python", 5)
def test_killed_member_expires_and_others_take_over(broker_process):
    setup_topic(broker_process.bootstrap, "gk")
    members = [make_member(broker_process.bootstrap, "gk", "grp-kill") for _ in range(3)]
    try:
        wait_until(lambda: covered(members), 30, "three members sharing the partitions")
        members[0].kill()  # SIGKILL: no LeaveGroup, only the session timeout removes it
        killed_at = time.monotonic()
        survivors = members[1:]
        wait_until(lambda: covered(survivors), 30, "the survivors to take over after the session timeout")
        assert time.monotonic() - killed_at >= SESSION_MS / 1000 * 0.5
    finally:
        for m in members[1:]:
            m.stop()


@pytest.mark.scenario("kafka-python", 6)
@pytest.mark.engines  # storage: on both engines (tests/conftest.py)
def test_commit_then_new_consumer_resumes_across_restart(broker_process):
    setup_topic(broker_process.bootstrap, "gc")
    tp = TopicPartition("gc", 2)
    c = KafkaConsumer(bootstrap_servers=broker_process.bootstrap, group_id="grp-commit", enable_auto_commit=False)
    c.assign([tp])
    c.commit({tp: OffsetAndMetadata(17, "checkpoint", -1)})
    c.close()
    broker_process.restart()
    c2 = KafkaConsumer(bootstrap_servers=broker_process.bootstrap, group_id="grp-commit", enable_auto_commit=False)
    assert c2.committed(tp) == 17
    c2.assign([tp])
    assert c2.position(tp) == 17
    c2.close()
