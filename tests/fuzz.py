"""A mutation fuzzer for the wire: valid requests of every API in the table at every version, broken on
purpose, fired at a broker in a child process while a well-behaved client keeps being served.

Kafka's rule for bad input is an error code or a closed connection, never a dead broker. Each frame starts
from a valid request (odd but well-typed values, ``Values``) and gets one or more mutations: a length or
count field (found by walking the request with kio's schema) set to a huge, negative, null or off-by-one
value, bytes overwritten or flipped, the body cut short or spliced, the version swapped, tagged fields
kio does not know put into a tagged section (well-formed: to be skipped; or sized past the end). A frame is
answered, closes its connection, or is still being served when its short wait ends; the broker must not
die and its log must hold no traceback.

``tests/wire/test_fuzz_requests.py`` runs 20,000 frames in CI; ``make fuzz`` runs a million
(``python -m tests.fuzz --frames 1000000``) and prints one summary line.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime
import random
import struct
import sys
import tempfile
import time
import typing
import uuid
from dataclasses import fields
from pathlib import Path

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    classify_field,
    get_field_tag,
    is_optional,
)

from groupd.protocol import codec
from groupd.protocol.api_table import API_TABLE
from groupd.protocol.bounds import read_uvarint
from groupd.protocol.errors import ErrorCode
from groupd.protocol.fastwrite import _uvarint as write_uvarint
from groupd.storage.batch import build_batch
from tests.harness import FAST_CONFIG, BrokerProcess, WireClient, request_bytes

WIDTHS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint16": 16, "uint32": 32}
STRINGS = ["", "fz", "fz2", "__consumer_offsets", "__transaction_state", "g", "x" * 300, "a/b", "ü"]
ELEMENTS = {
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "str": "string",
    "UUID": "uuid",
    "bool": "bool",
}


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


# ------------------------------------------------------------------ where a request's lengths are

_FIXED = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}


@dataclasses.dataclass(frozen=True, slots=True)
class LengthField:
    """One length or count on the wire: where it starts, its form (2 or 4 bytes, or a varint of ``size``
    bytes), the value it holds, and what it counts ("array" elements, or the bytes of a "value", or
    tagged fields)."""

    pos: int
    form: str  # "i16", "i32" or "uv"
    size: int
    value: int
    what: str = "value"
    nullable: bool = True


def _length(
    buf: bytes,
    pos: int,
    flexible: bool,
    legacy: str,
    out: list[LengthField],
    what: str = "value",
    nullable: bool = True,
) -> tuple[int, int]:
    """(length, position after it), recording where it is; compact lengths are returned minus one."""
    if flexible:
        raw, after = read_uvarint(buf, pos)
        out.append(LengthField(pos, "uv", after - pos, raw, what, nullable))
        return raw - 1, after
    form, width = (">h", 2) if legacy == "i16" else (">i", 4)
    (n,) = struct.unpack_from(form, buf, pos)
    out.append(LengthField(pos, legacy, width, n, what, nullable))
    return n, pos + width


def length_fields(cls: type, buf: bytes, pos: int = 0) -> list[LengthField]:
    """Every length and count of the ``cls`` entity encoded at ``pos`` (strings, bytes, arrays, tagged
    fields), in wire order."""
    out: list[LengthField] = []
    _walk(cls, buf, pos, out)
    return out


def _walk(cls: type, buf: bytes, pos: int, out: list[LengthField]) -> int:
    flexible = bool(cls.__flexible__)
    for field in fields(cls):
        if get_field_tag(field) is not None:
            continue
        kind = classify_field(field)
        kafka_type = field.metadata.get("kafka_type", "")
        if isinstance(kind, PrimitiveField):
            if kafka_type in _FIXED:
                pos += _FIXED[kafka_type]
            else:
                n, pos = _length(buf, pos, flexible, "i16" if kafka_type == "string" else "i32", out)
                pos += max(n, 0)
        elif isinstance(kind, EntityField):
            if is_optional(field):
                pos += 1
                if buf[pos - 1] >= 128:
                    continue
            pos = _walk(kind.type_, buf, pos, out)
        else:
            n, pos = _length(buf, pos, flexible, "i32", out, "array", is_optional(field))
            for _ in range(max(n, 0)):
                if isinstance(kind, EntityTupleField):
                    pos = _walk(kind.type_, buf, pos, out)
                elif kafka_type in _FIXED:
                    pos += _FIXED[kafka_type]
                else:
                    m, pos = _length(buf, pos, flexible, "i16" if kafka_type == "string" else "i32", out)
                    pos += max(m, 0)
    if flexible:  # the tagged fields: their count, then each one's tag and size (recorded as compact,
        tags, pos = _length(buf, pos, True, "", out, "tags")  # so one less than the raw value)
        for _ in range(tags + 1):
            _, pos = read_uvarint(buf, pos)
            size, pos = _length(buf, pos, True, "", out)
            pos += size + 1
    return pos


# ------------------------------------------------------------------ mutations

_HUGE_I32 = [-1, -2, -(2**31), 2**31 - 1, 2**30, 1 << 20, 65536]
_HUGE_I16 = [-1, -2, -(2**15), 2**15 - 1, 0x4000]
_HUGE_UV = [0, 2**32 - 1, 2**31, 2**28, 1 << 20, 2**32 - 2]


@dataclasses.dataclass(slots=True)
class Base:
    """A valid request to start from: its api, version, header bytes, body bytes and length fields."""

    key: int
    version: int
    header: bytes
    body: bytes
    lengths: list[LengthField]


class Mutator:
    """Frames from valid requests of every API x version in the table, each broken in one or more ways."""

    def __init__(self, seed: int, per_version: int = 3) -> None:
        self.r = random.Random(seed)
        values = Values(seed)
        self.bases: list[Base] = []
        self.covered: set[tuple[int, int]] = set()  # (api key, version) of the requests mutated so far
        for key, spec in sorted(API_TABLE.items()):
            for version in range(spec.min_version, spec.max_version + 1):
                for _ in range(per_version):
                    frame = request_bytes(key, version, values.entity(codec.request_class(key, version)), 1, "fuzz")
                    payload = frame[4:]
                    _, used = codec.decode(codec.request_header_class(key, version), payload)
                    body = payload[used:]
                    self.bases.append(
                        Base(key, version, payload[:used], body, length_fields(codec.request_class(key, version), body))
                    )
        self.kinds = [
            (self._length, 40),
            (self._overwrite, 15),
            (self._flip, 10),
            (self._truncate, 8),
            (self._splice, 8),
            (self._version, 6),
            (self._client_id, 3),
            (self._as_is, 5),
            (self._frame_size, 2),
            (self._tags, 6),
        ]
        self._weights = [w for _, w in self.kinds]
        self._choices = [k for k, _ in self.kinds]

    def frame(self, correlation_id: int) -> tuple[int, int, bytes]:
        """(api key, version, whole frame with its size prefix)."""
        base = self.r.choice(self.bases)
        self.covered.add((base.key, base.version))
        header = bytearray(base.header)
        struct.pack_into(">i", header, 4, correlation_id)
        body = bytearray(base.body)
        state = {"header": header, "body": body, "size": None, "base": base}
        for _ in range(1 if self.r.random() < 0.8 else self.r.randint(2, 4)):
            self.r.choices(self._choices, self._weights)[0](state)
        payload = bytes(state["header"]) + bytes(state["body"])
        size = len(payload) if state["size"] is None else state["size"]
        key, version = (
            struct.unpack_from(">hh", state["header"], 0) if len(state["header"]) >= 4 else (base.key, base.version)
        )
        return key, version, struct.pack(">i", size) + payload

    def _length(self, s: dict) -> None:
        lengths = s["base"].lengths
        if not lengths or len(s["body"]) != len(s["base"].body):
            return self._overwrite(s)
        f = self.r.choice(lengths)
        body = s["body"]
        if f.form == "uv":
            value = self.r.choice([*_HUGE_UV, f.value + 1, max(f.value - 1, 0), f.value * 1000])
            new = write_uvarint(value) if self.r.random() < 0.95 else b"\xff" * 6 + b"\x01"  # an overlong varint
            body[f.pos : f.pos + f.size] = new
        else:
            form, pool = (">h", _HUGE_I16) if f.form == "i16" else (">i", _HUGE_I32)
            lo, hi = (-(2**15), 2**15 - 1) if f.form == "i16" else (-(2**31), 2**31 - 1)
            value = min(max(self.r.choice([*pool, f.value + 1, f.value - 1, f.value * 1000]), lo), hi)
            struct.pack_into(form, body, f.pos, value)
        return None

    def _tags(self, s: dict) -> None:
        """Unknown tagged fields put into a section of the header or the body: well-formed (Kafka skips
        them and serves the request), one whose size runs past the end, or a low tag with odd bytes."""
        base = s["base"]
        if (
            not codec.is_flexible(base.key, base.version)
            or len(s["body"]) != len(base.body)
            or len(s["header"]) != len(base.header)
        ):
            return self._overwrite(s)  # no sections, or a frame already cut
        sections = [("body", f.pos) for f in base.lengths if f.what == "tags"] + [("header", len(base.header) - 1)]
        where, at = self.r.choice(sections)
        part = s[where]
        try:
            count, after = read_uvarint(part, at)
        except (IndexError, ValueError):  # an earlier mutation overwrote the count
            return self._overwrite(s)
        added = []
        for _ in range(self.r.randint(1, 3)):
            roll = self.r.random()
            tag = self.r.choice([0, 1, 2, 7, 127, 128, 9999, 2**31 - 1]) if roll < 0.3 else self.r.randint(3, 5000)
            value = self.r.randbytes(self.r.choice([0, 1, 2, 16, 130]))
            size = len(value) + (self.r.choice([1, 1000, 2**31]) if roll > 0.85 else 0)  # past the end
            added.append(write_uvarint(tag) + write_uvarint(size) + value)
        part[at:after] = write_uvarint(count + len(added)) + b"".join(added)
        return None

    def _overwrite(self, s: dict) -> None:
        body = s["body"]
        if not body:
            return
        width = self.r.choice([1, 2, 4])
        pos = self.r.randrange(len(body))
        fill = (
            self.r.choice([b"\xff", b"\x00", b"\x7f", b"\x80"]) * width
            if self.r.random() < 0.6
            else self.r.randbytes(width)
        )
        body[pos : pos + width] = fill[: len(body) - pos]

    def _flip(self, s: dict) -> None:
        body = s["body"]
        for _ in range(self.r.randint(1, 4)):
            if body:
                body[self.r.randrange(len(body))] ^= 1 << self.r.randrange(8)

    def _truncate(self, s: dict) -> None:
        if s["body"]:
            del s["body"][self.r.randrange(len(s["body"])) :]

    def _splice(self, s: dict) -> None:
        body = s["body"]
        pos = self.r.randint(0, len(body))
        if self.r.random() < 0.5:
            body[pos:pos] = self.r.randbytes(self.r.randint(1, 16))
        else:
            del body[pos : pos + self.r.randint(1, 16)]

    def _version(self, s: dict) -> None:
        spec = API_TABLE[s["base"].key]
        struct.pack_into(">h", s["header"], 2, self.r.randint(spec.min_version, spec.max_version))

    def _client_id(self, s: dict) -> None:
        struct.pack_into(">h", s["header"], 8, self.r.choice(_HUGE_I16))

    def _as_is(self, s: dict) -> None:
        pass

    def _frame_size(self, s: dict) -> None:
        s["size"] = self.r.choice([-1, 2**31 - 1, 0, 3])


# ------------------------------------------------------------------ the run


@dataclasses.dataclass
class Summary:
    frames: int = 0
    answered: int = 0
    closed: int = 0
    waiting: int = 0
    refused: int = 0
    crashes: int = 0
    tracebacks: int = 0
    good_calls: int = 0
    good_failures: int = 0
    good_worst_ms: float = 0.0
    seconds: float = 0.0
    crash_frames: list[bytes] = dataclasses.field(default_factory=list)
    covered: set[tuple[int, int]] = dataclasses.field(default_factory=set)

    def line(self) -> str:
        return (
            f"fuzz: {self.frames} frames in {self.seconds:.1f} s ({self.frames / max(self.seconds, 1e-9):.0f}/s): "
            f"{self.answered} answered, {self.closed} closed, {self.waiting} still served at the wait's end; "
            f"crashes {self.crashes}, tracebacks {self.tracebacks}; well-behaved client {self.good_calls} calls, "
            f"{self.good_failures} failed, worst {self.good_worst_ms:.0f} ms"
        )


async def _send(port: int, frame: bytes, wait: float) -> str:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return "refused"
    try:
        writer.write(frame)
        head = await asyncio.wait_for(reader.readexactly(4), wait)
        (size,) = struct.unpack(">i", head)
        await asyncio.wait_for(reader.readexactly(size), wait)
        return "answered"
    except (asyncio.IncompleteReadError, ConnectionError):
        return "closed"
    except TimeoutError:
        return "waiting"
    finally:
        writer.close()


async def _good_client(port: int, stop: asyncio.Event, summary: Summary) -> None:
    """ApiVersions, Metadata and FindCoordinator in a loop, each on a connection kept open: all must be
    answered, promptly, throughout."""
    client = None
    while not stop.is_set():
        started = time.monotonic()
        try:
            if client is None:
                client = await WireClient.connect(port, client_id="well-behaved")
            versions = await client.call(
                18, 3, {"client_software_name": "t", "client_software_version": "1"}, timeout=10
            )
            meta = await client.call(
                3,
                12,
                {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
                timeout=10,
            )
            coord = await client.call(10, 4, {"key_type": 0, "coordinator_keys": ("good-group",)}, timeout=10)
            ok = versions.error_code == 0 and bool(meta.brokers) and coord.coordinators[0].error_code == 0
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            ok = False
        summary.good_calls += 1
        summary.good_failures += not ok
        summary.good_worst_ms = max(summary.good_worst_ms, (time.monotonic() - started) * 1000)
        if not ok and client is not None:
            await client.close()
            client = None
        await asyncio.sleep(0.05)
    if client is not None:
        await client.close()


async def fuzz(
    broker: BrokerProcess,
    frames: int,
    seed: int = 26,
    concurrency: int = 24,
    wait: float = 0.3,
    progress: bool = False,
    max_seconds: float | None = None,
) -> Summary:
    """Fire ``frames`` mutated frames at ``broker`` (restarted if it dies, each death counted), or as many
    as ``max_seconds`` allow."""
    mutator = Mutator(seed)
    summary = Summary()
    started = time.monotonic()
    stop = asyncio.Event()
    good = asyncio.create_task(_good_client(broker.port, stop, summary))
    sent = 0
    last_report = started

    restarting = asyncio.Lock()

    stop_at = None if max_seconds is None else started + max_seconds

    async def worker() -> None:
        nonlocal sent, last_report
        while sent < frames and (stop_at is None or time.monotonic() < stop_at):
            sent += 1
            key, version, frame = mutator.frame(sent & 0x7FFFFFFF)
            outcome = await _send(broker.port, frame, wait)
            summary.frames += 1
            async with restarting:
                if broker.proc is None or broker.proc.poll() is not None:
                    summary.crashes += 1
                    summary.crash_frames.append(frame)
                    broker.kill()
                    broker.start()
                    continue
            setattr(summary, outcome, getattr(summary, outcome) + 1)
            if progress and time.monotonic() - last_report > 30:
                last_report = time.monotonic()
                print(f"  ... {summary.frames} frames, {summary.crashes} crashes", file=sys.stderr, flush=True)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    stop.set()
    await good
    summary.seconds = time.monotonic() - started
    summary.covered = mutator.covered
    summary.tracebacks = broker.log_text().count("Traceback")
    return summary


# auto-created topics from random names would fill the disk over a million frames; everything else as tested
FUZZ_CONFIG = {**FAST_CONFIG, "auto.create.topics.enable": "false", "log.level": "WARNING"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--concurrency", type=int, default=24)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="groupd-fuzz-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data", FUZZ_CONFIG)
        broker.start()
        try:
            summary = asyncio.run(fuzz(broker, args.frames, args.seed, args.concurrency, progress=True))
        finally:
            broker.stop()
        for i, frame in enumerate(summary.crash_frames[:20]):
            print(f"crash frame {i}: {frame.hex()}")
        print(summary.line())
    return 0 if summary.crashes == 0 and summary.tracebacks == 0 and summary.good_failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
