"""The broker over the PostgreSQL engine, with a real client (kafka-python): everything durable is in the
database, so a broker started over the same database with an empty log.dirs carries on where the killed
one stopped: every acknowledged record is there and the group resumes at its committed offsets."""

from __future__ import annotations

import time
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from tests.harness import BrokerProcess

TOPIC, PARTITIONS, RECORDS = "pgt", 3, 300


def committed_offsets(consumer: KafkaConsumer) -> dict[int, int | None]:
    return {p: consumer.committed(TopicPartition(TOPIC, p)) for p in range(PARTITIONS)}


def consume(bootstrap: str, count: int, commit: bool) -> tuple[list[tuple[int, int, bytes]], dict[int, int | None]]:
    """Up to ``count`` records of group ``g`` (partition, offset, value), committed when ``commit``; and
    the group's committed offsets as the broker answers them then."""
    consumer = KafkaConsumer(
        TOPIC,
        bootstrap_servers=bootstrap,
        group_id="g",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=4000,
    )
    got: list[tuple[int, int, bytes]] = []
    try:
        for message in consumer:
            got.append((message.partition, message.offset, message.value))
            if len(got) == count:
                break
        if commit:
            consumer.commit()
        offsets = committed_offsets(consumer)
    finally:
        consumer.close()
    return got, offsets


def test_a_broker_over_the_same_database_with_empty_log_dirs_resumes_the_group(
    tmp_path: Path, postgresql_url: str
) -> None:
    settings = {"storage.engine": "postgresql", "storage.postgresql.url": postgresql_url}
    first = BrokerProcess(tmp_path / "first", settings).start()
    try:
        KafkaAdminClient(bootstrap_servers=first.bootstrap).create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
        producer = KafkaProducer(bootstrap_servers=first.bootstrap, acks="all", linger_ms=5)
        sent = [producer.send(TOPIC, b"v%d" % i, partition=i % PARTITIONS) for i in range(RECORDS)]
        producer.flush()
        acked = {(f.get(10).partition, f.get(10).offset) for f in sent}  # every send acknowledged
        producer.close()
        before, committed = consume(first.bootstrap, 120, commit=True)
        assert len(before) == 120 and sum(o or 0 for o in committed.values()) == 120
    finally:
        first.kill()  # SIGKILL: no clean stop, nothing flushed on the way out
    assert not (tmp_path / "first").exists() or not any((tmp_path / "first").iterdir())  # log.dirs: nothing

    second = BrokerProcess(tmp_path / "second", settings).start()  # a new, empty log.dirs
    try:
        consumer = KafkaConsumer(bootstrap_servers=second.bootstrap, group_id="g", enable_auto_commit=False)
        assert committed_offsets(consumer) == committed
        consumer.close()
        after, _ = consume(second.bootstrap, RECORDS - len(before), commit=False)
    finally:
        second.stop()
    for partition, offset, _value in after:
        assert offset >= (committed[partition] or 0)  # resumed at the commit, not before
    read = {(p, o) for p, o, _ in before} | {(p, o) for p, o, _ in after}
    assert read == acked
    values = sorted(int(v[1:]) for _p, _o, v in before + after)
    assert values == list(range(RECORDS))


def test_sigkill_under_produce_load_loses_no_acknowledged_record(tmp_path: Path, postgresql_url: str) -> None:
    """kafka-python producing with acks=all while the broker is SIGKILLed: a broker started over the same
    database (an empty log.dirs) has every record whose send was acknowledged, at its offset."""
    settings = {"storage.engine": "postgresql", "storage.postgresql.url": postgresql_url}
    first = BrokerProcess(tmp_path / "first", settings).start()
    acked: dict[tuple[int, int], bytes] = {}
    try:
        KafkaAdminClient(bootstrap_servers=first.bootstrap).create_topics([NewTopic("load", 2, 1)])
        producer = KafkaProducer(bootstrap_servers=first.bootstrap, acks="all", linger_ms=2, retries=0)
        deadline = time.monotonic() + 1.5
        i = 0
        while time.monotonic() < deadline:
            value = b"r%d" % i
            producer.send("load", value, partition=i % 2).add_callback(
                lambda meta, value=value: acked.__setitem__((meta.partition, meta.offset), value)
            )
            i += 1
            if i % 50 == 0:
                time.sleep(0.005)
    finally:
        first.kill()  # SIGKILL with sends in flight
    producer.close(timeout=2)
    assert len(acked) > 50
    second = BrokerProcess(tmp_path / "second", settings).start()
    try:
        consumer = KafkaConsumer(bootstrap_servers=second.bootstrap, enable_auto_commit=False)
        partitions = [TopicPartition("load", p) for p in range(2)]
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(partitions)
        stored: dict[tuple[int, int], bytes] = {}
        stop_at = time.monotonic() + 20
        while any(consumer.position(tp) < ends[tp] for tp in partitions) and time.monotonic() < stop_at:
            for tp, messages in consumer.poll(500).items():
                stored.update({(tp.partition, m.offset): m.value for m in messages})
        consumer.close()
    finally:
        second.stop()
    assert {key: stored.get(key) for key in acked} == acked
