"""DescribeGroups, ListGroups, DeleteGroups per state and offsets retention (spec §7, §8.4, scenarios 28, 34, 36)."""

from __future__ import annotations

from groupd.coordinator import shard
from groupd.coordinator.api import DescribedMember, GroupListing, Protocol
from groupd.coordinator.records import GroupMetadataKey, OffsetCommitKey

from .harness import Core, subscription

WEEK = 604_800_000


def delete(c: Core, gid: str = "g") -> int:
    tok = c.run(lambda state, g, token, now, cfg: shard.delete_group(state, g, token, now), gid, gid)
    return c.answers[tok].error


def test_describe_per_state():
    c = Core()
    d = shard.describe_group(c.state, "g")
    assert (d.error, d.state, d.protocol_type, d.protocol, d.members) == (0, "Dead", "", "", ())
    a, ta = c.new_member()
    d = shard.describe_group(c.state, "g")
    assert d.state == "PreparingRebalance" and d.protocol == ""
    assert d.members == (DescribedMember(a, None, "c", "/127.0.0.1", b"", b""),)
    c.finish_join()
    assert shard.describe_group(c.state, "g").state == "CompletingRebalance"
    c.sync(a, 1, {a: b"asg"})
    d = shard.describe_group(c.state, "g")
    assert (d.state, d.protocol_type, d.protocol) == ("Stable", "consumer", "range")
    assert d.members == (DescribedMember(a, None, "c", "/127.0.0.1", b"range-meta", b"asg"),)
    c.leave((a, None))
    d = shard.describe_group(c.state, "g")
    assert (d.state, d.protocol, d.members, d.protocol_type) == ("Empty", "", (), "consumer")


def test_list_groups_with_filters():
    c = Core()
    c.stable_group(group="s")
    c.commit(("t", 0, 1), group="simple")
    everything = shard.list_groups(c.state, None, None)
    assert sorted(everything, key=lambda x: x.group_id) == [
        GroupListing("s", "consumer", "Stable"),
        GroupListing("simple", "", "Empty"),
    ]
    assert [x.group_id for x in shard.list_groups(c.state, frozenset({"stable"}), None)] == ["s"]
    assert [x.group_id for x in shard.list_groups(c.state, frozenset({"Empty"}), frozenset())] == ["simple"]
    assert len(shard.list_groups(c.state, frozenset(), frozenset({"Classic"}))) == 2
    assert shard.list_groups(c.state, None, frozenset({"consumer"})) == []
    assert shard.list_groups(c.state, None, frozenset({"bogus"})) == []


def test_delete_groups_per_state():
    c = Core()
    assert delete(c, "nope") == 69
    (a,) = c.stable_group(1)
    assert delete(c) == 68
    c.join(member_id=a)
    assert delete(c) == 68  # PreparingRebalance
    c.leave((a, None))
    c.commit(("t", 0, 1), ("t", 1, 2))
    c.log.clear()
    assert delete(c) == 0
    assert c.log == [
        (OffsetCommitKey("g", "t", 0), None),
        (OffsetCommitKey("g", "t", 1), None),
        (GroupMetadataKey("g"), None),
    ]
    assert c.results[-1].replay is True
    d = shard.describe_group(c.state, "g")
    assert (d.error, d.state) == (0, "Dead")
    assert delete(c) == 69


def test_deleted_group_stays_deleted_after_replay():
    c = Core()
    (a,) = c.stable_group(1)
    c.commit(("t", 0, 1), generation=1, member_id=a)
    c.leave((a, None))
    assert delete(c) == 0
    fresh = shard.ShardState(0)
    for k, v in c.log:
        shard.replay(fresh, k, v, 0)
    assert fresh.groups == {}


def test_delete_write_failure_restores_group():
    c = Core()
    c.commit(("t", 0, 1))
    c.fail_next_write = 6
    assert delete(c) == 16
    assert c.group().state == "Empty" and c.fetch(topics={"t": (0,)}).partitions[0].offset == 1


def expire(c: Core) -> None:
    c.expire()


def test_consumer_group_offsets_expire_from_the_time_it_became_empty():
    c = Core()
    (a,) = c.stable_group(1)
    c.commit(("t", 0, 1), generation=1, member_id=a)
    c.now = 50_000
    c.leave((a, None))
    t_empty = c.now
    assert c.group().state_ts == t_empty
    c.now = t_empty + WEEK - 1
    expire(c)
    assert c.state.offsets.of("g")
    c.log.clear()
    c.now = t_empty + WEEK
    expire(c)
    assert c.log == [(OffsetCommitKey("g", "t", 0), None), (GroupMetadataKey("g"), None)]
    assert "g" not in c.state.groups


def test_simple_group_offsets_expire_from_commit_time():
    c = Core()
    c.now = 1_000
    c.commit(("t", 0, 1))
    c.now = 5_000
    c.commit(("t", 1, 1))
    c.now = 1_000 + WEEK
    expire(c)
    assert list(c.state.offsets.of("g")["t"]) == [1]
    c.now = 5_000 + WEEK
    expire(c)
    assert "g" not in c.state.groups


def test_explicit_expire_timestamp_wins():
    c = Core()
    c.commit(("t", 0, 1), retention=10_000, version=2)
    c.now = 9_999
    expire(c)
    assert c.state.offsets.of("g")
    c.now = 10_000
    expire(c)
    assert "g" not in c.state.groups


def test_empty_group_without_offsets_goes_at_next_check():
    c = Core()
    (a,) = c.stable_group(1)
    c.leave((a, None))
    c.log.clear()
    expire(c)
    assert c.log == [(GroupMetadataKey("g"), None)]
    assert "g" not in c.state.groups


def test_stable_consumer_group_expires_only_unsubscribed_topics():
    c = Core()
    a, b = c.stable_group(protocols=(Protocol("range", subscription("t")),))
    c.commit(("t", 0, 1), ("u", 0, 1), generation=1, member_id=a)
    c.now += WEEK
    for t in (a, b):
        c.heartbeat(t, 1)
    expire(c)
    g = c.group()
    assert list(c.state.offsets.of("g")) == ["t"] and g.state == "Stable"


def test_rebalancing_group_offsets_never_expire():
    c = Core()
    a, b = c.stable_group(protocols=(Protocol("range", subscription("t")),))
    c.commit(("u", 0, 1), generation=1, member_id=a)
    c.join(member_id=a)
    c.now += WEEK
    expire(c)
    assert list(c.state.offsets.of("g")) == ["u"]


def test_topic_deletion_tombstones_offsets():
    c = Core()
    c.commit(("t", 0, 1), ("u", 0, 1))
    c.commit(("t", 3, 1), group="h")
    c.apply(shard.remove_topic_offsets(c.state, {"t"}))
    assert list(c.state.offsets.of("g")) == ["u"]
    assert not c.state.offsets.of("h")


def test_group_recreated_before_the_tombstone_is_durable_survives_its_replay():
    c = Core()
    c.commit(("t", 0, 1))
    tok = c.token()
    r = shard.delete_group(c.state, "g", tok, 0)  # not yet durable
    assert "g" not in c.state.groups
    c.join(version=3)  # a new group "g" is born meanwhile
    for k, v in r.records:  # the delete's records become durable and are replayed
        shard.replay(c.state, k, v, 0)
    assert c.group().state == "PreparingRebalance" and len(c.group().members) == 1
    assert c.state.dropping == {}
    # At load the same tombstone removes the group.
    fresh = shard.ShardState(0)
    for k, v in [*c.log, *r.records]:
        shard.replay(fresh, k, v, 0)
    assert fresh.groups == {}


def test_expiry_write_failure_keeps_groups_and_offsets():
    c = Core()
    c.commit(("t", 0, 1))
    c.now = WEEK
    c.fail_next_write = 56
    expire(c)
    assert c.results[-1].responses == ()  # nobody to answer: Kafka only logs it
    assert c.state.dropping == {} and c.group().state == "Empty"
    assert c.fetch(topics={"t": (0,)}).partitions[0].offset == 1
    expire(c)  # the next check succeeds
    assert "g" not in c.state.groups
