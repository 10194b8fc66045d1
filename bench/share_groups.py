"""The share-group (KIP-932) core without sockets: `simple` assignor time and heartbeat throughput.

    .venv/bin/python -m bench.share_groups [members] [partitions]

Share groups are at most `group.share.max.size` (200, up to 1000) members; this measures the assignor
over that many members and a topic's partitions, fresh and after one member left, and steady heartbeats
of a Stable group through the pure handler, on one core, bounded in count and time.
"""

from __future__ import annotations

import sys
import time
import uuid

from bench.consumer_protocol import best_of
from groupd.coordinator.consumer.heartbeat import TopicInfo
from groupd.coordinator.share.api import ShareGroupHeartbeat, ShareStateInitialized
from groupd.coordinator.share.assignor import assign
from groupd.coordinator.share.config import ShareGroupConfig
from groupd.coordinator.share.heartbeat import heartbeat
from groupd.coordinator.share.partitions import state_initialized


def assignment_times(n_members: int, n_partitions: int) -> dict[str, float]:
    t = uuid.UUID(int=1)
    subs = {f"m{i}": frozenset({t}) for i in range(n_members)}
    parts = {t: frozenset(range(n_partitions))}
    out = {"simple, fresh": best_of(lambda: assign(subs, parts, {}))}
    first = assign(subs, parts, {})
    left = {m: s for m, s in list(subs.items())[1:]}
    out["simple, one member left"] = best_of(lambda: assign(left, parts, first))
    return out


def heartbeat_rate(n_members: int, n_partitions: int, seconds: float = 3.0) -> tuple[float, float]:
    """Steady heartbeats of a Stable group: per second, and p99 in microseconds."""
    groups: dict = {}
    topics = {"t": TopicInfo(uuid.UUID(int=1), n_partitions)}
    config = ShareGroupConfig(max_size=max(n_members, 1), assignment_interval_ms=0)
    now = 1_000_000
    for i in range(n_members):
        heartbeat(groups, topics, ShareGroupHeartbeat("g", f"m{i}", 0, subscribed_topic_names=("t",)), now, config)
    state_initialized(
        groups, topics, ShareStateInitialized("g", ((uuid.UUID(int=1), tuple(range(n_partitions))),), True), now
    )
    g = groups["g"]
    for m in list(g.members.values()):
        heartbeat(groups, topics, ShareGroupHeartbeat("g", m.member_id, m.epoch), now, config)
    for m in list(g.members.values()):
        heartbeat(groups, topics, ShareGroupHeartbeat("g", m.member_id, m.epoch), now, config)
    members = list(g.members.values())
    assert all(m.epoch == g.assignment_epoch for m in members)
    samples = []
    deadline = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < deadline and n < 2_000_000:
        m = members[n % len(members)]
        started = time.perf_counter()
        heartbeat(groups, topics, ShareGroupHeartbeat("g", m.member_id, m.epoch), now, config)
        samples.append(time.perf_counter() - started)
        n += 1
    samples.sort()
    return n / sum(samples), samples[int(len(samples) * 0.99)] * 1e6


def main() -> None:
    members = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    partitions = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    for name, seconds in assignment_times(members, partitions).items():
        print(f"{name}: {members} members x {partitions} partitions in {seconds * 1000:.1f} ms")
    rate, p99 = heartbeat_rate(members, partitions)
    print(f"steady heartbeats of a Stable {members}-member group: {rate:,.0f}/s, p99 {p99:.1f} us")


if __name__ == "__main__":
    main()
