"""Share groups inside a shard, beside classic and consumer groups (spec §2.10, Kafka 4.3's ShareGroup and
GroupMetadataManager): ListGroups type ``share`` with states Empty/Stable, DescribeGroups answers Dead,
DeleteGroups (NON_EMPTY_GROUP, the partitions moved to deleting, then tombstones in Kafka's order), the
consumer offset APIs and the other group types' APIs refusing a share group's id, replay through the
shard and session timers re-armed after a load."""

from groupd.coordinator import errors as E
from groupd.coordinator import group_types
from groupd.coordinator import shard as core
from groupd.coordinator.api import (
    CommitPartition,
    GroupConfig,
    JoinGroup,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    Protocol,
)
from groupd.coordinator.consumer.api import ConsumerGroupHeartbeat
from groupd.coordinator.group import Group as ClassicGroup
from groupd.coordinator.records import decode_key, decode_value, encode_key, encode_value
from groupd.coordinator.share import records as rec
from groupd.coordinator.share.api import ShareGroupHeartbeat
from groupd.coordinator.share.group import share_groups

from .driver import call, in_shard, tid

T = tid("T")


def test_list_groups_type_share_and_states():
    state, d = in_shard()
    d.join("m1")
    d.join("m2", group="idle")
    d.hb("m2", -1, group="idle")
    rows = {g.group_id: (g.protocol_type, g.state, g.group_type) for g in core.list_groups(state, None, None)}
    assert rows == {"g": ("share", "Stable", "share"), "idle": ("share", "Empty", "share")}
    assert [g.group_id for g in core.list_groups(state, frozenset({"Empty"}), None)] == ["idle"]
    assert [g.group_id for g in core.list_groups(state, None, frozenset({"share"}))] == ["g", "idle"]
    assert core.list_groups(state, None, frozenset({"consumer", "classic"})) == []


def test_describe_groups_answers_dead():
    state, d = in_shard()
    d.join("m1")
    described = core.describe_group(state, "g")
    assert (described.error, described.state) == (E.NONE, "Dead")


def test_share_group_describe():
    state, d = in_shard()
    d.join("m1", rack_id="r1")
    (g,) = group_types.share_group_describe(state, ["g"])
    assert (g.error, g.state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (E.NONE, "Stable", 2, 2, "simple")
    (m,) = g.members
    assert (m.member_id, m.rack_id, m.member_epoch, m.client_id, m.subscribed_topic_names) == (
        "m1",
        "r1",
        2,
        "c",
        ("T",),
    )
    (missing,) = group_types.share_group_describe(state, ["nope"])
    assert (missing.error, missing.message) == (E.GROUP_ID_NOT_FOUND, "Share group nope not found.")
    (blank,) = group_types.share_group_describe(state, [""])
    assert blank.error == E.INVALID_GROUP_ID


def test_delete_non_empty_then_empty():
    state, d = in_shard()
    d.join("m1")
    d.initialized()
    _, plan = call(state, group_types.share_delete_prepare, "g")
    assert plan.error == E.NON_EMPTY_GROUP
    d.hb("m1", -1)
    result, plan = call(state, group_types.share_delete_prepare, "g")
    assert (plan.error, plan.topics) == (E.NONE, ((T, (0, 1)),))
    ((key, value),) = result.records
    assert (
        key.kind == rec.STATE_PARTITION_METADATA
        and value.deleting == (rec.TopicInfo(T, "T"),)
        and value.initialized == ()
    )
    deleted = core.delete_group(state, "g", 7, 2000)
    assert [(k.kind, v is None) for k, v in deleted.records] == [
        (rec.TARGET_ASSIGNMENT_METADATA, True),
        (rec.STATE_PARTITION_METADATA, True),
        (rec.GROUP_METADATA, True),
    ]
    assert deleted.responses[0][1].error == E.NONE
    assert "g" not in share_groups(state)
    _, plan = call(state, group_types.share_delete_prepare, "g")
    assert plan is None  # no longer a share group


def test_consumer_offset_apis_refuse_a_share_group():
    state, d = in_shard()
    d.join("m1")
    commit = OffsetCommit("g", -1, "", None, -1, (CommitPartition("T", 0, 5, -1, None),), 9)
    _, resp = call(state, core.offset_commit, commit)
    assert [p.error for p in resp.partitions] == [E.GROUP_ID_NOT_FOUND]
    assert core.offset_fetch(state, OffsetFetch("g", None, False, 8), 1000).error == E.GROUP_ID_NOT_FOUND
    result = core.offset_delete(state, OffsetDelete("g", (("T", 0),)), 1, 1000)
    assert result.responses[0][1].error == E.GROUP_ID_NOT_FOUND


def test_other_group_types_refuse_a_share_group_id():
    state, d = in_shard()
    d.join("m1")
    join = JoinGroup("g", "", None, 10_000, 10_000, "consumer", (Protocol("range", b""),), "c", "h", 9)
    _, resp = call(state, core.join_group, join)
    assert (resp.error, resp.member_id) == (E.INCONSISTENT_GROUP_PROTOCOL, "")
    hb = ConsumerGroupHeartbeat("g", "c1", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("T",), owned=())
    _, resp = call(state, group_types.consumer_group_heartbeat, hb)
    assert resp.error == E.GROUP_ID_NOT_FOUND


def test_share_heartbeat_to_a_consumer_group_id():
    state, d = in_shard()
    hb = ConsumerGroupHeartbeat("cg", "c1", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("T",), owned=())
    call(state, group_types.consumer_group_heartbeat, hb)
    _, resp = call(
        state, group_types.share_group_heartbeat, ShareGroupHeartbeat("cg", "m1", 0, subscribed_topic_names=("T",))
    )
    assert (resp.error, resp.message) == (E.GROUP_ID_NOT_FOUND, "Group cg is not a share group.")
    (g,) = group_types.share_group_describe(state, ["cg"])
    assert (g.error, g.message) == (E.GROUP_ID_NOT_FOUND, "Group cg is not a share group.")


def test_replay_through_the_shard_and_timers_after_load():
    state, d = in_shard()
    d.join("m1")
    d.join("m2")
    d.initialized()
    fresh = core.ShardState(0)
    fresh.topics = state.topics
    for key, value in d.log:
        key2 = decode_key(encode_key(key))
        core.replay(fresh, key2, decode_value(key2, encode_value(value)), 5000)
    assert share_groups(fresh)["g"].members == share_groups(state)["g"].members
    assert {t: i.partitions for t, i in share_groups(fresh)["g"].initialized.items()} == {T: frozenset({0, 1})}
    loaded = core.on_loaded(fresh, 5000, GroupConfig())
    deadlines = {op.key: op.deadline_ms for op in loaded.timers}
    assert deadlines == {("share-session", "g", "m1"): 50_000, ("share-session", "g", "m2"): 50_000}
    fired = core.on_timer(fresh, ("share-session", "g", "m1"), 50_000, GroupConfig())
    assert [k.kind for k, _ in fired.records][:3] == [
        rec.CURRENT_MEMBER_ASSIGNMENT,
        rec.TARGET_ASSIGNMENT_MEMBER,
        rec.MEMBER_METADATA,
    ]
    assert set(share_groups(fresh)["g"].members) == {"m2"}


def test_unload_forgets_share_groups():
    state, d = in_shard()
    d.join("m1")
    core.unload(state)
    assert share_groups(state) == {}


def test_deleted_topics_leave_the_share_partition_states():
    state, d = in_shard()
    d.join("m1")
    d.initialized()
    u = d.topic("U", 1)
    d.hb("m1", 2, subscribed_topic_names=("T", "U"))  # U initializing
    result = group_types.share_topics_deleted(state, frozenset({T, u}), 2000)
    ((key, value),) = result.records
    assert key.kind == rec.STATE_PARTITION_METADATA and value == rec.StatePartitionMetadata((), (), ())
    assert group_types.share_topics_deleted(state, frozenset({T}), 3000).records == ()  # nothing left to clean


def test_share_heartbeat_to_an_empty_classic_group_id():
    """Kafka's getOrMaybeCreateShareGroup refuses any group of another type, an empty classic group
    (no members, no offsets) included: the id is the classic group's until it is deleted."""
    state, _ = in_shard()
    state.groups["empty"] = ClassicGroup("empty", 0)
    _, resp = call(
        state, group_types.share_group_heartbeat, ShareGroupHeartbeat("empty", "m1", 0, subscribed_topic_names=("T",))
    )
    assert (resp.error, resp.message) == (E.GROUP_ID_NOT_FOUND, "Group empty is not a share group.")
    assert state.groups["empty"].__class__ is ClassicGroup
    assert "empty" not in share_groups(state)
