"""confluent-kafka's ShareConsumer (librdkafka's KIP-932 share consumer) against a broker started by the
test: members share one partition, each record goes to one member at a time, explicit RELEASE redelivers
with a higher delivery count, REJECT archives, a member that holds records and stops answering loses
them when its locks run out (a killed one at once: its connection closes, Kafka releases the session),
and a restart keeps what was acknowledged.

The share.auto.offset.reset of a new group is ``latest``: records produced before a share-partition is
first fetched are not delivered, so each test produces only after a warm-up record reached a member.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.clients.test_other_clients import create_topic
from tests.harness import BrokerProcess

pytestmark = pytest.mark.client

LOCK_MS = 15_000  # group.share.record.lock.duration.ms: Kafka's minimum
BROKER = {"group.share.record.lock.duration.ms": str(LOCK_MS), "group.share.heartbeat.interval.ms": "5000"}


@pytest.fixture
def share_broker(tmp_path):
    proc = BrokerProcess(tmp_path / "data", BROKER)
    proc.start()
    yield proc
    proc.kill()


def share_consumer(bootstrap, group, topic, explicit=False):
    from confluent_kafka import ShareConsumer

    conf = {"bootstrap.servers": bootstrap, "group.id": group}
    if explicit:
        conf["share.acknowledgement.mode"] = "explicit"
    c = ShareConsumer(conf)
    c.subscribe([topic])
    return c


def produce(bootstrap, topic, values):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, value=v)
    assert p.flush(15) == 0


def records(c, timeout=0.2):
    return [m for m in c.poll(timeout) if m.error() is None]


def warm_up(bootstrap, topic, members, seconds=40):
    """Produce markers until one reaches a member: the share-partition is loaded and assigned."""
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        produce(bootstrap, topic, [f"warm-{n}".encode()])
        n += 1
        for c in members:
            for m in records(c):
                if m.value().startswith(b"warm-"):
                    return
    raise AssertionError("no member ever received a record")


def drain(members, want, seconds, ack=None):
    """Poll every member until ``want`` values were seen; {value: [(member, delivery count)]}."""
    seen: dict[bytes, list[tuple[int, int]]] = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not want <= set(seen):
        for i, c in enumerate(members):
            for m in records(c, 0.1):
                if m.value().startswith(b"warm-"):
                    if ack is not None:
                        c.acknowledge(m)
                    continue
                seen.setdefault(m.value(), []).append((i, m.delivery_count()))
                if ack is not None:
                    ack(c, m)
    return seen


@pytest.mark.scenario("confluent-kafka ShareConsumer", 32)
def test_three_members_share_one_partition_and_each_record_goes_to_one(share_broker):
    bs = share_broker.bootstrap
    create_topic(bs, "jobs", 1)
    members = [share_consumer(bs, "workers", "jobs") for _ in range(3)]
    try:
        warm_up(bs, "jobs", members)
        values = {f"job-{i}".encode() for i in range(300)}
        counts = [0, 0, 0]
        deadline = time.monotonic() + 60
        seen: dict[bytes, list[int]] = {}
        # small batches keep every member busy: each poll takes what is there
        for i in range(0, 300, 10):
            produce(bs, "jobs", [f"job-{j}".encode() for j in range(i, i + 10)])
            for k, c in enumerate(members):
                for m in records(c, 0.05):
                    if not m.value().startswith(b"warm-"):
                        seen.setdefault(m.value(), []).append(k)
                        counts[k] += 1
        while time.monotonic() < deadline and not values <= set(seen):
            for k, c in enumerate(members):
                for m in records(c, 0.1):
                    if not m.value().startswith(b"warm-"):
                        seen.setdefault(m.value(), []).append(k)
                        counts[k] += 1
        assert values <= set(seen)
        assert all(len(who) == 1 for who in seen.values()), "a record went to two members"
        assert all(counts), f"a member received nothing: {counts}"
    finally:
        for c in members:
            c.close()


@pytest.mark.scenario("confluent-kafka ShareConsumer", 33)
@pytest.mark.engines  # storage: on both engines (tests/conftest.py)
def test_release_redelivers_with_a_higher_count_and_reject_archives(share_broker):
    from confluent_kafka import AcknowledgeType

    bs = share_broker.bootstrap
    create_topic(bs, "tasks", 1)
    c = share_consumer(bs, "g-release", "tasks", explicit=True)
    try:
        warm_up_explicit(bs, "tasks", c)
        produce(bs, "tasks", [b"keep", b"again", b"poison"])
        decided: dict[bytes, list[int]] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
            len(decided.get(b"again", [])) >= 2 and b"keep" in decided and b"poison" in decided
        ):
            for m in c.poll(0.2):
                if m.error() is not None:
                    continue
                decided.setdefault(m.value(), []).append(m.delivery_count())
                if m.value() == b"again" and m.delivery_count() == 1:
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                elif m.value() == b"poison":
                    c.acknowledge(m, AcknowledgeType.REJECT)
                else:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync()
        assert decided[b"again"][:2] == [1, 2]
        assert decided[b"keep"] == [1]
        # nothing rejected or accepted comes back
        end = time.monotonic() + 3
        while time.monotonic() < end:
            for m in c.poll(0.2):
                assert m.value() not in (b"poison", b"keep"), m.value()
                c.acknowledge(m)
        assert decided[b"poison"] == [1]
    finally:
        c.close()


def warm_up_explicit(bootstrap, topic, c, seconds=40):
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        produce(bootstrap, topic, [f"warm-{n}".encode()])
        n += 1
        got = [m for m in c.poll(0.3) if m.error() is None]
        for m in got:
            c.acknowledge(m)
        if got:
            c.commit_sync()
            return
    raise AssertionError("no record ever arrived")


HOLDER = """
import json, sys, time
from confluent_kafka import ShareConsumer
spec = json.loads(sys.argv[1])
c = ShareConsumer({"bootstrap.servers": spec["bs"], "group.id": spec["group"], \
"share.acknowledgement.mode": "explicit"})
c.subscribe([spec["topic"]])
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    got = [m for m in c.poll(0.2) if m.error() is None]
    if got:  # held: never acknowledged
        print(json.dumps([m.value().decode() for m in got]), flush=True)
        break
time.sleep(600)
"""


@pytest.mark.scenario("confluent-kafka ShareConsumer", 34)
@pytest.mark.parametrize("how", ["stopped", "killed"])
def test_a_member_holding_records_loses_them_to_the_others(share_broker, how):
    """The holder joins alone and takes records without acknowledging them; then a second member joins.
    Stopped (SIGSTOP, its connection open), the holder's records come to the other member once their
    locks run out; killed, at once (its connection closes, ending its share session)."""
    bs = share_broker.bootstrap
    create_topic(bs, "held", 1)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, json.dumps({"bs": bs, "group": "g-held", "topic": "held"})],
        stdout=subprocess.PIPE,
        text=True,
    )
    other = None
    try:
        os.set_blocking(holder.stdout.fileno(), False)
        deadline = time.monotonic() + 40
        held: list[str] = []
        n = 0
        while time.monotonic() < deadline and not held:  # until its share-partition is loaded and fetched
            produce(bs, "held", [f"h-{i}".encode() for i in range(n, n + 5)])
            n += 5
            time.sleep(0.5)
            line = holder.stdout.readline()
            if line:
                held = json.loads(line)
        assert held, "the holder never got records"
        start = time.monotonic()
        holder.send_signal(signal.SIGSTOP if how == "stopped" else signal.SIGKILL)
        other = share_consumer(bs, "g-held", "held")
        seen = drain([other], {v.encode() for v in held}, LOCK_MS / 1000 + 30)
        took = time.monotonic() - start
        assert {v.encode() for v in held} <= set(seen)
        assert all(seen[v.encode()][-1][1] >= 2 for v in held)  # a second delivery
        if how == "stopped":  # the connection stays open: only the lock's expiry frees them
            assert took >= LOCK_MS / 1000 - 2
    finally:
        holder.kill()
        holder.wait()
        if other is not None:
            other.close()


@pytest.mark.scenario("confluent-kafka ShareConsumer", 35)
@pytest.mark.engines  # storage: on both engines (tests/conftest.py)
def test_restart_keeps_acknowledged_state(share_broker):
    from confluent_kafka import AcknowledgeType

    bs = share_broker.bootstrap
    create_topic(bs, "durable", 1)
    c = share_consumer(bs, "g-durable", "durable", explicit=True)
    try:
        warm_up_explicit(bs, "durable", c)
        produce(bs, "durable", [f"d-{i}".encode() for i in range(10)])
        accepted: set[bytes] = set()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(accepted) < 5:
            for m in c.poll(0.2):
                if m.error() is not None:
                    continue
                if len(accepted) < 5:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                    accepted.add(m.value())
                else:
                    c.acknowledge(m, AcknowledgeType.RELEASE)
            c.commit_sync()
        assert len(accepted) == 5
    finally:
        c.close()
    share_broker.restart()
    c = share_consumer(bs, "g-durable", "durable", explicit=True)
    try:
        rest: set[bytes] = set()
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and len(rest) < 5:
            for m in c.poll(0.3):
                if m.error() is None:
                    assert m.value() not in accepted, f"{m.value()} was acknowledged before the restart"
                    rest.add(m.value())
                    c.acknowledge(m)
            c.commit_sync()
        assert rest == {f"d-{i}".encode() for i in range(10)} - accepted
    finally:
        c.close()


@pytest.mark.scenario("confluent-kafka ShareConsumer", 36)
def test_earliest_through_the_group_config(share_broker):
    """share.auto.offset.reset=earliest as a GROUP config (IncrementalAlterConfigs, as kafka-configs.sh
    --entity-type groups sets it): records produced before anyone joined are delivered.

    And the time to the first of them, as against Kafka 4.3: the join's answer is empty while the share
    coordinator initializes the partitions, librdkafka heartbeats again after the answered interval (5 s)
    and gets them then, and its first ShareFetch hands over the records (tests/wire/test_share_first_record.py
    pins each step)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    bs = share_broker.bootstrap
    create_topic(bs, "early", 1)
    produce(bs, "early", [f"e-{i}".encode() for i in range(5)])
    admin = AdminClient({"bootstrap.servers": bs})
    resource = ConfigResource(
        ResourceType.GROUP,
        "g-early",
        incremental_configs=[
            ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    try:
        admin.incremental_alter_configs([resource])[resource].result(15)
    except KafkaException as exc:  # a build without group configs (their branch) refuses GROUP resources
        pytest.skip(f"group configs not in this build: {exc}")
    subscribed = time.monotonic()
    c = share_consumer(bs, "g-early", "early")
    try:
        first, values = None, set()
        while first is None and time.monotonic() - subscribed < 30:
            values = {m.value() for m in records(c, 0.05)}
            if values:
                first = time.monotonic() - subscribed
        assert first is not None and 4.9 <= first < 9.0, first  # the heartbeat interval, then at once
        want = {f"e-{i}".encode() for i in range(5)}
        seen = drain([c], want - values, 30)
        assert values | set(seen) == want
    finally:
        c.close()
