"""A group record larger than ``message.max.bytes`` gets Kafka 4.x's answer, never a retriable lie.

Kafka's coordinator runtime refuses a write whose batch exceeds the offsets partition's max message
size with RecordTooLargeException (MESSAGE_TOO_LARGE, 10), and its group coordinator maps 10, 18 and 4
to UNKNOWN_SERVER_ERROR (-1) for JoinGroup, SyncGroup and OffsetCommit alike
(``CoordinatorOperationExceptionHelper.handleOperationException``,
``GroupMetadataManager.appendGroupMetadataErrorToResponseError``). UNKNOWN_SERVER_ERROR is not
retriable: a client raises it instead of looping on a coordinator lookup that names this broker again,
which NOT_COORDINATOR (16) made it do. The partition stays writable: the next request of a normal
size succeeds.
"""

from __future__ import annotations

import asyncio

import pytest

from groupd.coordinator import errors as E
from groupd.protocol import codec
from tests.harness import WireClient
from tests.wire.test_groups import commit_body, fetch_body, join_body, join_with_id, start_broker, sync_body

LIMIT = 20_000  # message.max.bytes for these brokers: the offsets partitions' batch limit too


def test_kafka_maps_oversized_writes_to_unknown_server_error():
    """The mapping itself (Kafka 4.x), for group metadata and for offset commits."""
    for too_large in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        assert E.group_write_error(too_large) == E.UNKNOWN_SERVER_ERROR
        assert E.offset_write_error(too_large) == E.UNKNOWN_SERVER_ERROR
    # a failed disk is still NOT_COORDINATOR, as in Kafka (the broker then stops: see test_full_disk)
    assert E.group_write_error(E.KAFKA_STORAGE_ERROR) == E.NOT_COORDINATOR


def big_join_body(version, member_id="", group="g", instance=None, metadata_bytes=0):
    cls = codec.request_class(11, version)
    proto = codec.nested(cls, "JoinGroupRequestProtocol")
    return codec.make(
        cls, group_id=group, session_timeout=10_000, rebalance_timeout=10_000, member_id=member_id,
        group_instance_id=instance, protocol_type="consumer",
        protocols=(proto(name="range", metadata=b"\x00" * metadata_bytes),), reason=None,
    )


async def form_group(client, version=5, group="g"):
    member = await join_with_id(client, version, group)
    joined = await client.call(11, version, join_body(version, member, group))
    assert joined.error_code == 0
    return member, joined.generation_id


async def test_sync_group_whose_assignment_exceeds_the_limit_gets_unknown_server_error(tmp_path):
    b = await start_broker(tmp_path, **{"message.max.bytes": str(LIMIT)})
    try:
        c = await WireClient.connect(b.port)
        member, generation = await form_group(c)
        sync = await c.call(14, 3, sync_body(3, member, generation, [(member, b"\x01" * (2 * LIMIT))]))
        assert sync.error_code == E.UNKNOWN_SERVER_ERROR
        # the group is not wedged: it rebalances, and a normal assignment is stored
        rejoin = await c.call(11, 5, join_body(5, member))
        assert rejoin.error_code == 0 and rejoin.generation_id > generation
        sync = await c.call(14, 3, sync_body(3, member, rejoin.generation_id, [(member, b"\x01" * 100)]))
        assert sync.error_code == 0 and sync.assignment == b"\x01" * 100
        await c.close()
    finally:
        await b.stop()


async def test_join_whose_member_metadata_exceeds_the_limit_fails_its_sync_with_unknown_server_error(tmp_path):
    """JoinGroup writes nothing for a dynamic member (Kafka writes at the sync): the member's huge
    metadata makes the sync's group record too large, and every parked SyncGroup learns -1."""
    b = await start_broker(tmp_path, **{"message.max.bytes": str(LIMIT), "group.initial.rebalance.delay.ms": "200"})
    try:
        c1, c2 = await WireClient.connect(b.port), await WireClient.connect(b.port)
        m1, m2 = await join_with_id(c1), await join_with_id(c2)
        r1, r2 = await asyncio.gather(
            c1.call(11, 5, join_body(5, m1)), c2.call(11, 5, big_join_body(5, m2, metadata_bytes=2 * LIMIT)),
        )
        assert r1.error_code == r2.error_code == 0
        leader, follower = ((c1, m1), (c2, m2)) if r1.leader == m1 else ((c2, m2), (c1, m1))
        parked = asyncio.create_task(follower[0].call(14, 3, sync_body(3, follower[1], r1.generation_id)))
        await asyncio.sleep(0.1)
        led = await leader[0].call(14, 3, sync_body(3, leader[1], r1.generation_id, [(m1, b"a"), (m2, b"b")]))
        assert led.error_code == E.UNKNOWN_SERVER_ERROR
        assert (await parked).error_code == E.UNKNOWN_SERVER_ERROR
        await c1.close()
        await c2.close()
    finally:
        await b.stop()


@pytest.mark.parametrize("limit", [LIMIT, None], ids=["small-limit", "default-limit"])
async def test_static_rejoin_whose_record_exceeds_the_limit_gets_unknown_server_error(tmp_path, limit):
    """A known group.instance.id rejoining a Stable group is written at once (Kafka's static member
    replacement): that JoinGroup itself gets -1, and the old member stays. With the default limit
    (1 MiB, Kafka's), 2 MiB of member metadata."""
    overrides = {"message.max.bytes": str(limit)} if limit else {}
    b = await start_broker(tmp_path, **overrides)
    try:
        c = await WireClient.connect(b.port)
        joined = await c.call(11, 5, join_body(5, instance="i"))
        assert joined.error_code == 0
        sync = await c.call(14, 3, sync_body(3, joined.member_id, joined.generation_id, [(joined.member_id, b"a")]))
        assert sync.error_code == 0
        again = await c.call(11, 5, big_join_body(5, instance="i", metadata_bytes=2 * (limit or 1_048_588)))
        assert again.error_code == E.UNKNOWN_SERVER_ERROR
        group = b.coordinator.shard_for("g").state.groups["g"]
        assert list(group.members) == [joined.member_id]
        await c.close()
    finally:
        await b.stop()


async def test_offset_commit_whose_batch_exceeds_the_limit_gets_unknown_server_error_on_every_partition(tmp_path):
    b = await start_broker(tmp_path, **{"message.max.bytes": str(LIMIT)})
    try:
        b.create_topic("t", 10, {})
        c = await WireClient.connect(b.port)
        cls = codec.request_class(8, 8)
        t = codec.nested(cls, "OffsetCommitRequestTopic")
        p = codec.nested(cls, "OffsetCommitRequestPartition")
        parts = tuple(
            p(partition_index=i, committed_offset=7, committed_leader_epoch=-1, committed_metadata="m" * 4000)
            for i in range(10)
        )
        body = codec.make(
            cls,
            group_id="g",
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=(t(name="t", partitions=parts),),
        )
        for _ in range(2):  # the same answer each time: nothing is left half-done
            resp = await c.call(8, 8, body)
            assert [x.error_code for x in resp.topics[0].partitions] == [E.UNKNOWN_SERVER_ERROR] * 10
        fetched = await c.call(9, 7, fetch_body("g", "t", range(10)))
        assert [x.committed_offset for x in fetched.topics[0].partitions] == [-1] * 10
        ok = await c.call(8, 8, commit_body("g", "t", 0, 8, "small"))
        assert ok.topics[0].partitions[0].error_code == 0
        await c.close()
    finally:
        await b.stop()
