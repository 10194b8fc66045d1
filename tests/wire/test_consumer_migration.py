"""Classic <-> consumer migration (KIP-848) through a real socket: a raw JoinGroup/SyncGroup/Heartbeat
member (as kafka-python speaks) and a ConsumerGroupHeartbeat member in one group, a restart in the
middle, the consumer member leaving (the group turns classic again), and an online upgrade."""

from groupd.broker.app import Broker
from groupd.coordinator.consumer.embedded import assignment_bytes, parse_assignment
from groupd.protocol import codec
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.wire.test_consumer_groups import describe_body, hb_body
from tests.wire.test_groups import join_body, sync_body, wait_loaded


async def started(tmp_path, **overrides):
    config = {"group.consumer.assignment.interval.ms": "0", "group.initial.rebalance.delay.ms": "0", **overrides}
    b = Broker(broker_config(tmp_path, **config))
    await b.start()
    await wait_loaded(b)
    return b


def heartbeat_body(member_id, generation, group="g"):
    return codec.make(
        codec.request_class(12, 4),
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
    )


def describe_groups_body(*groups):
    return codec.make(codec.request_class(15, 5), groups=tuple(groups), include_authorized_operations=False)


def partitions(assignment: bytes) -> list[int]:
    parts, _ = parse_assignment(assignment)
    return sorted(p for _, ps in parts for p in ps)


async def test_a_classic_member_and_a_consumer_member_share_a_group_across_a_restart(tmp_path):
    b = await started(tmp_path)
    try:
        tid = b.create_topic("t", 4, {}).topic_id
        c = await WireClient.connect(b.port)
        r = await c.call(68, 1, hb_body(1, "m1", 0, names=("t",), owned=(), timeout=30_000))
        assert (r.error_code, r.member_epoch) == (0, 2)
        first = await c.call(11, 5, join_body(5))
        assert first.error_code == 79 and first.member_id
        classic = first.member_id
        joined = await c.call(11, 7, join_body(7, classic))
        assert (joined.error_code, joined.generation_id, joined.protocol_type, joined.protocol_name, joined.leader) == (
            0,
            3,
            "consumer",
            "range",
            "",
        )
        synced = await c.call(14, 5, sync_body(5, classic, 3))
        assert synced.error_code == 0 and partitions(synced.assignment) == []  # m1 still holds everything
        # m1 revokes half; the classic member is told to rejoin and collects the rest
        r = await c.call(68, 1, hb_body(1, "m1", 2, owned=((tid, (0, 1, 2, 3)),)))
        kept = sorted(r.assignment.topic_partitions[0].partitions)
        r = await c.call(68, 1, hb_body(1, "m1", 2, owned=((tid, kept),)))
        assert r.member_epoch == 3
        assert (await c.call(12, 4, heartbeat_body(classic, 3))).error_code == 27
        assert (await c.call(11, 5, join_body(5, classic))).generation_id == 3
        synced = await c.call(14, 5, sync_body(5, classic, 3))
        assert partitions(synced.assignment) == sorted({0, 1, 2, 3} - set(kept))
        assert (await c.call(12, 4, heartbeat_body(classic, 3))).error_code == 0
        (g,) = (await c.call(69, 1, describe_body("g"))).groups
        assert g.group_state == "Stable"
        assert {m.member_id: m.member_type for m in g.members} == {"m1": 1, classic: 0}
        await c.close()
    finally:
        await b.stop()

    b = await started(tmp_path)
    try:
        c = await WireClient.connect(b.port)
        (g,) = (await c.call(69, 1, describe_body("g"))).groups
        assert (g.group_state, g.group_epoch) == ("Stable", 3)
        assert {m.member_id: m.member_type for m in g.members} == {"m1": 1, classic: 0}
        assert (await c.call(12, 4, heartbeat_body(classic, 3))).error_code == 0
        # the consumer member leaves: only a classic member is left, the group turns classic and rebalances
        r = await c.call(68, 1, hb_body(1, "m1", -1))
        assert (r.error_code, r.member_epoch) == (0, -1)
        (d,) = (await c.call(15, 5, describe_groups_body("g"))).groups
        assert (d.error_code, d.group_state, d.protocol_type) == (0, "PreparingRebalance", "consumer")
        assert [m.member_id for m in d.members] == [classic]
        assert (await c.call(12, 4, heartbeat_body(classic, 3))).error_code == 27
        joined = await c.call(11, 5, join_body(5, classic))
        assert (joined.error_code, joined.generation_id, joined.leader) == (0, 4, classic)
        synced = await c.call(
            14, 5, sync_body(5, classic, 4, ((classic, assignment_bytes((("t", (0, 1, 2, 3)),), 0)),))
        )
        assert partitions(synced.assignment) == [0, 1, 2, 3]
        (d,) = (await c.call(15, 5, describe_groups_body("g"))).groups
        assert d.group_state == "Stable"
        (gone,) = (await c.call(69, 1, describe_body("g"))).groups
        assert gone.error_code == 69  # no longer a consumer group
        await c.close()
    finally:
        await b.stop()


async def test_a_consumer_heartbeat_upgrades_a_running_classic_group(tmp_path):
    b = await started(tmp_path)
    try:
        b.create_topic("t", 4, {})
        c = await WireClient.connect(b.port)
        member = (await c.call(11, 5, join_body(5))).member_id
        joined = await c.call(11, 5, join_body(5, member))
        assert joined.error_code == 0 and joined.leader == member
        gen = joined.generation_id
        mine = assignment_bytes((("t", (0, 1, 2, 3)),), 0)
        assert (await c.call(14, 5, sync_body(5, member, gen, ((member, mine),)))).assignment == mine
        r = await c.call(68, 1, hb_body(1, "m1", 0, names=("t",), owned=(), timeout=30_000))
        assert (r.error_code, r.member_epoch) == (0, gen + 1)
        (g,) = (await c.call(69, 1, describe_body("g"))).groups
        held = {m.member_id: (m.member_type, m.member_epoch) for m in g.members}
        assert held == {member: (0, gen), "m1": (1, gen + 1)}
        assert (await c.call(12, 4, heartbeat_body(member, gen))).error_code == 27
        assert (await c.call(15, 5, describe_groups_body("g"))).groups[0].group_state == "Dead"
        await c.close()
    finally:
        await b.stop()


async def test_policy_disabled_refuses_both_ways(tmp_path):
    b = await started(tmp_path, **{"group.consumer.migration.policy": "disabled"})
    try:
        b.create_topic("t", 4, {})
        c = await WireClient.connect(b.port)
        member = (await c.call(11, 5, join_body(5))).member_id
        await c.call(11, 5, join_body(5, member))
        r = await c.call(68, 1, hb_body(1, "m1", 0, names=("t",), owned=(), timeout=30_000))
        assert r.error_code == 69 and r.error_message
        r = await c.call(68, 1, hb_body(1, "m1", 0, names=("t",), owned=(), timeout=30_000, group="h"))
        assert r.error_code == 0
        assert (await c.call(11, 5, join_body(5, group="h"))).error_code == 23
        await c.close()
    finally:
        await b.stop()
