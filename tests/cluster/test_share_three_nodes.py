"""A share group across three ``python -m groupd`` nodes over one PostgreSQL, with librdkafka's ShareConsumer
(confluent-kafka, explicit acknowledgement): SIGKILL of the node owning the most leases while it consumes.

What KIP-932 guarantees, and what is checked: a record whose ACCEPT the consumer's commit_sync reported
done for its partition (the share coordinator's write was durable before the answer) is in ACCEPTED
(ACKNOWLEDGED) state and is never delivered again, whichever node leads its partition or holds its state
after the takeover; records acquired but not acknowledged when the leader died are offered again
(at-least-once: the ACQUIRED state is never persisted, the new leader reads AVAILABLE), so they may be
delivered twice; nothing produced is lost (every record is delivered at least once). The group
consumes again, from the partitions the dead node led too, within the lease plus 5 s."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.clients.test_other_clients import create_topic
from tests.cluster.test_three_nodes import LEASE_MS, owners, settings, three_nodes, wait_for
from tests.harness import BrokerProcess

pytestmark = pytest.mark.client

TOPIC, PARTITIONS = "jobs", 3
BEFORE, AFTER = 240, 120  # records produced before and after the kill
IN_FLIGHT = 60  # the last of those before: acquired, then the kill, then acknowledged


@pytest.fixture
def nodes(tmp_path: Path, postgresql_url: str):  # type: ignore[no-untyped-def]
    configs = [
        settings(postgresql_url, n) | {"group.share.record.lock.duration.ms": 15_000, "log.level": "INFO"}
        for n in (1, 2, 3)
    ]
    yield from three_nodes(tmp_path, configs)


def produce(bootstrap: str, values: list[tuple[int, bytes]]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for partition, v in values:
        p.produce(TOPIC, value=v, partition=partition)
    assert p.flush(30) == 0


class Member:
    """One explicit-mode ShareConsumer: what it was given, and which values a commit_sync confirmed."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import ShareConsumer

        self.consumer: Any = ShareConsumer(
            {"bootstrap.servers": bootstrap, "group.id": "workers", "share.acknowledgement.mode": "explicit"}
        )
        self.consumer.subscribe([TOPIC])
        self.delivered: list[tuple[bytes, int, float]] = []  # value, partition, when
        self.confirmed: dict[bytes, float] = {}  # value -> when its ACCEPT was confirmed
        self.errors = 0

    def take(self, seconds: float = 0.2) -> list[Any]:
        """One poll's records, not acknowledged yet."""
        got = []
        for m in self.consumer.poll(seconds):
            if m.error() is not None:
                self.errors += 1
                continue
            self.delivered.append((m.value(), m.partition(), time.monotonic()))
            got.append(m)
        return got

    def poll(self, seconds: float = 0.2) -> None:
        self.accept(self.take(seconds))

    def accept(self, messages: list[Any]) -> None:
        """ACCEPT each and commit_sync: the values of each partition the commit reports done are confirmed."""
        from confluent_kafka import AcknowledgeType, KafkaException

        pending: dict[int, list[bytes]] = {}
        for m in messages:
            self.consumer.acknowledge(m, AcknowledgeType.ACCEPT)
            pending.setdefault(m.partition(), []).append(m.value())
        if not pending:
            return
        try:
            results = self.consumer.commit_sync(15)
        except KafkaException:
            return  # nothing confirmed: these may come again
        now = time.monotonic()
        for tp, error in results.items():
            if error is None:
                for v in pending.get(tp.partition, ()):
                    self.confirmed.setdefault(v, now)


def test_a_share_group_across_a_sigkill_never_gets_an_accepted_record_again(
    nodes: list[BrokerProcess], postgresql_url: str
) -> None:
    bootstrap = ",".join(n.bootstrap for n in nodes)
    create_topic(nodes[0].bootstrap, TOPIC, PARTITIONS)
    wait_for(
        lambda: (o := owners(postgresql_url)) and sum(1 for (t, _p) in o if t == TOPIC) == PARTITIONS and o,
        10,
        "every partition owned",
    )
    member = Member(bootstrap)
    try:
        # share.auto.offset.reset is latest: markers until one came from every partition (each loaded)
        warm: set[int] = set()
        deadline = time.monotonic() + 40
        n = 0
        while warm != set(range(PARTITIONS)) and time.monotonic() < deadline:
            produce(bootstrap, [(p, b"warm-%d" % n) for p in range(PARTITIONS) if p not in warm])
            n += 1
            member.poll(0.5)
            warm = {p for v, p, _t in member.delivered if v.startswith(b"warm-")}
        assert warm == set(range(PARTITIONS)), warm
        values = [(i % PARTITIONS, b"job-%d" % i) for i in range(BEFORE + AFTER)]
        produce(bootstrap, values[: BEFORE - IN_FLIGHT])
        deadline = time.monotonic() + 30
        while len(member.confirmed) < BEFORE // 3 and time.monotonic() < deadline:
            member.poll()
        assert len(member.confirmed) >= BEFORE // 3
        produce(bootstrap, values[BEFORE - IN_FLIGHT : BEFORE])

        now_held = owners(postgresql_url)
        counts: dict[int, int] = {}
        for owner in now_held.values():
            if owner is not None:
                counts[owner] = counts.get(owner, 0) + 1
        led = {k: sum(1 for (t, _p), o in now_held.items() if t == TOPIC and o == k) for k in counts}
        victim = max(counts, key=lambda k: (counts[k], led[k]))  # of those owning the most, one leading jobs
        victim_partitions = {p for (t, p), o in now_held.items() if t == TOPIC and o == victim}
        confirmed_before = dict(member.confirmed)
        held: list[Any] = []
        deadline = time.monotonic() + 10
        while not held and time.monotonic() < deadline:
            held = member.take()  # in flight at the kill: acquired, not acknowledged yet
        nodes[victim - 1].kill()  # SIGKILL: no hand-over, its leases expire
        killed_at = time.monotonic()
        member.accept(held)  # refused where the dead node led: those come again
        survivors = ",".join(nd.bootstrap for i, nd in enumerate(nodes, 1) if i != victim)
        produce(survivors, values[BEFORE:])
        want = {v for _p, v in values}
        deadline = time.monotonic() + 45
        while not want <= {v for v, _p, _t in member.delivered} and time.monotonic() < deadline:
            member.poll()
        while time.monotonic() < deadline and not want <= set(member.confirmed):
            member.poll()  # the last acknowledgements confirmed
    finally:
        member.consumer.close()

    delivered = [(v, p, t) for v, p, t in member.delivered if not v.startswith(b"warm-")]
    seen = {v for v, _p, _t in delivered}
    assert want <= seen, f"never delivered: {sorted(want - seen)[:10]}"  # at least once, nothing lost
    # an ACCEPT confirmed is final: the value never comes again after its confirmation
    again = [(v, p) for v, p, t in delivered if v in member.confirmed and t > member.confirmed[v]]
    assert again == [], again[:10]
    assert confirmed_before and not [v for v, _p, t in delivered if v in confirmed_before and t > killed_at]
    # consumed again from every partition, the dead node's too, within the lease plus 5 s
    after = {p: min(t for _v, q, t in delivered if q == p and t > killed_at) for p in range(PARTITIONS)}
    recovered = max(after.values()) - killed_at
    assert recovered < LEASE_MS / 1000 + 5, (recovered, after, victim_partitions)
    twice = sum(1 for v in seen if sum(1 for w, _p, _t in delivered if w == v) > 1)
    assert twice <= len(held)  # only what was in flight at the kill may come twice
    print(
        f"share group: node {victim} killed (led {sorted(victim_partitions)}, {counts[victim]} leases): consumed"
        f" from every partition again {recovered:.2f} s after; {twice} records delivered twice (in flight at the kill)"
    )
