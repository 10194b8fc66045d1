"""ShareGroupHeartbeat in the pure core, on a manual clock: the spec's share-group scenarios 33-36 (Kafka
4.3's GroupMetadataManager.shareGroupHeartbeat, GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid,
KafkaApis.isMemberIdValid), each refusal, the session timer, leaving, and replay from the records."""

from groupd.coordinator import errors as E
from groupd.coordinator.share import records as rec
from groupd.coordinator.share.api import INITIALIZE_RETRY_INTERVAL_MS
from groupd.coordinator.share.config import ShareGroupConfig

from .driver import Driver, assigned, kinds, tid

T = tid("T")


def ready(members=("m1",), partitions=6) -> Driver:
    """Members joined to T, its partitions initialized and assigned (the interval passed)."""
    d = Driver()
    d.topic("T", partitions)
    for m in members:
        d.join(m)
    d.initialized()
    d.now += 1000
    for m in members:
        d.hb(m, d.group().members[m].epoch)
    return d


# ---------------------------------------------------------------- 33: validation


def test_s33_invalid_requests():
    d = Driver()
    d.topic("T", 6)
    out = d.hb("m" * 37, 0, subscribed_topic_names=("T",))
    assert (out.response.error, out.response.message) == (E.INVALID_REQUEST, "Invalid member id in the request.")
    assert d.hb("", 0, subscribed_topic_names=("T",)).response.error == E.INVALID_REQUEST
    out = d.hb("m1", 0, subscribed_topic_names=())
    assert (out.response.error, out.response.message) == (
        E.INVALID_REQUEST,
        "SubscribedTopicNames must be set in first request.",
    )
    assert d.hb("m1", 0).response.error == E.INVALID_REQUEST  # names null on a join
    out = d.hb("m1", -2)
    assert (out.response.error, out.response.message) == (E.INVALID_REQUEST, "MemberEpoch is invalid.")
    assert d.hb("m1", 0, group=" ", subscribed_topic_names=("T",)).response.error == E.INVALID_REQUEST
    assert d.hb("m1", 0, rack_id=" ", subscribed_topic_names=("T",)).response.error == E.INVALID_REQUEST
    assert d.hb(" ", 0, subscribed_topic_names=("T",)).response.message == "MemberId can't be empty."
    assert d.log == [] and d.groups == {}  # nothing written, no group made
    assert d.hb("m" * 36, 0, subscribed_topic_names=("T",)).response.error == E.NONE


# ---------------------------------------------------------------- 34: initialization


def test_s34_first_join_initializes_then_assigns():
    d = Driver()
    d.topic("T", 6)
    out = d.join("m1")
    r = out.response
    assert (r.error, r.member_id, r.member_epoch, r.assignment, r.heartbeat_interval_ms) == (E.NONE, "m1", 2, (), 5000)
    assert r.initialize is not None
    assert (r.initialize.state_epoch, r.initialize.topics) == (2, ((T, (0, 1, 2, 3, 4, 5)),))
    assert kinds(out) == [
        (rec.MEMBER_METADATA, False),
        (rec.GROUP_METADATA, False),
        (rec.TARGET_ASSIGNMENT_MEMBER, False),
        (rec.TARGET_ASSIGNMENT_METADATA, False),
        (rec.CURRENT_MEMBER_ASSIGNMENT, False),
        (rec.STATE_PARTITION_METADATA, False),
    ]
    meta = out.records[-1][1]
    assert meta == rec.StatePartitionMetadata((rec.TopicPartitionsInfo(T, "T", (0, 1, 2, 3, 4, 5)),), (), ())
    # a heartbeat before the answer changes nothing and asks nothing again
    again = d.hb("m1", 2)
    assert again.records == [] and again.response.initialize is None and again.response.assignment is None
    done = d.initialized()
    assert done.records[0][1] == rec.StatePartitionMetadata(
        (), (rec.TopicPartitionsInfo(T, "T", (0, 1, 2, 3, 4, 5)),), ()
    )
    # within the assignment interval: the epoch moves, the target waits
    d.now += 500
    early = d.hb("m1", 2)
    assert early.response.member_epoch == 2 and early.response.assignment is None
    assert d.group().epoch == 3
    d.now += 500  # 1000 ms after the first target
    later = d.hb("m1", 2)
    assert later.response.member_epoch == 3
    assert assigned(later) == {(T, p) for p in range(6)}


def test_s34_failed_initialization_is_retried():
    d = Driver()
    d.topic("T", 2)
    d.join("m1")
    d.initialized(ok=False)
    assert d.group().initializing == {} and d.group().initialized == {}
    out = d.hb("m1", 2)
    assert out.response.initialize is not None and out.response.initialize.topics == ((T, (0, 1)),)


def test_initializing_older_than_the_retry_interval_is_asked_again():
    d = Driver()
    d.topic("T", 2)
    d.join("m1")
    d.asked.clear()  # the share coordinator never answers
    d.now += INITIALIZE_RETRY_INTERVAL_MS - 1
    assert d.hb("m1", 2).response.initialize is None
    d.now += 1
    assert d.hb("m1", 2).response.initialize.topics == ((T, (0, 1)),)


def test_partitions_added_are_initialized_and_assigned():
    d = ready()
    d.topic("T", 8)
    out = d.hb("m1", 3)
    assert out.response.initialize.topics == ((T, (6, 7)),)
    d.initialized()
    d.now += 1000
    out = d.hb("m1", d.group().members["m1"].epoch)
    assert assigned(out) == {(T, p) for p in range(8)}


def test_a_second_topic_subscribed_later():
    d = ready()
    u = d.topic("U", 1)
    out = d.hb("m1", 3, subscribed_topic_names=("T", "U"))
    assert out.response.initialize.topics == ((u, (0,)),)
    assert assigned(out) == {(T, p) for p in range(6)}  # U not initialized yet
    d.initialized()
    d.now += 1000
    out = d.hb("m1", d.group().members["m1"].epoch)
    assert (u, 0) in assigned(out)


# ---------------------------------------------------------------- 35: refusals


def test_s35_group_full():
    d = Driver(config=ShareGroupConfig(max_size=2))
    d.topic("T", 6)
    d.join("m1")
    d.join("m2")
    out = d.join("m3")
    assert (out.response.error, out.response.message) == (
        E.GROUP_MAX_SIZE_REACHED,
        "The share group has reached its maximum capacity of 2 members.",
    )
    assert d.join("m1").response.error == E.NONE  # a member rejoining is not counted twice


def test_s35_default_max_size_is_200():
    d = Driver()
    d.topic("T", 1)
    for i in range(200):
        assert d.join(f"m{i}").response.error == E.NONE
    assert d.join("m200").response.error == E.GROUP_MAX_SIZE_REACHED


def test_s35_epochs_and_unknown_members():
    d = ready()  # m1 at epoch 3, previous 2
    out = d.hb("m1", 4)
    assert out.response.error == E.FENCED_MEMBER_EPOCH and "greater member epoch (4)" in out.response.message
    assert d.hb("m1", 2).response.error == E.NONE  # the previous epoch: the last answer was lost
    out = d.hb("m1", 1)
    assert out.response.error == E.FENCED_MEMBER_EPOCH and "smaller member epoch (1)" in out.response.message
    assert d.hb("nobody", 3).response.error == E.UNKNOWN_MEMBER_ID
    assert d.hb("nobody", -1).response.error == E.UNKNOWN_MEMBER_ID
    assert d.hb("m1", 3, group="other").response.error == E.GROUP_ID_NOT_FOUND
    assert d.hb("m1", -1, group="other").response.error == E.GROUP_ID_NOT_FOUND


# ---------------------------------------------------------------- 36: sharing


def test_s36_four_members_two_partitions():
    d = ready(members=("m1", "m2", "m3", "m4"), partitions=2)
    holders = {0: set(), 1: set()}
    for mid, m in d.group().members.items():
        parts = [p for ps in m.assigned.values() for p in ps]
        assert len(parts) == 1, (mid, parts)
        holders[parts[0]].add(mid)
    assert [len(h) for h in holders.values()] == [2, 2]


def test_six_partitions_three_members_two_each_no_sharing():
    d = ready(members=("m1", "m2", "m3"))
    seen = []
    for m in d.group().members.values():
        ps = sorted(p for ps in m.assigned.values() for p in ps)
        assert len(ps) == 2
        seen += ps
    assert sorted(seen) == list(range(6))


# ---------------------------------------------------------------- leave, session timeout, replay


def test_leave_fences_with_three_tombstones_and_a_bump():
    d = ready(members=("m1", "m2"))
    epoch = d.group().epoch
    out = d.hb("m2", d.group().members["m2"].epoch * 0 - 1)
    assert (out.response.error, out.response.member_id, out.response.member_epoch) == (E.NONE, "m2", -1)
    assert kinds(out) == [
        (rec.CURRENT_MEMBER_ASSIGNMENT, True),
        (rec.TARGET_ASSIGNMENT_MEMBER, True),
        (rec.MEMBER_METADATA, True),
        (rec.GROUP_METADATA, False),
    ]
    assert d.group().epoch == epoch + 1 and set(d.group().members) == {"m1"}
    assert ("share-session", "g", "m2") not in d.timers
    d.now += 1000
    out = d.hb("m1", d.group().members["m1"].epoch)
    assert assigned(out) == {(T, p) for p in range(6)}  # m1 takes everything back


def test_session_timeout_fences():
    d = Driver(config=ShareGroupConfig(session_timeout_ms=45_000))
    d.topic("T", 6)
    d.join("m1")
    assert d.advance(44_999) == []
    assert "m1" in d.group().members
    (fired,) = d.advance(1)
    assert kinds(fired)[:3] == [
        (rec.CURRENT_MEMBER_ASSIGNMENT, True),
        (rec.TARGET_ASSIGNMENT_MEMBER, True),
        (rec.MEMBER_METADATA, True),
    ]
    assert d.group().members == {} and d.group().state() == "Empty"


def test_heartbeats_keep_the_session():
    d = Driver()
    d.topic("T", 6)
    d.join("m1")
    for _ in range(5):
        assert d.advance(40_000) == []
        d.hb("m1", d.group().members["m1"].epoch)
    assert "m1" in d.group().members


def test_rejoin_with_epoch_0_gets_its_assignment():
    d = ready()
    out = d.join("m1")
    assert out.response.member_epoch == 3 and assigned(out) == {(T, p) for p in range(6)}


def test_states_empty_and_stable():
    d = ready()
    assert d.group().state() == "Stable"
    d.hb("m1", -1)
    assert d.group().state() == "Empty"


def test_replay_rebuilds_the_same_groups():
    d = ready(members=("m1", "m2", "m3"), partitions=4)
    d.hb("m2", -1)
    d.topic("U", 2)
    d.hb("m1", d.group().members["m1"].epoch, subscribed_topic_names=("T", "U"))
    d.initialized()
    d.now += 1000
    d.hb("m3", d.group().members["m3"].epoch)
    fresh = d.replayed()
    live = d.groups["g"]
    again = fresh["g"]
    assert (again.epoch, again.assignment_epoch, again.metadata_hash) == (
        live.epoch,
        live.assignment_epoch,
        live.metadata_hash,
    )
    assert again.members == live.members
    assert again.targets == live.targets
    assert {t: i.partitions for t, i in again.initialized.items()} == {
        t: i.partitions for t, i in live.initialized.items()
    }
