"""The cluster's pure core: balanced targets, one node's lease decisions, its serving deadlines (a manual
clock: plain integers of milliseconds)."""

from __future__ import annotations

from collections import Counter

from groupd.cluster.assignment import target
from groupd.cluster.lease import (
    DEFAULT_LEASE_MS,
    LeaseRow,
    LocalLeases,
    View,
    decide,
    heartbeat_interval_ms,
    serving_margin_ms,
)

SHARDS = [("__consumer_offsets", p) for p in range(50)]
DATA = [("orders", p) for p in range(6)]


def test_every_resource_gets_a_live_node_and_counts_differ_by_one_at_most() -> None:
    goal = target(SHARDS + DATA, [3, 1, 2], {})
    assert set(goal) == set(SHARDS + DATA)
    counts = Counter(goal.values())
    assert set(counts) == {1, 2, 3}
    assert max(counts.values()) - min(counts.values()) <= 1
    assert sum(counts.values()) == 56


def test_no_live_node_no_target() -> None:
    assert target(DATA, [], {}) == {}


def test_current_owners_keep_their_share_so_a_joining_node_takes_only_its_own() -> None:
    before = target(SHARDS, [1, 2], {})
    after = target(SHARDS, [1, 2, 3], before)
    moved = [r for r in SHARDS if before[r] != after[r]]
    assert all(after[r] == 3 for r in moved)
    assert len(moved) == Counter(after.values())[3] == 16  # 50 = 17 + 17 + 16: the newcomer's share only


def test_a_dead_nodes_resources_spread_over_the_others_and_nothing_else_moves() -> None:
    before = target(SHARDS, [1, 2, 3], {})
    after = target(SHARDS, [1, 3], {r: n for r, n in before.items() if n != 2})
    assert all(after[r] == before[r] for r in SHARDS if before[r] != 2)
    assert Counter(after.values()) == {1: 25, 3: 25}


def test_an_owner_outside_the_live_nodes_is_ignored() -> None:
    goal = target(DATA, [1], {("orders", 0): 9})
    assert set(goal.values()) == {1}


def view(now: int, nodes: dict[int, int], leases: dict[tuple[str, int], LeaseRow]) -> View:
    return View(now, nodes, leases)


def test_a_lone_node_acquires_everything_at_the_epochs_it_read() -> None:
    leases = {("orders", 0): LeaseRow(None, 4, 0)}
    d = decide(1, view(1000, {1: 5000}, leases), DATA)
    assert dict(d.acquire) == {("orders", 0): 4, **{r: 0 for r in DATA[1:]}}
    assert d.renew == d.release == ()


def test_a_held_lease_is_renewed_and_a_lease_held_by_a_live_node_is_left_alone() -> None:
    leases = {r: LeaseRow(1 if r[1] < 3 else 2, 7, 9000) for r in DATA}
    d = decide(1, view(1000, {1: 5000, 2: 5000}, leases), DATA)
    assert d.acquire == d.release == ()
    assert dict(d.renew) == {r: 7 for r in DATA[:3]}


def test_an_expired_lease_is_taken_over_by_the_node_the_target_names() -> None:
    # node 2 died: its heartbeat and its leases expired (by the database's clock)
    leases = {r: LeaseRow(1 if r[1] < 3 else 2, 7, 9000 if r[1] < 3 else 900) for r in DATA}
    d = decide(1, view(1000, {1: 5000, 2: 900}, leases), DATA)
    assert dict(d.acquire) == {r: 7 for r in DATA[3:]}


def test_a_node_over_its_share_hands_over_to_a_returning_node() -> None:
    leases = {r: LeaseRow(1, 2, 9000) for r in DATA}
    mine = decide(1, view(1000, {1: 5000, 2: 5000}, leases), DATA)
    assert len(mine.release) == 3 and len(mine.renew) == 3
    # node 2 sees them held until node 1 released them, then acquires them
    assert decide(2, view(1000, {1: 5000, 2: 5000}, leases), DATA).acquire == ()
    released = {r: LeaseRow(None, 2, 1000) if (r, 2) in mine.release else row for r, row in leases.items()}
    theirs = decide(2, view(1001, {1: 5000, 2: 5000}, released), DATA)
    assert sorted(theirs.acquire) == sorted(mine.release)


def test_a_leaving_node_releases_everything_and_takes_nothing() -> None:
    leases = {r: LeaseRow(1, 3, 9000) for r in DATA[:3]}
    d = decide(1, view(1000, {1: 5000, 2: 5000}, leases), DATA, leaving=True)
    assert d.acquire == d.renew == ()
    assert dict(d.release) == {r: 3 for r in DATA[:3]}


def test_a_lease_of_a_resource_no_longer_wanted_is_released() -> None:
    leases = {("gone", 0): LeaseRow(1, 1, 9000)}
    assert decide(1, view(1000, {1: 5000}, leases), []).release == ((("gone", 0), 1),)


def test_the_node_stops_serving_before_the_database_can_expire_its_lease() -> None:
    lease = 2000
    local = LocalLeases(lease)
    sent = 10_000  # monotonic ms when the renewal left; the database expires it at its now() + lease, later
    local.granted(("orders", 0), 5, sent)
    assert local.serving(("orders", 0), sent + 100) == 5
    stop = sent + lease - serving_margin_ms(lease)
    assert local.serving(("orders", 0), stop - 1) == 5
    assert local.serving(("orders", 0), stop) is None
    assert stop < sent + lease
    assert local.expired(stop) == [("orders", 0)]
    assert local.held == {}


def test_renewals_leave_room_for_three_failures_before_the_deadline() -> None:
    lease = DEFAULT_LEASE_MS
    assert DEFAULT_LEASE_MS == 10_000
    assert 3 * heartbeat_interval_ms(lease) < lease - serving_margin_ms(lease)


def test_a_lease_the_database_gives_this_node_id_but_this_process_does_not_serve_is_taken_at_a_new_epoch() -> None:
    # an earlier process of node.id 1 (or this one, past its own deadline) holds it: never renewed as is
    leases = {r: LeaseRow(1, 4, 9000) for r in DATA[:2]}
    d = decide(1, view(1000, {1: 5000}, leases), DATA[:2], serving=[DATA[0]])
    assert d.renew == ((DATA[0], 4),)
    assert d.acquire == ((DATA[1], 4),)  # compare-and-set at 4: the database moves it to 5


def test_each_topic_is_spread_over_the_nodes_and_the_totals_too() -> None:
    """Kafka spreads each topic's partition leaders over the brokers: a topic of six partitions on three
    nodes is led two by each, whatever the internal topics' shards weigh, and the totals differ by one at
    most (before, a topic could land on two nodes when the shards filled the third's share)."""
    internal = [("__consumer_offsets", p) for p in range(6)] + [("__transaction_state", p) for p in range(3)]
    internal += [("__share_group_state", p) for p in range(3)]
    # the shards taken while only nodes 1 and 3 were live, then node 2 joins and a topic appears
    before = target(internal, [1, 3], {})
    orders = [("orders", p) for p in range(6)]
    goal = target(internal + orders, [1, 2, 3], before)
    assert Counter(goal[r] for r in orders) == {1: 2, 2: 2, 3: 2}
    for topic in ("__consumer_offsets", "__transaction_state", "__share_group_state"):
        shards = [r for r in internal if r[0] == topic]
        counts = Counter(goal[r] for r in shards)
        assert max(counts.values()) - min(counts.get(n, 0) for n in (1, 2, 3)) <= 1, (topic, counts)
    totals = Counter(goal.values())
    assert set(totals.values()) == {6}
    assert target(internal + orders, [1, 2, 3], goal) == goal  # stable: the next beat moves nothing
