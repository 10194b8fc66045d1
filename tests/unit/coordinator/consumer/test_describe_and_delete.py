"""ConsumerGroupDescribe (spec scenario 22, the consumer-group side) and a group's deletion tombstones
(scenario 26: Kafka's order, accepted by replay)."""

from groupd.coordinator import errors as E
from groupd.coordinator.consumer import records as rec
from groupd.coordinator.consumer.describe import CONSUMER_MEMBER, describe
from groupd.coordinator.consumer.group import EMPTY, RECONCILING, deletion_records, replay

from .driver import Driver, tid

T = tid("T")


def test_s22_describe_errors_and_a_reconciling_group():
    d = Driver()
    d.topic("T", 4)
    d.join("m1", rack_id="r1")
    d.join("m2", server_assignor="range")
    names = {info.topic_id: name for name, info in d.topics.items()}
    blank, missing, g = describe(d.groups, ["", "nope", "g"], names, d.config)
    assert blank.error == E.INVALID_GROUP_ID
    assert missing.error == E.GROUP_ID_NOT_FOUND
    assert (g.error, g.state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (0, RECONCILING, 3, 3, "range")
    m1, m2 = g.members
    assert (m1.member_id, m1.rack_id, m1.member_epoch, m1.member_type) == ("m1", "r1", 2, CONSUMER_MEMBER)
    # m1 still holds all four (nothing revoked yet); its target is the new half
    assert m1.assignment == ((T, "T", (0, 1, 2, 3)),)
    assert len(m1.target[0][2]) == 2
    assert m2.assignment == () and len(m2.target[0][2]) == 2


def test_describe_leaves_out_topics_the_metadata_lost():
    d = Driver()
    d.topic("T", 2)
    d.join("m1")
    (g,) = describe(d.groups, ["g"], {}, d.config)
    assert g.members[0].assignment == () and g.members[0].target == ()


def test_s26_deletion_tombstones_in_kafka_order_replay_cleanly():
    d = Driver()
    d.topic("foo1", 2)
    d.hb("m1", 0, subscribed_topic_regex="foo.*", rebalance_timeout_ms=5000, owned=())
    d.resolve()
    d.hb("m1", 1)
    group = d.group()
    tombs = deletion_records(group)
    assert [(rec.key_kind(k), v) for k, v in tombs] == [
        (8, None), (7, None), (6, None), (5, None), (16, None), (4, None), (3, None)
    ]
    for key, value in tombs:
        replay(d.groups, key, value)
    assert "g" not in d.groups


def test_empty_group_state_after_the_last_member_leaves():
    d = Driver()
    d.topic("T", 2)
    d.join("m1")
    d.hb("m1", -1)
    assert d.group().state() == EMPTY
