"""A real client meets a group record larger than ``message.max.bytes`` (issue 26 item 7): kafka-python
raises Kafka 4.x's UNKNOWN_SERVER_ERROR from poll() and commit() at once. With the NOT_COORDINATOR
groupd used to answer, it looked the coordinator up again, found this broker, and looped for ever."""

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import UnknownError
from kafka.structs import OffsetAndMetadata

from tests.harness import BrokerProcess

pytestmark = pytest.mark.client

# small enough that one consumer's group record (member and client ids, host, subscription and
# assignment) does not fit, large enough for a commit of short metadata
LIMIT = 150


@pytest.mark.timeout(90)
def test_kafka_python_raises_instead_of_looping(tmp_path):
    broker = BrokerProcess(tmp_path / "data", overrides={"message.max.bytes": str(LIMIT)}).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic("big", 1, 1)])
        admin.close()

        consumer = KafkaConsumer("big", group_id="g", bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        started = time.monotonic()
        with pytest.raises(UnknownError):
            for _ in range(40):
                consumer.poll(timeout_ms=250)
        assert time.monotonic() - started < 15
        consumer.close(autocommit=False)

        committer = KafkaConsumer(group_id="g2", bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        tp = TopicPartition("big", 0)
        committer.assign([tp])
        committer.commit({tp: OffsetAndMetadata(5, "", -1)})  # a record that fits
        with pytest.raises(UnknownError):
            committer.commit({tp: OffsetAndMetadata(6, "x" * 2 * LIMIT, -1)})
        assert committer.committed(tp) == 5
        committer.close(autocommit=False)
    finally:
        broker.stop()
