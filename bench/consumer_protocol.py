"""The consumer-group (KIP-848) core without sockets: target assignment time and heartbeat throughput.

    .venv/bin/python -m bench.consumer_protocol [members] [partitions]

Kafka's reference (its JMH benchmark of the Java uniform assignor): 10,000 members x 10,000 partitions
in 4.3 ms. This measures the Python assignors and the pure heartbeat handler on one core, bounded in
count and time.
"""

from __future__ import annotations

import sys
import time
import uuid

from groupd.coordinator.consumer.api import ConsumerGroupHeartbeat
from groupd.coordinator.consumer.assignors import MemberSpec, assign
from groupd.coordinator.consumer.config import ConsumerConfig
from groupd.coordinator.consumer.heartbeat import TopicInfo, heartbeat


def best_of(fn, runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def assignment_times(n_members: int, n_partitions: int, n_topics: int = 10) -> dict[str, float]:
    topics = {uuid.UUID(int=i + 1): n_partitions // n_topics for i in range(n_topics)}
    ids = frozenset(topics)
    fresh = {f"m{i}": MemberSpec(ids) for i in range(n_members)}
    out = {"uniform, fresh": best_of(lambda: assign("uniform", fresh, topics))}
    first = assign("uniform", fresh, topics)
    # one member leaves: every other keeps its target and the leaver's partitions are spread
    sticky = {m: MemberSpec(ids, current=first[m]) for m in list(fresh)[1:]}
    out["uniform, one member left"] = best_of(lambda: assign("uniform", sticky, topics))
    half = {f"m{i}": MemberSpec(ids if i % 2 else frozenset(list(ids)[:5])) for i in range(n_members)}
    out["uniform heterogeneous, fresh"] = best_of(lambda: assign("uniform", half, topics), 1)
    out["range, fresh"] = best_of(lambda: assign("range", fresh, topics))
    return out


def heartbeat_rate(n_members: int, n_partitions: int, seconds: float = 3.0) -> tuple[float, float]:
    """Steady-state heartbeats of a Stable group (no change): per second, and p99 in microseconds."""
    groups: dict = {}
    topics = {"t": TopicInfo(uuid.UUID(int=1), n_partitions)}
    config = ConsumerConfig(assignment_interval_ms=0)
    now = 1_000_000
    for i in range(n_members):
        heartbeat(groups, topics, ConsumerGroupHeartbeat("g", f"m{i}", 0, rebalance_timeout_ms=30_000,
                  subscribed_topic_names=("t",), owned=()), now, config)
    g = groups["g"]
    for _ in range(3):  # reconcile to Stable
        for m in list(g.members.values()):
            owned = tuple((t, tuple(ps)) for t, ps in m.assigned.items())
            heartbeat(groups, topics, ConsumerGroupHeartbeat("g", m.member_id, m.epoch, owned=owned), now, config)
    assert g.state() == "Stable", g.state()
    requests = [ConsumerGroupHeartbeat("g", m.member_id, m.epoch) for m in g.members.values()]
    times = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline and len(times) < 2_000_000:
        for r in requests:
            started = time.perf_counter()
            heartbeat(groups, topics, r, now, config)
            times.append(time.perf_counter() - started)
    times.sort()
    return len(times) / sum(times), times[int(len(times) * 0.99)] * 1e6


def main() -> None:
    members = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    partitions = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    for name, seconds in assignment_times(members, partitions).items():
        print(f"target assignment {members} members x {partitions} partitions, {name}: {seconds * 1000:.1f} ms")
    rate, p99 = heartbeat_rate(members, partitions)
    print(f"steady heartbeats of a Stable group of {members}: {rate:,.0f}/s in the core, p99 {p99:.0f} us")


if __name__ == "__main__":
    main()
