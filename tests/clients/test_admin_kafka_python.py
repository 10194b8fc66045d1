"""kafka-python's admin client against groupd: partitions, records, configs, groups, offsets and replicas."""

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    NewTopic,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import (
    ElectionNotNeededError,
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicationAssignmentError,
    LogDirNotFoundError,
    NoError,
    NonEmptyGroupError,
    NoReassignmentInProgressError,
    SecurityDisabledError,
    UnknownTopicOrPartitionError,
)
from kafka.structs import OffsetAndMetadata, TopicPartitionReplica

from tests.clients.kp import ChildConsumer, wait_until

pytestmark = pytest.mark.client


@pytest.mark.engines  # storage: on both engines (tests/conftest.py)
def test_partitions_records_and_configs(broker_process):
    admin = KafkaAdminClient(bootstrap_servers=broker_process.bootstrap)
    admin.create_topics([NewTopic("adm", 2, 1, topic_configs={"retention.ms": "3600000"})])
    admin.create_partitions({"adm": NewPartitions(4)})
    consumer = KafkaConsumer(bootstrap_servers=broker_process.bootstrap)
    wait_until(lambda: consumer.partitions_for_topic("adm") == {0, 1, 2, 3}, 10, "4 partitions in Metadata")
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"adm": NewPartitions(3)})

    producer = KafkaProducer(bootstrap_servers=broker_process.bootstrap)
    for i in range(10):
        producer.send("adm", value=str(i).encode(), partition=0)
    producer.flush()
    admin.delete_records({TopicPartition("adm", 0): 4})
    tp = TopicPartition("adm", 0)
    assert consumer.beginning_offsets([tp])[tp] == 4
    assert consumer.end_offsets([tp])[tp] == 10

    def topic_configs(config_filter="modified"):
        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "adm")], config_filter=config_filter
        )
        return described["topic"]["adm"]

    modified = topic_configs()
    assert set(modified) == {"retention.ms"} and "3600000" in str(modified["retention.ms"])
    assert "cleanup.policy" in topic_configs("all")
    admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "adm", configs={"retention.ms": "1000"})], incremental=True
    )
    assert "'1000'" in str(topic_configs()["retention.ms"])
    refused = admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "adm", configs={"no.such.key": "1"})],
        incremental=True,
        raise_on_unknown=False,
    )
    assert InvalidConfigurationError.errno == 40 and ("40" in str(refused) or "InvalidConfiguration" in str(refused)), (
        refused
    )
    producer.close()
    consumer.close()
    admin.close()


@pytest.mark.scenario("kafka-python", 9)
def test_group_admin(broker_process):
    bs = broker_process.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bs)
    admin.create_topics([NewTopic("ga", 3, 1)])
    member = ChildConsumer(
        bs, "ga", group_id="admin-g", enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=300
    )
    wait_until(lambda: len(member.assignment) == 3, 20, "the member to own all partitions")
    listed = admin.list_groups()
    assert "admin-g" in str(listed)
    described = admin.describe_groups(["admin-g"])
    assert "Stable" in str(described)
    refused = admin.delete_groups(["admin-g"])
    assert "NonEmptyGroup" in str(refused) or str(NonEmptyGroupError.errno) in str(refused), refused
    member.stop()
    admin.alter_group_offsets("admin-g", {TopicPartition("ga", 1): OffsetAndMetadata(7, "", -1)})
    offsets = admin.list_group_offsets({"admin-g": None})
    assert "7" in str(offsets)
    deleted = admin.delete_groups(["admin-g"])
    assert "NonEmptyGroup" not in str(deleted), deleted
    assert "admin-g" not in str(admin.list_groups())
    admin.close()


def test_acls_log_dirs_reassignments_and_legacy_alter_configs(broker_process):
    admin = KafkaAdminClient(bootstrap_servers=broker_process.bootstrap)
    any_topic = ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY)
    acl_filter = ACLFilter(
        principal=None,
        host=None,
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=any_topic,
    )
    # no authorizer: kafka-python raises the SECURITY_DISABLED error with Kafka's message
    with pytest.raises(SecurityDisabledError, match="No Authorizer is configured on the broker"):
        admin.describe_acls(acl_filter)
    acl = ACL(
        "User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW, ResourcePattern(ResourceType.TOPIC, "adm-acl")
    )
    assert admin.create_acls([acl]) == {"succeeded": [], "failed": [SecurityDisabledError]}
    assert admin.delete_acls([acl_filter]) == [(acl_filter, [], SecurityDisabledError)]

    admin.create_topics(
        [NewTopic("logs", 2, 1, topic_configs={"retention.ms": "3600000", "cleanup.policy": "compact,delete"})]
    )
    producer = KafkaProducer(bootstrap_servers=broker_process.bootstrap)
    for i in range(20):
        producer.send("logs", key=b"k", value=str(i).encode() * 50, partition=1)
    producer.flush()
    producer.close()
    (answer,) = admin.describe_log_dirs({"logs": [0, 1]})
    assert answer["broker"] == 1
    (log_dir,) = answer["log_dirs"]
    assert log_dir["error_code"] == 0 and log_dir["log_dir"] == str(broker_process.log_dir.absolute())
    (topic,) = log_dir["topics"]
    assert topic["name"] == "logs"
    sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
    on_disk = sum(f.stat().st_size for f in (broker_process.log_dir / "logs-1").glob("*.log"))
    assert sizes == {0: 0, 1: on_disk} and on_disk > 1000
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]

    assert admin.list_partition_reassignments() == {}
    assert admin.list_partition_reassignments({"logs": [0, 1]}) == {}

    def topic_configs():
        return admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "logs")])["topic"]["logs"]

    assert set(topic_configs()) == {"retention.ms", "cleanup.policy"}
    # legacy AlterConfigs (api 33); kafka-python sends the other modified keys along, as the API replaces the set
    result = admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "logs", configs={"retention.ms": "7200000"})], incremental=False
    )
    assert result == {"topic": {"logs": "OK"}}
    modified = topic_configs()
    assert set(modified) == {"retention.ms", "cleanup.policy"}
    assert "'7200000'" in str(modified["retention.ms"]) and "'compact,delete'" in str(modified["cleanup.policy"])
    dry = admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "logs", configs={"retention.ms": "60000"})],
        incremental=False,
        validate_only=True,
    )
    assert dry == {"topic": {"logs": "OK"}}
    assert "'7200000'" in str(topic_configs()["retention.ms"])
    refused = admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "logs", configs={"segment.bytes": "1"})], incremental=False
    )
    assert "InvalidConfigurationError" in refused["topic"]["logs"] and "segment.bytes" in refused["topic"]["logs"], (
        refused
    )
    assert "'7200000'" in str(topic_configs()["retention.ms"])
    admin.close()


def test_elections_reassignments_and_log_dir_moves(broker_process):
    """One node: no election is needed, the only reassignment is to this node, the only move is to log.dirs."""
    admin = KafkaAdminClient(bootstrap_servers=broker_process.bootstrap)
    admin.create_topics([NewTopic("reps", 3, 1)])
    node = 1  # BrokerProcess's node.id
    for election_type in (0, 1):  # preferred, unclean
        response = admin.elect_leaders(election_type, {"reps": [0, 1, 2]})
        (result,) = response.replica_election_results
        assert result.topic == "reps"
        assert sorted((p.partition_id, p.error_code) for p in result.partition_result) == [
            (p, ElectionNotNeededError.errno) for p in range(3)
        ]
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.elect_leaders(0, {"reps": [7]})

    tp0, tp1, tp2 = (TopicPartition("reps", p) for p in range(3))
    assert admin.alter_partition_reassignments({tp0: [node], tp1: [node]}) == {tp0: None, tp1: None}
    assert admin.alter_partition_reassignments({tp0: [node, 2], tp1: None, tp2: [node]}) == {
        tp0: InvalidReplicationAssignmentError,
        tp1: NoReassignmentInProgressError,
        tp2: None,
    }
    assert admin.list_partition_reassignments() == {}

    (answer,) = admin.describe_log_dirs()
    log_dir = answer["log_dirs"][0]["log_dir"]
    here, there = TopicPartitionReplica("reps", 0, node), TopicPartitionReplica("reps", 1, node)
    missing = TopicPartitionReplica("reps", 9, node)
    assert admin.alter_replica_log_dirs({here: log_dir, missing: log_dir}) == {
        here: NoError,
        missing: UnknownTopicOrPartitionError,
    }
    assert admin.alter_replica_log_dirs({there: log_dir + "-elsewhere"}) == {there: LogDirNotFoundError}
    admin.close()
