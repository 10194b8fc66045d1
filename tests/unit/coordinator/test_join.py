"""JoinGroup v0-v9 with a manual clock (spec §3, scenarios 3-8, 14-23 of §13)."""

from __future__ import annotations

from groupd.coordinator.api import JoinMember, Protocol
from groupd.coordinator.records import GroupMetadataKey

from .harness import RANGE, Core

RR = (Protocol("roundrobin", b"rr"),)


def test_session_timeout_bounds_and_group_id():
    c = Core()
    assert c.answers[c.join(session=5999)].error == 26
    assert c.answers[c.join(session=5999)].member_id == ""
    assert "g" not in c.state.groups  # nothing created
    assert c.answers[c.join(session=1_800_001)].error == 26
    assert c.answers[c.join(session=6000)].error == 79
    assert c.answers[c.join(group="")].error == 24
    resp = c.answers[c.join(group="", member_id="m")]
    assert (resp.error, resp.member_id) == (24, "m")


def test_known_member_id_on_unknown_group_is_unknown_member():
    c = Core()
    resp = c.answers[c.join(member_id="x")]
    assert (resp.error, resp.member_id, resp.generation_id) == (25, "x", -1)
    assert "g" not in c.state.groups


def test_member_id_required_then_pending_expires():
    c = Core()
    resp = c.answers[c.join(version=4, client="cli")]
    assert resp.error == 79
    assert resp.member_id == "cli-u1"
    assert resp.generation_id == -1
    g = c.group()
    assert g.state == "Empty" and set(g.pending) == {"cli-u1"} and not g.members
    assert c.heartbeat("cli-u1", 0) == 25  # a pending id is not a member
    c.advance(9_999)
    assert "cli-u1" in g.pending
    c.advance(10_000)
    assert not g.pending
    assert c.answers[c.join(member_id="cli-u1")].error == 25


def test_member_ids_use_client_id_or_instance_id():
    c = Core(initial_rebalance_delay_ms=0)
    assert c.answers[c.join(client="kafka-python-2.0")].member_id == "kafka-python-2.0-u1"
    c.join(instance="i-7", client="other")
    assert "i-7-u2" in c.group().members


def test_initial_delay_single_member():
    c = Core()
    a, tok = c.new_member()
    assert c.group().state == "PreparingRebalance"
    c.advance(2_999)
    assert tok not in c.answers
    c.advance(3_000)
    resp = c.answers[tok]
    assert resp.error == 0 and resp.generation_id == 1 and resp.leader == a and resp.member_id == a
    assert resp.members == (JoinMember(a, None, b"range-meta"),)
    assert resp.protocol_name == "range" and resp.protocol_type == "consumer"
    assert c.group().state == "CompletingRebalance"


def test_initial_delay_extended_by_newcomer():
    c = Core()
    a, ta = c.new_member()
    c.advance(1_000)
    b, tb = c.new_member()
    c.advance(3_000)
    assert ta not in c.answers  # extended by B
    c.advance(5_999)
    assert ta not in c.answers
    c.advance(6_000)
    ra, rb = c.answers[ta], c.answers[tb]
    assert (ra.generation_id, ra.leader, [m.member_id for m in ra.members]) == (1, a, [a, b])
    assert (rb.generation_id, rb.leader, rb.members) == (1, a, ())


def test_initial_delay_never_past_rebalance_timeout():
    c = Core()
    fires = []
    a, ta = c.new_member(rebalance=7_000)
    for t in (1_000, 4_000, 6_500):
        c.advance(t)
        fires.append(c.timers.get(("join", "g")))
        c.new_member()
    assert fires == [3_000, 6_000, 7_000]  # timer set when B, C, E arrive
    c.advance(6_999)
    assert ta not in c.answers
    assert c.timers[("join", "g")] == 7_000
    c.advance(7_000)
    assert c.answers[ta].generation_id == 1
    assert len(c.answers[ta].members) == 4


def test_initial_delay_short_rebalance_timeout_ends_at_delay():
    c = Core()
    _, ta = c.new_member(rebalance=2_000)
    c.advance(1_000)
    c.new_member(rebalance=2_000)
    c.advance(2_999)
    assert ta not in c.answers
    c.advance(3_000)
    assert len(c.answers[ta].members) == 2


def test_initial_delay_does_not_end_early_when_everyone_joined():
    c = Core()
    _, ta = c.new_member()
    _, tb = c.new_member()  # joined within the first wave: it extends the delay once more
    assert ta not in c.answers and tb not in c.answers
    c.advance(5_999)
    assert ta not in c.answers
    c.advance(6_000)
    assert c.answers[ta].error == 0 and c.answers[tb].error == 0


def test_delay_zero_ends_the_initial_join_on_a_zero_ms_timer():
    # Kafka schedules the end of the initial join phase even with group.initial.rebalance.delay.ms=0;
    # its expiry is queued behind the JoinGroups already received, which therefore make generation 1.
    c = Core(initial_rebalance_delay_ms=0)
    a, ta = c.new_member()
    assert ta not in c.answers and c.timers[("join", "g")] == 0
    b, tb = c.new_member()  # arrived before the timer fired: a newcomer, so one more 0 ms timer
    c.advance(0)
    assert c.now == 0 and ("join", "g") not in c.timers
    assert c.answers[ta].generation_id == 1 and c.answers[tb].generation_id == 1
    assert {m.member_id for m in c.answers[ta].members} == {a, b}


def test_delay_zero_later_members_rebalance_event_driven():
    c = Core(initial_rebalance_delay_ms=0)
    a, ta = c.new_member()
    c.advance(0)
    assert c.answers[ta].generation_id == 1
    c.sync(a, 1, {a: b"x"})
    b, tb = c.new_member()
    assert tb not in c.answers  # waits for A to rejoin
    assert c.heartbeat(a, 1) == 27
    ta2 = c.join(member_id=a)
    # Not the initial rebalance: completed by A's arrival, no timer, the clock still at 0.
    assert c.now == 0
    assert c.answers[ta2].generation_id == 2 and c.answers[tb].generation_id == 2


def test_three_members_event_driven():
    c = Core(initial_rebalance_delay_ms=0)
    a, _ = c.new_member()
    c.advance(0)
    c.sync(a, 1, {a: b""})
    b, tb = c.new_member()
    cc, tc = c.new_member()
    ta = c.join(member_id=a)
    assert {c.answers[t].generation_id for t in (ta, tb, tc)} == {2}
    assert c.group().state == "CompletingRebalance"


def test_v0_join_without_rebalance_timeout_completes(  # KAFKA-8653
):
    c = Core(initial_rebalance_delay_ms=0)
    ta = c.join(version=0, rebalance=None, session=10_000)
    c.advance(0)  # the initial join phase ends on a 0 ms timer
    a = c.answers[ta].member_id
    assert c.answers[ta].error == 0
    c.sync(a, 1, {a: b"a"})
    tb = c.join(version=0, rebalance=None, session=10_000)  # B joins: rebalance, A never rejoins
    assert c.group().members[a].rebalance_timeout == 10_000
    c.heartbeat(a, 1)
    c.advance(9_999)
    assert tb not in c.answers
    c.advance(10_000)
    resp = c.answers[tb]
    assert resp.error == 0 and resp.generation_id == 2
    assert a not in c.group().members  # removed at the rebalance timeout (= session timeout)


def test_v0_to_v3_unknown_member_joins_without_member_id_required():
    for v in (0, 1, 2, 3):
        c = Core()
        tok = c.join(version=v)
        assert tok not in c.answers
        assert len(c.group().members) == 1


def test_follower_rejoin_same_metadata_in_stable_gets_current_info():
    c = Core()
    a, b = c.stable_group()
    tok = c.join(member_id=b)
    resp = c.answers[tok]
    assert (resp.error, resp.generation_id, resp.leader, resp.members) == (0, 1, a, ())
    assert c.group().state == "Stable"


def test_leader_rejoin_forces_rebalance_and_follower_completes_it():
    c = Core()
    a, b = c.stable_group()
    ta = c.join(member_id=a)
    assert c.group().state == "PreparingRebalance"
    assert c.heartbeat(b, 1) == 27
    tb = c.join(member_id=b)
    assert c.answers[ta].generation_id == 2 and c.answers[tb].generation_id == 2
    assert c.answers[ta].leader == a


def test_member_not_rejoining_is_removed_at_rebalance_timeout():
    c = Core()
    a, b = c.stable_group()
    t0 = c.now
    ta = c.join(member_id=a)
    for t in range(t0 + 3_000, t0 + 30_000, 3_000):
        c.advance(t)
        c.heartbeat(b, 1)
    assert ta not in c.answers
    c.advance(t0 + 30_000)
    resp = c.answers[ta]
    assert resp.generation_id == 2 and [m.member_id for m in resp.members] == [a]
    assert c.heartbeat(b, 2) == 25


def test_new_member_join_timeout_kafka_7610():
    c = Core()
    (a,) = c.stable_group(1, rebalance=600_000)
    t0 = c.now
    tc = c.join(version=3)
    cid = next(m for m in c.group().members if m != a)
    for t in range(t0 + 3_000, t0 + 300_000, 3_000):
        c.advance(t)
        assert c.heartbeat(a, 1) == 27
    assert tc not in c.answers
    c.advance(t0 + 300_000)
    resp = c.answers[tc]
    assert (resp.error, resp.member_id) == (25, "")
    assert cid not in c.group().members


def test_pending_member_never_returning_does_not_block_kafka_7909():
    c = Core()
    a, b = c.stable_group()
    t0 = c.now
    ta = c.join(member_id=a)
    pending = c.answers[c.join()].member_id  # gets 79, never comes back
    tb = c.join(member_id=b)
    assert ta not in c.answers  # the pending id blocks normal completion...
    c.advance(t0 + 10_000)  # ...until it expires: completion at that instant, not at the rebalance timeout
    assert c.answers[ta].generation_id == 2 and c.answers[tb].generation_id == 2
    assert pending not in c.group().pending


def test_group_max_size():
    c = Core(max_size=2)
    c.stable_group(2)
    resp = c.answers[c.join(version=3)]
    assert (resp.error, resp.member_id) == (81, "")
    assert c.group().state == "Stable"


def test_inconsistent_protocols():
    c = Core()
    c.stable_group()
    assert c.answers[c.join(protocols=RR)].error == 23
    assert c.answers[c.join(ptype="connect")].error == 23
    c2 = Core()
    assert c2.answers[c2.join(ptype="")].error == 23
    assert c2.answers[c2.join(protocols=())].error == 23


def test_protocol_selected_by_vote():
    c = Core()
    both = (Protocol("range", b"r"), Protocol("roundrobin", b"rr"))
    rev = (both[1], both[0])
    _, ta = c.new_member(protocols=both)
    c.new_member(protocols=rev)
    c.new_member(protocols=rev)
    c.finish_join()
    assert c.answers[ta].protocol_name == "roundrobin"
    assert all(m.metadata == b"rr" for m in c.answers[ta].members)


def test_known_member_in_empty_group_is_unknown():
    c = Core()
    (a,) = c.stable_group(1)
    c.leave((a, None))
    assert c.group().state == "Empty"
    assert c.answers[c.join(member_id=a)].error == 25


def test_completing_rebalance_rejoin_same_metadata_gets_current_info_with_members_for_leader():
    c = Core()
    a, ta = c.new_member()
    b, tb = c.new_member()
    c.finish_join()
    again = c.answers[c.join(member_id=a)]
    assert again.generation_id == 1 and len(again.members) == 2
    assert c.answers[c.join(member_id=b)].members == ()
    assert c.group().state == "CompletingRebalance"


def test_group_emptied_by_join_timeout_writes_memberless_metadata():
    c = Core()
    (a,) = c.stable_group(1)
    c.log.clear()
    c.now += 1
    c.join(member_id=a)  # PreparingRebalance, then leave
    c.leave((a, None))
    g = c.group()
    assert g.state == "Empty" and g.generation == 3
    key, value = c.log[-1]
    assert key == GroupMetadataKey("g")
    assert value.members == () and value.protocol is None and value.leader is None
    assert value.protocol_type == "consumer" and value.generation == 3


def test_second_join_supersedes_parked_one_without_answer():
    c = Core()
    a, ta = c.new_member()
    ta2 = c.join(member_id=a)
    c.advance(3_000)
    assert ta not in c.answers
    assert c.answers[ta2].error == 0


def test_default_member_id_is_client_id_and_java_uuid():
    import re

    from groupd.coordinator import shard
    from groupd.coordinator.api import GroupConfig, JoinGroup

    req = JoinGroup("g", "", None, 10_000, 30_000, "consumer", RANGE, "rdkafka", "/h", 4)
    r = shard.join_group(shard.ShardState(0), req, 1, 0, GroupConfig())
    mid = r.responses[0][1].member_id
    assert re.fullmatch(r"rdkafka-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", mid), mid


def test_nothing_is_written_entering_preparing_or_completing_rebalance():
    c = Core()
    c.new_member()
    c.new_member()
    c.finish_join()
    assert c.group().state == "CompletingRebalance"
    assert c.log == []
    assert all(r.records == () for r in c.results)


def test_member_ids_end_in_a_random_version_4_uuid():
    """Kafka's member id is ``client.id + "-" + UUID.randomUUID()``: what follows the client id parses
    as an RFC 4122 version-4 UUID, written as ``uuid`` writes it, and no two are alike."""
    import uuid

    from groupd.coordinator.classic.rules import random_uuid

    drawn = {random_uuid() for _ in range(2_000)}
    assert len(drawn) == 2_000
    for text in list(drawn)[:200]:
        u = uuid.UUID(text)
        assert (str(u), u.version, u.variant) == (text, 4, uuid.RFC_4122)
