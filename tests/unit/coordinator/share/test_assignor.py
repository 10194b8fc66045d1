"""The ``simple`` share assignor (Kafka's SimpleAssignor): every assignable partition goes to a member,
each member gets the count of Kafka's formula, no partition is held by more members than the desired
sharing, only subscribed and assignable partitions are given, and a previous target is kept where it can be."""

import math
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.coordinator.share.assignor import assign, desired_counts

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)


def test_kafka_examples():
    assert desired_counts(3, 6) == [2, 2, 2]
    assert desired_counts(4, 2) == [1, 1, 1, 1]  # sharing 2
    assert desired_counts(2, 3) == [2, 1]
    out = assign({m: frozenset({T}) for m in ("a", "b", "c", "d")}, {T: frozenset({0, 1})}, {})
    per_partition = {0: 0, 1: 0}
    for parts in out.values():
        (p,) = parts[T]
        per_partition[p] += 1
    assert per_partition == {0: 2, 1: 2}


def test_only_assignable_partitions():
    out = assign({"a": frozenset({T})}, {T: frozenset({1, 3})}, {})
    assert out == {"a": {T: frozenset({1, 3})}}
    assert assign({"a": frozenset({T})}, {}, {}) == {"a": {}}


def test_sticky_when_nothing_changes():
    subs = {m: frozenset({T}) for m in ("a", "b", "c")}
    first = assign(subs, {T: frozenset(range(6))}, {})
    assert assign(subs, {T: frozenset(range(6))}, first) == first


def test_heterogeneous_subscriptions():
    out = assign({"a": frozenset({T}), "b": frozenset({T, U})}, {T: frozenset(range(4)), U: frozenset({0})}, {})
    assert out["b"][U] == frozenset({0})
    assert U not in out["a"]
    assert out["a"][T] | out["b"].get(T, frozenset()) == frozenset(range(4))


@settings(max_examples=300, deadline=None)
@given(
    members=st.integers(1, 12),
    partitions=st.integers(0, 10),
    assignable=st.data(),
    previous_seed=st.data(),
)
def test_properties_homogeneous(members, partitions, assignable, previous_seed):
    ids = [f"m{i:02}" for i in range(members)]
    parts = frozenset(assignable.draw(st.sets(st.integers(0, max(partitions - 1, 0)), max_size=partitions)))
    previous = {}
    for m in ids:
        if previous_seed.draw(st.booleans()):
            previous[m] = {T: frozenset(previous_seed.draw(st.sets(st.integers(0, 12), max_size=5)))}
    out = assign({m: frozenset({T}) for m in ids}, {T: parts}, previous)
    assert set(out) == set(ids)
    holders: dict[int, int] = {}
    for m in ids:
        got = out[m].get(T, frozenset())
        assert got <= parts  # only assignable partitions
        for p in got:
            holders[p] = holders.get(p, 0) + 1
    if parts:
        sharing = math.ceil(members / len(parts))
        assert set(holders) == set(parts)  # every assignable partition is assigned
        assert max(holders.values()) <= sharing
        counts = desired_counts(members, len(parts))
        assert sorted(len(out[m].get(T, ())) for m in ids) == sorted(counts) or all(
            len(out[m].get(T, ())) <= c for m, c in zip(ids, counts, strict=True)
        )
        for m, c in zip(ids, counts, strict=True):
            assert len(out[m].get(T, ())) <= c
    else:
        assert all(not out[m] for m in ids)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sets(st.sampled_from([T, U]), min_size=1), min_size=1, max_size=8), st.integers(1, 6), st.integers(1, 6)
)
def test_properties_heterogeneous(subs, t_count, u_count):
    subscriptions = {f"m{i}": frozenset(s) for i, s in enumerate(subs)}
    assignable = {T: frozenset(range(t_count)), U: frozenset(range(u_count))}
    out = assign(subscriptions, assignable, {})
    for topic in (T, U):
        subscribers = [m for m, s in subscriptions.items() if topic in s]
        held = [p for m in subscribers for p in out[m].get(topic, ())]
        if subscribers:
            assert set(held) == set(assignable[topic])
        for m, s in subscriptions.items():
            if topic not in s:
                assert topic not in out[m]
