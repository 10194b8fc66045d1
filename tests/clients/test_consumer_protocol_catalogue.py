"""The rest of the client catalogue for confluent-kafka (librdkafka) with group.protocol=consumer
(KIP-848), each scenario as the classic column's tests run it, the group formed by ConsumerGroupHeartbeat:
admin (9), transactions (11), quotas (12), SASL (13), TLS (14), leader epochs (15); and two of the
issue's: partitions added to a subscribed topic, a broker restart mid-group."""

from __future__ import annotations

import time

import pytest

from tests.clients.test_consumer_protocol import (
    assert_disjoint,
    consumer,
    kip848_broker,  # noqa: F401  (a fixture)
    owned,
    poll_until,
    produce,
)
from tests.clients.test_leader_epochs import _ck_poll, _ck_topic, epoch_broker, ofle_requests  # noqa: F401
from tests.clients.test_other_clients import create_topic
from tests.clients.test_quotas import RATE, TOTAL, quota_process, set_quotas  # noqa: F401
from tests.clients.test_security_clients import (  # noqa: F401  (fixtures among them)
    CK_SASL,
    ck_produce,
    create_scram_users,
    encoded,
    scram,
    scram_secured,
    secured,
    tls_secured,
    values,
)
from tests.clients.test_security_clients import create_topic as create_secured_topic

pytestmark = pytest.mark.client
CLIENT = "confluent-kafka (consumer protocol)"


def consume(config: dict, topic: str, want: int, seconds: float = 40) -> list[bytes]:
    """Values a consumer-protocol member of ``config``'s group reads from ``topic`` (up to ``want``),
    its offsets committed before it leaves."""
    from confluent_kafka import Consumer

    c = Consumer({"auto.offset.reset": "earliest", "group.protocol": "consumer", **config})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and len(got) < want:
        m = c.poll(0.1)
        if m is not None and m.error() is None:
            got.append(m.value())
    if got:
        c.commit(asynchronous=False)
    c.close()
    return got


@pytest.mark.scenario(CLIENT, 9)
def test_admin_lists_describes_resets_and_deletes_a_consumer_protocol_group(kip848_broker):  # noqa: F811
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    bs = kip848_broker.bootstrap
    create_topic(bs, "kadm", 2)
    produce(bs, "kadm", 10)
    c = consumer(bs, "kadm-g", ["kadm"], **{"enable.auto.commit": False})
    got = []
    assert poll_until([c], lambda: len(got) == 10, 40, got)
    c.commit(asynchronous=False)
    admin = AdminClient({"bootstrap.servers": bs})
    listed = {g.group_id: g for g in admin.list_consumer_groups().result(10).valid}
    assert "kadm-g" in listed and str(listed["kadm-g"].type).endswith("CONSUMER"), listed.get("kadm-g")
    described = admin.describe_consumer_groups(["kadm-g"])["kadm-g"].result(10)
    assert len(described.members) == 1 and str(described.state).endswith("STABLE")
    assert {tp.partition for tp in described.members[0].assignment.topic_partitions} == {0, 1}
    with pytest.raises(Exception, match="NON_EMPTY_GROUP|not empty|NonEmpty"):
        admin.delete_consumer_groups(["kadm-g"])["kadm-g"].result(10)
    c.close()
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("kadm-g")])["kadm-g"].result(10)
    assert sum(tp.offset for tp in offsets.topic_partitions) == 10
    reset = ConsumerGroupTopicPartitions("kadm-g", [TopicPartition("kadm", 0, 1), TopicPartition("kadm", 1, 1)])
    admin.alter_consumer_group_offsets([reset])["kadm-g"].result(10)
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("kadm-g")])["kadm-g"].result(10)
    assert sorted(tp.offset for tp in offsets.topic_partitions) == [1, 1]
    assert len(consume({"bootstrap.servers": bs, "group.id": "kadm-g"}, "kadm", 8)) == 8, (
        "the group resumes at the reset offsets"
    )
    admin.delete_consumer_groups(["kadm-g"])["kadm-g"].result(10)
    assert "kadm-g" not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}


@pytest.mark.scenario(CLIENT, 11)
def test_transaction_sends_a_consumer_protocol_members_offsets(kip848_broker):  # noqa: F811
    """send_offsets_to_transaction with a consumer-protocol member's group metadata (its member id and
    epoch: TxnOffsetCommit checks the epoch); an aborted transaction's records stay unread under
    read_committed, the committed one's are read and the group's offsets are the transaction's."""
    from confluent_kafka import ConsumerGroupTopicPartitions, Producer
    from confluent_kafka.admin import AdminClient

    bs = kip848_broker.bootstrap
    create_topic(bs, "kt-in", 2)
    create_topic(bs, "kt-out", 2)
    produce(bs, "kt-in", 6)
    producer = Producer({"bootstrap.servers": bs, "transactional.id": "kt-tx", "transaction.timeout.ms": 30000})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce("kt-out", value=b"aborted", partition=0)
    assert producer.flush(10) == 0
    producer.abort_transaction(10)
    c = consumer(bs, "kt-g", ["kt-in"], **{"enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        inputs = []
        deadline = time.monotonic() + 40
        while len(inputs) < 6 and time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                inputs.append(m)
        assert len(inputs) == 6
        producer.begin_transaction()
        for m in inputs:
            producer.produce("kt-out", value=m.value() + b"-out", partition=m.partition())
        positions = c.position(c.assignment())
        producer.send_offsets_to_transaction(positions, c.consumer_group_metadata(), 10)
        producer.commit_transaction(10)
        expected = sorted((tp.partition, tp.offset) for tp in positions)
    finally:
        c.close()
    admin = AdminClient({"bootstrap.servers": bs})
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("kt-g")])["kt-g"].result(10)
    assert sorted((tp.partition, tp.offset) for tp in listed.topic_partitions) == expected
    assert sum(o for _, o in expected) == 6
    out = consume({"bootstrap.servers": bs, "group.id": "kt-reader", "isolation.level": "read_committed"}, "kt-out", 6)
    assert sorted(out) == sorted(v + b"-out" for v in (f"v{i}".encode() for i in range(6)))


@pytest.mark.scenario(CLIENT, 12)
def test_consumer_protocol_member_over_its_byte_rate_is_throttled_and_loses_nothing(quota_process):  # noqa: F811
    import json

    from confluent_kafka import Consumer, Producer

    bs = quota_process.bootstrap
    create_topic(bs, "quota", 1)
    set_quotas(quota_process.port)
    throttles: list[int] = []

    def seen(stats: str) -> None:
        throttles.extend(b["throttle"]["max"] for b in json.loads(stats)["brokers"].values() if b["throttle"]["max"])

    producer = Producer(
        {
            "bootstrap.servers": bs,
            "client.id": "throttled",
            "linger.ms": 0,
            "statistics.interval.ms": 100,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
            "stats_cb": seen,
        }
    )
    for i in range(TOTAL):
        producer.produce("quota", value=bytes([i]) * 3000)
        producer.flush(30)
    assert throttles and max(throttles) > 0, "the producer was throttled"
    throttles.clear()
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "quota-g",
            "group.protocol": "consumer",
            "client.id": "throttled",
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 1 << 20,
            "statistics.interval.ms": 100,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
            "stats_cb": seen,
        }
    )
    c.subscribe(["quota"])
    got: list[int] = []
    started = time.monotonic()
    deadline = started + 40
    while len(got) < TOTAL and time.monotonic() < deadline:
        m = c.poll(0.1)
        if m is not None and m.error() is None:
            got.append(m.value()[0])
    took = time.monotonic() - started
    for _ in range(10):  # the last statistics
        c.poll(0.1)
    c.close()
    assert got == list(range(TOTAL)), "every record, in order"
    assert throttles and max(throttles) > 0, "the consumer was told its throttle time"
    assert took > (TOTAL * 3000 - 2 * RATE) / RATE * 0.5, took


@pytest.mark.scenario(CLIENT, 13)
def test_consumer_protocol_group_over_sasl_plain(secured):  # noqa: F811
    sasl = secured.bootstraps["SASL_PLAINTEXT"]
    create_secured_topic(sasl, "kp-sasl", 2, **CK_SASL)
    ck_produce(sasl, "kp-sasl", values("v", 40), **CK_SASL)
    assert sorted(consume({"bootstrap.servers": sasl, "group.id": "kp-sasl-g", **CK_SASL}, "kp-sasl", 40)) == encoded(
        values("v", 40)
    )


@pytest.mark.scenario(CLIENT, 13)
def test_consumer_protocol_group_over_sasl_scram_users_an_admin_created(scram_secured):  # noqa: F811
    create_scram_users(scram_secured.bootstrap, {"kim": ("k-pass", 512)})
    create_topic(scram_secured.bootstrap, "kscram", 2)
    sasl = scram_secured.bootstraps["SASL_PLAINTEXT"]
    login = scram("librdkafka", "SCRAM-SHA-512", "kim", "k-pass")
    ck_produce(sasl, "kscram", values("s", 20), **login)
    assert sorted(consume({"bootstrap.servers": sasl, "group.id": "kscram-g", **login}, "kscram", 20)) == encoded(
        values("s", 20)
    )


@pytest.mark.scenario(CLIENT, 14)
def test_consumer_protocol_groups_over_ssl_and_sasl_ssl(tls_secured):  # noqa: F811
    certs, ssl_bs, sasl_ssl_bs = tls_secured.certs, tls_secured.bootstraps["SSL"], tls_secured.bootstraps["SASL_SSL"]
    ck_ssl = {
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
        "ssl.certificate.location": str(certs.client_cert),
        "ssl.key.location": str(certs.client_key),
    }
    ck_sasl_ssl = {**CK_SASL, "security.protocol": "SASL_SSL", "ssl.ca.location": str(certs.ca)}
    create_secured_topic(ssl_bs, "ktls", 2, **ck_ssl)
    ck_produce(sasl_ssl_bs, "ktls", values("t", 30), **ck_sasl_ssl)
    expected = encoded(values("t", 30))
    assert sorted(consume({"bootstrap.servers": ssl_bs, "group.id": "ktls-ssl", **ck_ssl}, "ktls", 30)) == expected
    assert (
        sorted(consume({"bootstrap.servers": sasl_ssl_bs, "group.id": "ktls-sasl", **ck_sasl_ssl}, "ktls", 30))
        == expected
    )


@pytest.mark.scenario(CLIENT, 15)
def test_consumer_protocol_member_commits_epochs_validates_positions_and_detects_truncation(epoch_broker):  # noqa: F811
    """Inside a consumer-protocol group: the committed offset carries leader epoch 0 and the member that
    takes the partition over resumes there with no reset allowed; a position it seeks to with epoch 0 is
    validated (OffsetForLeaderEpoch), and one past the log end is reported as truncation."""
    from confluent_kafka import Consumer, TopicPartition

    bs = epoch_broker.bootstrap
    producer = _ck_topic(bs, "kepochs", 10)
    first = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "kepochs-g",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    first.subscribe(["kepochs"])
    assert _ck_poll(first, 10, 40) == [(i, 0) for i in range(10)]
    first.commit(asynchronous=False)
    (committed,) = first.committed([TopicPartition("kepochs", 0)], timeout=10)
    assert (committed.offset, committed.leader_epoch) == (10, 0)
    first.close()
    for i in range(10, 15):
        producer.produce("kepochs", value=b"v%d" % i)
    assert producer.flush(15) == 0
    second = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "kepochs-g",
            "group.protocol": "consumer",
            "auto.offset.reset": "error",
            "enable.auto.commit": False,
        }
    )
    second.subscribe(["kepochs"])
    assert _ck_poll(second, 5, 40) == [(i, 0) for i in range(10, 15)], "resumed at the commit, no reset"
    before = ofle_requests(epoch_broker)
    second.seek(TopicPartition("kepochs", 0, 12, leader_epoch=0))
    assert _ck_poll(second, 3, 20) == [(i, 0) for i in range(12, 15)]
    assert ofle_requests(epoch_broker) > before, "the position sought with an epoch was validated"
    second.seek(TopicPartition("kepochs", 0, 100, leader_epoch=0))
    got = _ck_poll(second, 1, 20)
    assert len(got) == 1 and got[0][0] == "error" and "truncation detected at offset 100" in got[0][1], got
    second.close()


def test_partitions_added_to_a_subscribed_topic_are_assigned(kip848_broker):  # noqa: F811
    """CreatePartitions on a topic the group subscribes to: a new target assignment takes the new
    partitions in, never owned twice on the way."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    bs = kip848_broker.bootstrap
    create_topic(bs, "kgrow", 2)
    members = [consumer(bs, "kgrow-g", ["kgrow"], **{"topic.metadata.refresh.interval.ms": 1000}) for _ in range(2)]
    try:
        assert poll_until(members, lambda: all(len(owned(c)) == 1 for c in members), 40)
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_partitions([NewPartitions("kgrow", 6)]).values():
            f.result(15)
        assert poll_until(
            members,
            lambda: (
                set().union(*(owned(c) for c in members)) == {("kgrow", p) for p in range(6)}
                and all(len(owned(c)) == 3 for c in members)
            ),
            40,
        )
        produce(bs, "kgrow", 60)
        got = []
        assert poll_until(members, lambda: len(got) >= 60, 40, got)
        assert sorted(got) == sorted(f"v{i}".encode() for i in range(60))
    finally:
        for c in members:
            c.close()


@pytest.mark.engines  # storage: on both engines (tests/conftest.py)
def test_a_broker_restart_mid_group_keeps_the_group_and_its_offsets(kip848_broker):  # noqa: F811
    """Members keep going across a restart: the group, its epochs and assignments are replayed from
    __consumer_offsets, the members' next heartbeats are answered where they left off, and what was
    committed before is not read again."""
    bs = kip848_broker.bootstrap
    create_topic(bs, "krestart", 4)
    members = [consumer(bs, "krestart-g", ["krestart"], **{"enable.auto.commit": False}) for _ in range(2)]
    try:
        assert poll_until(members, lambda: all(len(owned(c)) == 2 for c in members), 60)
        produce(bs, "krestart", 40)
        got: list[bytes] = []
        assert poll_until(members, lambda: len(got) >= 40, 60, got)
        for c in members:
            c.commit(asynchronous=False)
        before = [owned(c) for c in members]
        kip848_broker.restart()
        produce(bs, "krestart", 40, start=40)
        after: list[bytes] = []
        assert poll_until(members, lambda: len(after) >= 40, 60, after)
        assert sorted(after) == sorted(f"v{i}".encode() for i in range(40, 80)), "nothing committed is read again"
        assert [owned(c) for c in members] == before, "each member kept its partitions"
        assert_disjoint(members)
    finally:
        for c in members:
            c.close()
