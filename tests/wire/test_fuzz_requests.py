"""Every API at every version in the table, fed well-formed requests with odd values (a fixed seed): the
broker answers each with a response that decodes, or closes that connection with a log line, and no
handler fails. A handler's exception would be a bug: Kafka answers bad values with error codes."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import random
import struct
import typing
import uuid

from protocol import codec
from protocol.api_table import API_TABLE
from protocol.errors import ErrorCode
from storage.batch import build_batch
from tests.harness import WireClient, request_bytes

SEED, PER_VERSION = 13, 2
WIDTHS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint16": 16, "uint32": 32}
STRINGS = ["", "fz", "fz2", "__consumer_offsets", "__transaction_state", "g", "x" * 300, "a/b", "ü"]
ELEMENTS = {"i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "str": "string", "UUID": "uuid", "bool": "bool"}


class Values:
    """Random values of each kio field kind: bounds, -1, 0, small numbers, names that exist and not."""

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def primitive(self, kind: str, nullable: bool) -> typing.Any:
        r = self.r
        if nullable and r.random() < 0.15:
            return None
        if kind in WIDTHS:
            bits, signed = WIDTHS[kind], not kind.startswith("u")
            lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
            return r.choice([0, 1, 2, 5, lo, hi, r.randint(lo, hi), r.randint(max(lo, -3), 100)])
        if kind in ("timedelta_i32", "timedelta_i64"):
            return datetime.timedelta(milliseconds=r.choice([0, 1, 100, 5000, -1]))
        if kind == "datetime_i64":
            return datetime.datetime.fromtimestamp(r.choice([0, 1, 1_700_000_000]), datetime.UTC)
        if kind == "float64":
            return r.choice([0.0, 1.0, -1.0, 1e300, float("nan")])
        if kind == "string":
            return r.choice(STRINGS)
        if kind == "bytes":
            return r.choice([b"", b"\x00" * 5, r.randbytes(r.randint(0, 40))])
        if kind == "records":
            return r.choice([b"", b"\x01\x02", build_batch([(b"k", b"v")], timestamp_ms=1000), r.randbytes(70)])
        if kind == "uuid":
            return r.choice([uuid.uuid4(), codec.ZERO_UUID])
        if kind == "bool":
            return r.random() < 0.5
        if kind == "error_code":
            return ErrorCode.none
        raise KeyError(kind)

    def entity(self, cls: type, depth: int = 0) -> typing.Any:
        hints = typing.get_type_hints(cls)
        values = {}
        for f in dataclasses.fields(cls):
            hint, kind = hints[f.name], f.metadata.get("kafka_type")
            args = typing.get_args(hint)
            nullable = type(None) in args
            inner = next((a for a in args if a is not type(None)), hint) if nullable else hint
            if nullable and kind is None and self.r.random() < 0.15:
                values[f.name] = None
            elif typing.get_origin(inner) is tuple:
                item = typing.get_args(inner)[0]
                n = 0 if depth > 3 else self.r.choice([0, 1, 1, 2, 3])
                if dataclasses.is_dataclass(item):
                    values[f.name] = tuple(self.entity(item, depth + 1) for _ in range(n))
                else:
                    element = kind or ELEMENTS.get(getattr(item, "__name__", ""), "int32")
                    values[f.name] = tuple(self.primitive(element, False) for _ in range(n))
            elif kind is None:
                values[f.name] = self.entity(inner, depth + 1)
            else:
                values[f.name] = self.primitive(kind, nullable)
        return cls(**values)


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
        outcomes = await asyncio.gather(*(_exchange(broker.port, key, version, frame) for key, version, _, frame in cases))
    failed = [r.getMessage() for r in caplog.records if "failed" in r.getMessage() or r.exc_info]
    assert not failed, failed
    undecodable = [(key, version, request, out) for (key, version, request, _), (kind, out) in zip(cases, outcomes, strict=True) if kind == "undecodable"]
    assert not undecodable, undecodable
    answered = sum(kind == "answered" for kind, _ in outcomes)
    assert answered > len(cases) * 0.8, (answered, len(cases))
    # and the broker still serves a well-behaved client
    wire = await WireClient.connect(broker.port)
    resp = await wire.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert resp.error_code == ErrorCode.none
    await wire.close()
