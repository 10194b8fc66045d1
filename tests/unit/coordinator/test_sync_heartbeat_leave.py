"""SyncGroup v0-v5, Heartbeat v0-v4, LeaveGroup v0-v5 (spec §4-§6, scenarios 9-13, 15-19, 27-28)."""

from __future__ import annotations

from groupd.coordinator.api import LeftMember, SyncGroupResponse
from groupd.coordinator.records import GroupMetadataKey

from .harness import Core


def completing(c: Core) -> tuple[str, str]:
    a, _ = c.new_member()
    c.advance(1_000)
    b, _ = c.new_member()
    c.finish_join()
    assert c.now == 6_000 and c.group().state == "CompletingRebalance"
    return a, b


def test_follower_sync_parks_until_leader_sync_is_durable():
    c = Core()
    a, b = completing(c)
    tb = c.sync(b, 1)
    assert tb not in c.answers
    c.log.clear()
    ta = c.sync(a, 1, {a: b"a", b: b"b"})
    r = c.results[-1]
    assert r.replay is False  # the group is already updated in memory
    ((key, value),) = r.records
    assert key == GroupMetadataKey("g")
    assert (value.generation, value.leader, value.protocol, value.protocol_type) == (
        1,
        a,
        "range",
        "consumer",
    )
    assert [(m.member_id, m.assignment, m.subscription) for m in value.members] == [
        (a, b"a", b"range-meta"),
        (b, b"b", b"range-meta"),
    ]
    assert value.current_state_timestamp == 6_000
    # Both answers ride on the Result that carries the record: sent once it is durable.
    assert dict(r.responses) == {
        ta: SyncGroupResponse(0, "consumer", "range", b"a"),
        tb: SyncGroupResponse(0, "consumer", "range", b"b"),
    }
    assert c.group().state == "Stable"


def test_missing_assignment_is_empty_bytes():
    c = Core()
    a, b = completing(c)
    tb = c.sync(b, 1)
    c.sync(a, 1, {a: b"a", "stranger": b"zz"})
    assert c.answers[tb] == SyncGroupResponse(0, "consumer", "range", b"")
    assert [m.member_id for m in c.log[-1][1].members] == [a, b]


def test_follower_syncing_after_stable_gets_stored_assignment():
    c = Core()
    a, b = completing(c)
    c.sync(a, 1, {a: b"a", b: b"b"})
    assert c.answers[c.sync(b, 1)] == SyncGroupResponse(0, "consumer", "range", b"b")
    assert ("sync", "g") not in c.timers  # everyone synced


def test_leader_write_failure_maps_error_and_rebalances():
    c = Core()
    a, b = completing(c)
    tb = c.sync(b, 1)
    c.fail_next_write = 6  # NOT_LEADER_OR_FOLLOWER
    ta = c.sync(a, 1, {a: b"a", b: b"b"})
    assert c.answers[ta].error == 16 and c.answers[tb].error == 16
    g = c.group()
    assert g.state == "PreparingRebalance"
    assert all(m.assignment == b"" for m in g.members.values())


def test_sync_errors_in_stable():
    c = Core()
    a, b = c.stable_group()
    assert c.answers[c.sync(b, 0)].error == 22
    assert c.answers[c.sync("nobody", 1)].error == 25
    assert c.answers[c.sync(b, 1, version=5, ptype="consumer", pname="roundrobin")].error == 23
    assert c.answers[c.sync(b, 1, version=5, ptype=None, pname="range")].error == 23
    assert c.answers[c.sync(b, 1, version=5, ptype="consumer", pname="range")] == SyncGroupResponse(
        0, "consumer", "range", b.encode()
    )
    assert c.answers[c.sync(b, 1, group="")].error == 24
    assert c.answers[c.sync(b, 1, group="other")].error == 25
    assert c.answers[c.sync(b, 1, instance="i9")].error == 25


def test_sync_during_preparing_rebalance_is_rebalance_in_progress():
    c = Core()
    a, b = c.stable_group()
    c.join(member_id=a)
    assert c.answers[c.sync(b, 1)].error == 27


def test_sync_v0_accepted():
    c = Core(initial_rebalance_delay_ms=0)
    ta = c.join(version=0, rebalance=None)
    c.advance(0)  # the initial join phase ends on a 0 ms timer
    a = c.answers[ta].member_id
    tok = c.sync(a, 1, {a: b"x"}, version=0)
    assert c.answers[tok].error == 0 and c.answers[tok].assignment == b"x"


def test_heartbeats_in_stable():
    c = Core()
    a, b = c.stable_group()
    assert c.heartbeat(b, 1) == 0
    assert c.heartbeat(b, 2) == 22
    assert c.heartbeat(b, 1, group="nope") == 25
    assert c.heartbeat(b, 1, group="") == 24
    assert c.heartbeat("zz", 1) == 25


def test_heartbeat_in_completing_rebalance_is_ok():
    c = Core()
    a, b = completing(c)
    assert c.heartbeat(b, 1) == 0


def test_session_expiry_in_stable_triggers_rebalance():
    c = Core()
    a, b = c.stable_group()
    t0 = c.now
    for t in range(t0 + 3_000, t0 + 10_000, 3_000):
        c.advance(t)
        assert c.heartbeat(a, 1) == 0
    c.advance(t0 + 10_000)
    g = c.group()
    assert b not in g.members and g.state == "PreparingRebalance"
    assert c.heartbeat(a, 1) == 27


def test_session_timer_rearmed_by_heartbeat():
    c = Core()
    a, b = c.stable_group()
    t0 = c.now
    c.advance(t0 + 5_000)
    c.heartbeat(b, 1)
    assert c.timers[("hb", "g", b)] == t0 + 15_000


def test_completing_rebalance_rejoin_with_new_metadata_answers_parked_sync_27():
    from groupd.coordinator.api import Protocol

    c = Core()
    a, b = completing(c)
    tb = c.sync(b, 1)
    c.join(member_id=a, protocols=(Protocol("range", b"changed"),))
    assert c.answers[tb] == SyncGroupResponse(27)
    assert c.group().state == "PreparingRebalance"


def test_pending_sync_expiry_removes_members_that_never_synced():
    c = Core()
    a, b = completing(c)
    t0 = c.now
    c.sync(a, 1, {a: b"a", b: b"b"})
    assert c.group().state == "Stable"
    for t in range(t0 + 3_000, t0 + 30_000, 3_000):
        c.advance(t)
        c.heartbeat(a, 1)
        c.heartbeat(b, 1)
    c.advance(t0 + 30_000)
    g = c.group()
    assert b not in g.members and g.state == "PreparingRebalance"


def test_member_parked_in_sync_is_not_expired_by_its_session():
    c = Core()
    a, b = completing(c)
    t0 = c.now
    tb = c.sync(b, 1)
    for t in range(t0 + 3_000, t0 + 15_000, 3_000):
        c.advance(t)
        assert c.heartbeat(a, 1) == 0
    assert b in c.group().members and tb not in c.answers


def test_leave_batch_v3():
    c = Core()
    a, b = c.stable_group(instance=None)
    resp = c.leave(("zzz", None))
    assert resp.error == 0 and resp.members == (LeftMember("zzz", None, 25),)
    assert c.group().state == "Stable"
    resp = c.leave((b, None))
    assert resp.members == (LeftMember(b, None, 0),)
    assert c.group().state == "PreparingRebalance"


def test_leave_v0_folds_member_error():
    c = Core()
    c.stable_group()
    resp = c.leave(("zzz", None), version=0)
    assert resp.error == 25 and resp.members == ()
    assert c.leave(("x", None), group="", version=1).error == 24


def test_leave_unknown_group():
    c = Core()
    resp = c.leave(("a", None), ("b", "i"), group="nope")
    assert resp.error == 0
    assert [m.error for m in resp.members] == [25, 25]
    assert c.leave(("a", None), group="nope", version=2).error == 25


def test_last_member_leaving_empties_group_with_record():
    c = Core()
    (a,) = c.stable_group(1)
    for gen in (2, 3):
        c.now += 1
        ta = c.join(member_id=a)
        assert c.answers[ta].generation_id == gen
        c.sync(a, gen, {a: b"x"})
    c.log.clear()
    c.leave((a, None))
    g = c.group()
    assert (g.state, g.generation) == ("Empty", 4)
    (key, value) = c.log[-1]
    assert value.members == () and value.protocol is None and value.leader is None and value.generation == 4
    assert value.current_state_timestamp == c.now


def test_leave_of_pending_member():
    c = Core()
    pending = c.answers[c.join()].member_id
    resp = c.leave((pending, None))
    assert resp.members[0].error == 0
    assert not c.group().pending
    assert ("pend", "g", pending) not in c.timers


def test_leave_answers_parked_join_of_removed_member_25():
    c = Core()
    a, ta = c.new_member()
    b, tb = c.new_member()
    # B leaves from another connection while its JoinGroup is parked.
    c.leave((b, None))
    assert c.answers[tb].error == 25 and c.answers[tb].member_id == ""
