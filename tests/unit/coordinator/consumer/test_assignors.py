"""The server-side assignors: Kafka's examples and property tests (balance, stickiness, every partition
owned exactly once)."""

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.coordinator.consumer.assignors import (
    AssignorError,
    MemberSpec,
    assign,
    range_assign,
    uniform_heterogeneous,
    uniform_homogeneous,
)

A = uuid.UUID(int=1)
B = uuid.UUID(int=2)
C = uuid.UUID(int=3)


def sizes(result):
    return sorted(sum(len(ps) for ps in a.values()) for a in result.values())


def owners(result):
    seen = {}
    for member, a in result.items():
        for topic, ps in a.items():
            for p in ps:
                assert (topic, p) not in seen, f"{topic}:{p} owned by {seen[(topic, p)]} and {member}"
                seen[(topic, p)] = member
    return seen


def test_range_splits_contiguously_from_partition_zero():
    # spec scenario 19: a, b, c dynamic, 7 partitions -> a [0,1,2], b [3,4], c [5,6]
    members = {m: MemberSpec(frozenset({A})) for m in ("c", "a", "b")}
    out = range_assign(members, {A: 7})
    assert out == {"a": {A: frozenset({0, 1, 2})}, "b": {A: frozenset({3, 4})}, "c": {A: frozenset({5, 6})}}


def test_range_sorts_static_members_first_by_instance_id():
    members = {
        "a": MemberSpec(frozenset({A})),
        "z": MemberSpec(frozenset({A}), instance_id="i2"),
        "y": MemberSpec(frozenset({A}), instance_id="i1"),
    }
    out = range_assign(members, {A: 3})
    assert out["y"] == {A: frozenset({0})} and out["z"] == {A: frozenset({1})} and out["a"] == {A: frozenset({2})}


def test_range_is_per_topic_and_not_sticky():
    members = {
        "a": MemberSpec(frozenset({A, B}), current={A: frozenset({2})}),
        "b": MemberSpec(frozenset({A})),
    }
    out = range_assign(members, {A: 3, B: 2})
    assert out == {"a": {A: frozenset({0, 1}), B: frozenset({0, 1})}, "b": {A: frozenset({2})}}


def test_range_member_without_partitions_gets_nothing():
    members = {m: MemberSpec(frozenset({A})) for m in ("a", "b", "c")}
    assert range_assign(members, {A: 1}) == {"a": {A: frozenset({0})}, "b": {}, "c": {}}


def test_uniform_three_members_ten_partitions():
    # spec scenario 20: sizes {4,3,3}; removing a member moves only its partitions
    members = {m: MemberSpec(frozenset({A})) for m in ("m1", "m2", "m3")}
    first = assign("uniform", members, {A: 10})
    assert sizes(first) == [3, 3, 4]
    assert len(owners(first)) == 10
    rest = {m: MemberSpec(frozenset({A}), current=first[m]) for m in ("m1", "m3")}
    second = assign("uniform", rest, {A: 10})
    assert sizes(second) == [5, 5]
    for m in ("m1", "m3"):
        assert first[m][A] <= second[m][A], "a remaining member lost a partition"


def test_uniform_joiner_takes_only_from_the_overloaded():
    members = {"m1": MemberSpec(frozenset({A}))}
    first = assign("uniform", members, {A: 6})
    assert first == {"m1": {A: frozenset(range(6))}}
    two = {"m1": MemberSpec(frozenset({A}), current=first["m1"]), "m2": MemberSpec(frozenset({A}))}
    second = assign("uniform", two, {A: 6})
    assert len(second["m1"][A]) == 3 and second["m1"][A] <= first["m1"][A]
    assert second["m2"][A] == frozenset(range(6)) - second["m1"][A]


def test_uniform_keeps_an_extra_partition_where_it_already_is():
    # 7 partitions over 3 members: the member already holding 3 keeps them, even when it comes last
    cur = {"m1": frozenset({0, 1}), "m2": frozenset({2, 3}), "m3": frozenset({4, 5, 6})}
    members = {m: MemberSpec(frozenset({A}), current={A: ps}) for m, ps in cur.items()}
    out = assign("uniform", members, {A: 7})
    assert {m: a[A] for m, a in out.items()} == cur


def test_uniform_heterogeneous_gives_topics_to_their_subscribers_only():
    members = {
        "m1": MemberSpec(frozenset({A})),
        "m2": MemberSpec(frozenset({A, B})),
        "m3": MemberSpec(frozenset({B})),
    }
    out = assign("uniform", members, {A: 3, B: 3})
    assert set(out["m1"]) <= {A} and set(out["m3"]) <= {B}
    assert len(owners(out)) == 6
    assert sizes(out) == [2, 2, 2]


def test_missing_topic_is_an_assignor_error():
    with pytest.raises(AssignorError):
        assign("uniform", {"m": MemberSpec(frozenset({A}))}, {})
    with pytest.raises(AssignorError):
        assign("range", {"m": MemberSpec(frozenset({A}))}, {})


def test_racks_do_not_change_the_assignment():
    # Kafka 4.x's server-side assignors carry the rack in the member spec but never use it
    plain = {m: MemberSpec(frozenset({A, B})) for m in ("m1", "m2", "m3")}
    racked = {m: MemberSpec(frozenset({A, B}), rack=f"r{i}") for i, m in enumerate(("m1", "m2", "m3"))}
    for name in ("uniform", "range"):
        assert assign(name, plain, {A: 5, B: 4}) == assign(name, racked, {A: 5, B: 4})


def test_empty_group_and_empty_subscriptions():
    assert assign("uniform", {}, {A: 3}) == {}
    assert assign("uniform", {"m": MemberSpec(frozenset())}, {A: 3}) == {"m": {}}
    assert assign("range", {"m": MemberSpec(frozenset())}, {A: 3}) == {"m": {}}


# ---------------------------------------------------------------- properties

topic_ids = [A, B, C]


@st.composite
def groups(draw, homogeneous):
    counts = {t: draw(st.integers(0, 12)) for t in topic_ids}
    n = draw(st.integers(1, 7))
    common = frozenset(draw(st.sets(st.sampled_from(topic_ids), min_size=1)))
    members = {}
    for i in range(n):
        subs = common if homogeneous else frozenset(draw(st.sets(st.sampled_from(topic_ids), min_size=1)))
        members[f"m{i}"] = MemberSpec(subs)
    return members, counts


def every_partition_once(result, members, counts):
    seen = owners(result)
    wanted = {(t, p) for spec in members.values() for t in spec.topics for p in range(counts[t])}
    assert set(seen) == wanted
    for member, a in result.items():
        assert set(a) <= members[member].topics


def perturb(members, result, draw_leave, draw_join, counts):
    """The next round: some members leave, one may join, members carry their previous target."""
    nxt = {}
    for i, (m, spec) in enumerate(members.items()):
        if i in draw_leave and len(members) - len(draw_leave) >= 1:
            continue
        nxt[m] = MemberSpec(spec.topics, current=result[m])
    if draw_join or not nxt:
        nxt["new"] = MemberSpec(next(iter(members.values())).topics)
    return nxt


@settings(max_examples=150, deadline=None)
@given(groups(True), st.sets(st.integers(0, 6), max_size=3), st.booleans())
def test_uniform_homogeneous_properties(group, leave, join):
    members, counts = group
    first = uniform_homogeneous(members, counts)
    every_partition_once(first, members, counts)
    s = sizes(first)
    assert s[-1] - s[0] <= 1, "unbalanced"
    # stickiness: with nothing changed, nothing moves
    same = {m: MemberSpec(spec.topics, current=first[m]) for m, spec in members.items()}
    assert uniform_homogeneous(same, counts) == first
    # after members leave or join: still balanced, and a member keeps min(its old count, its new quota)
    nxt = perturb(members, first, leave, join, counts)
    second = uniform_homogeneous(nxt, counts)
    every_partition_once(second, nxt, counts)
    s = sizes(second)
    assert s[-1] - s[0] <= 1
    for m, spec in nxt.items():
        old = {(t, p) for t, ps in spec.current.items() for p in ps}
        new = {(t, p) for t, ps in second[m].items() for p in ps}
        assert len(old & new) >= min(len(old), len(new)), f"{m} lost partitions it could have kept"


@settings(max_examples=150, deadline=None)
@given(groups(False), st.sets(st.integers(0, 6), max_size=3), st.booleans())
def test_uniform_heterogeneous_properties(group, leave, join):
    members, counts = group
    first = uniform_heterogeneous(members, counts)
    every_partition_once(first, members, counts)
    load = {m: sum(len(ps) for ps in a.values()) for m, a in first.items()}
    # balance: no partition could move to another subscriber of its topic to narrow a gap of two or more
    for m, a in first.items():
        for t in a:
            for other, spec in members.items():
                if t in spec.topics:
                    assert load[m] - load[other] <= 1, (m, other, t)
    same = {m: MemberSpec(spec.topics, current=first[m]) for m, spec in members.items()}
    assert uniform_heterogeneous(same, counts) == first
    nxt = perturb(members, first, leave, join, counts)
    every_partition_once(uniform_heterogeneous(nxt, counts), nxt, counts)


@settings(max_examples=100, deadline=None)
@given(groups(False))
def test_range_properties(group):
    members, counts = group
    out = range_assign(members, counts)
    every_partition_once(out, members, counts)
    for t in topic_ids:
        got = sorted(len(a.get(t, ())) for m, a in out.items() if t in members[m].topics)
        if got:
            assert got[-1] - got[0] <= 1
        for a in out.values():
            ps = sorted(a.get(t, ()))
            assert ps == list(range(ps[0], ps[0] + len(ps))) if ps else not ps, "range not contiguous"
