"""OffsetCommit / OffsetFetch / OffsetDelete and write failures (spec §8, scenarios 29-35)."""

from __future__ import annotations

from groupd.coordinator import shard
from groupd.coordinator.api import OffsetDelete, OffsetDeleteResponse, PartitionError
from groupd.coordinator.records import OffsetCommitKey, OffsetCommitValue

from .harness import Core, subscription


def errors(resp) -> list[int]:
    return [p.error for p in resp.partitions]


def test_simple_commit_creates_empty_simple_group_and_fetch_returns_it():
    c = Core()
    c.now = 1_000
    resp = c.commit(("t", 0, 42, "meta"), version=2)
    assert errors(resp) == [0]
    g = c.group()
    assert g.state == "Empty" and g.protocol_type is None
    ((key, value),) = c.log
    assert key == OffsetCommitKey("g", "t", 0)
    assert value == OffsetCommitValue(42, "meta", 1_000, -1, -1)
    assert c.results[-1].replay is True
    f = c.fetch(topics={"t": (0, 1)}, version=1)
    assert [(p.offset, p.metadata, p.leader_epoch, p.error) for p in f.partitions] == [
        (42, "meta", -1, 0),
        (-1, "", -1, 0),
    ]


def test_offsets_change_only_through_replay():
    c = Core()
    tok = c.token()
    from groupd.coordinator.api import CommitPartition, OffsetCommit

    req = OffsetCommit("g", -1, "", None, -1, (CommitPartition("t", 0, 5, -1, ""),), 8)
    r = shard.offset_commit(c.state, req, tok, 0, c.cfg)
    assert c.fetch(topics={"t": (0,)}).partitions[0].offset == -1  # not durable yet
    for k, v in r.records:
        shard.replay(c.state, k, v, 0)
    assert c.fetch(topics={"t": (0,)}).partitions[0].offset == 5


def test_metadata_round_trips_exactly():
    c = Core()
    odd = "é\x00😀 \t\n" + "x" * 100
    c.commit(("t", 0, 1, odd))
    c.commit(("t", 1, 1, None))
    parts = c.fetch(topics={"t": (0, 1)}).partitions
    assert parts[0].metadata == odd and parts[1].metadata == ""


def test_commit_with_generation_on_unknown_group_by_version():
    c = Core()
    assert errors(c.commit(("t", 0, 1), generation=5, member_id="m", version=8)) == [22]
    assert errors(c.commit(("t", 0, 1), generation=5, member_id="m", version=9)) == [69]
    assert errors(c.commit(("t", 0, 1), generation=5, member_id="m", version=2)) == [22]
    assert "g" not in c.state.groups


def test_commit_in_completing_rebalance_is_rebalance_in_progress_for_every_version():
    c = Core()
    a, _ = c.new_member()
    c.finish_join()
    for v in (1, 2, 5, 7, 8, 9):
        assert errors(c.commit(("t", 0, 1), ("t", 1, 1), generation=1, member_id=a, version=v)) == [27, 27]
    assert errors(c.commit(("t", 0, 1), generation=0, member_id=a)) == [22]  # stale generation first
    assert c.log == []  # nothing written


def test_commit_in_preparing_rebalance_is_accepted_and_keeps_session():
    c = Core()
    a, b = c.stable_group()
    c.join(member_id=a)  # PreparingRebalance, generation still 1
    c.now += 7_000
    assert errors(c.commit(("t", 0, 1), generation=1, member_id=b)) == [0]
    assert c.timers[("hb", "g", b)] == c.now + 10_000


def test_commit_member_checks():
    c = Core()
    (a,) = c.stable_group(1)
    assert errors(c.commit(("t", 0, 1), generation=-1)) == [25]  # group not Empty
    assert errors(c.commit(("t", 0, 1), generation=1, member_id="zz")) == [25]
    assert errors(c.commit(("t", 0, 1), generation=2, member_id=a)) == [22]
    assert errors(c.commit(("t", 0, 1), generation=1, member_id=a)) == [0]
    c.leave((a, None))
    assert errors(c.commit(("t", 0, 1), generation=1, member_id="m")) == [25]  # Empty: no members
    assert errors(c.commit(("t", 0, 1), generation=-1, member_id="whatever")) == [0]


def test_commit_fenced_static_member():
    c = Core()
    ta = c.join(instance="i1")
    c.finish_join()
    a = c.answers[ta].member_id
    c.sync(a, 1, {a: b""}, instance="i1")
    assert errors(c.commit(("t", 0, 1), generation=1, member_id="old", instance="i1", version=7)) == [82]
    assert errors(c.commit(("t", 0, 1), generation=1, member_id=a, instance="i1", version=7)) == [0]


def test_metadata_size_limit_counts_utf16_units():
    c = Core()
    ok = "x" * 4096
    too_big = "x" * 4097
    astral = "😀" * 2049  # 2049 code points, 4098 UTF-16 units
    resp = c.commit(("t", 0, 1, too_big), ("t", 1, 2, ok), ("t", 2, 3, astral))
    assert errors(resp) == [12, 0, 12]
    assert [k.partition for k, _ in c.log] == [1]


def test_all_partitions_oversized_writes_nothing():
    c = Core()
    c.commit(("t", 0, 1, "x" * 5000))
    assert c.log == [] and c.results[-1].records == ()


def test_retention_time_sets_expire_timestamp():
    c = Core()
    c.now = 100
    c.commit(("t", 0, 1), retention=5_000, version=2)
    assert c.log[-1][1].expire_timestamp == 5_100
    c.commit(("t", 0, 1), retention=-1, version=2)
    assert c.log[-1][1].expire_timestamp == -1


def test_leader_epoch_kept():
    c = Core()
    c.commit(("t", 0, 1), leader_epoch=7)
    assert c.fetch(topics={"t": (0,)}).partitions[0].leader_epoch == 7


def test_fetch_all_partitions_and_unknown_group():
    c = Core()
    c.commit(("t", 0, 1), ("t", 1, 2), ("u", 0, 3))
    f = c.fetch(topics=None, version=2)
    assert sorted((p.topic, p.partition, p.offset) for p in f.partitions) == [
        ("t", 0, 1),
        ("t", 1, 2),
        ("u", 0, 3),
    ]
    assert c.fetch(group="nope", topics=None).partitions == ()
    nope = c.fetch(group="nope", topics={"t": (0,)}).partitions
    assert [(p.offset, p.metadata, p.error) for p in nope] == [(-1, "", 0)]


def test_commit_write_failure_maps_every_partition():
    c = Core()
    c.fail_next_write = 6
    resp = c.commit(("t", 0, 1), ("t", 1, 1, "x" * 5000))
    assert errors(resp) == [16, 16]  # 4.x: the mapped error replaces every code, 12 included
    c.fail_next_write = 13
    assert errors(c.commit(("t", 0, 1))) == [14]
    c.fail_next_write = 10
    assert errors(c.commit(("t", 0, 1))) == [-1]
    assert c.fetch(topics={"t": (0,)}).partitions[0].offset == -1
    # the simple group the commits made is rolled back with them, as in Kafka
    assert c.state.offsets.writing("g") == 0 and "g" not in c.state.groups


def delete(c: Core, *parts: tuple[str, int], group: str = "g") -> OffsetDeleteResponse:
    tok = c.token()
    c.apply(shard.offset_delete(c.state, OffsetDelete(group, parts), tok, c.now))
    return c.answers[tok]


def test_offset_delete_protects_subscribed_topics():
    from groupd.coordinator.api import Protocol

    c = Core()
    sub = (Protocol("range", subscription("t")),)
    a, b = c.stable_group(protocols=sub)
    assert c.group().subscribed == frozenset({"t"})
    c.commit(("t", 0, 1), ("u", 0, 1), generation=1, member_id=a)
    resp = delete(c, ("t", 0), ("u", 0), ("u", 1))
    assert resp == OffsetDeleteResponse(
        0, (PartitionError("t", 0, 86), PartitionError("u", 0, 0), PartitionError("u", 1, 0))
    )
    assert [k for k, v in c.log[-1:]] == [OffsetCommitKey("g", "u", 0)]
    f = c.fetch(topics={"t": (0,), "u": (0,)}).partitions
    assert [p.offset for p in f] == [1, -1]
    assert delete(c, ("t", 0), group="nope").error == 69
    assert delete(c, ("t", 0), group="").error == 24


def test_offset_delete_unknown_subscription_protects_everything_for_consumer_groups():
    c = Core()
    a, b = c.stable_group()  # metadata b"range-meta" does not parse
    assert c.group().subscribed is None
    assert delete(c, ("t", 0)).partitions[0].error == 86


def test_offset_delete_non_consumer_non_empty_group():
    c = Core()
    c.stable_group(ptype="connect")
    assert delete(c, ("t", 0)).error == 68


def test_offset_delete_empty_group_deletes():
    c = Core()
    c.commit(("t", 0, 1))
    assert delete(c, ("t", 0)).partitions[0].error == 0
    assert c.log[-1] == (OffsetCommitKey("g", "t", 0), None)
    assert not c.state.offsets.of("g")


def test_v1_commit_timestamp_is_kept_when_given():
    from groupd.coordinator.api import CommitPartition, OffsetCommit

    c = Core()
    c.now = 500
    parts = (CommitPartition("t", 0, 1, -1, "", 123), CommitPartition("t", 1, 1, -1, ""))
    tok = c.token()
    c.apply(shard.offset_commit(c.state, OffsetCommit("g", -1, "", None, -1, parts, 1), tok, c.now, c.cfg))
    assert [v.commit_timestamp for _, v in c.log] == [123, 500]
