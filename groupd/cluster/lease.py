"""One node's lease decisions from one view of the database, and its own serving deadlines (pure).

Two clocks, as the notes on fencing ask: a lease's expiry in the database is the database's ``now()``
plus ``cluster.lease.ms`` and only the database compares it (``View.now_ms`` is the database's clock read
in the same query); the node stops serving a resource on its own monotonic clock, ``lease.ms`` minus a
margin after it *sent* the request that renewed it, so whatever pauses the node (GC, SIGSTOP, a slow
network) it stops before the database can give the lease to another node. Both are plain integers of
milliseconds here, so tests drive them by hand.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from groupd.cluster.assignment import Resource, target

DEFAULT_LEASE_MS = 10_000


def heartbeat_interval_ms(lease_ms: int) -> int:
    """How often a node heartbeats and renews: a quarter of the lease, so three renewals can fail before
    it stops serving."""
    return max(1, lease_ms // 4)


def serving_margin_ms(lease_ms: int) -> int:
    """How long before its lease can expire a node stops serving: a fifth of the lease (clock rate drift
    and the time to stop are far below it)."""
    return max(1, lease_ms // 5)


@dataclass(frozen=True, slots=True)
class LeaseRow:
    """A resource's lease as the database holds it: ``owner`` None when released or never taken."""

    owner: int | None
    epoch: int
    expires_ms: int


@dataclass(frozen=True, slots=True)
class View:
    """What one node read in one query: the database's clock, every node's heartbeat expiry, every lease."""

    now_ms: int
    nodes: dict[int, int]
    leases: dict[Resource, LeaseRow]

    def live_nodes(self) -> set[int]:
        return {n for n, expires in self.nodes.items() if expires > self.now_ms}

    def holder(self, r: Resource) -> int | None:
        """The node holding ``r``'s lease now, or None."""
        row = self.leases.get(r)
        if row is None or row.owner is None or row.expires_ms <= self.now_ms:
            return None
        return row.owner


@dataclass(frozen=True, slots=True)
class Decision:
    """What a node does after reading a view: each entry a resource and the epoch the database must still
    hold for the change to apply (compare-and-set)."""

    acquire: tuple[tuple[Resource, int], ...] = ()
    renew: tuple[tuple[Resource, int], ...] = ()
    release: tuple[tuple[Resource, int], ...] = ()


def decide(
    me: int,
    view: View,
    resources: Iterable[Resource],
    leaving: bool = False,
    serving: Iterable[Resource] | None = None,
) -> Decision:
    """Renew what this node holds and should keep, hand over what the balanced target gives another live
    node, acquire what is free (never taken, released or expired) and targeted to this node. A node
    ``leaving`` (SIGTERM) releases everything and takes nothing.

    ``serving`` is what this process serves now (None: whatever the database says it holds). A lease the
    database gives this node id but the process does not serve (an earlier process of the same
    ``node.id``, or one past its own deadline) is acquired again, at the next epoch, never renewed: the
    earlier holder's late writes then fail the fence."""
    wanted = set(resources)
    live = view.live_nodes() | {me}
    if leaving:
        live.discard(me)
    owners = {r: h for r in wanted if (h := view.holder(r)) is not None}
    goal = target(wanted, live, owners)
    acquire, renew, release = [], [], []
    mine = None if serving is None else set(serving)
    for r in sorted(wanted | set(view.leases)):
        row = view.leases.get(r)
        holder = view.holder(r)
        if holder == me:
            assert row is not None
            if not (r in wanted and goal.get(r) == me):
                release.append((r, row.epoch))
            elif mine is None or r in mine:
                renew.append((r, row.epoch))
            else:
                acquire.append((r, row.epoch))
        elif holder is None and r in wanted and goal.get(r) == me:
            acquire.append((r, row.epoch if row is not None else 0))
    return Decision(tuple(acquire), tuple(renew), tuple(release))


@dataclass(slots=True)
class Held:
    """A lease this node holds: its epoch and the monotonic instant it must stop serving at."""

    epoch: int
    serve_until: int


@dataclass(slots=True)
class LocalLeases:
    """The leases this node believes it holds, by its own monotonic clock (milliseconds)."""

    lease_ms: int = DEFAULT_LEASE_MS
    held: dict[Resource, Held] = field(default_factory=dict)

    def granted(self, r: Resource, epoch: int, sent_at: int) -> None:
        """The database acquired or renewed ``r`` at ``epoch`` by a request sent at ``sent_at``."""
        self.held[r] = Held(epoch, sent_at + self.lease_ms - serving_margin_ms(self.lease_ms))

    def lost(self, r: Resource) -> Held | None:
        return self.held.pop(r, None)

    def serving(self, r: Resource, now: int) -> int | None:
        """The epoch ``r`` is served at, or None when this node must not serve it (not held, or past its
        deadline)."""
        h = self.held.get(r)
        if h is None or now >= h.serve_until:
            return None
        return h.epoch

    def expired(self, now: int) -> list[Resource]:
        """The resources past their serving deadline: the caller stops serving them and forgets them."""
        gone = [r for r, h in self.held.items() if now >= h.serve_until]
        for r in gone:
            del self.held[r]
        return gone
