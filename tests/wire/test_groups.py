"""Group and offsets APIs through a real socket against an in-process broker."""

import asyncio
import time

import pytest

from groupd.broker.app import Broker
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from tests.conftest import broker_config
from tests.harness import WireClient

# the storage-touching wire tests run on both engines (tests/conftest.py)
pytestmark = pytest.mark.engines

RANGE = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # ConsumerProtocolSubscription v0: topic "t"


def join_body(version, member_id="", group="g", instance=None):
    cls = codec.request_class(11, version)
    proto = codec.nested(cls, "JoinGroupRequestProtocol")
    return codec.make(
        cls,
        group_id=group,
        session_timeout=10_000,
        rebalance_timeout=10_000,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=(proto(name="range", metadata=RANGE),),
        reason=None,
    )


def sync_body(version, member_id, generation, assignments=(), group="g"):
    cls = codec.request_class(14, version)
    a = codec.nested(cls, "SyncGroupRequestAssignment")
    return codec.make(
        cls,
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=tuple(a(member_id=m, assignment=b) for m, b in assignments),
    )


async def start_broker(tmp_path, **overrides):
    b = Broker(broker_config(tmp_path, **overrides))
    await b.start()
    await wait_loaded(b)
    return b


async def wait_loaded(b):
    for _ in range(200):
        if b.coordinator.is_loaded():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("offsets partitions never loaded")


async def join_with_id(client, version=5, group="g"):
    first = await client.call(11, version, join_body(version, group=group))
    assert first.error_code == ErrorCode.member_id_required
    return first.member_id


async def test_parked_join_completes_when_initial_delay_passes(tmp_path):
    b = await start_broker(tmp_path, **{"group.initial.rebalance.delay.ms": "300"})
    try:
        c = await WireClient.connect(b.port)
        member = await join_with_id(c)
        started = time.monotonic()
        resp = await c.call(11, 5, join_body(5, member))
        waited = time.monotonic() - started
        assert resp.error_code == 0 and resp.generation_id == 1 and resp.leader == member
        assert 0.25 <= waited < 5, waited
        await c.close()
    finally:
        await b.stop()


async def test_two_members_on_two_connections_complete_one_generation(tmp_path):
    b = await start_broker(tmp_path, **{"group.initial.rebalance.delay.ms": "200"})
    try:
        c1, c2 = await WireClient.connect(b.port), await WireClient.connect(b.port)
        m1, m2 = await join_with_id(c1), await join_with_id(c2)
        r1, r2 = await asyncio.gather(c1.call(11, 5, join_body(5, m1)), c2.call(11, 5, join_body(5, m2)))
        assert r1.generation_id == r2.generation_id == 1
        leader = r1 if r1.leader == m1 else r2
        assert {m.member_id for m in leader.members} == {m1, m2}
        follower_sync = asyncio.create_task(
            c2.call(14, 3, sync_body(3, m2, 1)) if leader is r1 else c1.call(14, 3, sync_body(3, m1, 1))
        )
        await asyncio.sleep(0.05)
        assert not follower_sync.done(), "a follower's SyncGroup waits for the leader"
        leader_client, leader_id = (c1, m1) if leader is r1 else (c2, m2)
        s = await leader_client.call(14, 3, sync_body(3, leader_id, 1, [(m1, b"A1"), (m2, b"A2")]))
        f = await follower_sync
        assert {s.assignment, f.assignment} == {b"A1", b"A2"}
        await c1.close()
        await c2.close()
    finally:
        await b.stop()


async def test_requests_behind_a_parked_join_wait_their_turn(tmp_path):
    b = await start_broker(tmp_path, **{"group.initial.rebalance.delay.ms": "400"})
    try:
        c, other = await WireClient.connect(b.port), await WireClient.connect(b.port)
        member = await join_with_id(c)
        c.send(11, 5, join_body(5, member))
        c.send(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        started = time.monotonic()
        # another connection is served at once meanwhile
        await other.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert time.monotonic() - started < 0.3
        join = await asyncio.wait_for(c.recv(), 5)
        versions = await asyncio.wait_for(c.recv(), 5)
        assert join.error_code == 0 and versions.error_code == 0
        assert time.monotonic() - started >= 0.35
        await c.close()
        await other.close()
    finally:
        await b.stop()


async def test_load_in_progress_then_served(tmp_path):
    b = Broker(broker_config(tmp_path))
    gate = asyncio.Event()
    b.coordinator.load_gate = gate
    await b.start()
    try:
        c = await WireClient.connect(b.port)
        resp = await c.call(11, 5, join_body(5))
        assert resp.error_code == ErrorCode.coordinator_load_in_progress
        hb = await c.call(12, 3, {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None})
        assert hb.error_code == 0, "Kafka answers NONE to heartbeats while loading"
        gate.set()
        await wait_loaded(b)
        resp = await c.call(11, 5, join_body(5))
        assert resp.error_code == ErrorCode.member_id_required
        await c.close()
    finally:
        await b.stop()


async def test_not_coordinator_for_a_partition_not_owned(broker, wire):
    await wait_loaded(broker)
    broker.coordinator.owned.discard(broker.coordinator.partition_for("g"))
    resp = await wire.call(11, 5, join_body(5))
    assert resp.error_code == ErrorCode.not_coordinator
    fc = await wire.call(10, 3, {"key": "g", "key_type": 0})
    assert fc.error_code == ErrorCode.not_coordinator


def commit_body(group, topic, partition, offset, metadata):
    cls = codec.request_class(8, 8)
    t = codec.nested(cls, "OffsetCommitRequestTopic")
    p = codec.nested(cls, "OffsetCommitRequestPartition")
    return codec.make(
        cls,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            t(
                name=topic,
                partitions=(
                    p(
                        partition_index=partition,
                        committed_offset=offset,
                        committed_leader_epoch=3,
                        committed_metadata=metadata,
                    ),
                ),
            ),
        ),
    )


def fetch_body(group, topic, partitions):
    cls = codec.request_class(9, 7)
    t = codec.nested(cls, "OffsetFetchRequestTopic")
    return codec.make(
        cls, group_id=group, topics=(t(name=topic, partition_indexes=tuple(partitions)),), require_stable=False
    )


@pytest.mark.parametrize("metadata", ["", "ünïcödé ✓", "x" * 4096])
async def test_commit_fetch_round_trip_survives_restart(tmp_path, metadata):
    b = await start_broker(tmp_path)
    b.create_topic("t", 2, {})
    c = await WireClient.connect(b.port)
    resp = await c.call(8, 8, commit_body("cg", "t", 1, 99, metadata))
    assert resp.topics[0].partitions[0].error_code == 0
    unknown = await c.call(8, 8, commit_body("cg", "t", 7, 1, ""))
    assert unknown.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
    too_big = await c.call(8, 8, commit_body("cg", "t", 0, 1, "y" * 4097))
    assert too_big.topics[0].partitions[0].error_code == ErrorCode.offset_metadata_too_large
    await c.close()
    await b.stop()
    b2 = await start_broker(tmp_path)
    c2 = await WireClient.connect(b2.port)
    got = await c2.call(9, 7, fetch_body("cg", "t", [0, 1]))
    by_partition = {p.partition_index: p for p in got.topics[0].partitions}
    assert by_partition[1].committed_offset == 99 and by_partition[1].metadata == metadata
    assert by_partition[1].committed_leader_epoch == 3
    assert by_partition[0].committed_offset == -1
    await c2.close()
    await b2.stop()


async def test_deleted_group_stays_deleted_after_restart(tmp_path):
    b = await start_broker(tmp_path)
    b.create_topic("t", 1, {})
    c = await WireClient.connect(b.port)
    await c.call(8, 8, commit_body("doomed", "t", 0, 5, "m"))
    listed = await c.call(16, 4, {"states_filter": ()})
    assert "doomed" in {g.group_id for g in listed.groups}
    deleted = await c.call(42, 2, {"groups_names": ("doomed", "never-was")})
    assert {r.group_id: r.error_code for r in deleted.results} == {
        "doomed": 0,
        "never-was": ErrorCode.group_id_not_found,
    }
    await c.close()
    await b.stop()
    b2 = await start_broker(tmp_path)
    c2 = await WireClient.connect(b2.port)
    listed = await c2.call(16, 4, {"states_filter": ()})
    assert "doomed" not in {g.group_id for g in listed.groups}
    got = await c2.call(9, 7, fetch_body("doomed", "t", [0]))
    assert got.topics[0].partitions[0].committed_offset == -1
    await c2.close()
    await b2.stop()


async def test_describe_and_non_empty_delete(tmp_path):
    b = await start_broker(tmp_path)
    try:
        c = await WireClient.connect(b.port)
        member = await join_with_id(c)
        join = await c.call(11, 5, join_body(5, member))
        await c.call(14, 3, sync_body(3, member, join.generation_id, [(member, b"ASSIGN")]))
        d = await c.call(15, 5, {"groups": ("g",), "include_authorized_operations": False})
        g = d.groups[0]
        assert g.group_state == "Stable" and g.protocol_data == "range"
        assert g.members[0].member_assignment == b"ASSIGN" and g.members[0].client_host == "/127.0.0.1"
        assert g.authorized_operations == -(1 << 31)  # not asked for: the schema's default
        asked = await c.call(15, 5, {"groups": ("g", "nobody"), "include_authorized_operations": True})
        # no authorizer: every operation a group supports (READ, DELETE, DESCRIBE, DESCRIBE/ALTER_CONFIGS)
        assert [(x.group_id, x.authorized_operations) for x in asked.groups] == [("g", 3400), ("nobody", 3400)]
        for version in (5, 6):  # before v6 an unknown group is Dead with no error; v6 says GROUP_ID_NOT_FOUND
            v = await c.call(15, version, {"groups": ("g", "nobody"), "include_authorized_operations": False})
            g6, nobody = v.groups
            assert (g6.error_code, g6.group_state) == (0, "Stable")
            assert (nobody.error_code, nobody.group_state, nobody.members) == (
                (69, "Dead", ()) if version == 6 else (0, "Dead", ())
            )
            if version == 6:
                assert (g6.error_message, nobody.error_message) == (None, "Group nobody not found.")
        deleted = await c.call(42, 2, {"groups_names": ("g",)})
        assert deleted.results[0].error_code == ErrorCode.non_empty_group
        await c.close()
    finally:
        await b.stop()


async def test_timer_firing_a_tick_early_still_completes_the_join(tmp_path):
    """asyncio runs timers up to one clock resolution early; the join must still complete."""
    b = await start_broker(tmp_path, **{"group.initial.rebalance.delay.ms": "100"})
    try:
        loop = asyncio.get_running_loop()
        original = loop.call_later
        loop.call_later = lambda delay, cb, *args: original(max(0.0, delay - 0.005), cb, *args)  # 5 ms early
        c = await WireClient.connect(b.port)
        member = await join_with_id(c)
        resp = await c.call(11, 5, join_body(5, member), timeout=5)
        assert resp.error_code == 0 and resp.generation_id == 1
        await c.close()
    finally:
        loop.call_later = original
        await b.stop()


async def test_joins_syncs_and_leaves_are_logged_as_member_events(tmp_path, caplog):
    """Answered from a callback (no coroutine per request), they are still logged once each."""
    import logging

    b = await start_broker(tmp_path, **{"group.initial.rebalance.delay.ms": "0"})
    try:
        with caplog.at_level(logging.INFO, logger="groupd.coordinator"):
            c = await WireClient.connect(b.port)
            member = await join_with_id(c, group="logged")
            join = await c.call(11, 5, join_body(5, member, group="logged"))
            await c.call(14, 3, sync_body(3, member, join.generation_id, [(member, b"a")], group="logged"))
            await c.call(
                13,
                3,
                {
                    "group_id": "logged",
                    "members": (
                        codec.make(
                            codec.nested(codec.request_class(13, 3), "MemberIdentity"),
                            member_id=member,
                            group_instance_id=None,
                        ),
                    ),
                },
            )
            await c.close()
        events = [
            (r.getMessage(), getattr(r, "fields", {}).get("member"))
            for r in caplog.records
            if r.name == "groupd.coordinator"
        ]
        # the first join (MEMBER_ID_REQUIRED) is an event too, said as the step it is: the member id is handed out there
        assert [m for m, who in events if who == member] == [
            f"new member {member} is given its id and joins again",
            "member joined",
            "member synced",
            "members left",
        ]
    finally:
        await b.stop()
