"""Client quotas through the wire: DescribeClientQuotas/AlterClientQuotas, and byte-rate throttling of
Produce and Fetch as Kafka does it (the answer at once with its throttle time, then the connection muted)."""

from __future__ import annotations

import asyncio
import time

import pytest

from groupd.broker.app import Broker
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch
from tests.conftest import broker_config
from tests.harness import WireClient, request_bytes
from tests.wire.test_data_plane import fetch_body, produce_body

EXACT, DEFAULT, ANY = 0, 1, 2


def alter_body(version, entries, validate_only=False):
    cls = codec.request_class(49, version)
    entry, entity, op = (codec.nested(cls, n) for n in ("EntryData", "EntityData", "OpData"))
    return codec.make(cls, validate_only=validate_only, entries=tuple(
        entry(entity=tuple(entity(entity_type=t, entity_name=n) for t, n in pairs),
              ops=tuple(op(key=k, value=float(v or 0), remove=v is None) for k, v in ops))
        for pairs, ops in entries
    ))


def describe_body(version, components, strict=False):
    cls = codec.request_class(48, version)
    comp = codec.nested(cls, "ComponentData")
    return codec.make(
        cls, strict=strict, components=tuple(comp(entity_type=t, match_type=m, match=s) for t, m, s in components)
    )


def described(resp):
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
        for entry in resp.entries
    }


@pytest.mark.parametrize("version", [0, 1])
async def test_alter_then_describe_and_they_survive_a_restart(tmp_path, version):
    config = broker_config(tmp_path)
    b = Broker(config)
    await b.start()
    wire = await WireClient.connect(b.port)
    try:
        resp = await wire.call(
            49,
            version,
            alter_body(
                version,
                [
                    ([("client-id", "app")], [("producer_byte_rate", 1024), ("consumer_byte_rate", 2048)]),
                    ([("user", None)], [("consumer_byte_rate", 100)]),
                    ([("user", "alice"), ("client-id", None)], [("producer_byte_rate", 5)]),
                    ([("user", "bob")], [("request_percentage", 50)]),  # Kafka's key, not enforced here: refused
                    ([("group", "g")], [("producer_byte_rate", 5)]),
                    ([("client-id", "app2")], [("producer_byte_rate", 10.5)]),
                ],
            ),
        )
        codes = [(e.error_code, e.error_message) for e in resp.entries]
        assert [c for c, _ in codes] == [ErrorCode.none] * 3 + [ErrorCode.invalid_request] * 3
        assert "not supported by groupd" in codes[3][1]
        assert codes[4][1] == "Unhandled client quota entity type: group"
        assert codes[5][1] == "producer_byte_rate cannot be a fractional value."
        assert [tuple((e.entity_type, e.entity_name) for e in x.entity) for x in resp.entries][2] == (
            ("user", "alice"),
            ("client-id", None),
        )

        # validate_only changes nothing
        resp = await wire.call(
            49,
            version,
            alter_body(version, [([("client-id", "other")], [("producer_byte_rate", 7)])], validate_only=True),
        )
        assert resp.entries[0].error_code == ErrorCode.none
        everything = {
            (("client-id", "app"),): {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
            (("user", None),): {"consumer_byte_rate": 100.0},
            (("client-id", None), ("user", "alice")): {"producer_byte_rate": 5.0},
        }
        assert described(await wire.call(48, version, describe_body(version, []))) == everything
        assert described(
            await wire.call(48, version, describe_body(version, [("user", DEFAULT, None)], strict=True))
        ) == {(("user", None),): {"consumer_byte_rate": 100.0}}
        assert described(await wire.call(48, version, describe_body(version, [("client-id", ANY, None)]))) == {
            k: v for k, v in everything.items() if "client-id" in dict(k)
        }
        bad = await wire.call(48, version, describe_body(version, [("user", EXACT, None)]))
        assert (bad.error_code, bad.entries) == (ErrorCode.invalid_request, None)
        assert bad.error_message == "Request specified MATCH_TYPE_EXACT, but set match string to null."
        bad = await wire.call(48, version, describe_body(version, [("topic", ANY, None)]))
        assert bad.error_code == ErrorCode.unsupported_version
    finally:
        await wire.close()
        await b.stop()

    b = Broker(config)
    await b.start()
    wire = await WireClient.connect(b.port)
    try:
        assert described(await wire.call(48, version, describe_body(version, []))) == everything
        assert b.quotas.produce.limit("ANONYMOUS", "app") == 1024.0
        # removing every key of an entity removes the entity
        resp = await wire.call(49, version, alter_body(version, [([("user", None)], [("consumer_byte_rate", None)])]))
        assert resp.entries[0].error_code == ErrorCode.none
        assert (("user", None),) not in described(await wire.call(48, version, describe_body(version, [])))
    finally:
        await wire.close()
        await b.stop()


@pytest.fixture
async def quota_broker(tmp_path):
    """One-second samples, two of them: a client's first window counts as one second."""
    b = Broker(broker_config(tmp_path, **{"quota.window.num": 2, "quota.window.size.seconds": 1}))
    await b.start()
    b.create_topic("q", 1, {})
    yield b
    await b.stop()


async def test_produce_over_its_quota_is_answered_with_a_throttle_time_then_muted(quota_broker):
    b = quota_broker
    wire, other = await WireClient.connect(b.port), await WireClient.connect(b.port, client_id="free")
    try:
        bound = 10_000
        await wire.call(49, 1, alter_body(1, [([("client-id", "test")], [("producer_byte_rate", bound)])]))
        body = produce_body("q", 0, build_batch([(None, b"x" * 12_000)], timestamp_ms=1000))
        size = len(request_bytes(0, 9, body)) - 4  # Kafka counts the request's bytes after the size prefix
        expected = round((size - bound) / bound * 1000)  # the rate over a one-second window, Kafka's formula
        assert 150 < expected < 1000
        resp = await wire.call(0, 9, body)
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
        assert codec.millis(resp.throttle_time) == expected
        # the connection is muted: its next request waits out the throttle time; another client's does not
        started = time.monotonic()
        wire.send(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        await other.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert time.monotonic() - started < expected / 1000
        await asyncio.wait_for(wire.recv(), 5)
        assert time.monotonic() - started >= expected / 1000 * 0.9
        assert b.metrics._throttled["producer_byte_rate"][0] == 1
        # a client id with no quota is never throttled
        free = await other.call(0, 9, body)
        assert codec.millis(free.throttle_time) == 0
    finally:
        await wire.close()
        await other.close()


async def test_fetch_over_its_quota_is_answered_empty_and_capped_to_the_window(quota_broker):
    b = quota_broker
    wire = await WireClient.connect(b.port)
    try:
        for i in range(10):
            resp = await wire.call(
                0, 9, produce_body("q", 0, build_batch([(None, bytes([i]) * 250)], timestamp_ms=1000))
            )
            assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
        bound = 2_000
        await wire.call(49, 1, alter_body(1, [([("user", "ANONYMOUS")], [("consumer_byte_rate", bound)])]))
        first = await wire.call(1, 11, fetch_body("q", 0, 0, max_bytes=1 << 20))
        data = first.responses[0].partitions[0].records
        assert codec.millis(first.throttle_time) == 0
        assert 0 < len(data) <= bound  # max_bytes capped to what one window lets through (bound x 1 s)
        second = await wire.call(1, 11, fetch_body("q", 0, 0, max_bytes=1 << 20))
        assert codec.millis(second.throttle_time) > 0
        assert second.responses == ()  # throttled: an empty answer, its bytes taken back
        assert b.metrics._throttled["consumer_byte_rate"][0] == 1
    finally:
        await wire.close()


def create_topics_body(version, topics):
    cls = codec.request_class(19, version)
    topic = codec.nested(cls, "CreatableTopic")
    return codec.make(
        cls,
        timeout=5000,
        validate_only=False,
        topics=tuple(
            topic(name=name, num_partitions=n, replication_factor=-1, assignments=(), configs=()) for name, n in topics
        ),
    )


@pytest.mark.parametrize(("version", "strict"), [(7, True), (5, False)])
async def test_topic_creation_over_the_mutation_rate(quota_broker, version, strict):
    """1 partition/s with two one-second samples: a burst of 2. A 3-partition topic takes the bucket to
    -1; strict (v6+) refuses the next topic for 1 s, permissive (older) creates it and throttles."""
    b = quota_broker
    wire = await WireClient.connect(b.port)
    try:
        await wire.call(49, 1, alter_body(1, [([("client-id", "test")], [("controller_mutation_rate", 1)])]))
        resp = await wire.call(19, version, create_topics_body(version, [("m1", 3), ("m2", 1)]))
        errors = [(t.name, t.error_code) for t in resp.topics]
        if strict:
            assert errors == [("m1", ErrorCode.none), ("m2", ErrorCode.throttling_quota_exceeded)]
            assert resp.topics[1].error_message == "The throttling quota has been exceeded."
            assert b.topics.get("m2") is None
        else:
            assert errors == [("m1", ErrorCode.none), ("m2", ErrorCode.none)]
        throttle = codec.millis(resp.throttle_time)
        assert 900 <= throttle <= 2000
        # this connection is muted meanwhile; from another, with the same client id and so the same bucket,
        # a delete is charged too, and strict DeleteTopics (v5+) refuses it while the bucket is empty
        other = await WireClient.connect(b.port)
        dcls = codec.request_class(20, 6)
        dtopic = codec.nested(dcls, "DeleteTopicState")
        resp = await other.call(
            20, 6, codec.make(dcls, timeout=5000, topics=(dtopic(name="m1", topic_id=codec.ZERO_UUID),))
        )
        await other.close()
        assert resp.responses[0].error_code == ErrorCode.throttling_quota_exceeded
        assert b.topics.get("m1") is not None
        # once the throttle time has passed, the bucket has refilled enough
        await asyncio.sleep(throttle / 1000 + 0.1)
        resp = await wire.call(
            20,
            6,
            codec.make(
                dcls, timeout=5000, topics=(dtopic(name="m2" if not strict else "m1", topic_id=codec.ZERO_UUID),)
            ),
        )
        assert resp.responses[0].error_code == ErrorCode.none
    finally:
        await wire.close()
