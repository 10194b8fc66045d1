"""confluent-kafka (librdkafka) with group.protocol=consumer (KIP-848): the broker assigns, members
reconcile through ConsumerGroupHeartbeat alone."""

import json
import subprocess
import sys
import threading
import time

import pytest

from tests.clients.test_other_clients import create_topic
from tests.harness import BrokerProcess

pytestmark = pytest.mark.client

# Short broker-side intervals so reconciliation steps take well under a second (Kafka: 5 s, 45 s)
CONSUMER_PROTOCOL = {
    "group.consumer.heartbeat.interval.ms": "300", "group.consumer.session.timeout.ms": "6000",
    # below Kafka's bounds (5000 and 45000), so the bounds come down too, as Kafka requires
    "group.consumer.min.heartbeat.interval.ms": "300", "group.consumer.min.session.timeout.ms": "6000",
}


@pytest.fixture
def kip848_broker(tmp_path):
    proc = BrokerProcess(tmp_path / "data", CONSUMER_PROTOCOL)
    proc.start()
    yield proc
    proc.kill()


def produce(bootstrap, topic, n, start=0):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + n):
        p.produce(topic, key=str(i), value=f"v{i}")
    assert p.flush(15) == 0


def consumer(bootstrap, group, topics, **extra):
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", **extra})
    c.subscribe(topics)
    return c


def owned(c):
    return {(tp.topic, tp.partition) for tp in c.assignment()}


def assert_disjoint(members):
    seen = {}
    for i, c in enumerate(members):
        for tp in owned(c):
            assert tp not in seen, f"{tp} owned by members {seen[tp]} and {i} at once"
            seen[tp] = i


def poll_until(members, done, seconds, got=None):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for c in members:
            m = c.poll(0.02)
            if m is not None and m.error() is None and got is not None:
                got.append(m.value())
        assert_disjoint(members)
        if done():
            return True
    return False


CHILD = """
import json, sys, time
from confluent_kafka import Consumer
spec = json.loads(sys.argv[1])
c = Consumer({"bootstrap.servers": spec["bs"], "group.id": spec["group"], "group.protocol": "consumer"})
c.subscribe([spec["topic"]])
last = None
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    c.poll(0.05)
    now = sorted(tp.partition for tp in c.assignment())
    if now != last:
        last = now
        print(json.dumps(now), flush=True)
"""


@pytest.mark.scenario("confluent-kafka (consumer protocol)", 1, 2, 3, 4, 5)
def test_a_group_of_three_forms_a_member_leaves_and_one_crashes(kip848_broker):
    bs = kip848_broker.bootstrap
    create_topic(bs, "kc", 6)
    produce(bs, "kc", 300)
    members = [consumer(bs, "kcg", ["kc"]) for _ in range(3)]
    got = []
    assert poll_until(members, lambda: len(got) >= 300 and all(len(owned(c)) == 2 for c in members), 60, got)
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(300))
    # a fourth member in its own process joins, then is killed: the others get its partitions back
    child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps({"bs": bs, "group": "kcg", "topic": "kc"})],
                             stdout=subprocess.PIPE, text=True)
    reports: list[list[int]] = []  # the child's assignments, read by a thread: the members must keep polling
    reader = threading.Thread(target=lambda: reports.extend(json.loads(line) for line in child.stdout), daemon=True)
    reader.start()
    try:
        assert poll_until(members, lambda: bool(reports and reports[-1]), 40), "the fourth member never got a partition"
        child_owned = reports[-1]
        assert poll_until(members, lambda: sum(len(owned(c)) for c in members) == 6 - len(child_owned), 20)
        assert not {("kc", p) for p in child_owned} & set().union(*(owned(c) for c in members))
    finally:
        child.kill()
        child.wait()
    # the crashed member's session (6 s) ends; the three share all six again
    assert poll_until(members, lambda: sum(len(owned(c)) for c in members) == 6, 30)
    members[0].close()  # leaves with epoch -1
    rest = members[1:]
    assert poll_until(rest, lambda: all(len(owned(c)) == 3 for c in rest), 30)
    for c in rest:
        c.close()


@pytest.mark.scenario("confluent-kafka (consumer protocol)", 6)
def test_commits_and_resume(kip848_broker):
    bs = kip848_broker.bootstrap
    create_topic(bs, "kr", 3)
    produce(bs, "kr", 60)
    c = consumer(bs, "krg", ["kr"], **{"enable.auto.commit": False})
    got = []
    assert poll_until([c], lambda: len(got) >= 60, 40, got)
    c.commit(asynchronous=False)
    c.close()
    produce(bs, "kr", 30, start=60)
    c = consumer(bs, "krg", ["kr"])
    again = []
    assert poll_until([c], lambda: len(again) >= 30, 40, again)
    assert sorted(again) == sorted(f"v{i}".encode() for i in range(60, 90)), "resumed from the committed offsets"
    c.close()


@pytest.mark.scenario("confluent-kafka (consumer protocol)", 7)
def test_static_member_restart_keeps_its_partitions(kip848_broker):
    bs = kip848_broker.bootstrap
    create_topic(bs, "ks", 4)
    a = consumer(bs, "ksg", ["ks"], **{"group.instance.id": "a"})
    b = consumer(bs, "ksg", ["ks"], **{"group.instance.id": "b"})
    assert poll_until([a, b], lambda: len(owned(a)) == 2 and len(owned(b)) == 2, 40)
    before = owned(a)
    a.close()  # a static member leaves with epoch -2: its partitions wait for it
    a2 = consumer(bs, "ksg", ["ks"], **{"group.instance.id": "a"})
    assert poll_until([a2, b], lambda: owned(a2) == before, 30)
    assert len(owned(b)) == 2
    a2.close()
    b.close()


def test_regex_subscription_picks_up_a_new_topic(kip848_broker):
    bs = kip848_broker.bootstrap
    create_topic(bs, "rx-1", 2)
    produce(bs, "rx-1", 10)
    c = consumer(bs, "rxg", ["^rx-.*"])
    got = []
    assert poll_until([c], lambda: len(got) >= 10, 40, got)
    create_topic(bs, "rx-2", 2)
    produce(bs, "rx-2", 10, start=10)
    assert poll_until([c], lambda: len(got) >= 20 and {t for t, _ in owned(c)} == {"rx-1", "rx-2"}, 40, got)
    c.close()
