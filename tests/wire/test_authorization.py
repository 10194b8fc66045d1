"""What each API checks with an authorizer, through SASL PLAIN sockets: (principal, API, resource, ACLs)
-> Kafka's answer, each fact from KafkaApis (Apache Kafka's core/src/main/scala/kafka/server/KafkaApis.scala)
and cited at its test. alice gets the ACLs a test gives her; admin is a super user."""

from __future__ import annotations

import asyncio
import logging

import pytest

from groupd.broker.app import Broker
from groupd.protocol import codec
from groupd.protocol.api_table import API_TABLE
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch
from tests.conftest import broker_config
from tests.fuzz import Values
from tests.harness import request_bytes
from tests.wire.test_acls import (
    ALLOW,
    AUTHORIZED_CONFIG,
    DENY,
    GROUP,
    LITERAL,
    PREFIXED,
    READ,
    WRITE,
    create,
    creation,
    start,
    user,
)
from tests.wire.test_data_plane import fetch_body, list_offsets_body, part, produce_body
from tests.wire.test_fuzz_requests import SEED, _exchange
from tests.wire.test_groups import commit_body, join_body

DESCRIBE, CREATE, ALTER, ALL = 8, 5, 7, 2
CLUSTER, TXN = 4, 5


@pytest.fixture
async def env(tmp_path):
    b = await start(tmp_path)
    b.create_topic("orders", 1, {})
    b.create_topic("secret", 1, {})
    admin = await user(b, "admin")
    alice = await user(b, "alice")
    yield b, admin, alice
    await alice.close()
    await admin.close()
    await b.stop()


def metadata_body(*names, auto=False, version=12):
    cls = codec.request_class(3, version)
    topic = codec.nested(cls, "MetadataRequestTopic")
    topics = None if not names else tuple(topic(name=n, topic_id=codec.ZERO_UUID) for n in names)
    return codec.make(
        cls,
        topics=topics,
        allow_auto_topic_creation=auto,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=True,
    )


BATCH = build_batch([(b"k", b"v")], timestamp_ms=1000)


async def test_produce_needs_write_on_the_topic(env):
    b, admin, alice = env
    # KafkaApis.handleProduceRequest: filterByAuthorized(WRITE, TOPIC) -> TOPIC_AUTHORIZATION_FAILED
    assert part(await alice.call(0, 9, produce_body("orders", 0, BATCH))).error_code == (
        ErrorCode.topic_authorization_failed
    )
    await create(admin, creation(name="ord", pattern=PREFIXED, op=WRITE))
    assert part(await alice.call(0, 9, produce_body("orders", 0, BATCH))).error_code == ErrorCode.none
    # a DENY wins over the prefixed ALLOW
    await create(admin, creation(name="orders", op=WRITE, perm=DENY))
    assert part(await alice.call(0, 9, produce_body("orders", 0, BATCH))).error_code == (
        ErrorCode.topic_authorization_failed
    )


async def test_fetch_needs_read_and_list_offsets_describe(env):
    b, admin, alice = env
    await admin.call(0, 9, produce_body("orders", 0, BATCH))
    # handleFetchRequest: READ on each topic; handleListOffsetRequest: DESCRIBE on each topic
    fetched = await alice.call(1, 11, fetch_body("orders", 0, 0))
    assert fetched.responses[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
    assert fetched.responses[0].partitions[0].records == b""
    listed = await alice.call(2, 7, list_offsets_body("orders", 0, -1))
    assert listed.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
    await create(admin, creation(op=READ))  # READ implies DESCRIBE
    fetched = await alice.call(1, 11, fetch_body("orders", 0, 0))
    assert fetched.responses[0].partitions[0].error_code == ErrorCode.none
    assert fetched.responses[0].partitions[0].high_watermark == 1
    listed = await alice.call(2, 7, list_offsets_body("orders", 0, -1))
    assert (listed.topics[0].partitions[0].error_code, listed.topics[0].partitions[0].offset) == (ErrorCode.none, 1)


async def test_metadata_hides_topics_without_describe(env):
    b, admin, alice = env
    await create(admin, creation(op=WRITE))  # WRITE implies DESCRIBE on "orders" only
    every = await alice.call(3, 12, metadata_body())
    assert [t.name for t in every.topics] == ["orders"]  # the others left out of "all topics"
    named = await alice.call(3, 12, metadata_body("orders", "secret", "nowhere"))
    got = {t.name: t.error_code for t in named.topics}
    # handleTopicMetadataRequest: named but not DESCRIBE-able -> TOPIC_AUTHORIZATION_FAILED, existing or not
    assert got == {
        "orders": ErrorCode.none,
        "secret": ErrorCode.topic_authorization_failed,
        "nowhere": ErrorCode.topic_authorization_failed,
    }
    orders = next(t for t in named.topics if t.name == "orders")
    # authorized operations (AclEntry.supportedOperations(TOPIC)): WRITE and the DESCRIBE it implies
    assert orders.topic_authorized_operations == (1 << WRITE) | (1 << DESCRIBE)
    secret = next(t for t in named.topics if t.name == "secret")
    assert secret.topic_authorized_operations == -(1 << 31) and secret.topic_id is None  # the zero id, as kio reads it


async def test_metadata_auto_creation_needs_create(env):
    b, admin, alice = env
    await create(admin, creation(name="new-", pattern=PREFIXED, op=DESCRIBE))
    resp = await alice.call(3, 12, metadata_body("new-a", auto=True))
    assert resp.topics[0].error_code == ErrorCode.topic_authorization_failed
    assert b.topics.get("new-a") is None
    await create(admin, creation(name="new-", pattern=PREFIXED, op=CREATE))  # CREATE on the topic suffices
    resp = await alice.call(3, 12, metadata_body("new-a", auto=True))
    assert resp.topics[0].error_code == ErrorCode.none and b.topics.get("new-a") is not None
    # or CREATE on the cluster
    await create(admin, creation(rtype=CLUSTER, name="kafka-cluster", op=CREATE), creation(name="x", op=DESCRIBE))
    resp = await alice.call(3, 12, metadata_body("x", auto=True))
    assert resp.topics[0].error_code == ErrorCode.none


async def test_group_apis_need_read_on_the_group(env):
    b, admin, alice = env
    # handleJoinGroupRequest / FindCoordinator (DESCRIBE on the group)
    joined = await alice.call(11, 5, join_body(5, group="g"))
    assert joined.error_code == ErrorCode.group_authorization_failed
    found = await alice.call(10, 4, {"key_type": 0, "coordinator_keys": ("g",)})
    assert (found.coordinators[0].error_code, found.coordinators[0].node_id) == (
        ErrorCode.group_authorization_failed,
        -1,
    )
    committed = await alice.call(8, 8, commit_body("g", "orders", 0, 1, ""))
    assert committed.topics[0].partitions[0].error_code == ErrorCode.group_authorization_failed
    await create(admin, creation(rtype=GROUP, name="g", op=READ))
    found = await alice.call(10, 4, {"key_type": 0, "coordinator_keys": ("g",)})
    assert found.coordinators[0].error_code == ErrorCode.none  # READ implies DESCRIBE
    # the group is allowed, the topic not: handleOffsetCommitRequest's READ on each topic
    committed = await alice.call(8, 8, commit_body("g", "orders", 0, 1, ""))
    assert committed.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
    await create(admin, creation(op=READ))
    committed = await alice.call(8, 8, commit_body("g", "orders", 0, 1, ""))
    assert committed.topics[0].partitions[0].error_code == ErrorCode.none


async def test_list_and_describe_groups(env):
    b, admin, alice = env
    await create(admin, creation(rtype=GROUP, name="mine", op=READ), creation(op=READ))
    for group in ("mine", "theirs"):
        await admin.call(8, 8, commit_body(group, "orders", 0, 1, ""))
    # handleListGroupsRequest: without DESCRIBE on the cluster only the groups alice may DESCRIBE
    listed = await alice.call(16, 4, {"states_filter": ()})
    assert [g.group_id for g in listed.groups] == ["mine"]
    described = await alice.call(15, 5, {"groups": ("mine", "theirs"), "include_authorized_operations": True})
    got = {g.group_id: (g.error_code, g.authorized_operations) for g in described.groups}
    assert got == {
        "mine": (ErrorCode.none, (1 << READ) | (1 << DESCRIBE)),
        "theirs": (ErrorCode.group_authorization_failed, -(1 << 31)),
    }
    deleted = await alice.call(42, 2, {"groups_names": ("theirs",)})
    assert deleted.results[0].error_code == ErrorCode.group_authorization_failed  # DELETE on the group
    group = codec.nested(codec.request_class(9, 8), "OffsetFetchRequestGroup")(group_id="theirs", topics=None)
    fetched = await alice.call(9, 8, {"groups": (group,), "require_stable": False})
    assert fetched.groups[0].error_code == ErrorCode.group_authorization_failed  # DESCRIBE on the group


async def test_transactional_and_idempotent_producers(env):
    b, admin, alice = env
    body = {"transactional_id": "tx", "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}
    # handleInitProducerIdRequest: WRITE on the transactional id
    assert (await alice.call(22, 4, body)).error_code == ErrorCode.transactional_id_authorization_failed
    # an idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic
    idem = {**body, "transactional_id": None}
    assert (await alice.call(22, 4, idem)).error_code == ErrorCode.cluster_authorization_failed
    await create(admin, creation(name="some-", pattern=PREFIXED, op=WRITE))
    assert (await alice.call(22, 4, idem)).error_code == ErrorCode.none
    await create(admin, creation(rtype=TXN, name="tx", op=WRITE))
    assert (await alice.call(22, 4, body)).error_code == ErrorCode.none
    # FindCoordinator for a transactional id: DESCRIBE on it, which WRITE implies
    found = await alice.call(10, 4, {"key_type": 1, "coordinator_keys": ("tx", "other")})
    assert [c.error_code for c in found.coordinators] == [
        ErrorCode.none,
        ErrorCode.transactional_id_authorization_failed,
    ]


async def test_literal_allow_is_not_a_prefix_and_hosts_count(env):
    b, admin, alice = env
    await create(admin, creation(name="order", op=WRITE, pattern=LITERAL), creation(op=WRITE, host="10.9.9.9"))
    assert part(await alice.call(0, 9, produce_body("orders", 0, BATCH))).error_code == (
        ErrorCode.topic_authorization_failed
    )
    await create(admin, creation(op=WRITE, host="127.0.0.1", perm=ALLOW))
    assert part(await alice.call(0, 9, produce_body("orders", 0, BATCH))).error_code == ErrorCode.none


async def test_without_an_authorizer_nothing_is_checked(tmp_path):
    b = await start(tmp_path, **{"authorizer.class.name": ""})
    b.create_topic("orders", 1, {})
    try:
        alice = await user(b, "alice")
        assert part(await alice.call(0, 9, produce_body("orders", 0, BATCH))).error_code == ErrorCode.none
        assert (await alice.call(11, 5, join_body(5, group="g"))).error_code != ErrorCode.group_authorization_failed
        await alice.close()
    finally:
        await b.stop()


async def test_super_user_is_not_checked(env):
    b, admin, alice = env
    await create(admin, creation(principal="User:admin", op=ALL, perm=DENY))
    assert part(await admin.call(0, 9, produce_body("orders", 0, BATCH))).error_code == ErrorCode.none


async def every_api_once(b: Broker) -> list[tuple[str, object]]:
    """Every version of every API once, with odd values (test_fuzz_requests' seed), each on a connection of
    its own: the outcomes."""
    values = Values(SEED)
    cases = [
        (key, version, request_bytes(key, version, values.entity(codec.request_class(key, version)), 7))
        for key, spec in sorted(API_TABLE.items())
        for version in range(spec.min_version, spec.max_version + 1)
    ]
    return await asyncio.gather(*(_exchange(b.port, key, version, frame) for key, version, frame in cases))


async def test_every_api_and_version_answers_a_principal_with_no_acls(tmp_path, caplog):
    """The odd-values sweep of test_fuzz_requests, from ``User:ANONYMOUS`` with an authorizer and no ACL:
    every refusal path answers (or closes with a log line), none fails."""
    b = Broker(broker_config(tmp_path, **{"authorizer.class.name": AUTHORIZED_CONFIG["authorizer.class.name"]}))
    await b.start()
    try:
        b.create_topic("fz", 2, {})
        with caplog.at_level(logging.WARNING, logger="groupd"):
            outcomes = await every_api_once(b)
        failed = [r.getMessage() for r in caplog.records if "failed" in r.getMessage() or r.exc_info]
        assert not failed, failed
        assert [o for o in outcomes if o[0] == "undecodable"] == []
        assert b.access.denials > 0
    finally:
        await b.stop()


async def test_describe_apis_check_describe(env):
    b, admin, alice = env
    await create(admin, creation(op=DESCRIBE))
    # handleOffsetForLeaderEpochRequest: CLUSTER_ACTION, else DESCRIBE on each topic
    ofle_cls = codec.request_class(23, 4)
    topic, part_ = codec.nested(ofle_cls, "OffsetForLeaderTopic"), codec.nested(ofle_cls, "OffsetForLeaderPartition")
    ask = tuple(topic(topic=n, partitions=(part_(partition=0, leader_epoch=0),)) for n in ("orders", "secret"))
    epochs = await alice.call(23, 4, {"replica_id": -1, "topics": ask})
    assert {t.topic: t.partitions[0].error_code for t in epochs.topics} == {
        "orders": ErrorCode.none,
        "secret": ErrorCode.topic_authorization_failed,
    }
    # DescribeTopicPartitions: every topic leaves "secret" out; named, it is refused
    dtp_topic = codec.nested(codec.request_class(75, 0), "TopicRequest")
    every = await alice.call(75, 0, {"topics": (), "response_partition_limit": 100, "cursor": None})
    assert [t.name for t in every.topics] == ["orders"]
    named = await alice.call(
        75, 0, {"topics": (dtp_topic(name="secret"),), "response_partition_limit": 100, "cursor": None}
    )
    assert named.topics[0].error_code == ErrorCode.topic_authorization_failed
    # cluster-level: DescribeLogDirs, DescribeClientQuotas, DescribeUserScramCredentials, DescribeAcls
    logdirs = await alice.call(35, 4, {"topics": None})
    assert logdirs.error_code == ErrorCode.cluster_authorization_failed
    quotas = await alice.call(48, 1, {"components": (), "strict": False})
    assert quotas.error_code == ErrorCode.cluster_authorization_failed
    scram = await alice.call(50, 0, {"users": None})
    assert scram.error_code == ErrorCode.cluster_authorization_failed


async def test_cluster_alter_apis(env):
    b, admin, alice = env
    # KafkaApis.handleElectLeaders / AlterPartitionReassignments and ControllerApis.handleDescribeQuorum
    elected = await alice.call(43, 2, {"election_type": 0, "topic_partitions": None, "timeout": 1000})
    assert elected.error_code == ErrorCode.cluster_authorization_failed
    moved = await alice.call(45, 0, {"timeout": 1000, "topics": ()})
    assert moved.error_code == ErrorCode.cluster_authorization_failed
    quorum = await alice.call(55, 1, {"topics": ()})
    assert quorum.error_code == ErrorCode.cluster_authorization_failed
    assert (await admin.call(43, 2, {"election_type": 0, "topic_partitions": None, "timeout": 1000})).error_code == 0
