"""The connection: strict per-connection order around a parked request, and no stuck state on close."""

import asyncio

from protocol.errors import ErrorCode
from tests.harness import WireClient
from tests.wire.test_groups import join_body, join_with_id, start_broker

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
