"""Bad input closes only the offending connection, with a log line; everyone else keeps being served."""

import asyncio
import logging
import struct

import pytest

from tests.harness import WireClient, request_bytes


async def _closed(reader: asyncio.StreamReader) -> bool:
    try:
        data = await asyncio.wait_for(reader.read(1 << 16), 5)
    except ConnectionError:
        return True
    return data == b""


CASES = {
    "garbage": b"\xde\xad\xbe\xef" * 8,
    "negative length": struct.pack(">i", -5) + b"abc",
    "oversized length": struct.pack(">i", 200 * 1024 * 1024),
    "unknown api key": struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1),
    "unsupported version": struct.pack(">i", 10) + struct.pack(">hhih", 3, 99, 1, -1),
    "undecodable body": struct.pack(">i", 13) + struct.pack(">hhih", 3, 9, 1, -1) + b"\x00\x00\x00",
    "tiny frame": struct.pack(">i", 2) + b"\x00\x00",
}


@pytest.mark.parametrize("case", list(CASES))
async def test_bad_input_closes_cleanly_and_others_carry_on(broker, case, caplog):
    good = await WireClient.connect(broker.port)
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    with caplog.at_level(logging.WARNING, logger="groupd.connection"):
        writer.write(CASES[case])
        await writer.drain()
        assert await _closed(reader), f"{case}: connection not closed"
    assert any("closed" in r.message for r in caplog.records), f"{case}: no log line"
    resp = await good.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert resp.error_code == 0
    writer.close()
    await good.close()


async def test_truncated_frame_is_logged(broker, caplog):
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    with caplog.at_level(logging.WARNING, logger="groupd.connection"):
        frame = request_bytes(3, 9, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False, "include_cluster_authorized_operations": False})
        writer.write(frame[: len(frame) - 2])
        await writer.drain()
        writer.close()
        await asyncio.sleep(0.2)
    assert any("truncated" in r.message for r in caplog.records)


async def test_pipelined_requests_answered_in_order(broker):
    c = await WireClient.connect(broker.port)
    for _ in range(50):
        c.send(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        c.send(3, 9, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False, "include_cluster_authorized_operations": False})
    for _ in range(50):
        assert (await c.recv()).error_code == 0  # recv asserts the correlation id order
        await c.recv()
    await c.close()
