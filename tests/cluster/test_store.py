"""Nodes and leases in a real PostgreSQL (the test run's own server): registration, the balanced spread,
takeover of a dead node's leases at a new epoch, hand-over on leaving."""

from __future__ import annotations

import time
from collections import Counter

import psycopg
import pytest

from groupd.cluster.assignment import Resource
from groupd.cluster.lease import decide
from groupd.cluster.store import ClusterStore, ListenerEndpoint
from groupd.storage import engines
from groupd.storage.postgresql.connection import Database
from groupd.storage.postgresql.engine import PostgresEngine
from groupd.storage.postgresql.schema import MIGRATIONS, migrate

RESOURCES: list[Resource] = [("__consumer_offsets", p) for p in range(5)] + [("orders", p) for p in range(4)]


def plaintext(port: int) -> tuple[ListenerEndpoint, ...]:
    """A node's registration with one listener, PLAINTEXT on loopback."""
    return (ListenerEndpoint("PLAINTEXT", "127.0.0.1", port),)


def store(url: str, node: int, lease_ms: int, incarnation: str = "a") -> ClusterStore:
    s = ClusterStore(Database(url), node, f"{incarnation}{node}", lease_ms)
    assert s.register(plaintext(9000 + node), None)
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
    assert not second.register(plaintext(9101), None)
    assert first.tick(RESOURCES) is not None
    time.sleep(0.35)
    assert second.register(plaintext(9101), None)
    assert first.tick(RESOURCES) is None  # its registration was taken over: it must stop
    assert [n.endpoint("PLAINTEXT") for n in second.live_nodes()] == [("127.0.0.1", 9101)]


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


def test_migration_4_moves_a_node_row_to_listener_endpoints(postgresql_url: str) -> None:
    """A database at schema 3 (one host and port per node) is brought to 4: the row keeps its node, loses the
    single address and has no endpoint until the node registers again, now with every listener."""
    db = Database(postgresql_url)

    def at_three(conn: psycopg.Connection) -> None:
        conn.execute("CREATE TABLE groupd_schema (version integer NOT NULL)")
        for sql in MIGRATIONS[:3]:
            conn.execute(sql)
        conn.execute("INSERT INTO groupd_schema VALUES (3)")
        conn.execute(
            "INSERT INTO groupd_node (node_id, incarnation, host, port, rack, expires_at) "
            "VALUES (1, 'old', 'h', 9092, NULL, now() + interval '1 hour')"
        )

    db.run(at_three, "schema 3", pipelined=False)
    assert migrate(db) == 3
    s = ClusterStore(db, 1, "old", 60_000)
    assert [(n.node_id, n.endpoints) for n in s.live_nodes()] == [(1, ())]
    both = (ListenerEndpoint("PLAINTEXT", "h", 9092), ListenerEndpoint("INTERNAL", "h2", 19092))
    assert s.register(both, "r1")
    [node] = s.live_nodes()
    assert (node.endpoints, node.rack) == (both, "r1")  # in the order given, the first listener first
    assert (node.endpoint("INTERNAL"), node.endpoint("EXTERNAL")) == (("h2", 19092), None)
    db.close()
