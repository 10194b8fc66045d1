"""The connection: strict per-connection order around a parked request, and no stuck state on close."""

import asyncio

from groupd.protocol.errors import ErrorCode
from tests.harness import WireClient
from tests.wire.test_groups import commit_body, fetch_body, join_body, join_with_id, start_broker

API_VERSIONS = {"client_software_name": "t", "client_software_version": "1"}


async def test_requests_behind_a_parked_join_wait_for_it_others_do_not(tmp_path):
    b = await start_broker(tmp_path, **{"group.initial.rebalance.delay.ms": "300"})
    try:
        c = await WireClient.connect(b.port)
        member = await join_with_id(c)
        c.send(11, 5, join_body(5, member))  # parked for the initial delay
        c.send(12, 3, {"group_id": "g", "generation_id": 1, "member_id": member, "group_instance_id": None})
        c.send(18, 3, API_VERSIONS)
        other = await WireClient.connect(b.port)
        assert (await other.call(18, 3, API_VERSIONS, timeout=0.25)).error_code == 0  # not held back
        join = await asyncio.wait_for(c.recv(), 5)  # recv checks correlation ids: strictly in order
        assert join.error_code == ErrorCode.none and join.generation_id == 1
        heartbeat = await asyncio.wait_for(c.recv(), 5)
        assert heartbeat.error_code == ErrorCode.none  # handled only after the join: the member is known
        assert (await asyncio.wait_for(c.recv(), 5)).error_code == 0
        await c.close()
        await other.close()
    finally:
        await b.stop()


async def test_closing_while_a_join_is_parked_leaves_nothing_waiting(tmp_path):
    b = await start_broker(tmp_path, **{"group.initial.rebalance.delay.ms": "5000"})
    try:
        c = await WireClient.connect(b.port)
        member = await join_with_id(c)
        c.send(11, 5, join_body(5, member))
        await asyncio.sleep(0.1)
        assert b.coordinator._waiting  # the join's token is parked
        await c.close()
        for _ in range(100):
            if not b.coordinator._waiting and not b._connections:
                break
            await asyncio.sleep(0.01)
        assert not b.coordinator._waiting and not b._connections
        again = await WireClient.connect(b.port)
        assert (await again.call(18, 3, API_VERSIONS)).error_code == 0
        await again.close()
    finally:
        await b.stop()


async def test_graceful_stop_answers_a_request_already_read(tmp_path):
    b = await start_broker(tmp_path, **{"group.initial.rebalance.delay.ms": "200"})
    c = await WireClient.connect(b.port)
    member = await join_with_id(c)
    c.send(11, 5, join_body(5, member))
    await asyncio.sleep(0.05)
    stopping = asyncio.create_task(b.stop())
    join = await asyncio.wait_for(c.recv(), 5)
    assert join.error_code == ErrorCode.none
    await asyncio.wait_for(stopping, 10)
    await c.close()


async def until(condition, tries: int = 100) -> None:
    for _ in range(tries):
        if condition():
            return
        await asyncio.sleep(0.01)


async def broker_holding_rounds(tmp_path) -> tuple:
    """A broker with topic t whose offsets store's flush rounds are held until the test releases them
    (their callbacks)."""
    b = await start_broker(tmp_path)
    b.create_topic("t", 1, {})
    held: list = []

    def hold(log, callback) -> bool:
        held.append(callback)
        return True

    b.coordinator.committer.when_durable = hold
    return b, held


async def test_commits_answered_from_their_round_keep_the_connections_order(tmp_path):
    """A commit's answer comes from its flush round's callback, not a coroutine: what was pipelined
    behind it on the connection still waits for it, and is answered after it, in order."""
    b, held = await broker_holding_rounds(tmp_path)
    try:
        c = await WireClient.connect(b.port)
        c.send(8, 8, commit_body("cg", "t", 0, 1, ""))
        c.send(8, 8, commit_body("cg", "t", 0, 2, ""))
        c.send(12, 4, {"group_id": "cg", "generation_id": 1, "member_id": "nobody", "group_instance_id": None})
        c.send(18, 3, API_VERSIONS)
        await until(lambda: held)
        assert len(held) == 1  # the second commit is not even read from the connection's queue yet
        other = await WireClient.connect(b.port)
        assert (await other.call(18, 3, API_VERSIONS, timeout=1)).error_code == 0  # nobody else waits
        held[0](None)
        first = await asyncio.wait_for(c.recv(), 5)
        assert first.topics[0].partitions[0].error_code == 0
        await until(lambda: len(held) == 2)
        held[1](None)
        # recv checks correlation ids: the rest come strictly in the order they were sent
        second, beat, versions = [await asyncio.wait_for(c.recv(), 5) for _ in range(3)]
        assert second.topics[0].partitions[0].error_code == 0
        assert (beat.error_code, versions.error_code) == (ErrorCode.unknown_member_id, 0)
        for conn in (c, other):
            await conn.close()
    finally:
        await b.stop()


async def test_closing_while_a_commit_waits_for_its_round_answers_nobody_and_breaks_nothing(tmp_path):
    b, held = await broker_holding_rounds(tmp_path)
    try:
        c = await WireClient.connect(b.port)
        c.send(8, 8, commit_body("cg", "t", 0, 7, ""))
        await until(lambda: held)
        await c.close()
        await until(lambda: not b._connections)
        held[0](None)  # the round ends after its connection went away
        assert not b.coordinator._waiting
        again = await WireClient.connect(b.port)
        fetched = await again.call(9, 7, fetch_body("cg", "t", [0]))
        assert fetched.topics[0].partitions[0].committed_offset == 7  # durable, so kept
        await again.close()
    finally:
        await b.stop()
