"""Bad input closes only the offending connection, with a log line; everyone else keeps being served."""

import asyncio
import logging
import socket
import struct
import time

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
        frame = request_bytes(
            3,
            9,
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
                "include_cluster_authorized_operations": False,
            },
        )
        writer.write(frame[: len(frame) - 2])
        await writer.drain()
        writer.close()
        await asyncio.sleep(0.2)
    assert any("truncated" in r.message for r in caplog.records)


async def test_pipelined_requests_answered_in_order(broker):
    c = await WireClient.connect(broker.port)
    for _ in range(50):
        c.send(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        c.send(
            3,
            9,
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
                "include_cluster_authorized_operations": False,
            },
        )
    for _ in range(50):
        assert (await c.recv()).error_code == 0  # recv asserts the correlation id order
        await c.recv()
    await c.close()


# Frames that once ended the whole process or wrote a traceback (issue 26): a count no frame could hold made
# kio's native reader reserve gigabytes and abort (SIGABRT), and a null where a required array belongs came
# through as None. Kafka's readers refuse both; the request is unparseable and the connection is closed.
# Sent to a broker in a child process, so that an abort shows as a dead child, not a dead test run.
HOSTILE = {
    "compact count 2^32-2 (Metadata v9)": bytes.fromhex("00000014000300090000000100047465737400ffffffff0f"),
    "int32 count 2^31-1 (Metadata v1)": bytes.fromhex("000000120003000100000001000474657374")
    + struct.pack(">i", 0x7FFFFFFF),
    "null required array (OffsetCommit v2 topics)": request_bytes(
        8,
        2,
        {"group_id": "g", "generation_id_or_member_epoch": 1, "member_id": "m", "retention_time_ms": -1, "topics": []},
    )[:-4]
    + b"\xff\xff\xff\xff",
    "null required array (FindCoordinator v4 coordinator_keys)": request_bytes(
        10, 4, {"key_type": 0, "coordinator_keys": []}
    )[:-2]
    + b"\x00\x00",
}


def _exchange(port: int, frame: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(frame)
        try:
            return s.recv(1 << 16)
        except ConnectionResetError:
            return b""


def test_hostile_counts_close_the_connection_not_the_process(broker_process):
    for name, frame in HOSTILE.items():
        assert _exchange(broker_process.port, frame) == b"", f"{name}: answered instead of closed"
        assert broker_process.proc.poll() is None, f"{name}: the broker died ({broker_process.log_text()[-600:]})"
    ok = _exchange(
        broker_process.port, request_bytes(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    )
    assert len(ok) > 8
    time.sleep(0.3)  # log lines leave once per loop turn
    log = broker_process.log_text()
    assert "Traceback" not in log, log[-3000:]
    closed = [line for line in log.splitlines() if "cannot decode" in line]
    assert len(closed) == len(HOSTILE), log[-3000:]
    assert any("tried to allocate a collection of size 4294967294" in line for line in closed)
    assert any("non-nullable field OffsetCommitRequest.topics was serialized as null" in line for line in closed)
