"""Answers produced in one event-loop turn leave together, after the turn, in request order.

One send per connection per turn (not one per answer), and the whole burst after the turn's input:
a peer woken by the first send finds the rest there. Nothing may be lost or reordered by the
deferral, and a connection closed for bad input still gets the answers queued before the bad frame.
"""

import asyncio
import struct

from groupd.broker.network.connection import Connection
from groupd.protocol import codec
from tests.harness import WireClient
from tests.wire.test_groups import start_broker

API_VERSIONS = {"client_software_name": "t", "client_software_version": "1"}


def frame(api_key: int, version: int, correlation_id: int, body: dict) -> bytes:
    header = codec.request_header_class(api_key, version)(
        request_api_key=api_key, request_api_version=version, correlation_id=correlation_id, client_id="t"
    )
    payload = codec.encode(header) + codec.encode(codec.make(codec.request_class(api_key, version), **body))
    return struct.pack(">i", len(payload)) + payload


class RecordingTransport:
    """Just enough of a transport to see what the connection sends, and in how many calls."""

    def __init__(self) -> None:
        self.sends: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.sends.append(bytes(data))

    def writelines(self, parts) -> None:
        self.sends.append(b"".join(bytes(p) for p in parts))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def set_write_buffer_limits(self, high: int) -> None:
        pass

    def get_extra_info(self, name: str):
        return ("127.0.0.1", 1) if name == "peername" else None

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def correlation_ids(sent: bytes) -> list[int]:
    ids, pos = [], 0
    while pos < len(sent):
        size, cid = struct.unpack_from(">ii", sent, pos)
        ids.append(cid)
        pos += 4 + size
    assert pos == len(sent)
    return ids


async def test_pipelined_answers_leave_in_one_send_after_the_turn(tmp_path):
    b = await start_broker(tmp_path)
    try:
        conn, transport = Connection(b), RecordingTransport()
        conn.connection_made(transport)
        conn.data_received(b"".join(frame(18, 3, cid, API_VERSIONS) for cid in (7, 8, 9)))
        assert transport.sends == []  # answered, but held until the loop turn ends
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert len(transport.sends) == 1
        assert correlation_ids(transport.sends[0]) == [7, 8, 9]
        conn.connection_lost(None)
    finally:
        await b.stop()


async def test_every_connection_answered_in_the_turn_is_sent(tmp_path):
    b = await start_broker(tmp_path)
    try:
        pairs = [(Connection(b), RecordingTransport()) for _ in range(3)]
        for i, (conn, transport) in enumerate(pairs):
            conn.connection_made(transport)
            conn.data_received(frame(18, 3, 100 + i, API_VERSIONS))
        assert all(t.sends == [] for _, t in pairs)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert [correlation_ids(b"".join(t.sends)) for _, t in pairs] == [[100], [101], [102]]
        for conn, _ in pairs:
            conn.connection_lost(None)
    finally:
        await b.stop()


async def test_answers_queued_before_a_bad_frame_are_sent_before_the_close(tmp_path):
    b = await start_broker(tmp_path)
    try:
        c = await WireClient.connect(b.port)
        unknown_api = struct.pack(">ihhi", 8, 9999, 0, 5)  # api key 9999: Kafka closes the connection
        c.writer.write(frame(18, 3, 1, API_VERSIONS) + unknown_api)
        await c.writer.drain()
        data = await asyncio.wait_for(c.reader.read(), 5)  # everything until the broker closes
        assert correlation_ids(data) == [1]
        await c.close()
    finally:
        await b.stop()


async def test_queued_answers_past_the_high_water_mark_hold_back_further_requests(tmp_path, monkeypatch):
    """Backpressure still holds with answers queued: past the mark, no further request is handled in
    that turn (a client pipelining large Fetches cannot make the broker queue them all), and the rest
    are answered, in order, once the queue is sent."""
    import groupd.broker.network.connection

    b = await start_broker(tmp_path)
    try:
        conn, transport = Connection(b), RecordingTransport()
        conn.connection_made(transport)
        conn.data_received(frame(18, 3, 1, API_VERSIONS))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        answer_size = len(transport.sends[0])
        transport.sends.clear()
        monkeypatch.setattr(groupd.broker.network.connection, "WRITE_HIGH_WATER", 3 * answer_size)
        conn.data_received(b"".join(frame(18, 3, cid, API_VERSIONS) for cid in range(10, 20)))
        assert conn.exchange.queued == 7  # three answers reached the mark; seven requests wait
        for _ in range(20):
            await asyncio.sleep(0)
        assert correlation_ids(b"".join(transport.sends)) == list(range(10, 20))
        assert len(transport.sends) == 4  # 3 + 3 + 3 + 1, one send per turn
        conn.connection_lost(None)
    finally:
        await b.stop()
