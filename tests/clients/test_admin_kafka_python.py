"""kafka-python's admin client against groupd: partitions, records, configs, groups and offsets."""

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import InvalidConfigurationError, InvalidPartitionsError, NonEmptyGroupError
from kafka.structs import OffsetAndMetadata

from tests.clients.kp import ChildConsumer, wait_until

pytestmark = pytest.mark.client


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
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "adm")], config_filter=config_filter)
        return described["topic"]["adm"]

    modified = topic_configs()
    assert set(modified) == {"retention.ms"} and "3600000" in str(modified["retention.ms"])
    assert "cleanup.policy" in topic_configs("all")
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "adm", configs={"retention.ms": "1000"})], incremental=True)
    assert "'1000'" in str(topic_configs()["retention.ms"])
    refused = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "adm", configs={"no.such.key": "1"})], incremental=True, raise_on_unknown=False)
    assert InvalidConfigurationError.errno == 40 and ("40" in str(refused) or "InvalidConfiguration" in str(refused)), refused
    producer.close()
    consumer.close()
    admin.close()


@pytest.mark.scenario('kafka-python', 9)
def test_group_admin(broker_process):
    bs = broker_process.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bs)
    admin.create_topics([NewTopic("ga", 3, 1)])
    member = ChildConsumer(bs, "ga", group_id="admin-g", enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=300)
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
