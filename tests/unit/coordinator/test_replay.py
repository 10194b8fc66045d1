"""Loading a partition = replaying its records (spec §9.4, scenario 37)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.coordinator import shard
from groupd.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
)

from .harness import Core, subscription


def member(mid: str, assignment: bytes, instance: str | None = None) -> MemberMetadata:
    return MemberMetadata(mid, instance, "cli", "/10.0.0.1", 30_000, 10_000, subscription("t"), assignment)


def gm(generation: int, *members: MemberMetadata, leader: str | None = "A") -> GroupMetadataValue:
    return GroupMetadataValue("consumer", generation, "range" if members else None, leader, 123, members)


def test_group_metadata_loads_stable_with_assignments_then_expires_after_load():
    c = Core()
    shard.replay(c.state, GroupMetadataKey("g"), gm(4, member("A", b"a", "i1"), member("B", b"b")), 0)
    g = c.group()
    assert (g.state, g.generation, g.leader, g.protocol, g.protocol_type) == (
        "Stable",
        4,
        "A",
        "range",
        "consumer",
    )
    assert g.members["A"].assignment == b"a" and g.static == {"i1": "A"}
    assert g.subscribed == frozenset({"t"})
    c.now = 50_000
    c.apply(shard.on_loaded(c.state, c.now, c.cfg))
    assert c.timers[("hb", "g", "A")] == 60_000
    assert c.answers[c.sync("B", 4)].assignment == b"b"
    c.advance(60_000)  # nobody heartbeats: both expire, the join completes empty
    assert (g.state, g.generation) == ("Empty", 5)
    assert not g.members


def test_loaded_member_can_heartbeat_and_rejoin():
    c = Core()
    shard.replay(c.state, GroupMetadataKey("g"), gm(4, member("A", b"a"), member("B", b"b")), 0)
    c.apply(shard.on_loaded(c.state, 0, c.cfg))
    assert c.heartbeat("A", 4) == 0
    assert c.answers[c.join(member_id="B", protocols=c.group().members["B"].protocols)].generation_id == 4


def test_offsets_only_make_a_simple_empty_group():
    c = Core()
    shard.replay(c.state, OffsetCommitKey("s", "t", 0), OffsetCommitValue(5, "m", 1), 0)
    g = c.group("s")
    assert g.state == "Empty" and g.protocol_type is None
    assert c.fetch("s").partitions[0].offset == 5


def test_group_record_then_tombstone_leaves_no_group():
    c = Core()
    shard.replay(c.state, GroupMetadataKey("g"), gm(1, member("A", b"")), 0)
    shard.replay(c.state, GroupMetadataKey("g"), None, 0)
    assert "g" not in c.state.groups


def test_offset_tombstone_removes_offset_and_last_write_wins():
    c = Core()
    k = OffsetCommitKey("g", "t", 0)
    shard.replay(c.state, k, OffsetCommitValue(1, "", 1), 0)
    shard.replay(c.state, k, OffsetCommitValue(2, "", 2), 0)
    assert c.fetch(topics={"t": (0,)}).partitions[0].offset == 2
    shard.replay(c.state, k, None, 0)
    assert c.fetch(topics={"t": (0,)}).partitions[0].offset == -1
    assert not c.state.offsets.of("g")


def test_empty_group_value_loads_empty_with_state_timestamp():
    c = Core()
    shard.replay(c.state, GroupMetadataKey("g"), gm(3, leader=None), 0)
    g = c.group()
    assert (g.state, g.generation, g.state_ts, g.leader, g.protocol) == ("Empty", 3, 123, None, None)
    assert g.subscribed == frozenset()


def test_v0_record_rebalance_timeout_falls_back_to_session():
    c = Core()
    m = MemberMetadata("A", None, "cli", "/h", -1, 10_000, b"", b"")
    shard.replay(c.state, GroupMetadataKey("g"), gm(1, m), 0)
    assert c.group().members["A"].rebalance_timeout == 10_000


def test_runtime_log_replayed_into_fresh_state_gives_same_groups():
    c = Core()
    a, b = c.stable_group()
    c.commit(("t", 0, 10, "meta"), generation=1, member_id=a)
    fresh = shard.ShardState(0)
    for k, v in c.log:
        shard.replay(fresh, k, v, 0)
    g, h = c.group(), fresh.groups["g"]
    assert (h.state, h.generation, h.leader, list(h.members)) == (
        g.state,
        g.generation,
        g.leader,
        list(g.members),
    )
    assert [m.assignment for m in h.members.values()] == [a.encode(), b.encode()]
    assert fresh.offsets.of("g")["t"][0].offset == 10 and fresh.offsets.of("g")["t"][0].metadata == "meta"


def test_over_capacity_group_rebalances_after_load():
    c = Core(max_size=1)
    shard.replay(c.state, GroupMetadataKey("g"), gm(2, member("A", b""), member("B", b"")), 0)
    c.apply(shard.on_loaded(c.state, 0, c.cfg))
    assert c.group().state == "PreparingRebalance"


def _view(state: shard.ShardState) -> dict:
    """What a load leaves behind, as plain data."""
    return {
        gid: (g.state, g.generation, g.leader, g.protocol, g.state_ts, tuple(g.members),
              tuple((m.member_id, m.assignment) for m in g.members.values()),
              {t: dict(ps) for t, ps in state.offsets.of(gid).items()})
        for gid, g in state.groups.items()
    }


_keys = st.one_of(
    st.builds(OffsetCommitKey, st.sampled_from(["g1", "g2"]), st.sampled_from(["t", "u"]), st.integers(0, 1)),
    st.builds(GroupMetadataKey, st.sampled_from(["g1", "g2"])),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(_keys, st.booleans(), st.integers(0, 5)), min_size=1, max_size=25),
    st.randoms(use_true_random=False),
)
def test_a_load_does_not_depend_on_the_order_of_the_surviving_records(writes, rnd):
    """Start-up replays only the last record of each key; which order the survivors come in does not
    change what is loaded (Kafka's loader, too, folds offsets and groups into maps before building
    groups), so the walk need not track the order of last appearance."""
    latest: dict = {}
    for key, live, n in writes:
        if not live:
            value = None
        elif isinstance(key, OffsetCommitKey):
            value = OffsetCommitValue(n, f"m{n}", 1_000 + n)
        else:
            value = gm(n + 1, member("A", b"a%d" % n)) if n % 2 else gm(n + 1)
        latest[key] = value  # first appearance order, last value
    items = list(latest.items())
    views = []
    for order in (items, items[::-1], rnd.sample(items, len(items))):
        state = shard.ShardState(0)
        for key, value in order:
            shard.replay(state, key, value, 0)
        views.append(_view(state))
    assert views[0] == views[1] == views[2]
