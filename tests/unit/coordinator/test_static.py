"""Static membership, KIP-345 (spec §3.4, scenarios 24-26)."""

from __future__ import annotations

from groupd.coordinator.api import JoinMember, Protocol, SyncGroupResponse
from groupd.coordinator.records import GroupMetadataKey

from .harness import RANGE, Core


def static_group(c: Core) -> tuple[str, str]:
    """Stable generation 1 with A (instance i1, leader) and B (instance i2)."""
    ta = c.join(instance="i1", version=9)
    tb = c.join(instance="i2", version=9)
    assert ta not in c.answers and tb not in c.answers  # static members never get MEMBER_ID_REQUIRED
    a, b = c.group().static["i1"], c.group().static["i2"]
    assert a == "i1-u1" and b == "i2-u2"
    c.finish_join()
    assert c.answers[ta].leader == a
    c.sync(b, 1, instance="i2")
    c.sync(a, 1, {a: b"a", b: b"b"}, instance="i1")
    assert c.group().state == "Stable"
    return a, b


def test_follower_restart_gets_old_assignment_without_rebalance():
    c = Core()
    a, b = static_group(c)
    c.log.clear()
    tok = c.join(instance="i2", version=9)
    resp = c.answers[tok]
    b2 = resp.member_id
    assert b2 == "i2-u3"
    assert (resp.error, resp.generation_id, resp.leader, resp.members, resp.skip_assignment) == (
        0,
        1,
        a,
        (),
        False,
    )
    g = c.group()
    assert g.state == "Stable" and g.generation == 1
    # The new id is persisted (no rebalance): one GroupMetadata record with the same generation.
    ((key, value),) = c.log
    assert key == GroupMetadataKey("g") and value.generation == 1
    assert [(m.member_id, m.assignment) for m in value.members] == [(a, b"a"), (b2, b"b")]
    assert c.heartbeat(b, 1, instance="i2") == 82
    assert c.heartbeat(b, 1) == 25
    assert c.heartbeat(b2, 1, instance="i2") == 0
    assert c.answers[c.sync(b2, 1, instance="i2")] == SyncGroupResponse(0, "consumer", "range", b"b")


def test_leader_restart_v9_skips_assignment_with_member_list():
    c = Core()
    a, b = static_group(c)
    resp = c.answers[c.join(instance="i1", version=9)]
    a2 = resp.member_id
    assert resp.leader == a2 and resp.skip_assignment is True
    assert resp.members == (JoinMember(b, "i2", b"range-meta"), JoinMember(a2, "i1", b"range-meta"))
    assert c.group().state == "Stable" and c.group().leader == a2


def test_leader_restart_v5_gets_old_leader_id_and_no_members():
    c = Core()
    a, b = static_group(c)
    resp = c.answers[c.join(instance="i1", version=5)]
    assert resp.member_id != a
    assert (resp.leader, resp.members, resp.skip_assignment) == (a, (), False)
    assert c.group().leader == resp.member_id  # leadership moved to the new id all the same


def test_restart_with_same_selection_but_new_metadata_skips_rebalance():
    c = Core()
    a, b = static_group(c)
    tok = c.join(instance="i2", version=9, protocols=(Protocol("range", b"new"),))
    assert c.answers[tok].error == 0
    assert c.group().state == "Stable"


def test_restart_changing_the_selected_protocol_rebalances():
    c = Core()
    ta = c.join(instance="i1")
    c.finish_join()
    a = c.answers[ta].member_id
    c.sync(a, 1, {a: b"a"}, instance="i1")
    tok = c.join(instance="i1", protocols=(Protocol("roundrobin", b"rr"), Protocol("range", b"r")))
    # The only member now votes roundrobin: the selection would change, so the group rebalances.
    g = c.group()
    assert g.state in ("PreparingRebalance", "CompletingRebalance")
    c.finish_join()
    assert c.answers[tok].protocol_name == "roundrobin" and c.answers[tok].generation_id == 2


def test_restart_write_failure_restores_old_member():
    c = Core()
    a, b = static_group(c)
    c.fail_next_write = 7  # REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE in 4.x
    resp = c.answers[c.join(instance="i2", version=9)]
    assert (resp.error, resp.member_id, resp.generation_id, resp.leader) == (15, "", 1, a)
    g = c.group()
    assert g.static["i2"] == b and b in g.members and len(g.members) == 2
    assert c.heartbeat(b, 1, instance="i2") == 0


def test_static_rejoin_in_completing_rebalance_fences_parked_sync():
    c = Core()
    ta = c.join(instance="i1")
    tb = c.join(instance="i2")
    c.finish_join()
    assert c.answers[ta].error == 0
    b = c.answers[tb].member_id
    ts_b = c.sync(b, 1, instance="i2")
    # A follower C's parked sync would get 27; here B's old id is fenced.
    c.join(instance="i2")
    assert c.answers[ts_b] == SyncGroupResponse(82)
    assert c.group().state == "PreparingRebalance"


def test_static_rejoin_in_completing_rebalance_other_parked_syncs_get_27():
    c = Core()
    ta = c.join(instance="i1")
    tb = c.join(instance="i2")
    tc = c.join(instance="i3")
    c.finish_join()
    b, cc = c.answers[tb].member_id, c.answers[tc].member_id
    s_b = c.sync(b, 1, instance="i2")
    s_c = c.sync(cc, 1, instance="i3")
    c.join(instance="i2")
    assert c.answers[s_b].error == 82 and c.answers[s_c].error == 27
    assert ta in c.answers


def test_static_rejoin_while_parked_fences_old_join():
    c = Core()
    a, b = static_group(c)
    t_old = c.join(member_id=a, instance="i1")  # leader rejoin: rebalance, parked
    assert c.group().state == "PreparingRebalance"
    t_new = c.join(instance="i1")
    assert c.answers[t_old].error == 82 and c.answers[t_old].member_id == a
    assert t_new not in c.answers
    assert c.group().state == "PreparingRebalance"


def test_static_member_that_does_not_rejoin_stays_in_group():
    c = Core()
    a, b = static_group(c)
    t0 = c.now
    ta = c.join(member_id=a, instance="i1")
    for t in range(t0 + 3_000, t0 + 30_000, 3_000):
        c.advance(t)
        c.heartbeat(b, 1, instance="i2")
    c.advance(t0 + 30_000)
    resp = c.answers[ta]
    assert resp.generation_id == 2
    assert [m.member_id for m in resp.members] == [a, b]  # B (static) kept with its last metadata


def test_fenced_instance_on_join_and_leave_by_instance():
    c = Core()
    a, b = static_group(c)
    assert c.answers[c.join(member_id="i2-stale", instance="i2")].error == 82
    assert c.answers[c.join(member_id=b, instance="i9")].error == 25
    resp = c.leave(("", "i2"))
    assert resp.members[0].error == 0
    assert b not in c.group().members and c.group().state == "PreparingRebalance"
    assert c.leave(("", "i2")).members[0].error == 25
    assert c.leave(("x", "i1")).members[0].error == 82


def test_dynamic_join_v4_gets_member_id_required_static_never():
    c = Core()
    assert c.answers[c.join(version=4)].error == 79
    tok = c.join(version=5, instance="i1", protocols=RANGE)
    assert tok not in c.answers
