"""Expiry of consumer-protocol groups and their offsets, as Kafka 4.x's periodic cleanup does it
(GroupCoordinatorShard.cleanupGroupMetadata -> OffsetMetadataManager.cleanupExpiredOffsets ->
GroupMetadataManager.maybeDeleteGroup), on the real coordinator runtime with a manual clock.

Kafka's facts, one or more per test: a ConsumerGroup's offset expiration condition has the commit
timestamp as its base in every state (a classic group's waits for the time it became Empty); a topic the
group subscribes to (by name, or through a resolved regex) keeps its offsets; once every offset is gone
and no transaction of the group is open, an Empty group is deleted with its own tombstones (no classic
GroupMetadata tombstone); a group that was never committed to is deleted at the first check once Empty."""

from groupd.coordinator import errors as E
from groupd.coordinator import shard
from groupd.coordinator.consumer import records as rec
from groupd.coordinator.consumer.group import consumer_groups, replay
from groupd.coordinator.records import GroupMetadataKey, OffsetCommitKey

from ..harness import Core
from .driver import Driver

WEEK = 604_800_000  # offsets.retention.minutes default, 7 days


def setup(*topics: tuple[str, int]) -> tuple[Core, Driver]:
    c = Core()
    c.now = 1_000_000
    d = Driver(groups=consumer_groups(c.state), now=c.now)
    c.state.topics = d.topics
    for name, n in topics or (("T", 2),):
        d.topic(name, n)
    return c, d


def at(c: Core, d: Driver, now: int) -> None:
    c.now = d.now = now


def commit(c: Core, member: str, epoch: int, *parts: tuple[str, int, int]) -> dict[tuple[str, int], int]:
    resp = c.commit(*parts, generation=epoch, member_id=member, version=9)
    return {(p.topic, p.partition): p.error for p in resp.partitions}


def expire(c: Core) -> list:
    """One retention check through the runtime; what it wrote."""
    before = len(c.log)
    c.expire()
    return c.log[before:]


def consumer_kinds(written: list) -> list[int]:
    return [rec.key_kind(k) for k, _ in written if not isinstance(k, (OffsetCommitKey, GroupMetadataKey))]


def test_offsets_expire_from_their_commit_time_then_the_empty_group_goes_with_its_own_tombstones():
    c, d = setup()
    d.join("m1")
    t0 = c.now
    assert commit(c, "m1", 2, ("T", 0, 5)) == {("T", 0): E.NONE}
    at(c, d, t0 + 1_000)
    assert commit(c, "m1", 2, ("T", 1, 7)) == {("T", 1): E.NONE}
    at(c, d, t0 + WEEK - 10)
    d.hb("m1", -1)  # Empty a moment before the first offset's retention ends
    assert expire(c) == []
    at(c, d, t0 + WEEK)  # a classic group would wait a retention from the time it became Empty
    assert expire(c) == [(OffsetCommitKey("g", "T", 0), None)]
    assert "g" in consumer_groups(c.state)
    at(c, d, t0 + 1_000 + WEEK)
    written = expire(c)
    assert written[0] == (OffsetCommitKey("g", "T", 1), None)
    # target metadata, partition metadata, group metadata: Kafka's order; no classic GroupMetadata tombstone
    assert consumer_kinds(written) == [6, 4, 3]
    assert all(v is None for _, v in written) and not any(isinstance(k, GroupMetadataKey) for k, _ in written)
    assert "g" not in consumer_groups(c.state) and "g" not in c.state.groups
    assert shard.list_groups(c.state, None, None) == []
    fresh = d.replayed()  # a restart: the consumer records, then the expiry's tombstones
    for key, value in written[1:]:
        replay(fresh, key, value)
    assert fresh == {}


def test_a_group_never_committed_to_is_deleted_at_the_first_check_once_empty():
    c, d = setup()
    d.join("m1")
    assert expire(c) == []  # members: never deleted
    d.hb("m1", -1)
    assert consumer_kinds(expire(c)) == [6, 4, 3]
    assert consumer_groups(c.state) == {}


def test_members_keep_the_offsets_of_subscribed_topics_and_lose_the_others():
    c, d = setup(("T", 2), ("U", 1))
    d.join("m1", names=("T",))
    t0 = c.now
    assert commit(c, "m1", 2, ("T", 0, 5), ("U", 0, 9)) == {("T", 0): E.NONE, ("U", 0): E.NONE}
    at(c, d, t0 + 2 * WEEK)
    d.hb("m1", 2)
    assert expire(c) == [(OffsetCommitKey("g", "U", 0), None)]  # even with members (OMM cleanupExpiredOffsets)
    assert c.state.offsets.of("g")["T"][0].offset == 5
    assert expire(c) == []


def test_a_topic_a_resolved_regex_matches_counts_as_subscribed():
    c, d = setup(("T1", 1), ("U", 1))
    d.hb("m1", 0, subscribed_topic_regex="T.*", rebalance_timeout_ms=5000, owned=())
    d.resolve()
    d.hb("m1", 1)
    epoch = consumer_groups(c.state)["g"].members["m1"].epoch
    t0 = c.now
    assert commit(c, "m1", epoch, ("T1", 0, 3), ("U", 0, 4)) == {("T1", 0): E.NONE, ("U", 0): E.NONE}
    at(c, d, t0 + WEEK)
    assert expire(c) == [(OffsetCommitKey("g", "U", 0), None)]
    assert list(c.state.offsets.of("g")) == ["T1"]


def test_a_live_group_whose_offsets_all_expired_stays():
    c, d = setup(("T", 1), ("U", 1))
    d.join("m1", names=("T",))
    t0 = c.now
    commit(c, "m1", 2, ("U", 0, 1))
    at(c, d, t0 + WEEK)
    d.hb("m1", 2)
    assert expire(c) == [(OffsetCommitKey("g", "U", 0), None)]
    assert expire(c) == []  # the member-less holder of its offsets is not a group of its own to expire
    assert shard.list_groups(c.state, None, None)[0].group_type == "consumer"


def test_an_explicit_expire_timestamp_wins():
    c, d = setup()
    d.join("m1")
    d.hb("m1", -1)
    t0 = c.now
    c.commit(("T", 0, 1), retention=10_000, version=2)  # OffsetCommit v1-4's retention time
    at(c, d, t0 + 9_999)
    assert expire(c) == []
    at(c, d, t0 + 10_000)
    written = expire(c)
    assert written[0] == (OffsetCommitKey("g", "T", 0), None) and consumer_kinds(written) == [6, 4, 3]


def test_an_open_transaction_keeps_its_offset_and_the_group():
    c, d = setup()
    d.join("m1")
    d.hb("m1", -1)
    t0 = c.now
    c.commit(("T", 0, 1), ("T", 1, 1))
    assert c.txn_commit(("T", 0, 2)).partitions[0].error == E.NONE
    at(c, d, t0 + WEEK)
    assert expire(c) == [(OffsetCommitKey("g", "T", 1), None)]
    assert "g" in consumer_groups(c.state)
    c.end_txn()
    at(c, d, c.now + WEEK)
    written = expire(c)
    assert written[0] == (OffsetCommitKey("g", "T", 0), None) and consumer_kinds(written) == [6, 4, 3]


def test_a_failed_write_brings_the_group_and_its_offsets_back():
    c, d = setup()
    d.join("m1")
    d.hb("m1", -1)
    c.commit(("T", 0, 1))
    at(c, d, c.now + WEEK)
    epochs = (consumer_groups(c.state)["g"].epoch, consumer_groups(c.state)["g"].assignment_epoch)
    c.fail_next_write = E.NOT_ENOUGH_REPLICAS
    assert expire(c) == []
    assert (consumer_groups(c.state)["g"].epoch, consumer_groups(c.state)["g"].assignment_epoch) == epochs
    assert c.fetch(topics={"T": (0,)}).partitions[0].offset == 1
    assert consumer_kinds(expire(c)) == [6, 4, 3]


def test_the_expiry_replayed_once_durable_leaves_a_group_made_meanwhile_alone():
    c, d = setup()
    d.join("m1")
    d.hb("m1", -1)
    result = shard.expire_offsets(c.state, c.now, c.cfg)  # made, not yet durable
    assert "g" not in consumer_groups(c.state)
    d.join("m2")  # the same id again, before the tombstones are durable
    shard.GroupShardRules(c.cfg).replay(c.state, result, c.now)
    group = consumer_groups(c.state)["g"]
    assert list(group.members) == ["m2"] and group.assignment_epoch == group.epoch


def test_a_deletion_with_offsets_replayed_once_durable_leaves_a_group_made_meanwhile_alone():
    """DeleteGroups of an Empty consumer group holding offsets: its consumer tombstones are applied when
    made, its offset tombstones once durable; a group of the same id made in between keeps its members."""
    c, d = setup()
    d.join("m1")
    assert commit(c, "m1", consumer_groups(c.state)["g"].members["m1"].epoch, ("T", 0, 1)) == {("T", 0): E.NONE}
    d.hb("m1", -1)
    result = shard.delete_group(c.state, "g", 7, c.now)  # made, not yet durable
    assert "g" not in consumer_groups(c.state) and result.replay
    d.join("m2")
    shard.GroupShardRules(c.cfg).replay(c.state, result, c.now)
    group = consumer_groups(c.state)["g"]
    assert list(group.members) == ["m2"] and group.assignment_epoch == group.epoch
