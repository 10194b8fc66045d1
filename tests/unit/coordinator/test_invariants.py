"""Random interleavings of joins, syncs, heartbeats, leaves, commits and time: the group's bookkeeping stays
consistent, no token is answered twice, and no group can get stuck without a timer to move it on."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupd.coordinator import shard
from groupd.coordinator.api import Protocol

from .harness import Core

OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "new",
                "new_v3",
                "static",
                "rejoin",
                "rejoin_changed",
                "sync",
                "heartbeat",
                "leave",
                "commit",
                "tick",
            ]
        ),
        st.integers(0, 5),
        st.integers(0, 12_000),
    ),
    min_size=1,
    max_size=60,
)


def check(c: Core) -> None:
    for gid, g in c.state.groups.items():
        members = g.members
        assert g.n_awaiting_join == sum(m.join_token is not None for m in members.values())
        counts: dict[str, int] = {}
        for m in members.values():
            for name in {p.name for p in m.protocols}:
                counts[name] = counts.get(name, 0) + 1
        assert counts == g.support
        assert g.static == {m.instance_id: mid for mid, m in members.items() if m.instance_id is not None}
        if members:
            assert g.leader in members
        else:
            assert g.state in ("Empty", "PreparingRebalance") and (g.leader is None or g.state != "Empty")
        for mid, m in members.items():
            assert m.member_id == mid
            if m.join_token is not None:
                assert g.state == "PreparingRebalance"
            if m.sync_token is not None:
                assert g.state == "CompletingRebalance"
            has_timer = ("hb", gid, mid) in c.timers
            assert has_timer or m.join_token is not None or m.sync_token is not None
        if g.state == "PreparingRebalance":
            assert ("join", gid) in c.timers  # never stuck
        for pid in g.pending:
            assert ("pend", gid, pid) in c.timers
        if g.state not in ("CompletingRebalance", "Stable"):
            assert not g.pending_sync


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS, st.sampled_from([0, 3000]))
def test_random_interleavings_keep_invariants(ops, delay):
    c = Core(initial_rebalance_delay_ms=delay)
    for op, pick, dt in ops:
        g = c.state.groups.get("g")
        ids = list(g.members) if g is not None else []
        target = ids[pick % len(ids)] if ids else None
        gen = g.generation if g is not None else 0
        if op == "new":
            tok = c.join()
            resp = c.answers.get(tok)
            if resp is not None and resp.error == 79:
                c.join(member_id=resp.member_id)
        elif op == "new_v3":
            c.join(version=3)
        elif op == "static":
            c.join(instance=f"i{pick}", version=9)
        elif target is None:
            c.advance(c.now + dt)
        elif op == "rejoin":
            c.join(member_id=target, instance=g.members[target].instance_id)
        elif op == "rejoin_changed":
            c.join(
                member_id=target,
                instance=g.members[target].instance_id,
                protocols=(Protocol("range", bytes([pick])),),
            )
        elif op == "sync":
            c.sync(target, gen, {m: m.encode() for m in ids}, instance=g.members[target].instance_id)
        elif op == "heartbeat":
            c.heartbeat(target, gen, instance=g.members[target].instance_id)
        elif op == "leave":
            c.leave((target, None))
        elif op == "commit":
            c.commit(("t", pick, dt), generation=gen, member_id=target)
        else:
            c.advance(c.now + dt)
        check(c)
    # Drive time far enough that every member's session ends: the group settles Empty.
    for _ in range(20):
        nxt = min(c.timers.values(), default=None)
        if nxt is None:
            break
        c.advance(nxt)
        check(c)
    g = c.state.groups.get("g")
    if g is not None:
        assert g.state == "Empty" and not g.members


def test_replay_of_runtime_log_matches_memory_after_rebalances():
    c = Core()
    a, b = c.stable_group()
    c.commit(("t", 0, 5, "m"), generation=1, member_id=b)
    c.join(member_id=a)
    c.join(member_id=b)
    c.sync(b, 2)
    c.sync(a, 2, {a: b"x", b: b"y"})
    fresh = shard.ShardState(0)
    for k, v in c.log:
        shard.replay(fresh, k, v, 0)
    g, h = c.group(), fresh.groups["g"]
    assert (h.generation, h.leader, h.state) == (2, a, "Stable")
    assert {m: x.assignment for m, x in h.members.items()} == {m: x.assignment for m, x in g.members.items()}
