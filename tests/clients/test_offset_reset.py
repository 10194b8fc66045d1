"""librdkafka resets an out-of-range position (issue 26, item 9).

A consumer positioned past the log end gets OFFSET_OUT_OF_RANGE and applies ``auto.offset.reset``. When
groupd answered that partition with null records, librdkafka could not parse the answer ("invalid
MessageSetSize -1"), never saw the error and refetched at once, forever: nothing was ever consumed."""

import time

import pytest

from tests.clients.test_other_clients import create_topic

pytestmark = pytest.mark.client


def _consume(consumer, want, seconds):
    got = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and len(got) < want:
        m = consumer.poll(0.1)
        if m is not None and m.error() is None:
            got.append(m.value())
    return got


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_confluent_consumer_past_the_end_resets(broker_process, reset):
    from confluent_kafka import Consumer, Producer, TopicPartition

    bs = broker_process.bootstrap
    create_topic(bs, "past", 1)
    producer = Producer({"bootstrap.servers": bs})
    for i in range(5):
        producer.produce("past", value=f"old{i}")
    assert producer.flush(15) == 0
    consumer = Consumer(
        {"bootstrap.servers": bs, "group.id": "pastg", "auto.offset.reset": reset, "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("past", 0, 1000)])  # far past the end: out of range
    if reset == "earliest":
        assert _consume(consumer, 5, 20) == [f"old{i}".encode() for i in range(5)]
    else:  # reset to the log end: only what is produced after the reset comes (new ones, until one does)
        got = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not got:
            producer.produce("past", value="new")
            assert producer.flush(15) == 0
            got = _consume(consumer, 1, 0.5)
        assert got == [b"new"]
    consumer.close()
