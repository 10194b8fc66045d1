"""ConsumerGroupHeartbeat against the scenarios of /work/shared/kafka-next-gen-groups-spec.md §3 (consumer
groups, numbers in the test names) and Kafka 4.3's GroupMetadataManager rules, on a manual clock."""

import pytest

from groupd.coordinator import errors as E
from groupd.coordinator.consumer import records as rec
from groupd.coordinator.consumer.config import ConsumerConfig
from groupd.coordinator.consumer.group import (
    ASSIGNING,
    EMPTY,
    GROUP_STABLE,
    RECONCILING,
    STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
)

from .driver import START, Driver, kinds, partitions, tid

T = tid("T")
B = tid("B")
ALL_T = {(T, p) for p in range(6)}


@pytest.fixture
def d():
    drv = Driver()
    drv.topic("T", 6)
    return drv


def owned_list(parts):
    by_topic = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items()))


def test_s01_first_join_creates_the_group_at_epoch_2_with_every_partition(d):
    out = d.hb("m1", 0, subscribed_topic_names=("T",), rebalance_timeout_ms=5000, owned=())
    r = out.response
    assert (r.error, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (0, "m1", 2, 5000)
    assert partitions(out) == ALL_T
    # records in Kafka's order: member metadata, group metadata, target member, target metadata, current
    assert kinds(out) == [(5, False), (3, False), (7, False), (6, False), (8, False)]
    assert out.records[1][1].epoch == 2 and out.records[1][1].metadata_hash != 0
    assert out.records[3][1] == rec.TargetAssignmentMetadata(2, START)
    cur = out.records[4][1]
    assert (cur.member_epoch, cur.previous_member_epoch, cur.state) == (2, 0, STABLE)
    # KIP-1251: each assigned partition records the target epoch at which the member got it
    assert cur.assigned[0].assignment_epochs == (2,) * 6
    assert d.group().state() == GROUP_STABLE
    assert d.timers[("consumer-session", "g", "m1")] == START + 45_000


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(member_id="", member_epoch=0, version=1), "MemberId"),
        (dict(member_id="m", member_epoch=0, rebalance_timeout_ms=-1), "RebalanceTimeoutMs"),
        (dict(member_id="m", member_epoch=0, owned=None), "TopicPartitions"),
        (dict(member_id="m", member_epoch=0, owned=((T, (0,)),)), "TopicPartitions"),
        (dict(member_id="m", member_epoch=0, subscribed_topic_names=None), "SubscribedTopic"),
        (dict(member_id="m", member_epoch=-3), "MemberEpoch"),
        (dict(member_id="m", member_epoch=-2), "InstanceId"),
        (dict(member_id="m", member_epoch=0, instance_id="  "), "InstanceId"),
        (dict(member_id="m", member_epoch=0, rack_id=""), "RackId"),
        (dict(member_id="m", member_epoch=0, group_id=" "), "GroupId"),
        (dict(member_id="", member_epoch=3, version=0), "MemberId"),
        (dict(member_id=" ", member_epoch=-1, version=0), "MemberId"),
    ],
)
def test_s02_invalid_requests_are_invalid_request(d, kw, message):
    from groupd.coordinator.consumer.api import ConsumerGroupHeartbeat
    from groupd.coordinator.consumer.heartbeat import heartbeat

    base = dict(group_id="g", rebalance_timeout_ms=5000, subscribed_topic_names=("T",), owned=())
    base.update(kw)
    out = heartbeat(d.groups, d.topics, ConsumerGroupHeartbeat(**base), d.now, d.config)
    assert out.response.error == E.INVALID_REQUEST and message in out.response.message
    assert out.records == [] and d.groups == {}


def test_s02_v0_join_without_member_id_gets_a_generated_one(d):
    out = d.hb("", 0, subscribed_topic_names=("T",), rebalance_timeout_ms=5000, owned=(), version=0)
    assert out.response.error == 0 and len(out.response.member_id) == 36
    assert out.response.member_id in d.group().members


def test_s02_empty_names_and_empty_regex_are_valid_joins(d):
    assert d.hb("m1", 0, subscribed_topic_names=(), rebalance_timeout_ms=5000, owned=()).response.error == 0
    assert d.hb("m2", 0, subscribed_topic_regex="", rebalance_timeout_ms=5000, owned=()).response.error == 0


def test_s03_server_assignor_must_be_configured(d):
    out = d.join("m1", server_assignor="foo")
    assert out.response.error == E.UNSUPPORTED_ASSIGNOR and out.records == []
    assert d.join("m1", server_assignor="range").response.error == 0


def test_s04_missing_group_and_unknown_member(d):
    assert d.hb("m1", 5, subscribed_topic_names=("T",)).response.error == E.GROUP_ID_NOT_FOUND
    d.join("m1")
    assert d.hb("m9", 1).response.error == E.UNKNOWN_MEMBER_ID


def _two_members_reconciled(d):
    """m1 at epoch 3 (previous 2) with 3 partitions, m2 at 3 with the other 3."""
    d.join("m1")
    d.join("m2")
    d.hb("m1", 2, owned=owned_list(ALL_T))
    keep = d.group().members["m1"].assigned[T]
    out = d.hb("m1", 2, owned=((T, tuple(sorted(keep))),))
    assert out.response.member_epoch == 3
    d.hb("m2", 3, owned=())
    return set(keep)


def test_s05_member_epoch_fencing(d):
    d.join("m1")
    assert d.hb("m1", 3).response.error == E.FENCED_MEMBER_EPOCH
    keep = _two_members_reconciled(d)
    m1 = d.group().members["m1"]
    assert (m1.epoch, m1.previous_epoch) == (3, 2)
    # the previous epoch is accepted when the member owns a subset of its assignment (a lost response)
    sub = ((T, (min(keep),)),)
    assert d.hb("m1", 2, owned=sub).response.error == 0
    foreign = min(set(range(6)) - keep)
    assert d.hb("m1", 2, owned=((T, (foreign,)),)).response.error == E.FENCED_MEMBER_EPOCH
    assert d.hb("m1", 2, owned=None).response.error == E.FENCED_MEMBER_EPOCH
    assert d.hb("m1", 1, owned=()).response.error == E.FENCED_MEMBER_EPOCH
    rejoin = d.join("m1")
    assert rejoin.response.error == 0 and rejoin.response.member_epoch == 3
    assert partitions(rejoin) == {(T, p) for p in keep}


def test_s06_group_max_size(d):
    d.config = ConsumerConfig(assignment_interval_ms=0, max_size=1)
    d.join("m1")
    out = d.join("m2")
    assert out.response.error == E.GROUP_MAX_SIZE_REACHED and out.records == []
    assert d.join("m1").response.error == 0  # a known member may rejoin


def test_s07_a_partition_moves_only_after_its_owner_revoked_it(d):
    d.join("m1")
    out = d.join("m2")
    assert out.response.member_epoch == 3 and out.response.assignment == ()
    g = d.group()
    assert (g.epoch, g.assignment_epoch) == (3, 3)
    assert g.members["m2"].state == UNRELEASED_PARTITIONS
    assert g.state() == RECONCILING
    # m1 still owns all six: it must revoke three first, staying at epoch 2
    out = d.hb("m1", 2, owned=owned_list(ALL_T))
    m1 = g.members["m1"]
    assert (out.response.member_epoch, m1.state) == (2, UNREVOKED_PARTITIONS)
    kept = partitions(out)
    assert len(kept) == 3
    assert ("consumer-rebalance", "g", "m1") in d.timers
    # m2 gets nothing while m1 has not revoked
    assert d.hb("m2", 3, owned=()).response.assignment is None
    out = d.hb("m1", 2, owned=owned_list(kept))
    assert (out.response.member_epoch, m1.state) == (3, STABLE)
    assert ("consumer-rebalance", "g", "m1") not in d.timers
    out = d.hb("m2", 3, owned=())
    assert partitions(out) == ALL_T - kept
    assert g.state() == GROUP_STABLE


def test_s08_assignment_interval_batches_target_computation(d):
    d.config = ConsumerConfig(assignment_interval_ms=1000)
    d.join("m1")
    d.now += 995
    out = d.join("m2")
    assert out.response.member_epoch == 2 and out.response.assignment == ()
    g = d.group()
    assert (g.epoch, g.assignment_epoch) == (3, 2) and g.state() == ASSIGNING
    d.now += 10
    out = d.hb("m1", 2, owned=owned_list(ALL_T))
    assert g.assignment_epoch == 3 and g.assignment_timestamp == d.now
    assert g.members["m1"].state == UNREVOKED_PARTITIONS


def test_s09_member_stuck_revoking_is_fenced_after_its_rebalance_timeout(d):
    d.join("m1", rebalance_timeout_ms=3000)
    d.join("m2")
    d.hb("m1", 2, owned=owned_list(ALL_T))
    fired = d.advance(2999)
    assert fired == [] and "m1" in d.group().members
    (out,) = d.advance(1)
    assert kinds(out)[:4] == [(8, True), (7, True), (5, True), (3, False)]
    assert "m1" not in d.group().members and d.group().epoch == 4
    assert d.hb("m1", 2, owned=()).response.error == E.UNKNOWN_MEMBER_ID
    # the survivor gets everything once it heartbeats
    out = d.hb("m2", 3, owned=())
    assert out.response.member_epoch == 4 and partitions(out) == ALL_T


def test_rebalance_timer_is_harmless_once_the_member_moved_on(d):
    d.join("m1", rebalance_timeout_ms=3000)
    d.join("m2")
    d.hb("m1", 2, owned=owned_list(ALL_T))
    from groupd.coordinator.consumer.heartbeat import on_rebalance_timeout

    kept = {(T, p) for p in d.group().members["m1"].assigned[T]}
    d.hb("m1", 2, owned=owned_list(kept))
    assert on_rebalance_timeout(d.groups, d.topics, "g", "m1", d.now + 5000).records == []


def test_s10_session_timeout_fences_at_45_s(d):
    d.join("m1")
    assert d.advance(44_999) == [] and "m1" in d.group().members
    (out,) = d.advance(1)
    assert kinds(out) == [(8, True), (7, True), (5, True), (3, False)]
    assert d.group().state() == EMPTY
    assert d.hb("m1", 2).response.error == E.UNKNOWN_MEMBER_ID


def test_heartbeats_keep_the_session_alive(d):
    d.join("m1")
    for _ in range(20):
        assert d.advance(5000) == []
        assert d.hb("m1", 2).response.error == 0
    assert "m1" in d.group().members


def test_s11_leave_with_epoch_minus_1(d):
    d.join("m1")
    out = d.hb("m1", -1)
    assert (out.response.error, out.response.member_id, out.response.member_epoch) == (0, "m1", -1)
    assert kinds(out) == [(8, True), (7, True), (5, True), (3, False)]
    assert out.records[-1][1].epoch == 3
    assert ("consumer-session", "g", "m1") not in d.timers
    assert d.hb("m1", -1).response.error == E.UNKNOWN_MEMBER_ID
    assert d.hb("m1", -1, group="nope").response.error == E.GROUP_ID_NOT_FOUND


def test_s12_static_member_leaves_with_minus_2_and_is_replaced(d):
    d.join("a", instance_id="i1")
    first = d.group().members["a"].assigned
    out = d.hb("a", -2, instance_id="i1")
    assert out.response.member_epoch == -2
    assert kinds(out) == [(8, False)]
    cur = out.records[0][1]
    assert (cur.member_epoch, cur.state, cur.pending_revocation) == (-2, STABLE, ())
    assert cur.assigned[0].assignment_epochs == (0,) * 6
    assert d.group().epoch == 2  # no bump
    out = d.join("b", instance_id="i1")
    assert out.response.error == 0 and partitions(out) == ALL_T
    ks = kinds(out)
    assert ks[:6] == [(8, True), (7, True), (5, True), (5, False), (7, False), (8, False)]
    assert (3, False) not in ks, "a replacement with the same subscription does not bump the group"
    g = d.group()
    assert set(g.members) == {"b"} and g.static_members == {"i1": "b"}
    assert g.members["b"].assigned.keys() == first.keys()


def test_s13_static_member_conflicts(d):
    d.join("a", instance_id="i1")
    assert d.join("b", instance_id="i1").response.error == E.UNRELEASED_INSTANCE_ID
    assert d.hb("b", 2, instance_id="i1").response.error == E.FENCED_INSTANCE_ID
    assert d.hb("b", 2, instance_id="i9").response.error == E.UNKNOWN_MEMBER_ID
    d.config = ConsumerConfig(assignment_interval_ms=0, max_size=1)
    # the size check comes first: an unknown member with an unknown instance id finds the group full
    assert d.hb("b", 2, instance_id="i9").response.error == E.GROUP_MAX_SIZE_REACHED
    d.hb("a", -2, instance_id="i1")
    # the group is full, but i1 is already a static member of it
    assert d.join("b", instance_id="i1").response.error == 0


def test_s14_rack_or_assignor_changes_write_member_metadata_without_a_bump(d):
    d.join("m1")
    out = d.hb("m1", 2, rack_id="r2")
    assert kinds(out) == [(5, False)] and d.group().epoch == 2
    out = d.hb("m1", 2, server_assignor="range")
    assert kinds(out) == [(5, False)] and out.records[0][1].server_assignor == "range"
    assert d.hb("m1", 2).records == []


def test_s15_dropping_a_topic_still_owned_means_revoking_it_first(d):
    d.topic("B", 2)
    d.join("m1", names=("T", "B"))
    m1 = d.group().members["m1"]
    assert set(m1.assigned) == {T, B}
    out = d.hb("m1", 2, subscribed_topic_names=("T",), owned=owned_list(ALL_T | {(B, 0), (B, 1)}))
    assert (m1.state, m1.epoch) == (UNREVOKED_PARTITIONS, 2)
    assert set(m1.pending_revocation) == {B}
    assert partitions(out) == ALL_T
    out = d.hb("m1", 2, owned=owned_list(ALL_T))
    assert out.response.member_epoch == 3 and d.group().members["m1"].state == STABLE


def test_s16_regex_subscription_resolves_then_assigns(d):
    d.topic("foo1", 2)
    d.topic("foo2", 1)
    out = d.hb("m1", 0, subscribed_topic_regex="foo.*", rebalance_timeout_ms=5000, owned=())
    assert (out.response.member_epoch, out.response.assignment) == (1, ())
    assert kinds(out) == [(5, False), (8, False)]
    assert out.regex_refresh == "g"
    res = d.resolve()
    assert kinds(res) == [(16, False), (3, False)]
    assert res.records[0][1].topics == ("foo1", "foo2") and res.records[1][1].epoch == 2
    out = d.hb("m1", 1)
    assert out.response.member_epoch == 2
    assert partitions(out) == {(tid("foo1"), 0), (tid("foo1"), 1), (tid("foo2"), 0)}


def test_a_regex_resolution_keeps_what_the_scheduling_heartbeat_may_describe(d):
    """GroupMetadataManager.refreshRegularExpressions (Kafka 4.2) filters the matched topics through the
    authorizer with the context of the heartbeat that scheduled the refresh (filterTopicDescribeAuthorizedTopics):
    the resolution record holds only those, and so does the assignment."""
    d.topic("foo1", 2)
    d.topic("foo2", 1)
    out = d.hb("m1", 0, subscribed_topic_regex="foo.*", rebalance_timeout_ms=5000, owned=(),
               topic_filter=lambda names: frozenset(n for n in names if n != "foo2"))  # fmt: skip
    assert out.regex_refresh == "g"
    res = d.resolve()
    assert res.records[0][1].topics == ("foo1",)
    assert partitions(d.hb("m1", 1)) == {(tid("foo1"), 0), (tid("foo1"), 1)}


def test_s17_invalid_regex_shared_regex_and_its_tombstone(d):
    d.topic("foo1", 2)
    out = d.hb("m1", 0, subscribed_topic_regex="(", rebalance_timeout_ms=5000, owned=())
    assert out.response.error == E.INVALID_REGULAR_EXPRESSION and out.records == [] and d.groups == {}
    d.hb("m1", 0, subscribed_topic_regex="foo.*", rebalance_timeout_ms=5000, owned=())
    d.resolve()
    epoch = d.group().epoch
    out = d.hb("m2", 0, subscribed_topic_regex="foo.*", rebalance_timeout_ms=5000, owned=())
    assert d.group().epoch == epoch + 1 and (3, False) in kinds(out)
    d.hb("m1", -1)
    out = d.hb("m2", -1)
    assert (16, True) in kinds(out) and d.group().regexes == {}


def test_regex_switch_tombstones_the_old_one_and_resolution_picks_up_new_topics(d):
    d.topic("foo1", 1)
    d.hb("m1", 0, subscribed_topic_regex="foo.*", rebalance_timeout_ms=5000, owned=())
    d.resolve()
    assert d.hb("m1", 1).response.member_epoch == 2
    d.topic("foo2", 1)
    d.now += 10_000
    out = d.hb("m1", 2)
    assert out.regex_refresh == "g"
    res = d.resolve()
    assert res.records[0][1].topics == ("foo1", "foo2") and (3, False) in kinds(res)
    out = d.hb("m1", 2)
    assert out.response.member_epoch == 3 and (tid("foo2"), 0) in partitions(out)
    out = d.hb("m1", 3, subscribed_topic_regex="bar.*")
    assert (16, True) in kinds(out)


def test_s18_partitions_added_to_a_subscribed_topic_reassign(d):
    d.join("m1")
    d.topic("T", 8)
    out = d.hb("m1", 2)
    assert out.response.member_epoch == 3 and partitions(out) == {(T, p) for p in range(8)}


def test_topic_created_after_subscription_is_picked_up(d):
    d.join("m1", names=("T", "later"))
    d.topic("later", 2)
    out = d.hb("m1", 2)
    assert out.response.member_epoch == 3 and (tid("later"), 1) in partitions(out)


def test_sliding_subscription_then_leave_then_rejoin_as_librdkafka_0045_does(d):
    """The answers groupd gives to the last requests of librdkafka 2.15-2.16's consumer in its 0045
    subscribe_many_updates stall (docs/clients.md): each is Kafka's, and the consumer then sends nothing
    more (a client race, not a missing answer). Kafka's rules pinned here (GroupMetadataManager and
    CurrentAssignmentBuilder): a subscription that drops one topic and adds another is answered in the
    same heartbeat, at the member's unchanged epoch, with the kept partitions only (the dropped topic is
    to be revoked first, the new one is withheld until then); a leave with epoch -1 in the middle of
    that revocation is answered with epoch -1 and no error; a heartbeat at epoch 0 that is not a full
    request (no rebalance timeout, no owned partitions: what the consumer sends when its subscribe comes
    after that answer) is INVALID_REQUEST, fatal to the client, and writes nothing; a proper join at
    epoch 0 reusing the member id gets the whole subscription at a new epoch."""
    names = [f"S{i}" for i in range(7)]
    for name in names:
        d.topic(name, 4)
    whole = lambda chosen: {(tid(n), p) for n in chosen for p in range(4)}  # noqa: E731
    first = d.join("m1", names=names[0:5])
    assert (first.response.member_epoch, partitions(first)) == (2, whole(names[0:5]))

    slide = d.hb("m1", 2, subscribed_topic_names=tuple(names[1:6]))
    assert (slide.response.error, slide.response.member_epoch) == (0, 2)
    assert partitions(slide) == whole(names[1:5])
    member = d.group().members["m1"]
    assert (member.state, d.group().epoch, d.group().assignment_epoch) == (UNREVOKED_PARTITIONS, 3, 3)
    assert set(member.pending_revocation) == {tid("S0")}
    assert ("consumer-rebalance", "g", "m1") in d.timers

    left = d.hb("m1", -1)
    assert (left.response.error, left.response.member_id, left.response.member_epoch) == (0, "m1", -1)
    assert "m1" not in d.group().members and ("consumer-rebalance", "g", "m1") not in d.timers

    partial = d.hb("m1", 0, subscribed_topic_names=tuple(names[2:7]))
    assert partial.response.error == E.INVALID_REQUEST
    assert partial.response.message == "RebalanceTimeoutMs must be provided in first request."
    assert partial.records == [] and "m1" not in d.group().members

    back = d.join("m1", names=names[2:7])
    assert (back.response.error, back.response.member_epoch) == (0, 5)
    assert partitions(back) == whole(names[2:7])
    assert d.group().members["m1"].state == STABLE


def test_s21_assignment_only_when_needed(d):
    d.join("m1")
    assert d.hb("m1", 2).response.assignment is None
    full = d.hb("m1", 2, rebalance_timeout_ms=5000, subscribed_topic_names=("T",), owned=owned_list(ALL_T))
    assert partitions(full) == ALL_T


def test_s20_uniform_three_members_ten_partitions_in_a_group(d):
    d.topic("T", 10)
    for m in ("m1", "m2", "m3"):
        d.join(m)
    for _ in range(3):
        for m in ("m1", "m2", "m3"):
            mem = d.group().members[m]
            d.hb(m, mem.epoch, owned=owned_list({(t, p) for t, ps in mem.assigned.items() for p in ps}))
    g = d.group()
    assert g.state() == GROUP_STABLE
    assert sorted(m.assigned_count() for m in g.members.values()) == [3, 3, 4]


def test_s32_replay_rebuilds_the_same_groups_and_checks_tombstone_order(d):
    test_s07_a_partition_moves_only_after_its_owner_revoked_it(d)
    d.hb("m2", -1)
    again = d.replayed()
    g, h = d.group(), again["g"]
    assert (h.epoch, h.assignment_epoch, h.metadata_hash, h.targets) == (
        g.epoch, g.assignment_epoch, g.metadata_hash, g.targets
    )
    for mid, m in g.members.items():
        r = h.members[mid]
        assert (r.epoch, r.previous_epoch, r.state, r.assigned, r.pending_revocation, r.metadata_value()) == (
            m.epoch,
            m.previous_epoch,
            m.state,
            m.assigned,
            m.pending_revocation,
            m.metadata_value(),
        )
    from groupd.coordinator.consumer.group import ReplayError, replay

    with pytest.raises(ReplayError):
        replay(again, rec.MemberKey(rec.MEMBER_METADATA, "g", "m1"), None)
