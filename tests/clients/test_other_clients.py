"""aiokafka and confluent-kafka (librdkafka) form groups, consume, hand partitions over and resume."""

import asyncio
import time

import pytest

pytestmark = pytest.mark.client


def create_topic(bootstrap, name, partitions=6):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(15)


@pytest.mark.scenario('confluent-kafka', 1, 2, 3, 4)
def test_confluent_group_produce_consume_handover(broker_process):
    from confluent_kafka import Consumer, Producer

    bs = broker_process.bootstrap
    create_topic(bs, "ck")
    producer = Producer(
        {"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "compression.type": "gzip"}
    )
    for i in range(300):
        producer.produce("ck", key=str(i), value=f"v{i}")
    assert producer.flush(15) == 0

    def consumer():
        c = Consumer(
            {
                "bootstrap.servers": bs,
                "group.id": "ckg",
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 300,
            }
        )
        c.subscribe(["ck"])
        return c

    members = [consumer() for _ in range(3)]
    got = []
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and (
        len(got) < 300 or sum(len(c.assignment()) for c in members) != 6 or not all(c.assignment() for c in members)
    ):
        for c in members:
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                got.append(m.value())
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(300))
    parts = [{tp.partition for tp in c.assignment()} for c in members]
    assert all(parts) and set().union(*parts) == set(range(6)) and sum(map(len, parts)) == 6
    members[0].close()  # LeaveGroup
    rest = members[1:]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and sum(len(c.assignment()) for c in rest) != 6:
        for c in rest:
            c.poll(0.05)
    assert sum(len(c.assignment()) for c in rest) == 6
    for c in rest:
        c.close()


@pytest.mark.scenario("confluent-kafka", 7)
def test_confluent_static_member_restart_keeps_partitions_without_rebalance(broker_process):
    from confluent_kafka import Consumer

    bs = broker_process.bootstrap
    create_topic(bs, "cs", 4)

    def member(instance):
        c = Consumer(
            {
                "bootstrap.servers": bs,
                "group.id": "csg",
                "group.instance.id": instance,
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 300,
            }
        )
        c.subscribe(["cs"])
        return c

    a, b = member("a"), member("b")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (
        a.assignment() and b.assignment() and len(a.assignment()) + len(b.assignment()) == 4
    ):
        a.poll(0.05)
        b.poll(0.05)
    before = {tp.partition for tp in a.assignment()}
    assert before
    a.close()  # a static member's close does not leave the group (KIP-345)
    a2 = member("a")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not a2.assignment():
        a2.poll(0.05)
        b.poll(0.05)
    assert {tp.partition for tp in a2.assignment()} == before, "the restarted static member keeps its partitions"
    a2.close()
    b.close()


@pytest.mark.scenario("aiokafka", 1, 6)
@pytest.mark.engines  # storage: on both engines (tests/conftest.py)
def test_aiokafka_group_consume_commit_resume(broker_process):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    bs = broker_process.bootstrap
    create_topic(bs, "ak")

    async def scenario():
        producer = AIOKafkaProducer(bootstrap_servers=bs, acks="all")
        await producer.start()
        for i in range(60):
            await producer.send("ak", f"a{i}".encode(), partition=i % 6)
        await producer.flush()

        async def consume(n, timeout=30):
            c = AIOKafkaConsumer(
                "ak",
                bootstrap_servers=bs,
                group_id="akg",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=6000,
                heartbeat_interval_ms=300,
            )
            await c.start()
            seen = []
            deadline = time.monotonic() + timeout
            while len(seen) < n and time.monotonic() < deadline:
                res = await c.getmany(timeout_ms=200)
                seen.extend(r.value for recs in res.values() for r in recs)
            await c.commit()
            assignment = c.assignment()
            await c.stop()
            return seen, assignment

        seen, assignment = await consume(60)
        assert sorted(seen) == sorted(f"a{i}".encode() for i in range(60)) and len(assignment) == 6
        await producer.send_and_wait("ak", b"later", partition=0)
        await producer.stop()
        again, _ = await consume(1, timeout=15)
        assert again == [b"later"], "resumes at the committed offsets"

    asyncio.run(asyncio.wait_for(scenario(), 90))


@pytest.mark.scenario("aiokafka", 3)
def test_aiokafka_two_members_split_partitions(broker_process):
    from aiokafka import AIOKafkaConsumer

    bs = broker_process.bootstrap
    create_topic(bs, "ak2")

    async def scenario():
        cs = [
            AIOKafkaConsumer(
                "ak2", bootstrap_servers=bs, group_id="ak2g", session_timeout_ms=6000, heartbeat_interval_ms=300
            )
            for _ in range(2)
        ]
        for c in cs:
            await c.start()

        async def settled():
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                await asyncio.gather(*(c.getmany(timeout_ms=100) for c in cs))
                parts = [{tp.partition for tp in c.assignment()} for c in cs]
                if all(parts) and set().union(*parts) == set(range(6)) and sum(map(len, parts)) == 6:
                    return parts
            raise AssertionError("aiokafka members never split the partitions")

        await settled()
        for c in cs:
            await c.stop()

    asyncio.run(asyncio.wait_for(scenario(), 60))


@pytest.mark.scenario("confluent-kafka", 6, 9)
@pytest.mark.engines  # storage: on both engines (tests/conftest.py)
def test_confluent_commit_resume_and_admin(broker_process):
    from confluent_kafka import (
        Consumer,
        ConsumerGroupTopicPartitions,
        Producer,
        TopicCollection,
        TopicPartition,
    )
    from confluent_kafka.admin import AclOperation, AdminClient

    bs = broker_process.bootstrap
    create_topic(bs, "cadm", 2)
    producer = Producer({"bootstrap.servers": bs})
    for i in range(10):
        producer.produce("cadm", value=f"c{i}", partition=i % 2)
    producer.flush(10)

    def consume(n):
        c = Consumer(
            {
                "bootstrap.servers": bs,
                "group.id": "cadm-g",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 300,
            }
        )
        c.subscribe(["cadm"])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                got.append(m.value())
                c.commit(message=m, asynchronous=False)
        return c, got

    c, got = consume(10)
    assert sorted(got) == sorted(f"c{i}".encode() for i in range(10))
    admin = AdminClient({"bootstrap.servers": bs})
    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)  # librdkafka: DescribeCluster
    assert [n.id for n in cluster.nodes] == [cluster.controller.id] and cluster.cluster_id
    assert AclOperation.IDEMPOTENT_WRITE in cluster.authorized_operations  # no authorizer: everything allowed
    topics = admin.describe_topics(TopicCollection(["cadm"]), include_authorized_operations=True)["cadm"].result(10)
    assert len(topics.partitions) == 2 and AclOperation.WRITE in topics.authorized_operations
    listed = admin.list_consumer_groups().result(10)
    assert "cadm-g" in {g.group_id for g in listed.valid}
    described = admin.describe_consumer_groups(["cadm-g"])["cadm-g"].result(10)
    assert len(described.members) == 1 and str(described.state).endswith("STABLE")
    with pytest.raises(Exception, match="NON_EMPTY_GROUP|not empty|NonEmpty"):
        admin.delete_consumer_groups(["cadm-g"])["cadm-g"].result(10)
    c.close()
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("cadm-g")])["cadm-g"].result(10)
    assert sorted(tp.offset for tp in offsets.topic_partitions) == [5, 5]
    producer.produce("cadm", value="later", partition=0)
    producer.flush(10)
    c2, again = consume(1)
    assert again == [b"later"], "resumes exactly at the committed offsets"
    c2.close()
    admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("cadm-g", [TopicPartition("cadm", 0, 0), TopicPartition("cadm", 1, 0)])]
    )["cadm-g"].result(10)
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("cadm-g")])["cadm-g"].result(10)
    assert sorted(tp.offset for tp in offsets.topic_partitions) == [0, 0]
    admin.delete_consumer_groups(["cadm-g"])["cadm-g"].result(10)
    assert "cadm-g" not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}


@pytest.mark.scenario("aiokafka", 2, 9)
def test_aiokafka_admin(broker_process):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    bs = broker_process.bootstrap

    async def scenario():
        admin = AIOKafkaAdminClient(bootstrap_servers=bs)
        await admin.start()
        await admin.create_topics([NewTopic("aadm", 6, 1)])
        assert "aadm" in await admin.list_topics()
        c = AIOKafkaConsumer(
            "aadm", bootstrap_servers=bs, group_id="aadm-g", session_timeout_ms=6000, heartbeat_interval_ms=300
        )
        await c.start()
        deadline = time.monotonic() + 30
        while len(c.assignment()) != 6 and time.monotonic() < deadline:
            await c.getmany(timeout_ms=100)
        assert len(c.assignment()) == 6
        groups = await admin.list_consumer_groups()
        assert "aadm-g" in {g[0] for g in groups}
        described = await admin.describe_consumer_groups(["aadm-g"])
        assert "Stable" in str(described)
        from aiokafka.structs import OffsetAndMetadata, TopicPartition

        await c.commit({TopicPartition("aadm", 3): OffsetAndMetadata(7, "")})
        offsets = await admin.list_consumer_group_offsets("aadm-g")
        assert offsets[TopicPartition("aadm", 3)].offset == 7
        await c.stop()
        await admin.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
