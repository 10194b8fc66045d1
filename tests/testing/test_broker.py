"""groupd.testing.Broker as another project's test meets it: real clients against it in this process's
thread and as a child process, its options reaching the broker's settings, SASL users, restart, and
nothing left behind once it stops."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from groupd.broker.config import ConfigError
from groupd.storage import memory
from groupd.testing import Broker


def produce(bootstrap: str, topic: str, values: list[bytes], **config: object) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, **config)
    try:
        for value in values:
            producer.send(topic, value).get(10)
    finally:
        producer.close()


def consume(bootstrap: str, topic: str, group: str, count: int) -> list[bytes]:
    consumer = KafkaConsumer(
        topic, group_id=group, bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10_000
    )
    got: list[bytes] = []
    try:
        for message in consumer:
            got.append(message.value)
            if len(got) == count:
                consumer.commit()
                break
    finally:
        consumer.close()
    return got


def test_a_memory_broker_in_a_thread_serves_kafka_python_and_leaves_nothing():
    with Broker() as broker:
        assert broker.bootstrap_servers == f"127.0.0.1:{broker.port}" and broker.running
        produce(broker.bootstrap_servers, "t", [b"a", b"b"])
        assert consume(broker.bootstrap_servers, "t", "g", 2) == [b"a", b"b"]
        name = str(broker.data_dir)
        assert name in memory.stored_names()
    assert not broker.running
    assert name not in memory.stored_names() and not broker.data_dir.exists()


async def test_async_with_serves_aiokafka_from_the_callers_loop():
    async with Broker() as broker:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
        await producer.start()
        try:
            await producer.send_and_wait("a", b"x")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("a", bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest")
        await consumer.start()
        try:
            message = await asyncio.wait_for(consumer.getone(), 10)
        finally:
            await consumer.stop()
        assert message.value == b"x"


def test_a_local_engine_keeps_files_in_a_temporary_directory_removed_at_the_stop(tmp_path):
    with Broker(engine="local") as broker:
        produce(broker.bootstrap_servers, "t", [b"a"])
        assert (broker.data_dir / "t-0").is_dir()
    assert not broker.data_dir.exists()
    with Broker(engine="local", data_dir=tmp_path / "kept") as broker:
        produce(broker.bootstrap_servers, "t", [b"a"])
    assert (tmp_path / "kept" / "t-0").is_dir()  # a directory the caller gave is the caller's


def test_a_restart_keeps_topics_and_committed_offsets_on_the_same_port():
    with Broker(num_partitions=2) as broker:
        port = broker.port
        produce(broker.bootstrap_servers, "r", [b"a"])
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="kept")
        consumer.commit({TopicPartition("r", 1): OffsetAndMetadata(7, "", -1)})
        consumer.close()
        admin.close()
        broker.restart()
        assert broker.port == port
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id="kept")
        try:
            assert "r" in admin.list_topics()
            assert consumer.committed(TopicPartition("r", 1)) == 7
        finally:
            consumer.close()
            admin.close()


def test_options_reach_the_brokers_settings_and_overrides_win():
    with Broker(
        num_partitions=3,
        initial_rebalance_delay_ms=25,
        min_session_timeout_ms=200,
        max_session_timeout_ms=9_000,
        auto_create_topics=True,
        overrides={"num.partitions": 4, "offsets.topic.num.partitions": 5},
    ) as broker:
        config = broker.call_in_loop(lambda: broker.app.config)
        assert config["group.initial.rebalance.delay.ms"] == 25
        assert (config["group.min.session.timeout.ms"], config["group.max.session.timeout.ms"]) == (200, 9_000)
        assert config["storage.engine"] == "memory" and config["offsets.topic.num.partitions"] == 5
        produce(broker.bootstrap_servers, "auto", [b"a"])
        assert broker.call_in_loop(lambda: broker.app.topics.get("auto").partitions) == 4


def test_without_auto_create_an_unknown_topic_is_not_made():
    with Broker(auto_create_topics=False) as broker:
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
        try:
            assert not consumer.partitions_for_topic("nope")  # kafka-python: an empty set, or None
        finally:
            consumer.close()
        assert broker.call_in_loop(lambda: broker.app.topics.get("nope")) is None


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_users_log_in_with_each_mechanism(mechanism):
    with Broker(sasl_users={"alice": "alice-secret"}) as broker:
        login = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism, "sasl_plain_username": "alice"}
        produce(broker.sasl_bootstrap_servers, "s", [b"a"], sasl_plain_password="alice-secret", **login)
        refused = KafkaProducer(
            bootstrap_servers=broker.sasl_bootstrap_servers,
            sasl_plain_password="wrong",
            max_block_ms=1_000,
            api_version=(2, 8),
            **login,
        )
        try:
            with pytest.raises(KafkaError):  # its metadata never comes: every login is refused
                refused.send("s", b"b").get(5)
        finally:
            refused.close(timeout=1)


def test_as_a_child_process_it_stops_cleanly_on_sigterm():
    broker = Broker(subprocess=True)
    with broker:
        with pytest.raises(RuntimeError):
            broker.app  # noqa: B018 - another process's broker has no object here
        produce(broker.bootstrap_servers, "p", [b"a"])
    assert broker.exit_code == 0
    assert any("groupd stopped" in line for line in broker.output)


def test_a_bad_setting_is_refused_in_the_caller_and_leaves_nothing():
    with pytest.raises(ConfigError):
        Broker(overrides={"num.partitions": 0}).start()
    broker = Broker(engine="local", overrides={"num.partitions": -1})
    with pytest.raises(ConfigError):
        broker.start()
    assert broker.data_dir is not None and not broker.data_dir.exists()  # made by start, removed by its failure
    assert Broker(engine="local").data_dir is None  # nothing is made before a start
