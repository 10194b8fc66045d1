"""Consumer-protocol groups inside a shard, beside classic groups: OffsetCommit / OffsetFetch /
TxnOffsetCommit with member epochs (spec scenarios 23-25, Kafka 4.3's ConsumerGroup.validateOffsetCommit /
validateOffsetFetch), ListGroups / DescribeGroups / DeleteGroups (22, 26), and classic requests meeting
consumer groups (30)."""

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
    PartitionError,
    Protocol,
)
from groupd.coordinator.consumer import records as rec
from groupd.coordinator.consumer.group import consumer_groups
from groupd.coordinator.records import OffsetCommitKey

from .driver import Driver


def setup():
    state = core.ShardState(0)
    d = Driver(groups=consumer_groups(state))
    state.topics = d.topics
    d.topic("T", 6)
    return state, d


def commit(state, epoch, member="m1", version=9, partitions=((0, 10),)):
    req = OffsetCommit(
        "g", epoch, member, None, -1, tuple(CommitPartition("T", p, o, -1, None) for p, o in partitions), version
    )
    result = core.offset_commit(state, req, 1, 1000, GroupConfig())
    for key, value in result.records:
        core.replay(state, key, value, 1000)
    ((_, resp),) = result.responses
    return {p.partition: p.error for p in resp.partitions}


def test_s23_commit_epochs():
    state, d = setup()
    d.join("m1")
    d.join("m2")
    d.hb("m1", 2, owned=((d.topics["T"].topic_id, tuple(range(6))),))
    kept = sorted(consumer_groups(state)["g"].members["m1"].assigned[d.topics["T"].topic_id])
    d.hb("m1", 2, owned=((d.topics["T"].topic_id, tuple(kept)),))  # m1 at epoch 3 now
    assert commit(state, 4, partitions=((kept[0], 1),)) == {kept[0]: E.STALE_MEMBER_EPOCH}
    assert commit(state, 3, partitions=((kept[0], 1),)) == {kept[0]: E.NONE}
    assert commit(state, 3, version=8, partitions=((kept[0], 1),)) == {kept[0]: E.UNSUPPORTED_VERSION}
    assert commit(state, 3, member="nobody") == {0: E.UNKNOWN_MEMBER_ID}
    # the offsets are there to fetch, for the member at its epoch
    fetched = core.offset_fetch(state, OffsetFetch("g", (("T", (kept[0],)),), False, 9, "m1", 3), 1000)
    assert fetched.error == 0 and fetched.partitions[0].offset == 1


def test_s24_lower_epoch_only_for_partitions_assigned_no_later():
    state, d = setup()
    d.join("m1")  # epoch 2, all six assigned at 2
    d.topic("U", 1)
    d.hb("m1", 2, subscribed_topic_names=("T", "U"))  # epoch 3: U:0 assigned at 3, T kept at 2
    assert consumer_groups(state)["g"].members["m1"].epoch == 3
    assert commit(state, 2, partitions=((0, 5),)) == {0: E.NONE}
    assert commit(state, 1, partitions=((0, 5),)) == {0: E.STALE_MEMBER_EPOCH}


def test_s23_empty_group_and_missing_group():
    state, d = setup()
    d.join("m1")
    d.hb("m1", -1)
    assert commit(state, -1, member="") == {0: E.NONE}  # no members: admin commits pass
    fresh = core.ShardState(0)
    assert commit(fresh, 5) == {0: E.GROUP_ID_NOT_FOUND}
    assert commit(fresh, 5, version=8) == {0: E.ILLEGAL_GENERATION}


def test_s25_fetch_epochs():
    state, d = setup()
    d.join("m1")
    assert core.offset_fetch(state, OffsetFetch("g", None, False, 9, "m1", 1), 1000).error == E.STALE_MEMBER_EPOCH
    assert core.offset_fetch(state, OffsetFetch("g", None, False, 9, "m9", 2), 1000).error == E.UNKNOWN_MEMBER_ID
    assert core.offset_fetch(state, OffsetFetch("g", None, False, 9, None, -1), 1000).error == E.NONE
    assert core.offset_fetch(state, OffsetFetch("g", None, False, 9, "m1", 2), 1000).error == E.NONE


def test_s30_classic_join_into_a_live_consumer_group_is_inconsistent_under_policy_disabled():
    from groupd.coordinator.consumer.config import ConsumerConfig

    state, d = setup()
    d.join("m1")
    req = JoinGroup("g", "", None, 10_000, 10_000, "consumer", (Protocol("range", b""),), "c", "/h", 5)
    disabled = GroupConfig(consumer=ConsumerConfig(migration_policy="disabled"))
    ((_, resp),) = core.join_group(state, req, 7, 1000, disabled).responses
    assert resp.error == E.INCONSISTENT_GROUP_PROTOCOL
    # under the default policy (bidirectional) the classic member is asked for its member id
    ((_, resp),) = core.join_group(state, req, 7, 1000, GroupConfig()).responses
    assert resp.error == E.MEMBER_ID_REQUIRED and resp.member_id


def test_s22_list_and_describe_groups_see_consumer_groups():
    state, d = setup()
    d.join("m1")
    commit(state, 2)  # creates the member-less group that holds the offsets
    listed = core.list_groups(state, None, None)
    assert [(g.group_id, g.protocol_type, g.state, g.group_type) for g in listed] == [
        ("g", "consumer", "Stable", "consumer")
    ]
    assert [g.group_id for g in core.list_groups(state, None, frozenset({"Consumer"}))] == ["g"]
    assert core.list_groups(state, None, frozenset({"bogus"})) == []
    assert core.list_groups(state, None, frozenset({"classic"})) == []
    assert [g.group_id for g in core.list_groups(state, frozenset({"stable"}), None)] == ["g"]
    assert core.describe_group(state, "g").state == "Dead"  # the handler answers GROUP_ID_NOT_FOUND from v6


def test_s26_delete_groups():
    state, d = setup()
    d.join("m1")
    commit(state, 2)
    ((_, resp),) = core.delete_group(state, "g", 3, 1000).responses
    assert resp.error == E.NON_EMPTY_GROUP
    d.hb("m1", -1)
    result = core.delete_group(state, "g", 3, 1000)
    ((_, resp),) = result.responses
    assert resp.error == E.NONE
    assert all(v is None for _, v in result.records)
    consumer_kinds = [k.kind for k, _ in result.records if isinstance(k, rec.GroupKey)]
    assert consumer_kinds == [6, 4, 3]  # target metadata, partition metadata, group metadata, in that order
    assert OffsetCommitKey("g", "T", 0) in [k for k, _ in result.records]
    assert "g" not in consumer_groups(state)
    for key, value in result.records:  # the shell replays them once durable: harmless for the consumer ones
        core.replay(state, key, value, 1000)
    assert "g" not in state.groups


def offset_delete(state, *parts):
    result = core.offset_delete(state, OffsetDelete("g", parts), 7, 1000)
    for key, value in result.records:
        core.replay(state, key, value, 1000)
    ((_, resp),) = result.responses
    return resp, [k for k, _ in result.records]


def test_offset_delete_keeps_the_offsets_of_topics_a_live_consumer_group_subscribes_to():
    """Kafka's ConsumerGroup: validateOffsetDelete allows it with members; isSubscribedToTopic is the
    group's subscribed topic names, so their partitions answer GROUP_SUBSCRIBED_TO_TOPIC (librdkafka's
    0081 DeleteConsumerGroupOffsets with a subscribing consumer)."""
    state, d = setup()
    d.topic("U", 2)
    d.join("m1", names=("T", "U"))  # epoch 2: every partition of T and U
    commit(state, 2, partitions=((0, 10), (1, 11)))
    req = OffsetCommit("g", 2, "m1", None, -1, (CommitPartition("U", 0, 5, -1, None),), 9)
    for key, value in core.offset_commit(state, req, 1, 1000, GroupConfig()).records:
        core.replay(state, key, value, 1000)
    assert state.offsets.of("g")["U"][0].offset == 5
    d.hb("m1", 2, subscribed_topic_names=("T",))  # U is no longer subscribed
    resp, deleted = offset_delete(state, ("T", 0), ("U", 0), ("U", 1))
    assert resp.error == E.NONE
    assert resp.partitions == (
        PartitionError("T", 0, E.GROUP_SUBSCRIBED_TO_TOPIC),
        PartitionError("U", 0, E.NONE),
        PartitionError("U", 1, E.NONE),
    )
    assert deleted == [OffsetCommitKey("g", "U", 0)]
    assert 0 in state.offsets.of("g")["T"]
    d.hb("m1", -1)  # the last member leaves: nothing is subscribed any more
    resp, deleted = offset_delete(state, ("T", 0))
    assert resp.partitions == (PartitionError("T", 0, E.NONE),) and deleted == [OffsetCommitKey("g", "T", 0)]


def test_offset_delete_of_a_consumer_group_without_offsets():
    state, d = setup()
    d.join("m1")
    resp, deleted = offset_delete(state, ("T", 0), ("V", 0))
    assert resp.partitions == (PartitionError("T", 0, E.GROUP_SUBSCRIBED_TO_TOPIC), PartitionError("V", 0, E.NONE))
    assert deleted == []
    _, resp = core.offset_delete(core.ShardState(0), OffsetDelete("g", (("T", 0),)), 7, 1000).responses[0]
    assert resp.error == E.GROUP_ID_NOT_FOUND


def test_s25_txn_offset_commit_checks_the_member_epoch():
    from groupd.coordinator.api import TxnOffsetCommit

    state, d = setup()
    d.join("m1")

    def txn(gen, member="m1", group="g"):
        req = TxnOffsetCommit("tx", group, 5, 0, gen, member, None, (CommitPartition("T", 0, 1, -1, None),), 3)
        ((_, resp),) = core.txn_offset_commit(state, req, 1, 1000, GroupConfig()).responses
        return resp.partitions[0].error

    assert txn(3) == E.ILLEGAL_GENERATION  # STALE_MEMBER_EPOCH, as this API says it
    assert txn(2) == E.NONE
    assert txn(2, member="m9") == E.UNKNOWN_MEMBER_ID
    assert txn(-1, member="") == E.NONE  # no member named: no checks
    assert txn(7, group="missing") == E.ILLEGAL_GENERATION


def test_a_classic_join_converts_an_empty_consumer_group():
    state, d = setup()
    d.join("m1")
    commit(state, 2)
    d.hb("m1", -1)
    req = JoinGroup("g", "", None, 10_000, 10_000, "consumer", (Protocol("range", b""),), "c", "/h", 5)
    result = core.join_group(state, req, 7, 1000, GroupConfig())
    assert "g" not in consumer_groups(state)
    assert [rec.key_kind(k) for k, v in result.records if isinstance(k, (rec.GroupKey, rec.MemberKey, rec.RegexKey))][
        -1
    ] == 3
    assert state.offsets.of("g")["T"][0].offset == 10  # the offsets stay
    assert [g.group_type for g in core.list_groups(state, None, None)] == ["classic"]


def test_heartbeat_refused_for_a_live_classic_group_and_when_disabled():
    from groupd.coordinator.consumer.api import ConsumerGroupHeartbeat
    from groupd.coordinator.consumer.config import ConsumerConfig

    state, d = setup()
    req = JoinGroup("g", "", None, 10_000, 10_000, "consumer", (Protocol("range", b""),), "c", "/h", 3)
    core.join_group(state, req, 7, 1000, GroupConfig())
    assert state.groups["g"].members
    hb = ConsumerGroupHeartbeat("g", "m1", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("T",), owned=())
    ((_, resp),) = group_types.consumer_group_heartbeat(state, hb, 8, 1000, GroupConfig()).responses
    assert resp.error == E.GROUP_ID_NOT_FOUND
    off = GroupConfig(consumer=ConsumerConfig(enabled=False))
    ((_, resp),) = group_types.consumer_group_heartbeat(state, hb, 9, 1000, off).responses
    assert resp.error == E.UNSUPPORTED_VERSION


def test_loading_rearms_sessions_and_rebalance_timers():
    # spec §1.10: loading re-arms session timers and the rebalance timers of members revoking
    state, d = setup()
    d.join("m1")
    d.join("m2")
    d.hb("m1", 2, owned=((d.topics["T"].topic_id, tuple(range(6))),))  # m1 now revoking
    loaded = core.ShardState(0)
    loaded.topics = state.topics
    for key, value in d.log:
        core.replay(loaded, key, value, 0)
    timers = {op.key: op.deadline_ms for op in core.on_loaded(loaded, 5000, GroupConfig()).timers}
    assert timers[("consumer-session", "g", "m1")] == 5000 + 45_000
    assert timers[("consumer-session", "g", "m2")] == 5000 + 45_000
    assert timers[("consumer-rebalance", "g", "m1")] == 5000 + 5000
    fenced = core.on_timer(loaded, ("consumer-rebalance", "g", "m1"), 10_000, GroupConfig())
    assert "m1" not in consumer_groups(loaded)["g"].members and fenced.records


def test_s22_consumer_group_describe_of_a_classic_group_is_not_found():
    state, d = setup()
    req = JoinGroup("c", "", None, 10_000, 10_000, "consumer", (Protocol("range", b""),), "c", "/h", 3)
    core.join_group(state, req, 7, 1000, GroupConfig())
    assert "c" in state.groups
    (described,) = group_types.consumer_group_describe(state, ["c"], GroupConfig())
    assert described.error == E.GROUP_ID_NOT_FOUND
