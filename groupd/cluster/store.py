"""The SQL of a cluster: nodes' registrations and heartbeats, and the leases (tables of the PostgreSQL
engine's migrations 2 and 4, groupd/storage/postgresql/schema.py).

Every expiry is the database's ``now()`` plus the lease, and every comparison of one is made in the
database, so the nodes' clocks never need to agree. Each change of a lease is a compare-and-set on its
epoch: an acquisition raises the epoch by one (the fencing token writes are checked against, and the
leader epoch clients see), a renewal or a release applies only at the epoch the node holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import psycopg
from psycopg.types.json import Jsonb

from groupd.cluster.assignment import Resource
from groupd.cluster.lease import Decision, LeaseRow, View
from groupd.storage.postgresql.connection import Database

_MS = "(extract(epoch from {}) * 1000)::bigint"
_NOW_MS = _MS.format("now()")


@dataclass(frozen=True, slots=True)
class ListenerEndpoint:
    """One advertised listener of a node, as Kafka's broker registration holds it: its name (upper case, as
    Kafka normalises it) and the address its clients are given."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A registered node with every listener it advertises, in the order of its ``listeners``."""

    node_id: int
    endpoints: tuple[ListenerEndpoint, ...]
    rack: str | None

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """The node's address on ``listener`` (None: it has no such listener, as Kafka's
        ``BrokerRegistration.node(listener)``)."""
        for e in self.endpoints:
            if e.name == listener:
                return e.host, e.port
        return None


class ClusterStore:
    """Nodes and leases in the database, through a connection of their own (the engine's rounds must not
    delay a heartbeat)."""

    def __init__(self, db: Database, node_id: int, incarnation: str, lease_ms: int) -> None:
        self.db = db
        self.node_id = node_id
        self.incarnation = incarnation
        self.lease_ms = lease_ms
        self._known: set[Resource] = set()

    def _interval(self) -> str:
        return f"{int(self.lease_ms)} milliseconds"

    def register(self, endpoints: Sequence[ListenerEndpoint], rack: str | None) -> bool:
        """Register this node with every listener it advertises; False when a live node of another
        incarnation holds the same ``node.id``."""
        listed = Jsonb([[e.name, e.host, e.port] for e in endpoints])

        def work(conn: psycopg.Connection) -> bool:
            row = conn.execute(
                "INSERT INTO groupd_node (node_id, incarnation, endpoints, rack, expires_at) "
                "VALUES (%s, %s, %s, %s, now() + %s::interval) "
                "ON CONFLICT (node_id) DO UPDATE SET incarnation = excluded.incarnation, "
                "endpoints = excluded.endpoints, rack = excluded.rack, expires_at = excluded.expires_at "
                "WHERE groupd_node.expires_at <= now() OR groupd_node.incarnation = excluded.incarnation "
                "RETURNING node_id",
                (self.node_id, self.incarnation, listed, rack, self._interval()),
            ).fetchone()
            return row is not None

        return self.db.run(work, f"registering node {self.node_id}")

    def tick(self, resources: Iterable[Resource]) -> View | None:
        """Heartbeat, make a lease row for every resource not seen before, and read the view, in one
        transaction; None when this node's registration was taken over (it must stop)."""
        wanted = set(resources)
        new = sorted(wanted - self._known)

        def work(conn: psycopg.Connection) -> View | None:
            alive = conn.execute(
                "UPDATE groupd_node SET expires_at = now() + %s::interval "
                "WHERE node_id = %s AND incarnation = %s RETURNING node_id",
                (self._interval(), self.node_id, self.incarnation),
            ).fetchone()
            if alive is None:
                return None
            if new:
                conn.execute(
                    "INSERT INTO groupd_lease (topic, partition) SELECT * FROM unnest(%s::text[], %s::integer[]) "
                    "ON CONFLICT DO NOTHING",
                    ([t for t, _p in new], [p for _t, p in new]),
                )
            row = conn.execute(f"SELECT {_NOW_MS}").fetchone()
            assert row is not None
            nodes = conn.execute(f"SELECT node_id, {_MS.format('expires_at')} FROM groupd_node").fetchall()
            leases = conn.execute(
                f"SELECT topic, partition, owner, epoch, {_MS.format('expires_at')} FROM groupd_lease"
            ).fetchall()
            return View(
                int(row[0]),
                {int(n): int(e) for n, e in nodes},
                {(t, int(p)): LeaseRow(o, int(ep), int(e)) for t, p, o, ep, e in leases},
            )

        view = self.db.run(work, f"heartbeat of node {self.node_id}")
        self._known |= set(new)
        return view

    def apply(self, decision: Decision) -> dict[Resource, int]:
        """Release, renew and acquire as ``decision`` says, in one transaction; the leases this node holds
        after it (acquired or renewed), with their epochs. A lease whose epoch or owner moved meanwhile is
        left as the database has it: not released, not renewed, not acquired."""

        def items(entries: tuple[tuple[Resource, int], ...]) -> tuple[list[str], list[int], list[int]]:
            return [r[0] for r, _e in entries], [r[1] for r, _e in entries], [e for _r, e in entries]

        def work(conn: psycopg.Connection) -> dict[Resource, int]:
            held: dict[Resource, int] = {}
            if decision.release:
                conn.execute(
                    f"UPDATE groupd_lease l SET owner = NULL, expires_at = now() {_MATCH} AND l.owner = %s",
                    (*items(decision.release), self.node_id),
                )
            if decision.renew:
                rows = conn.execute(
                    f"UPDATE groupd_lease l SET expires_at = now() + %s::interval {_MATCH} AND l.owner = %s "
                    "RETURNING l.topic, l.partition, l.epoch",
                    (self._interval(), *items(decision.renew), self.node_id),
                ).fetchall()
                held.update({(t, int(p)): int(e) for t, p, e in rows})
            if decision.acquire:
                rows = conn.execute(
                    "UPDATE groupd_lease l SET owner = %s, epoch = l.epoch + 1, expires_at = now() + %s::interval "
                    f"{_MATCH} AND (l.owner IS NULL OR l.expires_at <= now() OR l.owner = %s) "
                    "RETURNING l.topic, l.partition, l.epoch",
                    (self.node_id, self._interval(), *items(decision.acquire), self.node_id),
                ).fetchall()
                held.update({(t, int(p)): int(e) for t, p, e in rows})
            return held

        return self.db.run(work, f"the leases of node {self.node_id}")

    def leave(self) -> None:
        """Controlled shutdown: release every lease this node holds and end its registration, so the others
        take over at their next heartbeat instead of after the lease."""

        def work(conn: psycopg.Connection) -> None:
            conn.execute("UPDATE groupd_lease SET owner = NULL, expires_at = now() WHERE owner = %s", (self.node_id,))
            conn.execute(
                "UPDATE groupd_node SET expires_at = now() WHERE node_id = %s AND incarnation = %s",
                (self.node_id, self.incarnation),
            )

        self.db.run(work, f"node {self.node_id} leaving")

    def live_nodes(self) -> list[NodeInfo]:
        """The nodes whose heartbeat has not expired, by id, each with its listeners (Metadata's brokers)."""
        rows = self.db.run(
            lambda conn: conn.execute(
                "SELECT node_id, endpoints, rack FROM groupd_node WHERE expires_at > now() ORDER BY node_id"
            ).fetchall(),
            "listing the nodes",
        )
        return [
            NodeInfo(int(n), tuple(ListenerEndpoint(str(a), str(h), int(p)) for a, h, p in endpoints), r)
            for n, endpoints, r in rows
        ]


_MATCH = (
    "FROM unnest(%s::text[], %s::integer[], %s::bigint[]) AS w(topic, partition, epoch) "
    "WHERE l.topic = w.topic AND l.partition = w.partition AND l.epoch = w.epoch"
)
