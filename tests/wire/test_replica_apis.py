"""ElectLeaders, AlterPartitionReassignments and AlterReplicaLogDirs through a real socket.

groupd answers them as a single-node Apache Kafka 4.2 (KRaft) answers them: every partition's only
replica is this node, its preferred leader and its leader, in the one log dir; nothing ever moves.
Each fact below names the Kafka 4.2 source it was read from.
"""

import os

import pytest

from groupd.protocol import codec
from groupd.protocol.api_table import API_TABLE
from groupd.protocol.errors import ErrorCode

PREFERRED, UNCLEAN = 0, 1
# Errors.ELECTION_NOT_NEEDED's default message: ReplicationControlManager.electLeader answers
# new ApiError(ELECTION_NOT_NEEDED), and ApiError(Errors) carries the error's own message
NOT_NEEDED = "Leader election not needed for topic partition."


def test_the_three_apis_are_in_the_table():
    got = {k: (API_TABLE[k].name, API_TABLE[k].min_version, API_TABLE[k].max_version) for k in (34, 43, 45)}
    # Kafka 4.2's message JSONs: AlterReplicaLogDirs 1-2 (v0 removed in 4.0; served as Kafka 3.9 did,
    # issue 32), ElectLeaders 0-2, AlterPartitionReassignments 0-1 (v1: KIP-860's AllowReplicationFactorChange)
    assert got == {
        34: ("AlterReplicaLogDirs", 0, 2),
        43: ("ElectLeaders", 0, 2),
        45: ("AlterPartitionReassignments", 0, 1),
    }


async def test_api_versions_advertises_them(wire):
    resp = await wire.call(18, 3, {"client_software_name": "test", "client_software_version": "1"})
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert got[34] == (0, 2) and got[43] == (0, 2) and got[45] == (0, 1)
    assert got[46] == (0, 0)


# ---------------------------------------------------------------- ElectLeaders (43)


def _elect(version, topic_partitions, election_type=PREFERRED):
    cls = codec.request_class(43, version)
    if topic_partitions is not None:
        tp_cls = codec.nested(cls, "TopicPartitions")
        topic_partitions = tuple(tp_cls(topic=t, partitions=tuple(ps)) for t, ps in topic_partitions)
    return codec.make(cls, election_type=election_type, topic_partitions=topic_partitions, timeout=5000)


def _elections(resp):
    return [
        (r.topic, [(p.partition_id, p.error_code, p.error_message) for p in r.partition_result])
        for r in resp.replica_election_results
    ]


@pytest.mark.parametrize(
    ("version", "election_type"), [(0, PREFERRED), (1, PREFERRED), (1, UNCLEAN), (2, PREFERRED), (2, UNCLEAN)]
)
async def test_elect_leaders_is_never_needed(broker, wire, version, election_type):
    broker.create_topic("el", 3, {})
    broker.create_topic("el2", 1, {})
    resp = await wire.call(43, version, _elect(version, [("el", [2, 0, 1]), ("el2", [0])], election_type))
    # ReplicationControlManager.electLeader: PREFERRED with the preferred replica leading, or UNCLEAN
    # with any leader, is ELECTION_NOT_NEEDED; each requested partition is answered, in request order
    assert _elections(resp) == [
        (
            "el",
            [
                (2, ErrorCode.election_not_needed, NOT_NEEDED),
                (0, ErrorCode.election_not_needed, NOT_NEEDED),
                (1, ErrorCode.election_not_needed, NOT_NEEDED),
            ],
        ),
        ("el2", [(0, ErrorCode.election_not_needed, NOT_NEEDED)]),
    ]
    if version >= 1:
        assert resp.error_code == ErrorCode.none
    else:
        # ElectLeadersResponse.json: ErrorCode is "versions": "1+"; v0 has no top-level error code
        assert not hasattr(resp, "error_code")
    assert codec.millis(resp.throttle_time) == 0


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_elect_leaders_unknown_topics_and_partitions(broker, wire, version):
    broker.create_topic("ek", 2, {})
    resp = await wire.call(43, version, _elect(version, [("ek", [1, 5]), ("nope", [0, 3])]))
    # ReplicationControlManager.electLeader's messages
    assert _elections(resp) == [
        (
            "ek",
            [
                (1, ErrorCode.election_not_needed, NOT_NEEDED),
                (5, ErrorCode.unknown_topic_or_partition, "No such partition as ek-5"),
            ],
        ),
        (
            "nope",
            [
                (0, ErrorCode.unknown_topic_or_partition, "No such topic as nope"),
                (3, ErrorCode.unknown_topic_or_partition, "No such topic as nope"),
            ],
        ),
    ]
    if version >= 1:
        assert resp.error_code == ErrorCode.none


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_elect_leaders_for_all_partitions_lists_topics_without_the_unneeded(broker, wire, version):
    broker.create_topic("ea", 3, {})
    broker.create_topic("eb", 1, {})
    for election_type in (PREFERRED, UNCLEAN) if version >= 1 else (PREFERRED,):
        resp = await wire.call(43, version, _elect(version, None, election_type))
        # ReplicationControlManager.electLeaders with null topicPartitions: every topic gets an entry,
        # but "we do not return partitions which already have the desired leader" (ELECTION_NOT_NEEDED
        # is left out), so on one node every entry is empty
        results = _elections(resp)
        assert {t for t, _ in results} == {"ea", "eb"}
        assert all(parts == [] for _, parts in results)
        if version >= 1:
            assert resp.error_code == ErrorCode.none


async def test_elect_leaders_for_no_partitions_gets_no_results(broker, wire):
    broker.create_topic("en", 1, {})
    resp = await wire.call(43, 2, _elect(2, []))
    # QuorumController.electLeaders: an empty (not null) list is answered at once, empty
    assert resp.error_code == ErrorCode.none and resp.replica_election_results == ()


@pytest.mark.parametrize("version", [1, 2])
async def test_elect_leaders_unknown_election_type_is_invalid_request(broker, wire, version):
    broker.create_topic("eu", 2, {})
    resp = await wire.call(43, version, _elect(version, [("eu", [0, 1]), ("nope", [4])], election_type=2))
    # ReplicationControlManager.electionType throws InvalidRequestException("Unknown election type 2");
    # ElectLeadersRequest.getErrorResponse puts it at the top and on every requested partition
    assert resp.error_code == ErrorCode.invalid_request
    msg = "Unknown election type 2"
    assert _elections(resp) == [
        ("eu", [(0, ErrorCode.invalid_request, msg), (1, ErrorCode.invalid_request, msg)]),
        ("nope", [(4, ErrorCode.invalid_request, msg)]),
    ]
    # with null topicPartitions getErrorResponse has no partitions to list
    resp = await wire.call(43, version, _elect(version, None, election_type=-1))
    assert resp.error_code == ErrorCode.invalid_request and resp.replica_election_results == ()
    # an empty list is answered before the election type is looked at (QuorumController.electLeaders)
    resp = await wire.call(43, version, _elect(version, [], election_type=7))
    assert resp.error_code == ErrorCode.none and resp.replica_election_results == ()


# ---------------------------------------------------------------- AlterPartitionReassignments (45)


def _reassign(version, topics, allow=True):
    cls = codec.request_class(45, version)
    t_cls = codec.nested(cls, "ReassignableTopic")
    p_cls = codec.nested(cls, "ReassignablePartition")
    entities = tuple(
        t_cls(
            name=name,
            partitions=tuple(p_cls(partition_index=p, replicas=None if r is None else tuple(r)) for p, r in parts),
        )
        for name, parts in topics
    )
    return codec.make(cls, timeout=5000, allow_replication_factor_change=allow, topics=entities)


def _reassigned(resp):
    return [
        (t.name, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions]) for t in resp.responses
    ]


def _not_registered(broker_id):
    # ReplicationControlManager.validateManualPartitionAssignment's messages
    return f"The manual partition assignment includes broker {broker_id}, but no such broker is registered."


EMPTY_LIST = "The manual partition assignment includes an empty replica list."


@pytest.mark.parametrize("version", [0, 1])
async def test_reassigning_to_this_node_is_a_no_op(broker, wire, version):
    node = broker.node_id
    broker.create_topic("ra", 2, {})
    resp = await wire.call(45, version, _reassign(version, [("ra", [(0, [node]), (1, [node])])]))
    assert resp.error_code == ErrorCode.none and resp.error_message is None
    assert _reassigned(resp) == [("ra", [(0, ErrorCode.none, None), (1, ErrorCode.none, None)])]
    if version >= 1:
        assert resp.allow_replication_factor_change is True
    # nothing is in progress afterwards, and the partitions still live here alone
    listed = await wire.call(46, 0, {"timeout": 1000, "topics": None})
    assert listed.topics == ()
    meta = await wire.call(
        3, 12, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    )
    (topic,) = [t for t in meta.topics if t.name == "ra"]
    assert {(p.partition_index, p.leader_id, p.replica_nodes) for p in topic.partitions} == {
        (0, node, (node,)),
        (1, node, (node,)),
    }


@pytest.mark.parametrize("version", [0, 1])
async def test_reassigning_to_other_brokers_is_an_invalid_assignment(broker, wire, version):
    node = broker.node_id
    broker.create_topic("rb", 1, {})
    resp = await wire.call(
        45,
        version,
        _reassign(
            version,
            [
                (
                    "rb",
                    [
                        (0, [node + 1]),
                        (0, [node, node + 5]),
                        (0, [node + 1, node - 1]),  # the ids are checked sorted: the lower unknown one is named
                        (0, [node, node]),
                        (0, []),
                    ],
                )
            ],
        ),
    )
    assert resp.error_code == ErrorCode.none and resp.error_message is None
    invalid = ErrorCode.invalid_replica_assignment
    assert _reassigned(resp) == [
        (
            "rb",
            [
                (0, invalid, _not_registered(node + 1)),
                (0, invalid, _not_registered(node + 5)),
                (0, invalid, _not_registered(node - 1)),
                (0, invalid, f"The manual partition assignment includes the broker {node} more than once."),
                (0, invalid, EMPTY_LIST),
            ],
        )
    ]


@pytest.mark.parametrize("version", [0, 1])
async def test_cancelling_when_nothing_is_in_progress(broker, wire, version):
    broker.create_topic("rc", 2, {})
    resp = await wire.call(45, version, _reassign(version, [("rc", [(1, None)])]))
    # ReplicationControlManager.cancelPartitionReassignment throws NoReassignmentInProgressException with
    # the error's own message, which ApiError.fromThrowable turns into a null message
    assert _reassigned(resp) == [("rc", [(1, ErrorCode.no_reassignment_in_progress, None)])]


@pytest.mark.parametrize("version", [0, 1])
async def test_reassigning_unknown_topics_and_partitions(broker, wire, version):
    node = broker.node_id
    broker.create_topic("rd", 2, {})
    resp = await wire.call(
        45,
        version,
        _reassign(
            version,
            [
                ("nope", [(0, [node]), (1, None)]),
                ("rd", [(2, [node]), (9, None), (0, [node])]),
            ],
        ),
    )
    # ReplicationControlManager.alterPartitionReassignment: the topic and partition are looked up
    # before anything else, null replicas included
    unknown = ErrorCode.unknown_topic_or_partition
    assert _reassigned(resp) == [
        (
            "nope",
            [(0, unknown, "Unable to find a topic named nope."), (1, unknown, "Unable to find a topic named nope.")],
        ),
        (
            "rd",
            [
                (2, unknown, "Unable to find partition rd:2."),
                (9, unknown, "Unable to find partition rd:9."),
                (0, ErrorCode.none, None),
            ],
        ),
    ]


async def test_disallowing_a_replication_factor_change(broker, wire):
    node = broker.node_id
    broker.create_topic("re", 1, {})
    resp = await wire.call(45, 1, _reassign(1, [("re", [(0, [node]), (0, [node, node + 1]), (0, [])])], allow=False))
    # ReplicationControlManager.changePartitionReassignment validates the assignment first, then (KIP-860)
    # the replication factor; with one registered broker every valid target is [node], so the
    # INVALID_REPLICATION_FACTOR check ("The replication factor is changed from 1 to 2") never fires
    assert _reassigned(resp) == [
        (
            "re",
            [
                (0, ErrorCode.none, None),
                (0, ErrorCode.invalid_replica_assignment, _not_registered(node + 1)),
                (0, ErrorCode.invalid_replica_assignment, EMPTY_LIST),
            ],
        )
    ]
    # the response echoes the request's option (ReplicationControlManager.alterPartitionReassignments)
    assert resp.allow_replication_factor_change is False


@pytest.mark.parametrize("version", [0, 1])
async def test_reassigning_no_topics(broker, wire, version):
    resp = await wire.call(45, version, _reassign(version, [], allow=False))
    # QuorumController.alterPartitionReassignments answers an empty request with a fresh
    # AlterPartitionReassignmentsResponseData: ErrorMessage keeps the generator's string default ""
    # (not null) and AllowReplicationFactorChange its schema default, true
    assert resp.error_code == ErrorCode.none and resp.error_message == "" and resp.responses == ()
    if version >= 1:
        assert resp.allow_replication_factor_change is True


async def test_reassignment_on_another_node_id(tmp_path):
    from groupd.broker.app import Broker
    from tests.conftest import broker_config
    from tests.harness import WireClient

    b = Broker(broker_config(tmp_path, **{"node.id": "0"}))
    await b.start()
    try:
        b.create_topic("rz", 1, {})
        c = await WireClient.connect(b.port)
        resp = await c.call(45, 1, _reassign(1, [("rz", [(0, [0]), (0, [1])])]))
        assert _reassigned(resp) == [
            ("rz", [(0, ErrorCode.none, None), (0, ErrorCode.invalid_replica_assignment, _not_registered(1))])
        ]
        await c.close()
    finally:
        await b.stop()


# ---------------------------------------------------------------- AlterReplicaLogDirs (34)


def _move(version, dirs):
    cls = codec.request_class(34, version)
    d_cls = codec.nested(cls, "AlterReplicaLogDir")
    t_cls = codec.nested(cls, "AlterReplicaLogDirTopic")
    entities = tuple(
        d_cls(path=path, topics=tuple(t_cls(name=name, partitions=tuple(parts)) for name, parts in topics))
        for path, topics in dirs
    )
    return codec.make(cls, dirs=entities)


def _moved(resp):
    """{(topic, partition): error}, and each topic's entry appears once (Kafka groups the answers by topic)."""
    names = [t.topic_name for t in resp.results]
    assert len(names) == len(set(names)), names
    return {(t.topic_name, p.partition_index): p.error_code for t in resp.results for p in t.partitions}


def _log_dir(broker):
    return os.path.abspath(broker.config["log.dirs"])


@pytest.mark.parametrize("version", [1, 2])
async def test_moving_a_replica_to_its_own_dir_is_a_no_op(broker, wire, version):
    broker.create_topic("ma", 3, {})
    log_dir = _log_dir(broker)
    resp = await wire.call(34, version, _move(version, [(log_dir, [("ma", [0, 2]), ("__consumer_offsets", [0])])]))
    assert codec.millis(resp.throttle_time) == 0
    # the offsets partitions are hosted here too (DescribeLogDirs lists them)
    assert _moved(resp) == {
        ("ma", 0): ErrorCode.none,
        ("ma", 2): ErrorCode.none,
        ("__consumer_offsets", 0): ErrorCode.none,
    }
    # DescribeLogDirs still shows the same single dir with the topic in it
    described = await wire.call(35, 4, {"topics": None})
    (result,) = described.results
    assert result.log_dir == log_dir
    assert {p.partition_index for t in result.topics if t.name == "ma" for p in t.partitions} == {0, 1, 2}


@pytest.mark.parametrize("version", [1, 2])
async def test_a_dir_that_is_not_a_log_dir_is_not_found(broker, wire, version, tmp_path):
    broker.create_topic("mb", 2, {})
    log_dir = _log_dir(broker)
    # LogManager.isLogDirOnline compares the request's string with each log dir's absolute path:
    # no normalising, so a trailing slash or a relative spelling of the same dir is not found
    relative = os.path.relpath(log_dir)
    for path in (str(tmp_path / "elsewhere"), log_dir + "/", relative, ""):
        resp = await wire.call(34, version, _move(version, [(path, [("mb", [0, 1])])]))
        assert _moved(resp) == {("mb", 0): ErrorCode.log_dir_not_found, ("mb", 1): ErrorCode.log_dir_not_found}, path


@pytest.mark.parametrize("version", [1, 2])
async def test_moving_partitions_this_broker_does_not_host(broker, wire, version, tmp_path):
    broker.create_topic("mc", 2, {})
    log_dir = _log_dir(broker)
    resp = await wire.call(
        34,
        version,
        _move(
            version,
            [
                (log_dir, [("mc", [1, 7]), ("nope", [0])]),
                (str(tmp_path / "elsewhere"), [("nope", [1]), ("mc", [8])]),
            ],
        ),
    )
    # ReplicaManager.alterReplicaLogDirs: the dir is checked first (LOG_DIR_NOT_FOUND); then
    # getPartitionOrException answers UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata does not
    # know (NOT_LEADER_OR_FOLLOWER, sent as REPLICA_NOT_AVAILABLE, only for a known partition hosted
    # elsewhere, which one node never has)
    assert _moved(resp) == {
        ("mc", 1): ErrorCode.none,
        ("mc", 7): ErrorCode.unknown_topic_or_partition,
        ("nope", 0): ErrorCode.unknown_topic_or_partition,
        ("nope", 1): ErrorCode.log_dir_not_found,
        ("mc", 8): ErrorCode.log_dir_not_found,
    }


async def test_a_topic_name_too_long_for_a_future_dir(broker, wire):
    # ReplicaManager.alterReplicaLogDirs refuses first, with INVALID_TOPIC_EXCEPTION, when the future
    # log's directory name "<topic>-<partition>.<32 hex>-future" (LocalLog.logFutureDirName) would be
    # longer than 255 characters: len(topic) + len(str(partition)) + 41 > 255
    name = "l" * 213
    broker.create_topic(name, 11, {})
    log_dir = _log_dir(broker)
    resp = await wire.call(34, 2, _move(2, [(log_dir, [(name, [0, 9, 10])]), ("/not/a/log/dir", [("m" * 215, [0])])]))
    assert _moved(resp) == {
        (name, 0): ErrorCode.none,  # 213 + 1 + 41 = 255
        (name, 9): ErrorCode.none,
        (name, 10): ErrorCode.invalid_topic_exception,  # 256
        ("m" * 215, 0): ErrorCode.invalid_topic_exception,  # before the dir and the topic are looked at
    }


async def test_a_partition_named_twice_is_answered_once_for_its_last_dir(broker, wire, tmp_path):
    broker.create_topic("md", 2, {})
    log_dir, elsewhere = _log_dir(broker), str(tmp_path / "elsewhere")
    # AlterReplicaLogDirsRequest.partitionDirs is a map: a later dir replaces an earlier one
    resp = await wire.call(34, 2, _move(2, [(elsewhere, [("md", [0, 1])]), (log_dir, [("md", [0])])]))
    assert _moved(resp) == {("md", 0): ErrorCode.none, ("md", 1): ErrorCode.log_dir_not_found}
    assert sum(len(t.partitions) for t in resp.results) == 2
    resp = await wire.call(34, 2, _move(2, [(log_dir, [("md", [0])]), (elsewhere, [("md", [0])])]))
    assert _moved(resp) == {("md", 0): ErrorCode.log_dir_not_found}


async def test_moving_nothing(broker, wire):
    resp = await wire.call(34, 2, _move(2, []))
    assert resp.results == ()
    resp = await wire.call(34, 1, _move(1, [(_log_dir(broker), [])]))
    assert resp.results == ()
