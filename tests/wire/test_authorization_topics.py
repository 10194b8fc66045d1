"""The per-topic checks of the group, share and admin APIs with an authorizer, through SASL PLAIN sockets:
(principal, API, ACLs) -> Kafka's answer. Each fact is Apache Kafka 4.2's KafkaApis
(core/src/main/scala/kafka/server/KafkaApis.scala, the handler named at each test) unless a test names
another source. alice gets the ACLs a test gives her; admin is a super user."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from groupd.coordinator.share_state.persister import SharePartitionKey
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch
from tests.share.fake_persister import FakePersister
from tests.wire.test_acls import GROUP, LITERAL, READ, create, creation, start, user
from tests.wire.test_consumer_groups import hb_body as consumer_hb
from tests.wire.test_data_plane import fetch_body, list_offsets_body, produce_body
from tests.wire.test_groups import wait_loaded
from tests.wire.test_share_fetch import SHARE_ACK, SHARE_FETCH, ack_body, acquired, part
from tests.wire.test_share_fetch import fetch_body as share_fetch_body
from tests.wire.test_share_groups import alter_offsets_body, delete_offsets_body, describe_offsets_body
from tests.wire.test_share_groups import hb_body as share_hb

DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS = 8, 9, 10  # AclOperation's codes
CLUSTER = 4  # ResourceType
TAF, GAF, CAF = (
    ErrorCode.topic_authorization_failed,
    ErrorCode.group_authorization_failed,
    (ErrorCode.cluster_authorization_failed),
)
TOPICS_REFUSED = "The group has described topic(s) that the client is not authorized to describe."
FAST = {"group.consumer.assignment.interval.ms": "0", "group.share.assignment.interval.ms": "0"}


@pytest.fixture
async def env(tmp_path):
    b = await start(tmp_path, **FAST)
    b.share_persister = FakePersister()
    await wait_loaded(b)
    orders, secret = b.create_topic("orders", 1, {}), b.create_topic("secret", 1, {})
    admin = await user(b, "admin")
    alice = await user(b, "alice")
    yield b, admin, alice, orders.topic_id, secret.topic_id
    await alice.close()
    await admin.close()
    await b.stop()


async def test_consumer_group_heartbeat_needs_describe_on_each_subscribed_topic(env):
    b, admin, alice, _orders, _secret = env
    await create(admin, creation(rtype=GROUP, name="g", op=READ), creation(name="orders", op=READ))
    # handleConsumerGroupHeartbeat: READ on the group, then DESCRIBE on every subscribed topic name, else
    # TOPIC_AUTHORIZATION_FAILED and nothing else (no member id, epoch 0)
    r = await alice.call(68, 1, consumer_hb(1, "m1", 0, names=("orders", "secret"), owned=(), timeout=30_000))
    assert (r.error_code, r.member_id, r.member_epoch, r.assignment) == (TAF, None, 0, None)
    r = await alice.call(68, 1, consumer_hb(1, "m1", 0, names=("orders",), owned=(), timeout=30_000))
    assert r.error_code == ErrorCode.none and r.member_epoch > 0
    # a heartbeat that names no topics (the usual one) is not checked against topics
    r = await alice.call(68, 1, consumer_hb(1, r.member_id, r.member_epoch))
    assert r.error_code == ErrorCode.none
    # the group READ comes first: no READ on the group -> GROUP_AUTHORIZATION_FAILED, whatever the topics
    r = await alice.call(68, 1, consumer_hb(1, "m2", 0, names=("secret",), group="other", timeout=30_000))
    assert r.error_code == GAF


async def test_a_regex_resolves_to_the_topics_the_member_may_describe(env):
    """GroupMetadataManager.refreshRegularExpressions -> filterTopicDescribeAuthorizedTopics (Kafka 4.2's
    group coordinator): the topics a regex matches are kept only if the principal of the heartbeat that
    scheduled the resolution may DESCRIBE them, so a member never learns of the others through its
    assignment."""
    b, admin, alice, orders, secret = env
    await create(admin, creation(rtype=GROUP, name="g", op=READ), creation(name="orders", op=READ))
    r = await alice.call(68, 1, consumer_hb(1, "m1", 0, regex="orders|secret", owned=(), timeout=30_000))
    assert r.error_code == ErrorCode.none
    for _ in range(100):  # the regex is resolved a moment after the heartbeat; the assignment follows
        if r.assignment is not None and r.assignment.topic_partitions:
            break
        await asyncio.sleep(0.02)
        r = await alice.call(68, 1, consumer_hb(1, "m1", r.member_epoch))
    assert [tp.topic_id for tp in r.assignment.topic_partitions] == [orders]
    # admin (a super user) subscribing to the same regex in another group gets both
    r = await admin.call(68, 1, consumer_hb(1, "m2", 0, regex="orders|secret", owned=(), timeout=30_000, group="h"))
    for _ in range(100):
        if r.assignment is not None and len(r.assignment.topic_partitions) == 2:
            break
        await asyncio.sleep(0.02)
        r = await admin.call(68, 1, consumer_hb(1, "m2", r.member_epoch, group="h"))
    assert sorted(tp.topic_id for tp in r.assignment.topic_partitions) == sorted([orders, secret])


async def test_consumer_group_describe_refuses_a_group_assigned_a_hidden_topic(env):
    b, admin, alice, _orders, _secret = env
    r = await admin.call(68, 1, consumer_hb(1, "m1", 0, names=("secret",), owned=(), timeout=30_000))
    for _ in range(50):  # the target assignment reaches the member within a few heartbeats
        if r.assignment is not None and r.assignment.topic_partitions:
            break
        await asyncio.sleep(0.02)
        r = await admin.call(68, 1, consumer_hb(1, r.member_id, r.member_epoch))
    await create(admin, creation(rtype=GROUP, name="g", op=DESCRIBE))
    body = codec.make(codec.request_class(69, 1), group_ids=("g",), include_authorized_operations=True)
    # handleConsumerGroupDescribe: with an authorizer, a group whose members' assignments name a topic the
    # principal may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED, Kafka's message, no members
    (g,) = (await alice.call(69, 1, body)).groups
    assert (g.error_code, g.error_message, g.members, g.group_state) == (TAF, TOPICS_REFUSED, (), "")
    assert g.authorized_operations == -(1 << 31)
    await create(admin, creation(name="secret", op=DESCRIBE))
    (g,) = (await alice.call(69, 1, body)).groups
    assert g.error_code == ErrorCode.none and len(g.members) == 1
    assert g.authorized_operations == 1 << DESCRIBE


async def test_share_group_heartbeat_and_describe_check_topics(env):
    b, admin, alice, _orders, _secret = env
    await create(admin, creation(rtype=GROUP, name="g", op=READ), creation(name="orders", op=READ))
    # handleShareGroupHeartbeat: READ on the group, then DESCRIBE on every subscribed topic name
    r = await alice.call(76, 1, share_hb("m1", 0, names=("orders", "secret")))
    assert (r.error_code, r.member_id, r.member_epoch) == (TAF, None, 0)
    r = await alice.call(76, 1, share_hb("m1", 0, names=("orders",)))
    assert r.error_code == ErrorCode.none
    # handleShareGroupDescribe: a member assigned a topic alice may not DESCRIBE refuses the whole group
    r = await admin.call(76, 1, share_hb("m2", 0, names=("secret",), group="h"))
    for _ in range(50):
        if r.assignment is not None and r.assignment.topic_partitions:
            break
        await asyncio.sleep(0.02)
        r = await admin.call(76, 1, share_hb("m2", r.member_epoch, group="h"))
    await create(admin, creation(rtype=GROUP, name="h", op=DESCRIBE))
    body = codec.make(codec.request_class(77, 1), group_ids=("h",), include_authorized_operations=False)
    (h,) = (await alice.call(77, 1, body)).groups
    assert (h.error_code, h.error_message, h.members) == (TAF, TOPICS_REFUSED, ())


async def test_share_fetch_and_acknowledge_need_read_on_each_topic(env):
    b, admin, alice, orders, secret = env
    for tid in (orders, secret):
        await b.share_persister.initialize(SharePartitionKey("g", tid, 0), 0, 0)  # from offset 0
    for name in ("orders", "secret"):
        await admin.call(0, 9, produce_body(name, 0, build_batch([(None, b"v")], timestamp_ms=1000)))
    await create(admin, creation(rtype=GROUP, name="g", op=READ), creation(name="orders", op=READ))
    cls = codec.request_class(SHARE_FETCH, 1)
    topic_cls, part_cls = codec.nested(cls, "FetchTopic"), codec.nested(cls, "FetchPartition")
    both = share_fetch_body(1, orders, 0)
    both = codec.make(
        cls,
        **{
            **{f: getattr(both, f) for f in both.__dataclass_fields__},
            "topics": tuple(
                topic_cls(topic_id=t, partitions=(part_cls(partition_index=0, acknowledgement_batches=()),))
                for t in (orders, secret)
            ),
        },
    )
    # handleShareFetchRequest -> handleFetchFromShareFetchRequest: READ on each topic, else the partition
    # answers TOPIC_AUTHORIZATION_FAILED and nothing of it is acquired
    r = await alice.call(SHARE_FETCH, 1, both)
    codes = {t.topic_id: t.partitions[0].error_code for t in r.responses}
    assert codes == {orders: ErrorCode.none, secret: TAF}
    assert acquired(r) == [(0, 0, 1)]  # the one record of "orders"
    # handleAcknowledgements (ShareFetch's piggy-backed and ShareAcknowledge's): the batches validated,
    # then READ on the topic, before the partition is looked up
    r = await alice.call(SHARE_ACK, 1, ack_body(1, secret, 1, {0: [(0, 0, [1])]}))
    assert (r.error_code, part(r).error_code) == (ErrorCode.none, TAF)
    r = await alice.call(SHARE_ACK, 1, ack_body(1, secret, 2, {0: [(1, 0, [1])]}))  # first > last
    assert part(r).error_code == ErrorCode.invalid_request
    r = await alice.call(SHARE_ACK, 1, ack_body(1, secret, 3, {5: []}))  # an empty acknowledgement
    assert part(r, 5).error_code == TAF
    r = await alice.call(SHARE_ACK, 1, ack_body(1, orders, 4, {0: [(0, 0, [1])]}))
    assert part(r).error_code == ErrorCode.none
    # READ on the group first: GROUP_AUTHORIZATION_FAILED for the whole request
    r = await alice.call(SHARE_FETCH, 1, share_fetch_body(1, orders, 0, group="other"))
    assert (r.error_code, r.responses) == (GAF, ())


async def test_share_group_offset_apis_check_each_topic(env):
    b, admin, alice, orders, secret = env
    await create(admin, creation(rtype=GROUP, name="g", op=READ), creation(name="orders", op=READ))
    await create(admin, creation(rtype=GROUP, name="g", op=6))  # DELETE on the group
    # handleAlterShareGroupOffsetsRequest: READ on each topic, else TOPIC_AUTHORIZATION_FAILED per partition
    altered = await alice.call(91, 0, alter_offsets_body("g", (("orders", ((0, 0),)), ("secret", ((0, 0),)))))
    assert altered.error_code == ErrorCode.none
    rows = {
        (t.topic_name, p.partition_index): (p.error_code, p.error_message)
        for t in altered.responses
        for p in t.partitions
    }
    assert rows == {("orders", 0): (0, None), ("secret", 0): (TAF, "Topic authorization failed.")}
    assert next(t for t in altered.responses if t.topic_name == "secret").topic_id == secret
    await admin.call(91, 0, alter_offsets_body("g", (("secret", ((0, 0),)),)))
    # handleDescribeShareGroupOffsetsRequest: DESCRIBE on the group; named topics alice may not DESCRIBE
    # answer TOPIC_AUTHORIZATION_FAILED (start offset -1, lag -1, the zero topic id); every topic: left out
    (g,) = (await alice.call(90, 1, describe_offsets_body("g", (("orders", (0,)), ("secret", (0,)))))).groups
    got = {t.topic_name: (t.topic_id, [(p.error_code, p.start_offset, p.lag) for p in t.partitions]) for t in g.topics}
    assert got["secret"] == (None, [(TAF, -1, -1)])  # kio reads the zero id as None
    assert got["orders"][1][0][0] == ErrorCode.none
    (g,) = (await alice.call(90, 1, describe_offsets_body("g"))).groups
    assert [t.topic_name for t in g.topics] == ["orders"]
    (g,) = (await admin.call(90, 1, describe_offsets_body("g"))).groups
    assert sorted(t.topic_name for t in g.topics) == ["orders", "secret"]
    # handleDeleteShareGroupOffsetsRequest: DELETE on the group, READ on each topic
    deleted = await alice.call(92, 0, delete_offsets_body("g", ("orders", "secret")))
    assert {t.topic_name: (t.error_code, t.error_message) for t in deleted.responses} == {
        "orders": (0, None),
        "secret": (TAF, "Topic authorization failed."),
    }


async def test_list_config_resources_needs_describe_configs_on_the_cluster(env):
    b, admin, alice, _orders, _secret = env
    body = {"resource_types": ()}
    # handleListConfigResources: DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED, nothing listed
    r = await alice.call(74, 1, body)
    assert (r.error_code, r.config_resources) == (CAF, ())
    await create(admin, creation(rtype=CLUSTER, name="kafka-cluster", op=DESCRIBE_CONFIGS, pattern=LITERAL))
    r = await alice.call(74, 1, body)
    assert r.error_code == ErrorCode.none and {c.resource_name for c in r.config_resources} >= {"orders", "secret"}


async def test_list_offsets_v0_needs_describe(env):
    b, admin, alice, _orders, _secret = env
    await create(admin, creation(name="orders", op=DESCRIBE))
    cls = codec.request_class(2, 0)
    topic_cls, part_cls = codec.nested(cls, "ListOffsetsTopic"), codec.nested(cls, "ListOffsetsPartition")
    body = codec.make(
        cls,
        replica_id=-1,
        topics=tuple(
            topic_cls(name=n, partitions=(part_cls(partition_index=0, timestamp=-1, max_num_offsets=1),))
            for n in ("secret", "orders")
        ),
    )
    # Kafka 3.9's handleListOffsetRequestV0: partitionSeqByAuthorized(DESCRIBE, TOPIC); the refused topics'
    # partitions TOPIC_AUTHORIZATION_FAILED with no offsets, after the allowed topics
    r = await alice.call(2, 0, body)
    assert [(t.name, t.partitions[0].error_code, t.partitions[0].old_style_offsets) for t in r.topics] == [
        ("orders", ErrorCode.none, (0,)),
        ("secret", TAF, ()),
    ]
    # v1+ (handleListOffsetRequest): the same check, the refused topics after the others too
    v7 = list_offsets_body("secret", 0, -1)
    v7 = dataclasses.replace(v7, topics=(v7.topics[0], dataclasses.replace(v7.topics[0], name="orders")))
    r = await alice.call(2, 7, v7)
    assert [(t.name, t.partitions[0].error_code) for t in r.topics] == [("orders", ErrorCode.none), ("secret", TAF)]


def follower_fetch_v15(topic_id):
    """A Fetch v15 from replica 1: the replica id is in ReplicaState from v15 on."""
    cls = codec.request_class(1, 15)
    topic_cls, part_cls = codec.nested(cls, "FetchTopic"), codec.nested(cls, "FetchPartition")
    partition = part_cls(partition=0, fetch_offset=0, partition_max_bytes=1000)
    return codec.make(
        cls,
        replica_state=codec.nested(cls, "ReplicaState")(replica_id=1, replica_epoch=-1),
        max_wait=0,
        min_bytes=1,
        topics=(topic_cls(topic_id=topic_id, partitions=(partition,)),),
        forgotten_topics_data=(),
    )


async def test_a_followers_fetch_needs_cluster_action(env):
    b, admin, alice, orders, secret = env
    await create(admin, creation(name="orders", op=READ))
    follower = dataclasses.replace(fetch_body("orders", 0, 0, version=11), replica_id=1)
    # handleFetchRequest: a fetch from a follower (replica id >= 0) needs CLUSTER_ACTION on the cluster, else
    # every partition TOPIC_AUTHORIZATION_FAILED, READ on the topic notwithstanding
    r = await alice.call(1, 11, follower)
    assert r.responses[0].partitions[0].error_code == TAF
    r = await alice.call(1, 15, follower_fetch_v15(orders))
    assert r.responses[0].partitions[0].error_code == TAF
    consumer = await alice.call(1, 11, fetch_body("orders", 0, 0, version=11))
    assert consumer.responses[0].partitions[0].error_code == ErrorCode.none
    await create(admin, creation(rtype=CLUSTER, name="kafka-cluster", op=CLUSTER_ACTION))
    # with CLUSTER_ACTION no topic is checked: "secret" is read without READ on it
    r = await alice.call(1, 11, dataclasses.replace(fetch_body("secret", 0, 0, version=11), replica_id=1))
    assert r.responses[0].partitions[0].error_code == ErrorCode.none
    r = await alice.call(1, 15, follower_fetch_v15(secret))
    assert r.responses[0].partitions[0].error_code == ErrorCode.none
