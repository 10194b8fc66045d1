"""The asyncio adapter around the exchange, driven without a socket: a recording transport stands in.

What the adapter owns: the log lines and closes of bad input, and what happens to an answer still
awaited when the peer goes away."""

from __future__ import annotations

import asyncio
import logging
import struct

from groupd.broker.dispatch import Later
from groupd.broker.network.connection import Connection
from groupd.broker.routes import HANDLERS
from tests.wire.test_groups import start_broker
from tests.wire.test_write_coalescing import API_VERSIONS, RecordingTransport, correlation_ids, frame


async def test_an_oversize_frame_is_logged_and_closes(tmp_path, caplog):
    b = await start_broker(tmp_path)
    try:
        conn, transport = Connection(b), RecordingTransport()
        conn.connection_made(transport)
        limit = conn.max_bytes
        with caplog.at_level(logging.WARNING, logger="groupd.connection"):
            conn.data_received(frame(18, 3, 1, API_VERSIONS) + struct.pack(">i", limit + 1))
        assert transport.closed
        assert (
            f"connection 127.0.0.1:1 closed: frame size {limit + 1} exceeds socket.request.max.bytes {limit}"
            in caplog.text
        )
        assert transport.sends == []  # the frame before it was cut but not handled: nothing answered
        conn.connection_lost(None)
    finally:
        await b.stop()


async def test_a_torn_frame_at_the_end_of_the_stream_is_logged(tmp_path, caplog):
    b = await start_broker(tmp_path)
    try:
        conn, transport = Connection(b), RecordingTransport()
        conn.connection_made(transport)
        whole = frame(18, 3, 1, API_VERSIONS)
        conn.data_received(whole[:10])
        with caplog.at_level(logging.WARNING, logger="groupd.connection"):
            assert conn.eof_received() is False  # our side closes too
        assert f"connection 127.0.0.1:1 closed: truncated frame (6 of {len(whole) - 4} bytes)" in caplog.text
        conn.connection_lost(None)
    finally:
        await b.stop()


async def test_an_answer_awaited_when_the_peer_goes_away_is_abandoned(tmp_path, monkeypatch):
    b = await start_broker(tmp_path)
    try:
        abandoned: list[Later] = []

        def parked(broker, ctx, req) -> Later:
            later = Later(lambda payload, error: payload)
            later.abandon = lambda: abandoned.append(later)
            return later

        conn, transport = Connection(b), RecordingTransport()
        conn.connection_made(transport)
        monkeypatch.setitem(HANDLERS, 18, parked)
        conn.data_received(frame(18, 3, 1, API_VERSIONS) + frame(18, 3, 2, API_VERSIONS))
        assert conn.busy and conn.exchange.queued == 1  # the second waits behind the first
        conn.connection_lost(None)
        assert len(abandoned) == 1
        abandoned[0].set_result(None)  # its answer comes after all: for nobody
        await asyncio.sleep(0)
        assert transport.sends == []
    finally:
        await b.stop()


async def test_a_parked_answer_lets_the_next_request_in_once_it_comes(tmp_path, monkeypatch):
    b = await start_broker(tmp_path)
    try:
        parked: list[Later] = []
        answer_of = HANDLERS[18]

        def first_parked(broker, ctx, req):
            if parked:
                return answer_of(broker, ctx, req)
            later = Later(lambda payload, error: answer_of(broker, ctx, req))
            parked.append(later)
            return later

        conn, transport = Connection(b), RecordingTransport()
        conn.connection_made(transport)
        monkeypatch.setitem(HANDLERS, 18, first_parked)
        conn.data_received(frame(18, 3, 1, API_VERSIONS) + frame(18, 3, 2, API_VERSIONS))
        for _ in range(3):
            await asyncio.sleep(0)
        assert transport.sends == []
        parked[0].set_result(None)
        for _ in range(4):
            await asyncio.sleep(0)
        assert correlation_ids(b"".join(transport.sends)) == [1, 2]
        conn.connection_lost(None)
    finally:
        await b.stop()
