"""Real consumers and leader epochs (KIP-320): they read epoch 0 from fetched batches, commit it,
validate positions with OffsetForLeaderEpoch, and detect truncation as they do against Kafka.

When each client validates (read from their code and seen here): librdkafka validates a position
that carries an epoch whenever it is assigned or seeked to one (and on a leader epoch change);
kafka-python 3.0.12 only when the metadata's leader epoch passes its position's, or when the broker
reports a diverging epoch or an epoch error in a Fetch. With one epoch for a partition's life,
kafka-python therefore validates only on the truncation path (a Fetch past the end of its epoch).

The broker's per-API request counter (groupd_requests{api="OffsetForLeaderEpoch"}) proves the calls.
"""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from tests.harness import BrokerProcess, free_port

pytestmark = pytest.mark.client


@pytest.fixture
def epoch_broker(tmp_path):
    """A broker with /metrics on, and no topic auto-creation (a consumer's Metadata must not bring a
    deleted topic back before the test recreates it)."""
    port = free_port()
    proc = BrokerProcess(
        tmp_path / "data", {"metrics.listener": f"127.0.0.1:{port}", "auto.create.topics.enable": "false"}
    )
    proc.metrics_port = port
    proc.start()
    yield proc
    proc.kill()


def ofle_requests(proc: BrokerProcess) -> int:
    text = urllib.request.urlopen(f"http://127.0.0.1:{proc.metrics_port}/metrics", timeout=5).read().decode()
    found = re.search(r'^groupd_requests_total\{api="OffsetForLeaderEpoch"\} ([0-9.e+]+)$', text, re.M)
    return int(float(found.group(1))) if found else 0


# ------------------------------------------------------------------ confluent-kafka (librdkafka)


def _ck_topic(bs: str, name: str, records: int) -> object:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(name, 1, 1)]).values():
        f.result(15)
    producer = Producer({"bootstrap.servers": bs, "acks": "all"})
    for i in range(records):
        producer.produce(name, value=b"v%d" % i)
    assert producer.flush(15) == 0
    return producer


def _ck_poll(consumer, want: int, seconds: float) -> list:
    """(offset, leader epoch) of records, or ("error", text) of error events, until ``want`` records."""
    got: list = []
    deadline = time.monotonic() + seconds
    while sum(1 for g in got if g[0] != "error") < want and time.monotonic() < deadline:
        m = consumer.poll(0.1)
        if m is None:
            continue
        got.append(("error", str(m.error())) if m.error() else (m.offset(), m.leader_epoch()))
        if m.error():
            break
    return got


def _ck_consumer(bs: str, reset: str = "earliest"):
    from confluent_kafka import Consumer

    return Consumer(
        {"bootstrap.servers": bs, "group.id": "epochs", "auto.offset.reset": reset, "enable.auto.commit": False}
    )


@pytest.mark.scenario("confluent-kafka", 15)
def test_confluent_validates_positions_and_resumes_without_reset(epoch_broker):
    """librdkafka assigned a position with epoch 0 validates it (OffsetForLeaderEpoch says epoch 0 ends
    at the log end), then fetches on from it; the committed offsets carry epoch 0, and a consumer
    assigned them validates and resumes there: no truncation error, no reset."""
    from confluent_kafka import TopicPartition

    bs = epoch_broker.bootstrap
    producer = _ck_topic(bs, "ck-epochs", 10)
    before = ofle_requests(epoch_broker)
    c = _ck_consumer(bs)
    c.assign([TopicPartition("ck-epochs", 0, 5, leader_epoch=0)])
    assert _ck_poll(c, 5, 20) == [(i, 0) for i in range(5, 10)], "each batch carries the leader's epoch 0"
    assert ofle_requests(epoch_broker) > before, "the assigned position was validated"
    c.commit(asynchronous=False)
    (committed,) = c.committed([TopicPartition("ck-epochs", 0)], timeout=10)
    assert (committed.offset, committed.leader_epoch) == (10, 0)
    c.close()
    for i in range(10, 15):
        producer.produce("ck-epochs", value=b"v%d" % i)
    assert producer.flush(15) == 0
    before = ofle_requests(epoch_broker)
    resumed = _ck_consumer(bs, reset="error")  # any reset would surface as an error event
    resumed.assign([committed])
    assert _ck_poll(resumed, 5, 20) == [(i, 0) for i in range(10, 15)]
    assert ofle_requests(epoch_broker) > before
    resumed.close()


@pytest.mark.scenario("confluent-kafka", 15)
def test_confluent_detects_truncation_past_the_log_end(epoch_broker):
    """A position with epoch 0 past the log end (10): epoch 0 ends at 10, so librdkafka reports log
    truncation when no reset is allowed, and otherwise moves to the end offset 10 (not to the beginning)."""
    from confluent_kafka import TopicPartition

    bs = epoch_broker.bootstrap
    producer = _ck_topic(bs, "ck-trunc", 10)
    strict = _ck_consumer(bs, reset="error")
    strict.assign([TopicPartition("ck-trunc", 0, 100, leader_epoch=0)])
    got = _ck_poll(strict, 1, 20)
    assert len(got) == 1 and got[0][0] == "error", got
    assert "truncation detected at offset 100" in got[0][1] and "end offset is 10" in got[0][1]
    strict.close()
    lenient = _ck_consumer(bs)
    lenient.assign([TopicPartition("ck-trunc", 0, 100, leader_epoch=0)])
    assert _ck_poll(lenient, 1, 3) == []  # moved to 10: nothing there yet
    producer.produce("ck-trunc", value=b"new0")
    producer.produce("ck-trunc", value=b"new1")
    assert producer.flush(15) == 0
    assert _ck_poll(lenient, 2, 20) == [(10, 0), (11, 0)]
    lenient.close()


def test_confluent_position_with_an_unknown_epoch_resets_by_policy(epoch_broker):
    """Epoch 5 was never this partition's: OffsetForLeaderEpoch answers no epoch and no offset, which a
    client takes as truncation with nothing known: it resets by auto.offset.reset (earliest here)."""
    from confluent_kafka import TopicPartition

    bs = epoch_broker.bootstrap
    _ck_topic(bs, "ck-unknown", 4)
    before = ofle_requests(epoch_broker)
    c = _ck_consumer(bs)
    c.assign([TopicPartition("ck-unknown", 0, 2, leader_epoch=5)])
    assert _ck_poll(c, 4, 20) == [(i, 0) for i in range(4)]
    assert ofle_requests(epoch_broker) > before
    c.close()


# ------------------------------------------------------------------ kafka-python 3


def _kp_poll(consumer, want: int, seconds: float) -> list:
    got: list = []
    deadline = time.monotonic() + seconds
    while len(got) < want and time.monotonic() < deadline:
        for records in consumer.poll(100).values():
            got += [(r.offset, r.leader_epoch, r.value) for r in records]
    return got


def _kp_setup(bs: str, topic: str, records: int):
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bs)
    admin.create_topics([NewTopic(topic, 1, 1)])
    producer = KafkaProducer(bootstrap_servers=bs)
    for i in range(records):
        producer.send(topic, b"v%d" % i)
    producer.flush()
    return admin, producer


def test_kafka_python_reads_epoch_zero_commits_it_and_resumes(epoch_broker):
    """Records carry epoch 0, commits store it, and a consumer resumes at the committed offset with no
    reset. kafka-python drops a committed offset's epoch when it resumes and validates only when the
    leader epoch advances, so against one epoch it sends no OffsetForLeaderEpoch here (and is not left
    waiting on a validation either)."""
    from kafka import KafkaConsumer, TopicPartition

    bs = epoch_broker.bootstrap
    admin, producer = _kp_setup(bs, "kp-epochs", 6)
    tp = TopicPartition("kp-epochs", 0)
    c = KafkaConsumer(
        "kp-epochs", bootstrap_servers=bs, group_id="kpe", auto_offset_reset="earliest", enable_auto_commit=False
    )
    assert [(o, e) for o, e, _ in _kp_poll(c, 6, 30)] == [(i, 0) for i in range(6)]
    c.commit()
    committed = c.committed(tp, metadata=True)
    assert (committed.offset, committed.leader_epoch) == (6, 0)
    c.close()
    for i in range(6, 9):
        producer.send("kp-epochs", b"v%d" % i)
    producer.flush()
    resumed = KafkaConsumer(
        "kp-epochs", bootstrap_servers=bs, group_id="kpe", auto_offset_reset="none", enable_auto_commit=False
    )
    assert [(o, e) for o, e, _ in _kp_poll(resumed, 3, 30)] == [(6, 0), (7, 0), (8, 0)]
    assert ofle_requests(epoch_broker) == 0
    resumed.close()
    producer.close()
    admin.close()


def _kp_past_the_end(proc: BrokerProcess, topic: str, reset: str):
    """A consumer at offset 10 of epoch 0 (it read 10 records), then the topic deleted and recreated
    with 3: its next Fetch names epoch 0 at offset 10, past that epoch's end (3)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import NewTopic

    bs = proc.bootstrap
    admin, producer = _kp_setup(bs, topic, 10)
    tp = TopicPartition(topic, 0)
    c = KafkaConsumer(bootstrap_servers=bs, auto_offset_reset=reset, enable_auto_commit=False, metadata_max_age_ms=500)
    c.assign([tp])
    c.seek(tp, 0)
    assert [(o, e) for o, e, _ in _kp_poll(c, 10, 30)] == [(i, 0) for i in range(10)]
    admin.delete_topics([topic])
    admin.create_topics([NewTopic(topic, 1, 1)])
    for i in range(3):
        producer.send(topic, b"w%d" % i)
    producer.flush()
    return c, tp, admin, producer


@pytest.mark.scenario("kafka-python", 15)
def test_kafka_python_detects_truncation_and_seeks_to_the_diverging_offset(epoch_broker):
    """The Fetch answers the diverging epoch (0, end 3); kafka-python validates with OffsetForLeaderEpoch
    and, having a reset policy, seeks to the first diverging offset 3 instead of resetting to the
    beginning: what it reads next is what comes after."""
    c, tp, admin, producer = _kp_past_the_end(epoch_broker, "kp-trunc", "earliest")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and c.position(tp) != 3:
        assert _kp_poll(c, 1, 0.2) == [], "nothing is read until the position is settled"
    assert c.position(tp) == 3
    assert ofle_requests(epoch_broker) >= 1
    producer.send("kp-trunc", b"x0")
    producer.flush()
    assert [(o, v) for o, _, v in _kp_poll(c, 1, 20)] == [(3, b"x0")]
    c.close()
    producer.close()
    admin.close()


@pytest.mark.scenario("kafka-python", 15)
def test_kafka_python_without_a_reset_policy_raises_log_truncation(epoch_broker):
    from kafka.errors import LogTruncationError

    c, tp, admin, producer = _kp_past_the_end(epoch_broker, "kp-strict", "none")
    with pytest.raises(LogTruncationError) as raised:
        _kp_poll(c, 1, 30)
    divergent = raised.value.divergent_offsets[tp]
    assert (divergent.offset, divergent.leader_epoch) == (3, 0)
    assert ofle_requests(epoch_broker) >= 1
    c.close()
    producer.close()
    admin.close()
