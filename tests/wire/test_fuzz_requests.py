"""Every API at every version in the table, fed well-formed requests with odd values (a fixed seed): the
broker answers each with a response that decodes, or closes that connection with a log line, and no
handler fails. A handler's exception would be a bug: Kafka answers bad values with error codes.

Then the same requests broken on purpose (tests/fuzz.py: lengths and counts set huge, negative or null,
bytes overwritten, bodies cut): 20,000 frames at a broker in a child process, which must neither die nor
log a traceback while a well-behaved client keeps being served. ``make fuzz`` runs a million."""

from __future__ import annotations

import asyncio
import logging
import struct
import typing

from groupd.protocol import codec
from groupd.protocol.api_table import API_TABLE
from groupd.protocol.errors import ErrorCode
from tests.fuzz import FUZZ_CONFIG, Values, fuzz
from tests.harness import BrokerProcess, WireClient, request_bytes

SEED, PER_VERSION = 13, 2
# 20,000 frames take 12-25 s here; on a machine busy with other work the run stops at 50 s instead, and
# must still have fired enough frames to cover every API x version several times over
MUTATED_FRAMES, MUTATED_SECONDS, AT_LEAST = 20_000, 50, 5_000


async def _exchange(port: int, key: int, version: int, frame: bytes) -> tuple[str, typing.Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frame)
    try:
        head = await asyncio.wait_for(reader.read(4), 2)
        if len(head) < 4:
            return "closed", None
        (size,) = struct.unpack(">i", head)
        body = await asyncio.wait_for(reader.readexactly(size), 2)
    except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
        return "waiting", None  # a parked join, a long poll: still being served
    finally:
        writer.close()
    header, used = codec.decode(codec.response_header_class(key, version), body, 0)
    try:
        response, consumed = codec.decode(codec.response_class(key, version), body, used)
    except Exception as exc:  # noqa: BLE001 - reported below with the request
        # kio reads int64 timestamps as datetimes and refuses Kafka's -1 ("none yet", DescribeTransactions)
        return ("answered", None) if "negative timestamp" in str(exc) else ("undecodable", exc)
    assert used + consumed == len(body)
    return "answered", response


async def test_every_api_and_version_survives_odd_values(broker, caplog):
    broker.create_topic("fz", 2, {})
    values = Values(SEED)
    cases = []
    for key, spec in sorted(API_TABLE.items()):
        for version in range(spec.min_version, spec.max_version + 1):
            for _ in range(PER_VERSION):
                request = values.entity(codec.request_class(key, version))
                cases.append((key, version, request, request_bytes(key, version, request, 7)))
    with caplog.at_level(logging.WARNING, logger="groupd"):
        outcomes = await asyncio.gather(
            *(_exchange(broker.port, key, version, frame) for key, version, _, frame in cases)
        )
    # groupd's own lines only: a client another test of this process left reconnecting logs too
    failed = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("groupd") and ("failed" in r.getMessage() or r.exc_info)
    ]
    assert not failed, failed
    undecodable = [
        (key, version, request, out)
        for (key, version, request, _), (kind, out) in zip(cases, outcomes, strict=True)
        if kind == "undecodable"
    ]
    assert not undecodable, undecodable
    answered = sum(kind == "answered" for kind, _ in outcomes)
    assert answered > len(cases) * 0.8, (answered, len(cases))
    # and the broker still serves a well-behaved client
    wire = await WireClient.connect(broker.port)
    resp = await wire.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert resp.error_code == ErrorCode.none
    await wire.close()


async def test_mutated_frames_neither_kill_the_broker_nor_write_a_traceback(tmp_path):
    broker = BrokerProcess(tmp_path / "data", FUZZ_CONFIG)
    broker.start()
    try:
        summary = await fuzz(broker, MUTATED_FRAMES, seed=26, max_seconds=MUTATED_SECONDS)
    finally:
        broker.kill()
    print(summary.line())
    assert summary.crashes == 0, [f.hex() for f in summary.crash_frames[:5]]
    assert summary.tracebacks == 0, broker.log_text()[-3000:]
    assert summary.frames >= AT_LEAST and summary.seconds < MUTATED_SECONDS + 10, summary.line()
    every = {(key, v) for key, spec in API_TABLE.items() for v in range(spec.min_version, spec.max_version + 1)}
    assert summary.covered == every, sorted(every - summary.covered)
    assert summary.closed > 0 and summary.answered > 0, summary.line()  # the mutations reach both outcomes
    assert summary.good_calls > 10 and summary.good_failures == 0, summary.line()
    assert summary.good_worst_ms < 10_000, summary.line()  # answered promptly throughout, even on a busy machine
