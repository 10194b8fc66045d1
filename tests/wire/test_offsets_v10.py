"""OffsetCommit and OffsetFetch v10 (KIP-848): topics named by id, through a real socket.

Kafka facts (OffsetCommitRequest/Response.json and OffsetFetchRequest/Response.json, validVersions up
to 10; KafkaApis of 4.1+): v10 carries a topic's ``TopicId`` and no name, in the request and in the
response. The broker resolves each id through its metadata; an id it does not know (the zero id too) is
answered UNKNOWN_TOPIC_ID (100) on every partition asked for under it, echoing the id, and never
reaches the coordinator; a known id with a partition out of range is UNKNOWN_TOPIC_OR_PARTITION as by
name. Offsets stay stored by topic name, so v9 (names) and v10 (ids) read each other's commits. A
fetch of every offset (topics null) names each topic by its current id and leaves out a topic the
broker no longer knows. OffsetFetch v10 keeps v9's require_stable and member id/epoch.
"""

import asyncio
import struct
import uuid

import pytest
from kafka.protocol.consumer import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from tests.wire.test_groups import wait_loaded
from tests.wire.test_transactions import init_body
from tests.wire.test_txn_offsets import txn_body

UNKNOWN_TOPIC_ID = ErrorCode.unknown_topic_id  # 100
UNSTABLE = 88


def commit_body(version, group, topics):
    """``topics``: [(name for v9 / topic id for v10, [(partition, offset), ...]), ...]."""
    cls = codec.request_class(8, version)
    t, p = codec.nested(cls, "OffsetCommitRequestTopic"), codec.nested(cls, "OffsetCommitRequestPartition")
    key = "topic_id" if version >= 10 else "name"
    entries = tuple(
        codec.make(
            t,
            **{key: topic},
            partitions=tuple(
                codec.make(
                    p, partition_index=i, committed_offset=off, committed_leader_epoch=7, committed_metadata=f"m{off}"
                )
                for i, off in parts
            ),
        )
        for topic, parts in topics
    )
    return codec.make(
        cls, group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, topics=entries
    )


def fetch_body(version, groups, require_stable=False):
    """``groups``: {group: [(name or topic id, [partitions]), ...] or None for every offset}."""
    cls = codec.request_class(9, version)
    g, t = codec.nested(cls, "OffsetFetchRequestGroup"), codec.nested(cls, "OffsetFetchRequestTopics")
    key = "topic_id" if version >= 10 else "name"
    entries = tuple(
        codec.make(
            g,
            group_id=group,
            member_id=None,
            member_epoch=-1,
            topics=None
            if topics is None
            else tuple(codec.make(t, **{key: k}, partition_indexes=tuple(ps)) for k, ps in topics),
        )
        for group, topics in groups.items()
    )
    return codec.make(cls, groups=entries, require_stable=require_stable)


def commit_errors(resp, version=10):
    key = "topic_id" if version >= 10 else "name"
    return [(getattr(t, key), p.partition_index, p.error_code) for t in resp.topics for p in t.partitions]


def fetched(group, version=10):
    """[(topic key, partition, offset, leader epoch, metadata, error), ...] of one response group."""
    key = "topic_id" if version >= 10 else "name"
    return [
        (getattr(t, key), p.partition_index, p.committed_offset, p.committed_leader_epoch, p.metadata, p.error_code)
        for t in group.topics
        for p in t.partitions
    ]


@pytest.fixture
async def b(broker):
    await wait_loaded(broker)
    return broker


@pytest.fixture
def c(b, wire):
    return wire


async def test_api_versions_advertises_v10_of_both(c):
    resp = await c.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    spec = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert spec[8] == (0, 10) and spec[9] == (0, 10)  # from v0: Kafka 3.9's floors too (issue 32)


async def test_commit_then_fetch_by_topic_id(b, c):
    t = b.create_topic("t", 2, {})
    resp = await c.call(8, 10, commit_body(10, "g", [(t.topic_id, [(0, 5), (1, 6)])]))
    assert commit_errors(resp) == [(t.topic_id, 0, 0), (t.topic_id, 1, 0)]
    got = await c.call(9, 10, fetch_body(10, {"g": [(t.topic_id, [1, 0])]}))
    (group,) = got.groups
    assert (group.group_id, group.error_code) == ("g", 0)
    assert fetched(group) == [(t.topic_id, 1, 6, 7, "m6", 0), (t.topic_id, 0, 5, 7, "m5", 0)]


async def test_an_unknown_topic_id_is_unknown_topic_id_on_every_partition(b, c):
    stranger = uuid.uuid4()
    resp = await c.call(8, 10, commit_body(10, "g", [(stranger, [(0, 1), (3, 2)])]))
    assert commit_errors(resp) == [(stranger, 0, UNKNOWN_TOPIC_ID), (stranger, 3, UNKNOWN_TOPIC_ID)]
    zero = await c.call(8, 10, commit_body(10, "g", [(codec.ZERO_UUID, [(0, 1)])]))
    assert commit_errors(zero) == [(None, 0, UNKNOWN_TOPIC_ID)]  # kio reads the zero id as None
    # nothing reached the coordinator: the group was never made
    assert b.coordinator.shard_for("g").state.groups.get("g") is None
    got = await c.call(9, 10, fetch_body(10, {"g": [(stranger, [0, 3])]}))
    assert fetched(got.groups[0]) == [
        (stranger, 0, -1, -1, "", UNKNOWN_TOPIC_ID),
        (stranger, 3, -1, -1, "", UNKNOWN_TOPIC_ID),
    ]
    assert got.groups[0].error_code == 0


async def test_known_unknown_and_out_of_range_in_one_request(b, c):
    t, u = b.create_topic("t", 2, {}), b.create_topic("u", 1, {})
    stranger = uuid.uuid4()
    resp = await c.call(
        8, 10, commit_body(10, "g", [(t.topic_id, [(0, 10), (5, 1)]), (stranger, [(0, 1)]), (u.topic_id, [(0, 20)])])
    )
    assert sorted(commit_errors(resp), key=str) == sorted(
        [
            (t.topic_id, 0, 0),
            (t.topic_id, 5, ErrorCode.unknown_topic_or_partition),
            (stranger, 0, UNKNOWN_TOPIC_ID),
            (u.topic_id, 0, 0),
        ],
        key=str,
    )
    got = await c.call(9, 10, fetch_body(10, {"g": [(t.topic_id, [0, 1]), (stranger, [0]), (u.topic_id, [0])]}))
    assert fetched(got.groups[0]) == [
        (t.topic_id, 0, 10, 7, "m10", 0),
        (t.topic_id, 1, -1, -1, "", 0),
        (u.topic_id, 0, 20, 7, "m20", 0),
        (stranger, 0, -1, -1, "", UNKNOWN_TOPIC_ID),  # the unknown ids come after the coordinator's answers
    ]


async def test_v9_and_v10_read_each_others_offsets(b, c):
    t = b.create_topic("t", 2, {})
    assert commit_errors(await c.call(8, 9, commit_body(9, "g", [("t", [(0, 3)])])), 9) == [("t", 0, 0)]
    assert commit_errors(await c.call(8, 10, commit_body(10, "g", [(t.topic_id, [(1, 4)])]))) == [(t.topic_id, 1, 0)]
    by_id = await c.call(9, 10, fetch_body(10, {"g": [(t.topic_id, [0, 1])]}))
    assert fetched(by_id.groups[0]) == [(t.topic_id, 0, 3, 7, "m3", 0), (t.topic_id, 1, 4, 7, "m4", 0)]
    by_name = await c.call(9, 9, fetch_body(9, {"g": [("t", [0, 1])]}))
    assert fetched(by_name.groups[0], 9) == [("t", 0, 3, 7, "m3", 0), ("t", 1, 4, 7, "m4", 0)]
    # and the classic single-group fetch (v7) sees the v10 commit too
    old = await c.call(9, 7, codec.make(codec.request_class(9, 7), group_id="g", topics=None, require_stable=False))
    assert sorted((t.name, p.partition_index, p.committed_offset) for t in old.topics for p in t.partitions) == [
        ("t", 0, 3),
        ("t", 1, 4),
    ]


async def test_fetch_all_offsets_names_topics_by_id_across_groups(b, c):
    t, u = b.create_topic("t", 1, {}), b.create_topic("u", 2, {})
    await c.call(8, 9, commit_body(9, "g1", [("t", [(0, 1)]), ("u", [(1, 2)])]))
    await c.call(8, 10, commit_body(10, "g2", [(u.topic_id, [(0, 3)])]))
    got = await c.call(9, 10, fetch_body(10, {"g1": None, "g2": None, "nobody": None}))
    by_group = {g.group_id: sorted(fetched(g), key=str) for g in got.groups}
    assert by_group == {
        "g1": sorted([(t.topic_id, 0, 1, 7, "m1", 0), (u.topic_id, 1, 2, 7, "m2", 0)], key=str),
        "g2": [(u.topic_id, 0, 3, 7, "m3", 0)],
        "nobody": [],
    }


async def test_a_deleted_and_recreated_topic_has_a_new_id(b, c):
    old = b.create_topic("t", 1, {})
    assert commit_errors(await c.call(8, 10, commit_body(10, "g", [(old.topic_id, [(0, 9)])]))) == [
        (old.topic_id, 0, 0)
    ]
    b.delete_topic("t")
    new = b.create_topic("t", 1, {})
    assert new.topic_id != old.topic_id
    # the old id is gone; the offsets went with the topic (Kafka deletes a deleted partition's offsets)
    assert commit_errors(await c.call(8, 10, commit_body(10, "g", [(old.topic_id, [(0, 1)])]))) == [
        (old.topic_id, 0, UNKNOWN_TOPIC_ID)
    ]
    # (tombstones, durable a moment after the deletion: a require_stable fetch is answered after them)
    got = await c.call(9, 10, fetch_body(10, {"g": [(old.topic_id, [0]), (new.topic_id, [0])]}, require_stable=True))
    assert fetched(got.groups[0]) == [(new.topic_id, 0, -1, -1, "", 0), (old.topic_id, 0, -1, -1, "", UNKNOWN_TOPIC_ID)]
    assert commit_errors(await c.call(8, 10, commit_body(10, "g", [(new.topic_id, [(0, 2)])]))) == [
        (new.topic_id, 0, 0)
    ]
    got = await c.call(9, 10, fetch_body(10, {"g": None}))
    assert fetched(got.groups[0]) == [(new.topic_id, 0, 2, 7, "m2", 0)]


async def test_a_topic_gone_since_its_commit_is_left_out_of_fetch_all(b, c, monkeypatch):
    t = b.create_topic("t", 1, {})
    await c.call(8, 10, commit_body(10, "g", [(t.topic_id, [(0, 9)])]))
    # the offsets outlive the topic, as when its offsets partition was still loading at the deletion
    monkeypatch.setattr(b.coordinator, "remove_topic", lambda name: None)
    b.delete_topic("t")
    got = await c.call(9, 10, fetch_body(10, {"g": None}))
    assert fetched(got.groups[0]) == []  # no id to name it by
    assert fetched((await c.call(9, 9, fetch_body(9, {"g": None}))).groups[0], 9) == [("t", 0, 9, 7, "m9", 0)]


async def test_require_stable_by_id_sees_open_transactional_offsets(b, c):
    t = b.create_topic("t", 2, {})
    init = await c.call(22, 4, init_body("tx-1"))
    pid, epoch = init.producer_id, init.producer_epoch
    add_offsets = codec.make(
        codec.request_class(25, 3), transactional_id="tx-1", producer_id=pid, producer_epoch=epoch, group_id="g"
    )
    assert (await c.call(25, 3, add_offsets)).error_code == 0  # the offsets partition joins the transaction
    await c.call(28, 3, txn_body(3, "g", "t", [(0, 10)], producer_id=pid, epoch=epoch))
    got = await c.call(9, 10, fetch_body(10, {"g": [(t.topic_id, [0, 1])]}, require_stable=True))
    assert fetched(got.groups[0]) == [(t.topic_id, 0, -1, -1, "", UNSTABLE), (t.topic_id, 1, -1, -1, "", 0)]
    await b.coordinator.complete_transaction("g", pid, epoch, True)
    got = await c.call(9, 10, fetch_body(10, {"g": [(t.topic_id, [0])]}, require_stable=True))
    assert fetched(got.groups[0]) == [(t.topic_id, 0, 10, 5, "m10", 0)]


async def test_coordinator_errors_are_keyed_by_id(b, c):
    t = b.create_topic("t", 1, {})
    b.coordinator.owned.discard(b.coordinator.partition_for("g"))
    stranger = uuid.uuid4()
    resp = await c.call(8, 10, commit_body(10, "g", [(t.topic_id, [(0, 1)]), (stranger, [(0, 1)])]))
    assert commit_errors(resp) == [(t.topic_id, 0, ErrorCode.not_coordinator), (stranger, 0, UNKNOWN_TOPIC_ID)]
    got = await c.call(9, 10, fetch_body(10, {"g": [(t.topic_id, [0]), (stranger, [0])]}))
    assert (got.groups[0].error_code, got.groups[0].topics) == (ErrorCode.not_coordinator, ())


async def test_the_offsets_topic_id_is_refused_as_its_name_is(b, c):
    await c.call(10, 3, {"key": "g", "key_type": 0})  # creates __consumer_offsets
    resp = await c.call(8, 10, commit_body(10, "g", [(b.internal_topics["__consumer_offsets"].topic_id, [(0, 1)])]))
    v9 = await c.call(8, 9, commit_body(9, "g", [("__consumer_offsets", [(0, 1)])]))
    assert commit_errors(resp) == [
        (b.internal_topics["__consumer_offsets"].topic_id, 0, ErrorCode.unknown_topic_or_partition)
    ]
    assert commit_errors(v9, 9) == [("__consumer_offsets", 0, ErrorCode.unknown_topic_or_partition)]


async def test_frames_of_another_codec_kafka_python_v10_schemas(b, c):
    """kafka-python 3 carries Kafka's own v10 JSON schemas: its frames are read and its decoder reads ours."""
    t = b.create_topic("t", 1, {})
    stranger = uuid.uuid4()
    reader, writer = await asyncio.open_connection("127.0.0.1", b.port)

    async def call(request, response_cls, cid):
        request.with_header(correlation_id=cid, client_id="kp-codec")
        writer.write(bytes(request.encode(header=True, framed=True)))
        (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
        return response_cls.decode(await reader.readexactly(size), version=10, header=True)

    try:
        ct = OffsetCommitRequest.OffsetCommitRequestTopic
        cp = ct.OffsetCommitRequestPartition
        commit = OffsetCommitRequest(
            version=10,
            group_id="g",
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                ct(
                    topic_id=tid,
                    partitions=[
                        cp(partition_index=0, committed_offset=42, committed_leader_epoch=1, committed_metadata="kp")
                    ],
                )
                for tid in (t.topic_id, stranger)
            ],
        )
        resp = await call(commit, OffsetCommitResponse, 1)
        assert [(x.topic_id, p.partition_index, p.error_code) for x in resp.topics for p in x.partitions] == [
            (t.topic_id, 0, 0),
            (stranger, 0, 100),
        ]
        group = OffsetFetchRequest.OffsetFetchRequestGroup
        fetch = OffsetFetchRequest(
            version=10,
            require_stable=True,
            groups=[
                group(
                    group_id="g",
                    member_id=None,
                    member_epoch=-1,
                    topics=[group.OffsetFetchRequestTopics(topic_id=t.topic_id, partition_indexes=[0])],
                ),
            ],
        )
        got = await call(fetch, OffsetFetchResponse, 2)
        rows = [
            (x.topic_id, p.partition_index, p.committed_offset, p.metadata, p.error_code)
            for g in got.groups
            for x in g.topics
            for p in x.partitions
        ]
        assert rows == [(t.topic_id, 0, 42, "kp", 0)]
    finally:
        writer.close()
