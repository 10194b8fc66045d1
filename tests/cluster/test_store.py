"""Nodes and leases in a real PostgreSQL (the test run's own server): registration, the balanced spread,
takeover of a dead node's leases at a new epoch, hand-over on leaving."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from groupd.cluster.assignment import Resource
from groupd.cluster.lease import decide
from groupd.cluster.store import ClusterStore
from groupd.storage import engines
from groupd.storage.postgresql.connection import Database
from groupd.storage.postgresql.engine import PostgresEngine

RESOURCES: list[Resource] = [("__consumer_offsets", p) for p in range(5)] + [("orders", p) for p in range(4)]


def store(url: str, node: int, lease_ms: int, incarnation: str = "a") -> ClusterStore:
    s = ClusterStore(Database(url), node, f"{incarnation}{node}", lease_ms)
    assert s.register("127.0.0.1", 9000 + node, None)
    return s


def step(s: ClusterStore, leaving: bool = False) -> dict[Resource, int]:
    view = s.tick(RESOURCES)
    assert view is not None
    return s.apply(decide(s.node_id, view, RESOURCES, leaving))


@pytest.fixture
def url(postgresql_url: str) -> str:
    engine = engines.build({"storage.engine": "postgresql", "storage.postgresql.url": postgresql_url})
    assert isinstance(engine, PostgresEngine)
    engine.open()  # the migrations, the cluster's tables among them
    engine.close()
    return postgresql_url


def test_a_node_id_held_by_a_live_node_is_refused_and_free_again_once_it_expired(url: str) -> None:
    first = store(url, 1, 300)
    second = ClusterStore(Database(url), 1, "other", 300)
    assert not second.register("127.0.0.1", 9101, None)
    assert first.tick(RESOURCES) is not None
    time.sleep(0.35)
    assert second.register("127.0.0.1", 9101, None)
    assert first.tick(RESOURCES) is None  # its registration was taken over: it must stop
    assert [n.port for n in second.live_nodes()] == [9101]


def test_three_nodes_spread_the_leases_then_take_over_a_dead_nodes_at_the_next_epoch(url: str) -> None:
    nodes = [store(url, n, 400) for n in (1, 2, 3)]
    held: dict[int, dict[Resource, int]] = {}
    for _ in range(2):
        for s in nodes:
            held[s.node_id] = step(s)
    owners = {r: n for n, mine in held.items() for r in mine}
    assert set(owners) == set(RESOURCES)
    assert sorted(Counter(owners.values()).values()) == [3, 3, 3]
    assert all(e == 1 for mine in held.values() for e in mine.values())
    assert sum(len(m) for m in held.values()) == len(RESOURCES)  # one owner each
    # node 2 dies: no heartbeat, no renewal; its leases are free once the database's clock passes them
    dead = held[2]
    assert not step(nodes[0]).keys() & dead.keys()  # still held by node 2: nobody takes them early
    deadline = time.monotonic() + 0.6  # the survivors heartbeat meanwhile, a tenth of a lease apart
    while time.monotonic() < deadline:
        for s in (nodes[0], nodes[2]):
            held[s.node_id] = step(s)
        time.sleep(0.04)
    taken = {r: e for n in (1, 3) for r, e in held[n].items() if r in dead}
    assert taken == {r: 2 for r in dead}
    assert all(e == 1 for n in (1, 3) for r, e in held[n].items() if r not in dead)  # theirs never moved
    assert len(held[1]) + len(held[3]) == len(RESOURCES)
    assert abs(len(held[1]) - len(held[3])) <= 1


def test_a_leaving_node_hands_over_at_once_and_a_returning_node_gets_its_share_back(url: str) -> None:
    a, b = store(url, 1, 5000), store(url, 2, 5000)
    step(a)
    step(b)
    assert len(step(a)) == len(RESOURCES) // 2 + 1 or len(step(b)) == len(RESOURCES) // 2 + 1
    a.leave()
    assert len(step(b)) == len(RESOURCES)  # no waiting for the 5 s lease
    a2 = store(url, 1, 5000, incarnation="b")
    step(a2)  # node 1 is live again: node 2 is over its share and hands some over
    mine_b = step(b)
    mine_a = step(a2)
    assert len(mine_a) + len(mine_b) == len(RESOURCES)
    assert sorted([len(mine_a), len(mine_b)]) == [4, 5]
    assert set(mine_a.values()) == {2}  # taken back at the next epoch
