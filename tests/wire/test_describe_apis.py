"""DescribeTopicPartitions, ListConfigResources and DescribeQuorum through a real socket.

Each expectation is a fact of a single-node Apache Kafka 4.2 (KRaft, combined broker+controller), with
the Kafka source it was read from:

- DescribeTopicPartitions: core/.../handlers/DescribeTopicPartitionsRequestHandler.java and
  metadata/.../KRaftMetadataCache.java (describeTopicResponse), AuthHelper.authorizedOperations,
  DescribeTopicPartitionsRequest.getErrorResponse, ServerConfigs (max.request.partition.size.limit);
- ListConfigResources: KafkaApis.handleListConfigResources, ListConfigResourcesRequest.supportedResourceTypes;
- DescribeQuorum: KafkaRaftClient.handleDescribeQuorumRequest, RaftUtil.singletonDescribeQuorumResponse
  and toReplicaState, DescribeQuorumRequest.getPartitionLevelErrorResponse.
"""

import time

import pytest

from groupd.broker.app import Broker
from groupd.protocol import codec
from groupd.protocol.api_table import API_TABLE
from groupd.protocol.errors import ErrorCode
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.wire.test_groups import commit_body, wait_loaded

# AclOperation codes READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10,
# ALTER_CONFIGS 11: AclEntry.supportedOperations(TOPIC), every one allowed without an authorizer
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
NOT_SET = -2147483648  # the schema's default of topic_authorized_operations
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32  # ConfigResource.Type ids
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."
ZERO_UUID = None  # kio reads the all-zero uuid (Kafka's Uuid.ZERO_UUID) as None


def test_the_apis_are_in_the_table():
    got = {k: (API_TABLE[k].min_version, API_TABLE[k].max_version) for k in (55, 74, 75)}
    assert got == {55: (0, 2), 74: (0, 1), 75: (0, 0)}
    assert (API_TABLE[55].name, API_TABLE[74].name, API_TABLE[75].name) == (
        "DescribeQuorum", "ListConfigResources", "DescribeTopicPartitions",
    )


async def test_api_versions_advertises_them(wire):
    resp = await wire.call(18, 3, {"client_software_name": "test", "client_software_version": "1"})
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert got[55] == (0, 2) and got[74] == (0, 1) and got[75] == (0, 0)


# ---------------------------------------------------------------- DescribeTopicPartitions


def dtp_body(names, limit=2000, cursor=None):
    cls = codec.request_class(75, 0)
    topic = codec.nested(cls, "TopicRequest")
    cursor_entity = (
        None if cursor is None else codec.nested(cls, "Cursor")(topic_name=cursor[0], partition_index=cursor[1])
    )
    return codec.make(
        cls, topics=tuple(topic(name=n) for n in names), response_partition_limit=limit, cursor=cursor_entity
    )


def cursor_of(resp):
    c = resp.next_cursor
    return None if c is None else (c.topic_name, c.partition_index)


def listed(resp):
    return [(t.name, p.partition_index) for t in resp.topics for p in t.partitions]


async def test_named_topics_in_name_order_each_partition_as_kafka_fills_it(wire, broker):
    b_topic = broker.create_topic("b-topic", 2, {})
    a_topic = broker.create_topic("a-topic", 3, {})
    resp = await wire.call(75, 0, dtp_body(["b-topic", "a-topic", "a-topic"]))
    assert [t.name for t in resp.topics] == ["a-topic", "b-topic"]  # a set, sorted
    assert resp.next_cursor is None
    a, b = resp.topics
    assert (a.error_code, a.topic_id, a.is_internal) == (ErrorCode.none, a_topic.topic_id, False)
    assert b.topic_id == b_topic.topic_id
    assert a.topic_authorized_operations == b.topic_authorized_operations == TOPIC_OPERATIONS == 3576
    node = broker.node_id
    for t, count in ((a, 3), (b, 2)):
        assert [p.partition_index for p in t.partitions] == list(range(count))
        for p in t.partitions:
            assert p.error_code == ErrorCode.none
            assert (p.leader_id, p.leader_epoch) == (node, 0)
            assert p.replica_nodes == p.isr_nodes == (node,)
            # a healthy partition's ELR lists are empty, not null; no replica is offline
            assert p.eligible_leader_replicas == () and p.last_known_elr == ()
            assert p.offline_replicas == ()


async def test_an_empty_list_is_every_topic_metadata_lists(wire, broker):
    for name, count in (("zeta", 1), ("alpha", 2), ("mid", 1)):
        broker.create_topic(name, count, {})
    resp = await wire.call(75, 0, dtp_body([]))
    assert [t.name for t in resp.topics] == ["alpha", "mid", "zeta"]
    assert listed(resp) == [("alpha", 0), ("alpha", 1), ("mid", 0), ("zeta", 0)]
    md = await wire.call(
        3, 12, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    )
    assert sorted(t.name for t in md.topics) == [t.name for t in resp.topics]


async def test_unknown_and_invalid_topics(wire, broker):
    broker.create_topic("real", 1, {})
    resp = await wire.call(75, 0, dtp_body(["nope", "real", "bad name!"]))
    by_name = {t.name: t for t in resp.topics}
    assert [t.name for t in resp.topics] == ["bad name!", "nope", "real"]
    assert by_name["nope"].error_code == ErrorCode.unknown_topic_or_partition
    assert by_name["bad name!"].error_code == ErrorCode.invalid_topic_exception
    for name in ("nope", "bad name!"):
        t = by_name[name]
        assert (t.topic_id, t.is_internal, t.partitions) == (ZERO_UUID, False, ())
        # the handler sets the operations of every topic it answers, unknown ones too
        assert t.topic_authorized_operations == TOPIC_OPERATIONS
    assert by_name["real"].error_code == ErrorCode.none


async def test_unknown_internal_name_is_flagged_internal(wire):
    resp = await wire.call(75, 0, dtp_body(["__transaction_state"]))
    (t,) = resp.topics
    assert (t.error_code, t.is_internal) == (ErrorCode.unknown_topic_or_partition, True)


@pytest.mark.parametrize("limit", [0, -5])
async def test_a_limit_below_one_is_one(wire, broker, limit):
    broker.create_topic("t", 3, {})
    resp = await wire.call(75, 0, dtp_body(["t"], limit=limit))
    assert listed(resp) == [("t", 0)]
    assert cursor_of(resp) == ("t", 1)


async def test_the_limit_is_capped_by_max_request_partition_size_limit(tmp_path):
    b = Broker(broker_config(tmp_path, **{"max.request.partition.size.limit": "2"}))
    await b.start()
    try:
        b.create_topic("t", 5, {})
        c = await WireClient.connect(b.port)
        resp = await c.call(75, 0, dtp_body(["t"], limit=2000))
        assert listed(resp) == [("t", 0), ("t", 1)]
        assert cursor_of(resp) == ("t", 2)
        await c.close()
    finally:
        await b.stop()


async def test_the_default_cap_is_kafkas_2000(broker):
    assert broker.config["max.request.partition.size.limit"] == 2000


async def _page_through(wire, names, limit):
    pages, cursors, cursor = [], [], None
    for _ in range(100):
        resp = await wire.call(75, 0, dtp_body(names, limit=limit, cursor=cursor))
        assert all(t.error_code == ErrorCode.none for t in resp.topics)
        pages.append(listed(resp))
        cursor = cursor_of(resp)
        cursors.append(cursor)
        if cursor is None:
            return pages, cursors
    raise AssertionError("pagination never finished")


@pytest.mark.parametrize("names", [["c", "a", "b"], []], ids=["named", "all"])
async def test_limit_one_pages_cover_every_partition_exactly_once(wire, broker, names):
    for name, count in (("a", 3), ("b", 1), ("c", 2)):
        broker.create_topic(name, count, {})
    pages, cursors = await _page_through(wire, names, 1)
    assert all(len(page) == 1 for page in pages)
    assert [p for page in pages for p in page] == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("c", 0), ("c", 1)]
    # a topic's last partition filling the page leaves the cursor at the next topic's partition 0
    assert cursors == [("a", 1), ("a", 2), ("b", 0), ("c", 0), ("c", 1), None]


async def test_limit_two_pages_cross_topics(wire, broker):
    for name, count in (("a", 3), ("b", 1), ("c", 2)):
        broker.create_topic(name, count, {})
    pages, cursors = await _page_through(wire, ["a", "b", "c"], 2)
    assert pages == [[("a", 0), ("a", 1)], [("a", 2), ("b", 0)], [("c", 0), ("c", 1)]]
    assert cursors == [("a", 2), ("c", 0), None]


async def test_the_cursor_may_point_at_a_topic_that_does_not_exist(wire, broker):
    broker.create_topic("a", 1, {})
    resp = await wire.call(75, 0, dtp_body(["a", "m-missing"], limit=1))
    assert listed(resp) == [("a", 0)] and cursor_of(resp) == ("m-missing", 0)
    resp = await wire.call(75, 0, dtp_body(["a", "m-missing"], limit=1, cursor=("m-missing", 0)))
    assert [(t.name, t.error_code) for t in resp.topics] == [("m-missing", ErrorCode.unknown_topic_or_partition)]
    assert resp.next_cursor is None


async def test_the_cursor_skips_earlier_names_and_starts_its_own_topic_at_its_partition(wire, broker):
    for name, count in (("a", 2), ("b", 3), ("c", 2)):
        broker.create_topic(name, count, {})
    resp = await wire.call(75, 0, dtp_body(["a", "b", "c"], cursor=("b", 1)))
    assert listed(resp) == [("b", 1), ("b", 2), ("c", 0), ("c", 1)]
    every = await wire.call(75, 0, dtp_body([], cursor=("b", 2)))
    assert listed(every) == [("b", 2), ("c", 0), ("c", 1)]
    # listing every topic, the cursor's topic need not exist: names from it on are listed
    after = await wire.call(75, 0, dtp_body([], cursor=("bb", 5)))
    assert listed(after) == [("c", 0), ("c", 1)]


async def test_a_cursor_past_the_last_partition_answers_the_topic_without_partitions(wire, broker):
    broker.create_topic("a", 2, {})
    broker.create_topic("b", 1, {})
    resp = await wire.call(75, 0, dtp_body(["a", "b"], cursor=("a", 10)))
    assert [(t.name, t.error_code, len(t.partitions)) for t in resp.topics] == [
        ("a", ErrorCode.none, 0),
        ("b", ErrorCode.none, 1),
    ]
    assert resp.next_cursor is None


@pytest.mark.parametrize("cursor", [("x", 0), ("a", -1)], ids=["topic-not-requested", "negative-partition"])
async def test_a_bad_cursor_is_invalid_request_for_every_requested_topic(wire, broker, cursor):
    broker.create_topic("a", 2, {})
    resp = await wire.call(75, 0, dtp_body(["b-unknown", "a", "a"], cursor=cursor))
    # getErrorResponse: every requested topic, in request order, duplicates kept
    assert [t.name for t in resp.topics] == ["b-unknown", "a", "a"]
    for t in resp.topics:
        assert t.error_code == ErrorCode.invalid_request
        assert (t.topic_id, t.is_internal, t.partitions, t.topic_authorized_operations) == (
            ZERO_UUID,
            False,
            (),
            NOT_SET,
        )
    assert resp.next_cursor is None


# ---------------------------------------------------------------- ListConfigResources


def lcr_body(version, types=()):
    return {"resource_types": tuple(types)} if version >= 1 else {}


def resources(resp):
    return [(r.resource_type, r.resource_name) for r in resp.config_resources]


OFFSETS = "__consumer_offsets"


async def _with_a_group(broker, wire):
    """A group with committed offsets: a real group, but one without dynamic configs."""
    await wait_loaded(broker)
    resp = await wire.call(8, 8, commit_body("cg", "t", 0, 5, ""))
    assert resp.topics[0].partitions[0].error_code == ErrorCode.none
    listed_groups = await wire.call(16, 4, {"states_filter": ()})
    assert [g.group_id for g in listed_groups.groups] == ["cg"]


async def test_v0_lists_client_metrics_resources_only_and_groupd_has_none(wire, broker):
    broker.create_topic("t", 1, {})
    await _with_a_group(broker, wire)
    resp = await wire.call(74, 0, lcr_body(0))
    assert resp.error_code == ErrorCode.none
    assert resp.config_resources == ()


async def test_v1_empty_types_lists_every_supported_type_in_kafkas_order(wire, broker):
    for name in ("t", "b-topic"):
        broker.create_topic(name, 1, {})
    await _with_a_group(broker, wire)
    resp = await wire.call(74, 1, lcr_body(1))
    node = str(broker.node_id)
    # groups with dynamic configs, client-metrics subscriptions (none here), the broker as broker
    # logger, then as broker, then every topic: the group's commit made __consumer_offsets one
    assert resp.error_code == ErrorCode.none
    assert resources(resp) == [
        (BROKER_LOGGER, node),
        (BROKER, node),
        (TOPIC, OFFSETS),
        (TOPIC, "b-topic"),
        (TOPIC, "t"),
    ]


@pytest.mark.parametrize(
    "types, expected",
    [
        ((TOPIC,), [(TOPIC, "__consumer_offsets"), (TOPIC, "t")]),  # the group's commit made the offsets topic
        ((BROKER,), [(BROKER, "N")]),
        ((BROKER_LOGGER,), [(BROKER_LOGGER, "N")]),
        (
            (TOPIC, BROKER),
            [(BROKER, "N"), (TOPIC, "__consumer_offsets"), (TOPIC, "t")],
        ),  # Kafka's order, not the request's
        ((TOPIC, TOPIC), [(TOPIC, "__consumer_offsets"), (TOPIC, "t")]),
        ((CLIENT_METRICS,), []),
        ((GROUP,), []),  # Kafka lists groups that have configs (GroupConfigManager), not every group
    ],
)
async def test_v1_lists_the_types_asked_for(wire, broker, types, expected):
    broker.create_topic("t", 1, {})
    await _with_a_group(broker, wire)
    resp = await wire.call(74, 1, lcr_body(1, types))
    assert resp.error_code == ErrorCode.none
    assert resources(resp) == [(k, str(broker.node_id) if n == "N" else n) for k, n in expected]


@pytest.mark.parametrize("types", [(0,), (1,), (64,), (TOPIC, 3)])
async def test_v1_an_unsupported_type_is_unsupported_version(wire, broker, types):
    broker.create_topic("t", 1, {})
    resp = await wire.call(74, 1, lcr_body(1, types))
    assert resp.error_code == ErrorCode.unsupported_version
    assert resp.config_resources == ()


# ---------------------------------------------------------------- DescribeQuorum


def dq_body(version, topics):
    cls = codec.request_class(55, version)
    t_cls, p_cls = codec.nested(cls, "TopicData"), codec.nested(cls, "PartitionData")
    return codec.make(
        cls,
        topics=tuple(t_cls(topic_name=n, partitions=tuple(p_cls(partition_index=i) for i in ps)) for n, ps in topics),
    )


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_describe_quorum_every_version(wire, broker, version):
    before = int(time.time() * 1000)
    resp = await wire.call(55, version, dq_body(version, [("__cluster_metadata", [0])]))
    after = int(time.time() * 1000)
    assert resp.error_code == ErrorCode.none
    (topic,) = resp.topics
    assert topic.topic_name == "__cluster_metadata"
    (p,) = topic.partitions
    assert (p.partition_index, p.error_code) == (0, ErrorCode.none)
    # a fresh single node: voter 0 -> candidate in epoch 1 -> leader in epoch 1
    assert (p.leader_id, p.leader_epoch) == (broker.node_id, 1)
    assert p.high_watermark == 0  # groupd keeps no metadata log: it is empty
    (voter,) = p.current_voters
    assert (voter.replica_id, voter.log_end_offset) == (broker.node_id, p.high_watermark)
    assert p.observers == ()
    if version >= 1:
        # the leader reports the current time as both of its own timestamps
        assert before <= voter.last_fetch_timestamp <= after
        assert voter.last_caught_up_timestamp == voter.last_fetch_timestamp
    if version >= 2:
        assert resp.error_message is None and p.error_message is None
        assert voter.replica_directory_id == ZERO_UUID  # no metadata log directory
        host, port = broker.advertised
        assert [(n.node_id, [(lst.name, lst.host, lst.port) for lst in n.listeners]) for n in resp.nodes] == [
            (broker.node_id, [("PLAINTEXT", host, port)])
        ]


@pytest.mark.parametrize(
    "topics",
    [
        [("orders", [0])],
        [("__cluster_metadata", [1])],
        [("__cluster_metadata", [0, 0])],
        [("__cluster_metadata", [0]), ("__cluster_metadata", [0])],
        [("__cluster_metadata", [0]), ("other", [3, 4])],
        [],
    ],
    ids=["other-topic", "other-partition", "two-partitions", "two-topics", "mixed", "none"],
)
@pytest.mark.parametrize("version", [0, 2])
async def test_describe_quorum_anything_but_the_metadata_partition_alone(wire, version, topics):
    resp = await wire.call(55, version, dq_body(version, topics))
    assert resp.error_code == ErrorCode.none  # the errors are per partition, every one requested
    got = [(t.topic_name, [p.partition_index for p in t.partitions]) for t in resp.topics]
    assert got == [(n, list(ps)) for n, ps in topics]
    for t in resp.topics:
        for p in t.partitions:
            assert p.error_code == ErrorCode.unknown_topic_or_partition
            assert (p.leader_id, p.leader_epoch, p.high_watermark, p.current_voters, p.observers) == (0, 0, 0, (), ())
            if version >= 2:
                assert p.error_message == UNKNOWN_TOPIC_MESSAGE
    if version >= 2:
        assert resp.nodes == () and resp.error_message is None
