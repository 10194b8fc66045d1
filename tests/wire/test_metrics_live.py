"""A scrape during a real rebalance of the real coordinator: counted, timed, and the states gauge moves."""

import asyncio

from tests.harness import WireClient
from tests.wire.test_groups import join_body, join_with_id, sync_body, wait_loaded
from tests.wire.test_metrics import http_get, metrics_broker, samples


def total(text, name, **labels):
    return sum(
        v
        for (n, ls), v in samples(text).items()
        if n == name and all(dict(ls).get(k) == val for k, val in labels.items())
    )


async def test_scrape_sees_a_real_rebalance(tmp_path):
    b = await metrics_broker(tmp_path, **{"group.initial.rebalance.delay.ms": "100"})
    try:
        await wait_loaded(b)
        port = b.metrics_server.port
        status, _ = await http_get(port, "/healthz")
        assert status == 200
        c1, c2 = await WireClient.connect(b.port), await WireClient.connect(b.port)
        m1, m2 = await join_with_id(c1, group="mg"), await join_with_id(c2, group="mg")
        j1, j2 = await asyncio.gather(
            c1.call(11, 5, join_body(5, m1, group="mg")), c2.call(11, 5, join_body(5, m2, group="mg"))
        )
        leader, other = (c1, m1), (c2, m2)
        if j1.leader != m1:
            leader, other = other, leader
        await asyncio.gather(
            leader[0].call(14, 3, sync_body(3, leader[1], j1.generation_id, [(m1, b"a"), (m2, b"b")], group="mg")),
            other[0].call(14, 3, sync_body(3, other[1], j1.generation_id, group="mg")),
        )
        _, text = await http_get(port, "/metrics")
        assert total(text, "groupd_groups", state="Stable") >= 1
        assert total(text, "groupd_rebalance_duration_seconds_count") >= 1
        assert total(text, "groupd_rebalances_total") + total(text, "groupd_rebalances") >= 1
        assert total(text, "groupd_requests_total", api="JoinGroup") >= 4
        # a member leaves: a new rebalance starts, caused by a leave, and the state gauge moves
        leave = await c2.call(13, 3, {"group_id": "mg", "members": (_member(m2 if other[1] == m2 else m1),)})
        assert leave.error_code == 0
        _, text = await http_get(port, "/metrics")
        assert total(text, "groupd_groups", state="PreparingRebalance") >= 1
        assert total(text, "groupd_rebalances_started_total", cause="leave") >= 1
        await c1.close()
        await c2.close()
    finally:
        await b.stop()


def _member(member_id):
    from groupd.protocol import codec

    return codec.nested(codec.request_class(13, 3), "MemberIdentity")(member_id=member_id, group_instance_id=None)


async def test_scrape_sees_consumer_protocol_groups(tmp_path):
    """Two members join a consumer-protocol group through real heartbeats: two rebalances in Kafka's
    sense (group epoch bumps), a consumer group counted by protocol and by state."""
    from tests.wire.test_consumer_groups import hb_body

    b = await metrics_broker(tmp_path, **{"group.consumer.assignment.interval.ms": "0"})
    try:
        await wait_loaded(b)
        b.create_topic("mt", 2, {})
        c = await WireClient.connect(b.port)
        assert (
            await c.call(68, 1, hb_body(1, "m1", 0, names=("mt",), owned=(), timeout=30_000, group="kg"))
        ).member_epoch == 2
        assert (
            await c.call(68, 1, hb_body(1, "m2", 0, names=("mt",), owned=(), timeout=30_000, group="kg"))
        ).member_epoch == 3
        _, text = await http_get(b.metrics_server.port, "/metrics")
        assert total(text, "groupd_consumer_group_rebalances_total") == 2
        assert total(text, "groupd_group_count", protocol="consumer") == 1
        assert total(text, "groupd_consumer_group_count", state="Reconciling") == 1
        assert total(text, "groupd_consumer_group_count", state="Stable") == 0
        await c.call(68, 1, hb_body(1, "m1", -1, group="kg"))
        await c.call(68, 1, hb_body(1, "m2", -1, group="kg"))
        _, text = await http_get(b.metrics_server.port, "/metrics")
        assert total(text, "groupd_consumer_group_rebalances_total") == 2, (
            "leaving is not a rebalance in Kafka's sensor"
        )
        assert total(text, "groupd_consumer_group_count", state="Empty") == 1
        await c.close()
    finally:
        await b.stop()
