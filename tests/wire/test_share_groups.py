"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77) through a real socket: a join gets an empty
assignment while its partitions are initialized, a later heartbeat gets them, leaving, a session that
times out (short configured timeouts), the share.version gate, and a restart that keeps the group."""

import asyncio
import logging

import pytest

from groupd.broker.app import Broker
from groupd.coordinator.share.group import share_groups
from groupd.coordinator.share_state.persister import SharePartitionKey
from groupd.protocol import codec
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.wire.test_group_configs import GROUP, SET, incremental
from tests.wire.test_groups import wait_loaded
from tests.wire.test_leader_epochs import produce
from tests.wire.test_metrics import http_get, value

# the storage-touching wire tests run on both engines (tests/conftest.py)
pytestmark = pytest.mark.engines

FAST = {"group.share.assignment.interval.ms": "0"}
SHORT = {  # a session of 600 ms (Kafka's bounds allow it once the minimums are lowered)
    "group.share.min.session.timeout.ms": "300", "group.share.session.timeout.ms": "600",
    "group.share.min.heartbeat.interval.ms": "100", "group.share.heartbeat.interval.ms": "200",
}


def hb_body(member_id, epoch, names=None, group="g"):
    return codec.make(codec.request_class(76, 1), group_id=group, member_id=member_id, member_epoch=epoch,
                      rack_id=None, subscribed_topic_names=names)


def describe_body(*groups):
    return codec.make(codec.request_class(77, 1), group_ids=tuple(groups), include_authorized_operations=False)


async def started(tmp_path, **overrides):
    b = Broker(broker_config(tmp_path, **{**FAST, **overrides}))
    await b.start()
    await wait_loaded(b)
    return b


async def initialized(b, group, tid, partitions):
    """Which of these partitions the share coordinator holds a state of (a state epoch above 0)."""
    out = []
    for p in partitions:
        summary = await b.share_persister.read_summary(SharePartitionKey(group, tid, p), 0)
        if summary.state_epoch > 0:
            out.append(p)
    return out


def parts(r):
    return sorted((tp.topic_id, p) for tp in r.assignment.topic_partitions for p in tp.partitions)


async def until_assigned(c, member, epoch, want, r=None, group="g"):
    if r is not None and r.assignment is not None and len(parts(r)) == want:
        return r
    for _ in range(100):
        r = await c.call(76, 1, hb_body(member, epoch, group=group))
        assert r.error_code == 0, r
        epoch = r.member_epoch
        if r.assignment is not None and len(parts(r)) == want:
            return r
        await asyncio.sleep(0.02)
    raise AssertionError("no assignment")


async def test_join_initialize_assign_leave_and_restart(tmp_path):
    b = await started(tmp_path)
    try:
        tid = b.create_topic("orders", 3, {}).topic_id
        c = await WireClient.connect(b.port)
        versions = await c.call(
            18, 3, codec.make(codec.request_class(18, 3), client_software_name="t", client_software_version="1")
        )
        keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert keys[76] == (1, 1) and keys[77] == (1, 1)
        assert {(f.name, f.min_version, f.max_version) for f in versions.supported_features} >= {
            ("share.version", 0, 1)
        }
        assert {(f.name, f.min_version_level, f.max_version_level) for f in versions.finalized_features} >= {
            ("share.version", 1, 1)
        }
        r = await c.call(76, 1, hb_body("m1", 0, names=("orders",)))
        assert (r.error_code, r.member_id, r.member_epoch) == (0, "m1", 2)
        assert codec.millis(r.heartbeat_interval) == 5000
        assert r.assignment is not None and r.assignment.topic_partitions == ()  # not initialized yet
        r = await until_assigned(c, "m1", 2, 3)
        assert parts(r) == [(tid, 0), (tid, 1), (tid, 2)] and r.member_epoch == 3
        assert await initialized(b, "g", tid, range(3)) == [0, 1, 2]
        r2 = await c.call(76, 1, hb_body("m2", 0, names=("orders",)))
        assert r2.error_code == 0
        r2 = await until_assigned(c, "m2", r2.member_epoch, 1, r2)
        (g,) = (await c.call(77, 1, describe_body("g"))).groups
        assert (g.error_code, g.group_state, g.assignor_name) == (0, "Stable", "simple")
        assert sorted(m.member_id for m in g.members) == ["m1", "m2"]
        assert all(m.subscribed_topic_names == ("orders",) for m in g.members)
        (missing,) = (await c.call(77, 1, describe_body("nope"))).groups
        assert missing.error_code == 69
        left = await c.call(76, 1, hb_body("m2", -1))
        assert (left.error_code, left.member_epoch) == (0, -1)
        bad = await c.call(76, 1, hb_body("x" * 37, 0, names=("orders",)))
        assert bad.error_code == 42
        unknown = await c.call(76, 1, hb_body("m9", 5))
        assert unknown.error_code == 25
        await c.close()
    finally:
        await b.stop()

    b = await started(tmp_path)
    try:
        c = await WireClient.connect(b.port)
        (g,) = (await c.call(77, 1, describe_body("g"))).groups
        assert (g.error_code, g.group_state) == (0, "Stable")
        assert [m.member_id for m in g.members] == ["m1"]
        assert sorted(p for tp in g.members[0].assignment.topic_partitions for p in tp.partitions) == [0, 1, 2]
        r = await c.call(76, 1, hb_body("m1", g.members[0].member_epoch))
        assert r.error_code == 0
        await c.close()
    finally:
        await b.stop()


async def test_session_timeout_removes_the_member(tmp_path):
    b = await started(tmp_path, **SHORT)
    try:
        b.create_topic("orders", 1, {})
        c = await WireClient.connect(b.port)
        r = await c.call(76, 1, hb_body("m1", 0, names=("orders",)))
        assert r.error_code == 0 and codec.millis(r.heartbeat_interval) == 200
        for _ in range(100):
            (g,) = (await c.call(77, 1, describe_body("g"))).groups
            if g.group_state == "Empty":
                break
            await asyncio.sleep(0.05)
        assert g.group_state == "Empty" and g.members == ()
        gone = await c.call(76, 1, hb_body("m1", r.member_epoch))
        assert gone.error_code == 25  # UNKNOWN_MEMBER_ID
        await c.close()
    finally:
        await b.stop()


async def test_share_version_0_refuses_share_apis(tmp_path):
    b = await started(tmp_path, **{"share.version": "0"})
    try:
        c = await WireClient.connect(b.port)
        r = await c.call(76, 1, hb_body("m1", 0, names=("orders",)))
        assert r.error_code == 35
        (g,) = (await c.call(77, 1, describe_body("g"))).groups
        assert g.error_code == 35
        versions = await c.call(
            18, 3, codec.make(codec.request_class(18, 3), client_software_name="t", client_software_version="1")
        )
        assert not any(f.name == "share.version" for f in versions.finalized_features)
        await c.close()
    finally:
        await b.stop()


async def test_list_groups_and_delete_groups(tmp_path):
    b = await started(tmp_path)
    try:
        tid = b.create_topic("orders", 2, {}).topic_id
        c = await WireClient.connect(b.port)
        r = await c.call(76, 1, hb_body("m1", 0, names=("orders",)))
        await until_assigned(c, "m1", r.member_epoch, 2)
        listed = await c.call(16, 5, codec.make(codec.request_class(16, 5), states_filter=(), types_filter=("share",)))
        assert [(g.group_id, g.group_state, g.group_type, g.protocol_type) for g in listed.groups] == [
            ("g", "Stable", "share", "share")
        ]
        delete = codec.make(codec.request_class(42, 2), groups_names=("g",))
        (res,) = (await c.call(42, 2, delete)).results
        assert res.error_code == 68  # NON_EMPTY_GROUP
        assert await initialized(b, "g", tid, range(2)) == [0, 1]
        await c.call(76, 1, hb_body("m1", -1))
        (res,) = (await c.call(42, 2, delete)).results
        assert res.error_code == 0
        assert await initialized(b, "g", tid, range(2)) == []  # the share state went first
        listed = await c.call(16, 5, codec.make(codec.request_class(16, 5), states_filter=(), types_filter=()))
        assert listed.groups == ()
        (g,) = (await c.call(77, 1, describe_body("g"))).groups
        assert g.error_code == 69
        # a deleted topic leaves a share group's partitions (Kafka's maybeCleanupShareGroupState)
        r = await c.call(76, 1, hb_body("m2", 0, names=("orders",), group="h"))
        await until_assigned(c, "m2", r.member_epoch, 2, group="h")
        b.delete_topic("orders")
        shard = b.coordinator.shard_for("h")
        assert share_groups(shard.state)["h"].initialized == {}
        await c.close()
    finally:
        await b.stop()


def describe_offsets_body(group, topics=None, version=1):
    cls = codec.request_class(90, version)
    g_cls, t_cls = (
        codec.nested(cls, "DescribeShareGroupOffsetsRequestGroup"),
        codec.nested(cls, "DescribeShareGroupOffsetsRequestTopic"),
    )
    ts = None if topics is None else tuple(codec.make(t_cls, topic_name=n, partitions=tuple(ps)) for n, ps in topics)
    return codec.make(cls, groups=(codec.make(g_cls, group_id=group, topics=ts),))


def alter_offsets_body(group, topics):
    cls = codec.request_class(91, 0)
    t_cls, p_cls = (
        codec.nested(cls, "AlterShareGroupOffsetsRequestTopic"),
        codec.nested(cls, "AlterShareGroupOffsetsRequestPartition"),
    )
    return codec.make(
        cls,
        group_id=group,
        topics=tuple(
            codec.make(
                t_cls,
                topic_name=n,
                partitions=tuple(codec.make(p_cls, partition_index=p, start_offset=o) for p, o in ps),
            )
            for n, ps in topics
        ),
    )


def delete_offsets_body(group, names):
    cls = codec.request_class(92, 0)
    t_cls = codec.nested(cls, "DeleteShareGroupOffsetsRequestTopic")
    return codec.make(cls, group_id=group, topics=tuple(codec.make(t_cls, topic_name=n) for n in names))


async def test_offsets_admin_apis(tmp_path):
    b = await started(tmp_path)
    try:
        tid = b.create_topic("orders", 2, {}).topic_id
        c = await WireClient.connect(b.port)
        await produce(c, "orders", 0, 10)
        r = await c.call(76, 1, hb_body("m1", 0, names=("orders",)))
        await until_assigned(c, "m1", r.member_epoch, 2)
        # with a member: NON_EMPTY_GROUP (scenario 49)
        altered = await c.call(91, 0, alter_offsets_body("g", (("orders", ((0, 5),)),)))
        assert altered.error_code == 68
        await c.call(76, 1, hb_body("m1", -1))
        altered = await c.call(91, 0, alter_offsets_body("g", (("orders", ((0, 5), (9, 1))), ("nope", ((0, 1),)))))
        assert altered.error_code == 0
        rows = {(t.topic_name, p.partition_index): p.error_code for t in altered.responses for p in t.partitions}
        assert rows == {("orders", 0): 0, ("orders", 9): 3, ("nope", 0): 3}
        assert (await b.share_persister.read_summary(SharePartitionKey("g", tid, 0), 0)).start_offset == 5
        # Describe: the start offset, and lag = end offset - start - delivery complete (0 after an alter)
        (g,) = (await c.call(90, 1, describe_offsets_body("g", (("orders", (0,)), ("nope", (0,)))))).groups
        by = {(t.topic_name, p.partition_index): (p.start_offset, p.lag) for t in g.topics for p in t.partitions}
        assert by[("orders", 0)] == (5, 5)
        assert by[("nope", 0)] == (-1, -1)
        (g,) = (await c.call(90, 1, describe_offsets_body("g"))).groups  # every initialized partition
        assert sorted((t.topic_name, p.partition_index) for t in g.topics for p in t.partitions) == [
            ("orders", 0),
            ("orders", 1),
        ]
        (g0,) = (await c.call(90, 0, describe_offsets_body("g", version=0))).groups
        assert g0.error_code == 0
        # Delete (scenario 50)
        deleted = await c.call(92, 0, delete_offsets_body("g", ("orders", "nope")))
        assert deleted.error_code == 0
        assert {t.topic_name: t.error_code for t in deleted.responses} == {"orders": 0, "nope": 3}
        assert await initialized(b, "g", tid, range(2)) == []
        again = await c.call(92, 0, delete_offsets_body("g", ("orders",)))
        assert {t.topic_name: t.error_code for t in again.responses} == {"orders": 3}
        missing = await c.call(92, 0, delete_offsets_body("nobody", ("orders",)))
        assert missing.error_code == 69
        await c.close()
    finally:
        await b.stop()


async def test_metrics_and_log_lines(tmp_path, caplog):
    b = await started(tmp_path, **{"metrics.listener": "127.0.0.1:0"})
    try:
        b.create_topic("orders", 1, {})
        c = await WireClient.connect(b.port)
        with caplog.at_level(logging.INFO, logger="groupd.coordinator"):
            r = await c.call(76, 1, hb_body("m1", 0, names=("orders",)))
            await c.call(76, 1, hb_body("m2", 0, names=("orders",), group="other"))
            await c.call(76, 1, hb_body("m2", -1, group="other"))
            await c.call(76, 1, hb_body("m1", 7))  # a greater epoch: fenced
        events = [(rec.getMessage(), rec.fields) for rec in caplog.records if hasattr(rec, "fields")]
        assert ("share member joined", {"group": "g", "member": "m1", "epoch": 2, "request_epoch": 0}) in events
        assert ("share member left", {"group": "other", "member": "m2", "epoch": -1, "request_epoch": -1}) in events
        refused = [f for msg, f in events if msg == "share member refused"]
        assert refused and refused[0]["request_epoch"] == 7 and refused[0]["error"] == 110
        assert r.error_code == 0
        _, text = await http_get(b.metrics_server.port, "/metrics")
        assert value(text, "groupd_share_groups", state="Stable") == 1
        assert value(text, "groupd_share_groups", state="Empty") == 1
        assert value(text, "groupd_share_group_members") == 1
        await c.close()
    finally:
        await b.stop()


async def test_a_groups_share_configs_are_honoured(tmp_path):
    b = await started(tmp_path)
    try:
        b.create_topic("orders", 1, {})
        c = await WireClient.connect(b.port)
        altered = await c.call(44, 1, incremental([(GROUP, "g", [("share.heartbeat.interval.ms", SET, "7000")])]))
        assert altered.responses[0].error_code == 0
        r = await c.call(76, 1, hb_body("m1", 0, names=("orders",)))
        assert (r.error_code, codec.millis(r.heartbeat_interval)) == (0, 7000)
        other = await c.call(76, 1, hb_body("m1", 0, names=("orders",), group="other"))
        assert codec.millis(other.heartbeat_interval) == 5000  # the broker's key elsewhere
        assert b.share_group_config("g").heartbeat_interval_ms == 7000
        await c.close()
    finally:
        await b.stop()
