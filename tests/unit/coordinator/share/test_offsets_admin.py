"""AlterShareGroupOffsets and DeleteShareGroupOffsets in the core (spec scenarios 49 and 50; Kafka 4.3's
GroupMetadataManager.alterShareGroupOffsets, GroupCoordinatorShard.initiateDeleteShareGroupOffsets and
sharePartitionsEligibleForOffsetDeletion)."""

from groupd.coordinator import errors as E
from groupd.coordinator import group_types
from groupd.coordinator.api import GroupConfig
from groupd.coordinator.consumer.api import ConsumerGroupHeartbeat
from groupd.coordinator.share import records as rec
from groupd.coordinator.share.api import AlterShareOffsets, DeleteShareOffsets
from groupd.coordinator.share.group import share_groups

from .driver import call, in_shard, tid

T = tid("T")


def test_s49_alter_offsets():
    state, d = in_shard()
    d.join("m1")
    _, plan = call(state, group_types.share_alter_offsets, AlterShareOffsets("g", (("T", ((0, 5),)),)))
    assert plan.error == E.NON_EMPTY_GROUP
    d.hb("m1", -1)
    result, plan = call(
        state, group_types.share_alter_offsets, AlterShareOffsets("g", (("T", ((0, 5), (7, 1))), ("nope", ((0, 1),))))
    )
    assert plan.error == E.NONE
    assert plan.results == (
        ("T", T, ((0, E.NONE), (7, E.UNKNOWN_TOPIC_OR_PARTITION))),
        ("nope", None, ((0, E.UNKNOWN_TOPIC_OR_PARTITION),)),
    )
    assert (plan.state_epoch, plan.offsets) == (d.group().epoch, ((T, ((0, 5),)),))
    ((key, value),) = result.records
    assert key.kind == rec.STATE_PARTITION_METADATA and T in {i.topic_id for i in value.initializing}


def test_s49_alter_makes_a_missing_group_and_refuses_other_types():
    state, d = in_shard()
    _, plan = call(state, group_types.share_alter_offsets, AlterShareOffsets("new", (("T", ((1, 3),)),)))
    assert plan.error == E.NONE and "new" in share_groups(state)
    assert share_groups(state)["new"].epoch == 1
    _, plan = call(state, group_types.share_alter_offsets, AlterShareOffsets("empty", (("nope", ((0, 1),)),)))
    assert plan.error == E.NONE and "empty" not in share_groups(state)  # no record, no group
    hb = ConsumerGroupHeartbeat("cg", "c1", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("T",), owned=())
    group_types.consumer_group_heartbeat(state, hb, 1, 1000, GroupConfig())
    _, plan = call(state, group_types.share_alter_offsets, AlterShareOffsets("cg", (("T", ((0, 1),)),)))
    assert plan.error == E.GROUP_ID_NOT_FOUND
    _, plan = call(state, group_types.share_alter_offsets, AlterShareOffsets("", ()))
    assert plan.error == E.INVALID_GROUP_ID


def test_s50_delete_offsets():
    state, d = in_shard()
    u = d.topic("U", 1)
    d.join("m1")
    d.initialized()
    _, plan = call(state, group_types.share_delete_offsets, DeleteShareOffsets("g", ("T",)))
    assert plan.error == E.NON_EMPTY_GROUP
    d.hb("m1", -1)
    result, plan = call(state, group_types.share_delete_offsets, DeleteShareOffsets("g", ("T", "U", "nope")))
    assert plan.error == E.NONE
    assert [(n, code) for n, code, _ in plan.refused] == [
        ("U", E.UNKNOWN_TOPIC_OR_PARTITION),
        ("nope", E.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert plan.refused[0][2] == "There is no offset information to delete."
    assert plan.to_delete == (("T", T, (0, 1)),)
    assert d.group().initialized == {} and d.group().deleting == {T: "T"}
    call(state, group_types.share_state_deleted, ("g", frozenset({T})))
    assert d.group().deleting == {}
    assert u not in d.group().initialized
    _, plan = call(state, group_types.share_delete_offsets, DeleteShareOffsets("nope", ("T",)))
    assert plan.error == E.GROUP_ID_NOT_FOUND


def test_s50_consumer_group_id():
    state, d = in_shard()
    hb = ConsumerGroupHeartbeat("cg", "c1", 0, rebalance_timeout_ms=5000, subscribed_topic_names=("T",), owned=())
    group_types.consumer_group_heartbeat(state, hb, 1, 1000, GroupConfig())
    _, plan = call(state, group_types.share_delete_offsets, DeleteShareOffsets("cg", ("T",)))
    assert plan.error == E.GROUP_ID_NOT_FOUND


def test_initialized_partitions_read():
    state, d = in_shard()
    d.join("m1")
    assert group_types.share_initialized_partitions(state, "g") == {}
    d.initialized()
    assert group_types.share_initialized_partitions(state, "g") == {T: frozenset({0, 1})}
    assert group_types.share_initialized_partitions(state, "nope") == {}
