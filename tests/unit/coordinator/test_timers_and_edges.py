"""Session expiry in every state, sync timeout, capacity, leader changes, unload (spec §3.7, §5, §12)."""

from __future__ import annotations

from groupd.coordinator import shard
from groupd.coordinator.api import JoinGroup, Protocol, SyncGroupResponse

from .harness import RANGE, Core


def test_session_expiry_in_preparing_rebalance_completes_when_everyone_left_is_parked():
    c = Core()
    a, b = c.stable_group()
    t0 = c.now
    ta = c.join(member_id=a)  # B keeps quiet: neither heartbeats nor rejoins
    c.advance(t0 + 9_999)
    assert ta not in c.answers
    c.advance(t0 + 10_000)  # B's session ends before the 30 s rebalance timeout
    assert c.answers[ta].generation_id == 2 and [m.member_id for m in c.answers[ta].members] == [a]


def test_session_expiry_in_completing_rebalance():
    c = Core()
    a, _ = c.new_member()
    c.advance(1_000)
    b, _ = c.new_member()
    c.finish_join()
    t0 = c.now
    tb = c.sync(b, 1)  # the leader never syncs
    c.advance(t0 + 10_000)  # A (leader) silent: removed; B's parked sync learns of the rebalance
    assert a not in c.group().members
    assert c.answers[tb] == SyncGroupResponse(27)
    assert c.group().state in ("PreparingRebalance", "CompletingRebalance")


def test_pending_sync_timeout_in_completing_rebalance_removes_unsynced():
    c = Core()
    a, _ = c.new_member()
    b, _ = c.new_member()
    c.finish_join()
    t0 = c.now
    assert c.timers[("sync", "g")] == t0 + 30_000
    for t in range(t0 + 3_000, t0 + 30_000, 3_000):
        c.advance(t)
        c.heartbeat(a, 1)
        c.heartbeat(b, 1)
    c.advance(t0 + 30_000)  # neither synced: both removed, the group ends up Empty
    g = c.group()
    assert not g.members and g.state == "Empty" and g.generation == 2


def test_sync_timer_stale_generation_is_ignored():
    c = Core()
    a, b = c.stable_group()
    g = c.group()
    assert ("sync", "g") not in c.timers  # everyone synced: cancelled
    r = shard.on_timer(c.state, ("sync", "g"), c.now + 10**9, c.cfg)
    assert r.records == () and r.responses == () and g.state == "Stable"


def test_stale_heartbeat_timer_is_ignored():
    c = Core()
    a, b = c.stable_group()
    c.heartbeat(b, 1)
    r = shard.on_timer(c.state, ("hb", "g", b), c.now + 1, c.cfg)  # deadline moved on: no-op
    assert r.responses == () and b in c.group().members
    assert shard.on_timer(c.state, ("hb", "nope", b), 10**9, c.cfg).responses == ()
    assert shard.on_timer(c.state, ("bogus", "g"), 10**9, c.cfg).responses == ()


def test_leader_leaving_mid_rebalance_hands_leadership_to_a_rejoined_member():
    c = Core()
    a, b = c.stable_group()
    tb = c.join(member_id=b)  # follower changes nothing but the group is Stable: immediate answer
    assert c.answers[tb].generation_id == 1
    ta = c.join(member_id=a)  # leader forces a rebalance
    tb = c.join(member_id=b)
    assert c.answers[ta].generation_id == 2 and c.answers[tb].generation_id == 2
    c.sync(b, 2)
    tb2 = c.join(member_id=b, protocols=(Protocol("range", b"changed"),))
    assert c.group().state == "PreparingRebalance"
    c.leave((a, None))
    assert c.answers[tb2].generation_id == 3 and c.answers[tb2].leader == b
    assert c.group().leader == b


def test_capacity_in_preparing_rebalance_counts_parked_joins():
    c = Core(max_size=2)
    a, b = c.stable_group()
    c.join(member_id=a)  # PreparingRebalance with one parked join
    t_new = c.join(version=3)  # 1 parked < 2: accepted
    assert t_new not in c.answers
    resp = c.answers[
        c.join(member_id=b)
    ]  # B exists but has no parked join and 2 are parked: rejected, removed
    assert (resp.error, resp.member_id) == (81, "")
    assert b not in c.group().members


def test_v9_normal_completion_does_not_skip_assignment_and_reason_is_accepted():
    c = Core()
    tok = c.token()
    req = JoinGroup("g", "", None, 10_000, 30_000, "consumer", RANGE, "c", "/h", 8, reason="rolling restart")
    r = c.apply(shard.join_group(c.state, req, tok, 0, c.cfg))
    assert r.responses[0][1].error == 79
    mid, tok2 = c.new_member(version=9)
    c.finish_join()
    assert c.answers[tok2].skip_assignment is False


def test_unload_answers_parked_requests_not_coordinator():
    c = Core()
    a, ta = c.new_member()
    r = c.apply(shard.unload(c.state))
    assert c.answers[ta].error == 16
    assert c.state.groups == {} and r.records == ()


def test_new_member_expires_even_while_parked():
    c = Core()
    (a,) = c.stable_group(1, rebalance=400_000)
    tc = c.join(version=1)
    t0 = c.now
    for t in range(t0 + 3_000, t0 + 300_001, 3_000):
        c.advance(t)
        c.heartbeat(a, 1)
    assert c.answers[tc].error == 25
    assert len(c.group().members) == 1


def test_heartbeat_after_group_emptied_is_unknown_member():
    c = Core()
    (a,) = c.stable_group(1)
    c.leave((a, None))
    assert c.heartbeat(a, 2) == 25


def test_rebalance_cause_is_recorded_for_metrics():
    c = Core()
    a, b = c.stable_group()
    assert c.group().rebalance_cause == "join"
    c.join(member_id=a)  # leader rejoin
    assert c.group().rebalance_cause == "metadata_change"
    c.join(member_id=b)
    c.sync(b, 2)
    c.sync(a, 2, {a: b"", b: b""})
    c.leave((b, None))
    assert c.group().rebalance_cause == "leave"
    c.join(member_id=a)  # completes generation 3 with A alone
    c.sync(a, 3, {a: b""})
    assert c.group().state == "Stable"
    c.advance(c.now + 10_000)  # A stops heartbeating
    assert c.group().rebalance_cause == "session_expiry"
