"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) through a real socket, and a restart that
keeps every group, epoch and assignment (the records replayed from __consumer_offsets)."""

import pytest

from groupd.broker.app import Broker
from groupd.protocol import codec
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.wire.test_groups import wait_loaded

# the storage-touching wire tests run on both engines (tests/conftest.py)
pytestmark = pytest.mark.engines


def hb_body(version, member_id, epoch, names=None, owned=None, timeout=-1, group="g", regex=None, instance=None):
    cls = codec.request_class(68, version)
    tp = codec.nested(cls, "TopicPartitions")
    return codec.make(
        cls, group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance, rack_id=None,
        rebalance_timeout=timeout, subscribed_topic_names=names, subscribed_topic_regex=regex, server_assignor=None,
        topic_partitions=None if owned is None else tuple(tp(topic_id=t, partitions=tuple(ps)) for t, ps in owned),
    )


def describe_body(*groups):
    return codec.make(codec.request_class(69, 1), group_ids=tuple(groups), include_authorized_operations=False)


async def started(tmp_path):
    # every change gets its target at once (Kafka 4.3 batches them, 1 s apart by default)
    b = Broker(broker_config(tmp_path, **{"group.consumer.assignment.interval.ms": "0"}))
    await b.start()
    await wait_loaded(b)
    return b


async def test_api_versions_advertises_the_consumer_protocol(tmp_path):
    b = await started(tmp_path)
    try:
        c = await WireClient.connect(b.port)
        resp = await c.call(
            18, 3, codec.make(codec.request_class(18, 3), client_software_name="t", client_software_version="1")
        )
        keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert keys[68] == (0, 1) and keys[69] == (0, 1)
        await c.close()
    finally:
        await b.stop()


async def test_a_group_forms_reconciles_and_survives_a_restart(tmp_path):
    b = await started(tmp_path)
    try:
        topic = b.create_topic("orders", 4, {})
        tid = topic.topic_id
        c = await WireClient.connect(b.port)
        r = await c.call(68, 1, hb_body(1, "m1", 0, names=("orders",), owned=(), timeout=30_000))
        assert (r.error_code, r.member_id, r.member_epoch) == (0, "m1", 2)
        assert codec.millis(r.heartbeat_interval) == 5000
        assert [(tp.topic_id, sorted(tp.partitions)) for tp in r.assignment.topic_partitions] == [(tid, [0, 1, 2, 3])]
        r2 = await c.call(68, 1, hb_body(1, "m2", 0, names=("orders",), owned=(), timeout=30_000))
        assert (r2.error_code, r2.member_epoch, r2.assignment.topic_partitions) == (0, 3, ())
        # m1 must revoke half before m2 gets anything
        r = await c.call(68, 1, hb_body(1, "m1", 2, owned=((tid, (0, 1, 2, 3)),)))
        assert r.member_epoch == 2
        kept = sorted(r.assignment.topic_partitions[0].partitions)
        assert len(kept) == 2
        r = await c.call(68, 1, hb_body(1, "m1", 2, owned=((tid, kept),)))
        assert r.member_epoch == 3
        r2 = await c.call(68, 1, hb_body(1, "m2", 3, owned=()))
        assert sorted(r2.assignment.topic_partitions[0].partitions) == sorted({0, 1, 2, 3} - set(kept))
        (g,) = (await c.call(69, 1, describe_body("g"))).groups
        assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (
            0,
            "Stable",
            3,
            3,
            "uniform",
        )
        assert sorted(m.member_id for m in g.members) == ["m1", "m2"]
        assert all(m.member_type == 1 for m in g.members)
        (missing,) = (await c.call(69, 1, describe_body("nope"))).groups
        assert missing.error_code == 69
        bad = await c.call(68, 1, hb_body(1, "", 0, names=("orders",), owned=(), timeout=30_000))
        assert bad.error_code == 42 and bad.error_message
        await c.close()
    finally:
        await b.stop()

    b = await started(tmp_path)
    try:
        c = await WireClient.connect(b.port)
        (g,) = (await c.call(69, 1, describe_body("g"))).groups
        assert (g.group_state, g.group_epoch, g.assignment_epoch) == ("Stable", 3, 3)
        held = {m.member_id: sorted(m.assignment.topic_partitions[0].partitions) for m in g.members}
        assert held["m1"] == kept
        r = await c.call(68, 1, hb_body(1, "m1", 3))
        assert (r.error_code, r.member_epoch, r.assignment) == (0, 3, None)
        r = await c.call(68, 1, hb_body(1, "m2", 3, owned=()))
        assert r.error_code == 0
        r = await c.call(68, 1, hb_body(1, "m2", -1))
        assert (r.error_code, r.member_epoch) == (0, -1)
        await c.close()
    finally:
        await b.stop()
