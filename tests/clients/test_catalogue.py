"""The catalogue's membership scenarios for each Python client, members in their own processes:
4 one closes, 5 one is killed (session expiry), 7 a static member restarts without a rebalance."""

import time

import pytest

from tests.clients.kp import ChildMember, wait_until
from tests.clients.test_other_clients import create_topic

pytestmark = pytest.mark.client
CLIENTS = ["kafka-python", "confluent-kafka", "aiokafka"]
SESSION_MS = 3000


def covered(members, n=6):
    parts = [m.assignment for m in members]
    return all(parts) and sum(map(len, parts)) == n and set().union(*parts) == set(range(n))


@pytest.mark.parametrize("client", [pytest.param(c, marks=pytest.mark.scenario(c, 3, 4, 5)) for c in CLIENTS])
def test_close_and_kill_hand_partitions_over(broker_process, client):
    topic = f"cat-{client}"
    create_topic(broker_process.bootstrap, topic)
    members = [ChildMember(client, broker_process.bootstrap, topic, f"{topic}-g", SESSION_MS) for _ in range(3)]
    try:
        wait_until(lambda: covered(members), 45, f"{client}: 3 members sharing 6 partitions")
        members[0].stop()  # close(): LeaveGroup
        wait_until(lambda: covered(members[1:]), 30, f"{client}: the other two taking over after a close")
        members[1].kill()  # no LeaveGroup: only the session timeout removes it
        killed = time.monotonic()
        wait_until(lambda: covered(members[2:]), 30, f"{client}: the last member taking over after the session timeout")
        assert time.monotonic() - killed >= SESSION_MS / 1000 * 0.5
    finally:
        for m in members:
            m.kill()


@pytest.mark.parametrize("client", [pytest.param(c, marks=pytest.mark.scenario(c, 7)) for c in CLIENTS])
def test_static_member_restart_keeps_partitions(broker_process, client):
    topic = f"static-{client}"
    create_topic(broker_process.bootstrap, topic, 4)
    group = f"{topic}-g"
    a = ChildMember(client, broker_process.bootstrap, topic, group, 15000, instance="a")
    b = ChildMember(client, broker_process.bootstrap, topic, group, 15000, instance="b")
    try:
        wait_until(lambda: covered([a, b], 4), 45, f"{client}: two static members sharing 4 partitions")
        before_a, before_b = set(a.assignment), set(b.assignment)
        a.kill()  # gone without a word; restarted within its session timeout with the same instance id
        a2 = ChildMember(client, broker_process.bootstrap, topic, group, 15000, instance="a")
        wait_until(
            lambda: a2.assignment == before_a, 30, f"{client}: the restarted static member getting its partitions back"
        )
        assert b.assignment == before_b, "the other member kept its partitions: no rebalance"
        a2.kill()
    finally:
        a.kill()
        b.kill()
