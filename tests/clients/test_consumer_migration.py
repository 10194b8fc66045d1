"""Classic and consumer-protocol members in one group (KIP-848 online migration), with real clients:
kafka-python (classic, its own process), confluent-kafka with group.protocol=classic and confluent-kafka
with group.protocol=consumer. A mixed group shares a topic without a partition ever owned twice, every
record is consumed and the commits resume; a running classic group is upgraded by a consumer-protocol
member and downgraded again when it leaves, the classic members carrying on."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.clients.kp import ChildConsumer
from tests.clients.test_consumer_protocol import CONSUMER_PROTOCOL, produce
from tests.clients.test_other_clients import create_topic
from tests.harness import BrokerProcess

pytestmark = pytest.mark.client

CLIENT = "confluent-kafka (consumer protocol)"  # COMPATIBILITY.md's column
CLASSIC = {"session.timeout.ms": 10_000, "heartbeat.interval.ms": 300, "partition.assignment.strategy": "range"}


@pytest.fixture
def broker(tmp_path):
    proc = BrokerProcess(tmp_path / "data", {**CONSUMER_PROTOCOL, "group.initial.rebalance.delay.ms": "200"})
    proc.start()
    yield proc
    proc.kill()


def confluent(bootstrap: str, group: str, topic: str, protocol: str) -> Any:
    from confluent_kafka import Consumer

    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "auto.offset.reset": "earliest",
    }
    if protocol == "classic":
        config.update(CLASSIC)
    c = Consumer(config)
    c.subscribe([topic])
    return c


def kafka_python(bootstrap: str, group: str, topic: str) -> ChildConsumer:
    return ChildConsumer(
        bootstrap,
        topic,
        group_id=group,
        session_timeout_ms=10_000,
        heartbeat_interval_ms=300,
        auto_offset_reset="earliest",
        auto_commit_interval_ms=500,
    )


class Members:
    """The in-process members (polled here) and the kafka-python child, with what they consumed.

    Ownership is checked after every poll round: two in-process members never hold the same partition.
    The child's assignment comes over a pipe after its own poll returns, so it may lag a rebalance by that
    poll; a partition it shares with another member counts as owned twice only if that lasts a second."""

    def __init__(self, child: ChildConsumer | None, *members: Any) -> None:
        self.child = child
        self.members = list(members)
        self.got: set[str] = set()
        self.shared_since: dict[int, float] = {}

    def owned(self) -> list[set[int]]:
        views = [{tp.partition for tp in c.assignment()} for c in self.members]
        return views + ([set(self.child.assignment)] if self.child is not None else [])

    def poll(self) -> None:
        for c in self.members:
            m = c.poll(0.02)
            if m is not None and m.error() is None:
                self.got.add(m.value().decode())
        if self.child is not None:
            self.got.update(self.child.values())
        self.check()

    def check(self) -> None:
        local = [{tp.partition for tp in c.assignment()} for c in self.members]
        seen: set[int] = set()
        for view in local:
            assert not view & seen, f"partitions {sorted(view & seen)} owned twice: {local}"
            seen |= view
        now = time.monotonic()
        shared = set(self.child.assignment) & seen if self.child is not None else set()
        for p in list(self.shared_since):
            if p not in shared:
                del self.shared_since[p]
        for p in shared:
            since = self.shared_since.setdefault(p, now)
            assert now - since < 1.0, f"partition {p} owned by kafka-python and another member for over a second"

    def until(self, done: Any, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.poll()
            if done():
                return
        raise AssertionError(
            f"timed out after {seconds}s waiting for {what}: owned {self.owned()}, {len(self.got)} records"
        )

    def covering(self, partitions: int) -> bool:
        views = self.owned()
        return all(views) and sum(len(v) for v in views) == partitions and set().union(*views) == set(range(partitions))


@pytest.mark.scenario(CLIENT, 10)
def test_mixed_group_of_classic_and_consumer_members(broker):
    bs = broker.bootstrap
    create_topic(bs, "mx", 6)
    produce(bs, "mx", 300)
    first = confluent(bs, "mxg", "mx", "consumer")  # the consumer-protocol member makes the consumer group
    group = Members(None, first)
    group.until(lambda: len(first.assignment()) == 6, 30, "the first member's six partitions")
    child = kafka_python(bs, "mxg", "mx")
    try:
        classic = confluent(bs, "mxg", "mx", "classic")
        group.child = child
        group.members.append(classic)
        group.until(lambda: group.covering(6) and len(group.got) >= 300, 90, "three members sharing six partitions")
        assert group.got == {f"v{i}" for i in range(300)}
        produce(bs, "mx", 60, start=300)
        group.until(lambda: len(group.got) >= 360, 60, "the records produced while mixed")
        end = time.monotonic() + 2  # let the auto commits catch up with what was read
        while time.monotonic() < end:
            group.poll()
        for c in (first, classic):
            c.close()
    finally:
        child.stop()
    # the commits resume: a new member reads only what comes next
    produce(bs, "mx", 30, start=360)
    resumed = confluent(bs, "mxg", "mx", "consumer")
    after = Members(None, resumed)
    after.until(lambda: len(after.got) >= 30, 60, "the records after the commits")
    end = time.monotonic() + 1
    while time.monotonic() < end:
        after.poll()
    assert after.got == {f"v{i}" for i in range(360, 390)}, "resumed from the committed offsets"
    resumed.close()


@pytest.mark.scenario(CLIENT, 10)
def test_online_upgrade_then_downgrade(broker):
    bs = broker.bootstrap
    create_topic(bs, "ud", 6)
    produce(bs, "ud", 120)
    child = kafka_python(bs, "udg", "ud")
    try:
        classic = confluent(bs, "udg", "ud", "classic")
        group = Members(child, classic)
        group.until(lambda: group.covering(6) and len(group.got) >= 120, 90, "a classic group of two")
        # a consumer-protocol member joins the running classic group: it becomes a consumer group
        upgrader = confluent(bs, "udg", "ud", "consumer")
        group.members.append(upgrader)
        group.until(lambda: group.covering(6), 90, "the upgraded group sharing six partitions")
        produce(bs, "ud", 60, start=120)
        group.until(lambda: len(group.got) >= 180, 60, "the records produced after the upgrade")
        # it leaves: only classic members remain, the group turns classic and they rebalance
        group.members.remove(upgrader)
        upgrader.close()
        group.until(lambda: group.covering(6), 90, "the classic members taking every partition back")
        produce(bs, "ud", 60, start=180)
        group.until(lambda: len(group.got) >= 240, 60, "the records produced after the downgrade")
        assert group.got == {f"v{i}" for i in range(240)}
        classic.close()
    finally:
        child.stop()
