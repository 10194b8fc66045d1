"""Compiled writers for kio entities: the same bytes as kio's own writer, several times faster.

kio writes an entity field by field into a BytesIO and validates every integer through its phantom
types; for a small response that is most of its cost. Here a writer is generated once per entity
class from kio's own schema introspection (the field list, each field's Kafka type, optionality,
flexibility, tags): runs of fixed-size fields become one precompiled ``struct.Struct`` pack, strings
are encoded once, nested entities call their own compiled writers, and the parts are joined once.
Values that do not fit their Kafka type still raise (``struct.error``, ``ValueError``); nothing is
written silently wrong. ``tests/unit/test_fastwrite.py`` checks byte equality with kio for every
request and response class of every version in the API table.
"""

from __future__ import annotations

import functools
import io
import struct
from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any

from kio.serial import entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.static.constants import uuid_zero

# kafka type -> (struct code, expression template) for non-nullable fixed-size values
_FIXED: dict[str, tuple[str, str]] = {
    "int8": ("b", "{v}"),
    "int16": ("h", "{v}"),
    "int32": ("i", "{v}"),
    "int64": ("q", "{v}"),
    "uint8": ("B", "{v}"),
    "uint16": ("H", "{v}"),
    "uint32": ("I", "{v}"),
    "uint64": ("Q", "{v}"),
    "float64": ("d", "{v}"),
    "bool": ("?", "{v}"),
    "error_code": ("h", "{v}"),
    "timedelta_i32": ("i", "round({v}.total_seconds() * 1000)"),
    "timedelta_i64": ("q", "round({v}.total_seconds() * 1000)"),
    "datetime_i64": ("q", "round({v}.timestamp() * 1000)"),
}
_FIXED_NULLABLE: dict[str, tuple[str, str]] = {
    "datetime_i64": ("q", "-1 if {v} is None else round({v}.timestamp() * 1000)"),
}
_UUID = ("16s", "(_uuid_zero if {v} is None else {v}).bytes")

_I16 = struct.Struct(">h").pack
_I32 = struct.Struct(">i").pack
_SMALL_UVARINTS = [bytes([n]) for n in range(128)]


def _uvarint(n: int) -> bytes:
    if n < 128:
        return _SMALL_UVARINTS[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# Strings repeat from answer to answer (group and member ids, protocol names, the client id): each short
# one's written form is kept, so writing it again is one dict lookup instead of an encode, a length
# check and a join. Bounded in count (cleared when full) and in size (long strings, such as a config
# value, are written each time): at most _STRINGS_MAX x _STRING_KEPT_CHARS characters per dict.
_STRINGS_MAX = 16384
_STRING_KEPT_CHARS = 255
_legacy_strings: dict[str, bytes] = {}
_compact_strings: dict[str, bytes] = {}


def _legacy_str(v: str) -> bytes:
    b = v.encode()
    if len(b) > 32767:
        raise ValueError(f"string of {len(b)} bytes is too long for the int16 length format")
    return _keep(_legacy_strings, v, _I16(len(b)) + b)


def _keep(kept: dict[str, bytes], v: str, written: bytes) -> bytes:
    if len(v) <= _STRING_KEPT_CHARS:
        if len(kept) >= _STRINGS_MAX:
            kept.clear()
        kept[v] = written
    return written


def _legacy_nstr(v: str | None) -> bytes:
    return b"\xff\xff" if v is None else _legacy_str(v)


def _legacy_bytes(v: bytes) -> bytes:
    if v is None:
        raise TypeError("Unexpectedly received None value")
    if len(v) > 2147483647:
        raise ValueError("bytes too long for the int32 length format")
    return _I32(len(v)) + bytes(v)


def _legacy_nbytes(v: bytes | None) -> bytes:
    return b"\xff\xff\xff\xff" if v is None else _legacy_bytes(v)


def _compact(v: str | bytes) -> bytes:
    if v is None:
        raise TypeError("Unexpectedly received None value")
    if not isinstance(v, str):
        return _uvarint(len(v) + 1) + bytes(v)
    b = v.encode()
    return _keep(_compact_strings, v, _uvarint(len(b) + 1) + b)


def _string_expr(b: _Builder, v: str, flexible: bool, optional: bool) -> str:
    """A string field's bytes: its kept written form, else the writer that makes and keeps it."""
    if flexible:
        kept, make, null = b.name(_compact_strings), b.name(_compact), "b'\\x00'"
    else:
        kept, make, null = b.name(_legacy_strings), b.name(_legacy_str), "b'\\xff\\xff'"
    expr = f"({kept}.get({v}) or {make}({v}))"  # a written string is never empty (its length comes first)
    if optional:
        return f"({null} if {v} is None else {expr})"
    if flexible:  # kio's message for a missing value, not a lookup's TypeError
        return f"({make}({v}) if {v} is None else {expr})"
    return expr


def _compact_n(v: str | bytes | None) -> bytes:
    return b"\x00" if v is None else _compact(v)


# kafka type, flexible, optional -> function value -> bytes (variable-size primitives)
def _variable(kafka_type: str, flexible: bool, optional: bool) -> Callable[[Any], bytes]:
    if kafka_type in ("string", "bytes", "records"):
        if flexible:
            return _compact_n if optional else _compact
        if kafka_type == "string":
            return _legacy_nstr if optional else _legacy_str
        return _legacy_nbytes if optional else _legacy_bytes
    raise NotImplementedError(f"no compiled writer for {kafka_type!r} (optional={optional})")


def _element_writer(kafka_type: str, flexible: bool) -> Callable[[Any], bytes]:
    """One element of a primitive array (elements are never nullable)."""
    if kafka_type == "uuid":
        return lambda v: (uuid_zero if v is None else v).bytes
    fixed = _FIXED.get(kafka_type)
    if fixed is not None:
        code, expr = fixed
        packer = struct.Struct(">" + code).pack
        return eval(f"lambda v, _p=_p: _p({expr.format(v='v')})", {"_p": packer})  # noqa: S307 - built from constants above
    return _variable(kafka_type, flexible, False)


class _Builder:
    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.env: dict[str, Any] = {"_uuid_zero": uuid_zero, "_uv": _uvarint, "_I32": _I32}
        self.lines: list[str] = []
        self.codes: list[str] = []
        self.exprs: list[str] = []
        self.n = 0

    def name(self, value: Any) -> str:
        self.n += 1
        key = f"_c{self.n}"
        self.env[key] = value
        return key

    def fixed(self, code: str, expr: str) -> None:
        self.codes.append(code)
        self.exprs.append(expr)

    def flush(self) -> None:
        if self.codes:
            packer = self.name(struct.Struct(">" + "".join(self.codes)).pack)
            self.lines.append(f"a({packer}({', '.join(self.exprs)}))")
            self.codes, self.exprs = [], []

    def emit(self, line: str) -> None:
        self.flush()
        self.lines.append(line)


def _array_prefix(b: _Builder, v: str, flexible: bool) -> None:
    if flexible:
        b.emit(f"a(b'\\x00' if {v} is None else _uv(len({v}) + 1))")
    else:
        b.emit(f"a(b'\\xff\\xff\\xff\\xff' if {v} is None else _I32(len({v})))")


@functools.cache
def compile_writer(cls: type) -> Callable[[Any], bytes]:
    """The writer of ``cls``: entity -> bytes, byte for byte what ``kio.serial.entity_writer`` writes."""
    return _joined(compile_into(cls))


def _joined(into: Callable[[Any, list], None]) -> Callable[[Any], bytes]:
    """A writer that collects the parts ``into`` appends, and joins them once."""
    join = b"".join

    def write(entity: Any) -> bytes:
        out: list[bytes] = []
        into(entity, out)
        return join(out)

    return write


def _bytes_field(b: _Builder, v: str, flexible: bool, optional: bool) -> None:
    b.emit(f"if {v} is None:")
    if optional:
        b.lines.append("    a(b'\\x00')" if flexible else "    a(b'\\xff\\xff\\xff\\xff')")
    else:
        b.lines.append("    raise TypeError('Unexpectedly received None value')")
    b.lines.append("else:")
    if flexible:
        b.lines.append(f"    a(_uv(len({v}) + 1)); a({v})")
    else:
        b.lines.append(f"    a(_I32(len({v}))); a({v})")


@functools.cache
def compile_into(cls: type) -> Callable[[Any, list], None]:
    """Like ``compile_writer``, appending the parts to ``out`` (nested entities share one list)."""
    return _compile(cls, from_values=False)


class NotCompiled(Exception):
    """A values writer met a tagged field away from its default: build the entity and let kio write it."""


@functools.cache
def compile_values_writer(cls: type) -> Callable[[dict[str, Any]], bytes]:
    """The bytes of the entity ``cls(**values)`` would be, without building it: for the largest answers
    of a rebalance, building the frozen entity cost as much as writing it.

    ``values`` are in the newest shape, as ``codec.make`` takes them: keys the version lacks are
    ignored, absent ones take kio's defaults, durations may be int milliseconds and error codes ints.
    Nested entities are given as entities or as dicts of their values. Raises NotCompiled where a
    tagged field needs kio."""
    return _joined(_compile_values_into(cls))


@functools.cache
def _compile_values_into(cls: type) -> Callable[[Any, list], None]:
    return _compile(cls, from_values=True)


def _nested_call(b: _Builder, cls: type, v: str, from_values: bool) -> str:
    """The statement writing nested entity ``v``: in values mode it may be given as a dict too."""
    writer = b.name(compile_into(cls))
    if not from_values:
        return f"{writer}({v}, out)"
    values_writer = b.name(_compile_values_into(cls))
    return f"({values_writer} if type({v}) is dict else {writer})({v}, out)"


def _ms(v: Any) -> int:
    return v if type(v) is int else round(v.total_seconds() * 1000)


def _compile(cls: type, from_values: bool) -> Callable[[Any, list], None]:
    flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]  # kio entities' class attribute, untyped on ``type``
    is_request_header = cls.__name__ == "RequestHeader"
    b = _Builder(cls)
    b.env["_ms"] = _ms
    tagged: list[tuple[str, Any]] = []
    reads: list[str] = []  # values mode: each field read once from the dict into a local
    for i, field in enumerate(fields(cls)):
        if get_field_tag(field) is not None:
            default = field.default if field.default is not MISSING else get_tagged_field_default(field)
            tagged.append((field.name, default))
            continue
        if from_values:
            v = f"x{i}"
            if field.default is not MISSING:
                reads.append(f"{v} = e.get({field.name!r}, {b.name(field.default)})")
            elif field.default_factory is not MISSING:
                reads.append(f"{v} = e[{field.name!r}] if {field.name!r} in e else {b.name(field.default_factory)}()")
            else:
                reads.append(f"{v} = e[{field.name!r}]")
        else:
            v = f"e.{field.name}"
        kind = classify_field(field)
        optional = is_optional(field)
        if isinstance(kind, PrimitiveField):
            kafka_type = get_schema_field_type(field)
            if is_request_header and field.name == "client_id":  # Kafka's special case: always legacy
                b.emit(f"a({_string_expr(b, v, False, True)})")
                continue
            if kafka_type == "string":
                b.emit(f"a({_string_expr(b, v, flexible, optional)})")
                continue
            if kafka_type == "uuid":
                b.fixed(_UUID[0], _UUID[1].format(v=v))
                continue
            table = _FIXED_NULLABLE if optional else _FIXED
            if kafka_type in table:
                code, expr = table[kafka_type]
                if from_values and kafka_type.startswith("timedelta"):
                    expr = "_ms({v})"
                b.fixed(code, expr.format(v=v))
                continue
            if kafka_type in ("bytes", "records"):  # possibly megabytes: appended as they are, not copied
                _bytes_field(b, v, flexible, optional)
                continue
            b.emit(f"a({b.name(_variable(kafka_type, flexible, optional))}({v}))")
        elif isinstance(kind, PrimitiveTupleField):
            element = b.name(_element_writer(get_schema_field_type(field), flexible))
            _array_prefix(b, v, flexible)
            b.emit(f"if {v}:")
            b.lines.append(f"    out.extend(map({element}, {v}))")
        elif isinstance(kind, EntityField):
            call = _nested_call(b, kind.type_, v, from_values)
            if optional:  # KIP-893 nullable struct: a marker byte first
                b.emit(f"if {v} is None: a(b'\\xff')")
                b.lines.append(f"else: a(b'\\x01'); {call}")
            else:
                b.emit(call)
        elif isinstance(kind, EntityTupleField):
            _array_prefix(b, v, flexible)
            b.emit(f"for x in {v} or ():")
            b.lines.append(f"    {_nested_call(b, kind.type_, 'x', from_values)}")
        else:  # pragma: no cover - kio's classification is exhaustive
            raise NotImplementedError(f"{cls.__name__}.{field.name}")
    b.flush()
    head: list[str] = []
    if flexible:
        if tagged:
            # tagged fields at their defaults are not written: then the count is 0; otherwise kio writes
            # this entity (rare: tagged fields carry optional extras)
            if from_values:
                checks = " or ".join(
                    f"e.get({name!r}, {b.name(default)}) != {b.name(default)}" for name, default in tagged
                )
                head.append(f"if {checks}: raise {b.name(NotCompiled)}")
            else:
                kio_writer = b.name(_kio_bytes(cls))
                checks = " or ".join(f"e.{name} != {b.name(default)}" for name, default in tagged)
                head.append(f"if {checks}: out.append({kio_writer}(e)); return")
        b.lines.append("a(b'\\x00')")
    body = "\n    ".join(head + reads + ["a = out.append"] + b.lines)
    source = f"def write(e, out):\n    {body}\n"
    namespace = dict(b.env)
    label = "values" if from_values else "fastwrite"
    exec(compile(source, f"<{label} {cls.__module__}.{cls.__qualname__}>", "exec"), namespace)  # noqa: S102
    return namespace["write"]


def _kio_bytes(cls: type) -> Callable[[Any], bytes]:
    writer: Callable[[Any, Any], None] = entity_writer(cls)

    def write(entity: Any) -> bytes:
        out = io.BytesIO()
        writer(out, entity)
        return out.getvalue()

    return write
