"""Read-ahead per connection is bounded in bytes (``queued.max.request.bytes``) as well as in count.

The attack of issue 26: a client parks a long-poll Fetch and streams large frames behind it; each
frame read is held until the poll ends. Reading stops once the unanswered bytes reach the bound and
resumes when answers drain them, so what the broker holds per connection is set by configuration."""

from __future__ import annotations

import asyncio

from groupd.broker.app import Broker
from tests.conftest import broker_config
from tests.harness import WireClient, padded_api_versions
from tests.wire.test_data_plane import fetch_body

MIB = 1 << 20


def read_ahead(broker: Broker) -> int:
    """Bytes the broker holds read but unanswered on its one connection: queued frames and the
    partial frame being cut."""
    (conn,) = broker._connections
    return conn.exchange.read_ahead_bytes


async def settle(broker: Broker, seconds: float = 1.0) -> int:
    """The read-ahead once it stops growing (the sender has written all it can)."""
    last, same = -1, 0
    for _ in range(int(seconds / 0.05)):
        await asyncio.sleep(0.05)
        now = read_ahead(broker)
        same = same + 1 if now == last else 0
        if same >= 4:
            break
        last = now
    return read_ahead(broker)


async def park_and_stream(broker: Broker, frames: int, max_wait_ms: int) -> WireClient:
    broker.create_topic("quiet", 1, {})
    client = await WireClient.connect(broker.port)
    client.send(1, 11, fetch_body("quiet", 0, 0, max_wait=max_wait_ms))
    for i in range(frames):
        client.writer.write(padded_api_versions(100 + i, MIB))
    return client


async def test_a_parked_fetch_holds_back_at_most_the_byte_bound(tmp_path):
    bound = 4 * MIB
    broker = Broker(broker_config(tmp_path, **{"queued.max.request.bytes": bound}))
    await broker.start()
    try:
        client = await park_and_stream(broker, 24, max_wait_ms=60_000)
        held = await settle(broker)
        # one read past the bound at most: the frames queued below it, plus the read that crossed it
        assert held <= bound + MIB + 256 * 1024, f"holds {held / MIB:.1f} MiB behind a parked Fetch"
        assert held >= bound - MIB, f"read ahead only {held / MIB:.1f} MiB: pipelining still works up to the bound"
        client.writer.transport.abort()
    finally:
        await broker.stop()


async def test_the_default_bounds_read_ahead_too(tmp_path):
    """Out of the box, not only when configured: the default is 16 MiB, far under the 500 frames the
    count bound alone let through."""
    broker = Broker(broker_config(tmp_path))
    assert broker.config["queued.max.request.bytes"] == 16 * MIB
    await broker.start()
    try:
        client = await park_and_stream(broker, 40, max_wait_ms=60_000)
        held = await settle(broker, 2.0)
        assert held <= 17 * MIB + 256 * 1024, f"holds {held / MIB:.1f} MiB behind a parked Fetch"
        client.writer.transport.abort()
    finally:
        await broker.stop()


async def test_reading_resumes_when_the_poll_answers_and_every_request_is_answered(tmp_path):
    broker = Broker(broker_config(tmp_path, **{"queued.max.request.bytes": 2 * MIB}))
    await broker.start()
    try:
        frames = 12
        client = await park_and_stream(broker, frames, max_wait_ms=1000)
        client._pending += [(100 + i, 18, 3) for i in range(frames)]
        client._cid = 100 + frames
        assert await settle(broker) <= 3 * MIB + 256 * 1024
        fetched = await asyncio.wait_for(client.recv(), 10)
        assert fetched.responses[0].partitions[0].error_code == 0
        for _ in range(frames):
            answer = await asyncio.wait_for(client.recv(), 10)
            assert answer.api_keys, "answered with the broker's API table"
        assert await asyncio.wait_for(
            client.call(18, 3, {"client_software_name": "x", "client_software_version": "1"}), 5
        )
        await client.close()
    finally:
        await broker.stop()


async def test_a_single_frame_larger_than_the_bound_is_still_read_and_answered(tmp_path):
    """The bound stops reading ahead; it never refuses a frame ``socket.request.max.bytes`` allows."""
    broker = Broker(broker_config(tmp_path, **{"queued.max.request.bytes": MIB}))
    await broker.start()
    try:
        client = await WireClient.connect(broker.port)
        client.writer.write(padded_api_versions(1, 3 * MIB))
        client._pending.append((1, 18, 3))
        client._cid = 1
        assert (await asyncio.wait_for(client.recv(), 10)).api_keys
        assert await asyncio.wait_for(
            client.call(18, 3, {"client_software_name": "x", "client_software_version": "1"}), 5
        )
        await client.close()
    finally:
        await broker.stop()
