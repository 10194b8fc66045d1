"""A request's counts checked against its bytes before kio reads it: no frame may make the broker reserve
more memory than the frame itself can justify, and no required array may arrive as null.

kio's native reader reserves room for an array from the count on the wire, before reading a single
element: a 24-byte Metadata request claiming 2^32-2 topics made Rust abort the whole process
(``memory allocation of 34359738352 bytes failed``), and a null (-1) count where the schema forbids null
came back as ``None`` and broke handlers far from the wire. Kafka's generated readers refuse both
(``MessageDataGenerator``: a count larger than the bytes remaining, "Tried to allocate a collection of
size N, but there are only M bytes remaining", and "non-nullable field X was serialized as null"); the
request is then unparseable and Kafka closes the connection. Here the same two rules are checked first.

A checker is generated once per request class from kio's own schema introspection (as
``protocol/fastwrite`` generates writers): it walks the body as kio will, jumping over fixed-size runs,
strings and byte fields by their lengths (kio checks those against the buffer itself), and looks at each
array count. It stops after the last array of the top-level entity, and a request without arrays (a
Heartbeat) has no checker at all, so the hot path pays only for what can allocate.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import fields

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

Checker = Callable[[bytes, int], None]


class Unparseable(ValueError):
    """The request breaks a rule of Kafka's readers: the connection is closed, as Kafka closes it."""


# kafka type -> bytes on the wire, for the fixed-size primitives a request can carry
_FIXED_SIZE: dict[str, int] = {
    "int8": 1, "uint8": 1, "bool": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}
_VARIABLE = frozenset({"string", "bytes", "records"})

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint at ``pos``: (value, position after it). At most five bytes, as Kafka reads it."""
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise Unparseable("varint is too long")


def _too_many(name: str, count: int, remaining: int) -> None:
    raise Unparseable(f"{name}: tried to allocate a collection of size {count}, but there are only {remaining} bytes remaining")


def _null(name: str) -> None:
    raise Unparseable(f"non-nullable field {name} was serialized as null")


@functools.cache
def _needs_check(cls: type) -> bool:
    """Whether an entity holds an array anywhere (directly, nested or in a tagged field)."""
    for field in fields(cls):
        kind = classify_field(field)
        if isinstance(kind, PrimitiveTupleField | EntityTupleField):
            return True
        if isinstance(kind, EntityField) and _needs_check(kind.type_):
            return True
    return False


@functools.cache
def _fixed_size(cls: type) -> int | None:
    """The wire size of a non-flexible entity made only of fixed-size primitives (a Fetch partition
    before v12): an array of them is skipped in one step. None for anything else."""
    if cls.__flexible__:
        return None
    size = 0
    for field in fields(cls):
        kind = classify_field(field)
        if not isinstance(kind, PrimitiveField):
            return None
        width = _FIXED_SIZE.get(get_schema_field_type(field))
        if width is None:
            return None
        size += width
    return size


class _Source:
    """The generated function's lines and the names it closes over."""

    def __init__(self) -> None:
        self.env: dict[str, object] = {"_I16": _I16, "_I32": _I32, "_uv": _uvarint, "_too_many": _too_many, "_null": _null}
        self.lines: list[str] = []
        self.skip = 0  # fixed-size bytes not yet added to pos
        self.n = 0

    def name(self, value: object) -> str:
        self.n += 1
        key = f"_k{self.n}"
        self.env[key] = value
        return key

    def flush(self) -> None:
        if self.skip:
            self.lines.append(f"pos += {self.skip}")
            self.skip = 0

    def emit(self, line: str, indent: int = 0) -> None:
        self.flush()
        self.lines.append("    " * indent + line)


def _length(src: _Source, flexible: bool, width_unpack: str, indent: int = 0) -> None:
    """Read a length or count into ``n``: compact (uvarint, 0 = null, so n is one less) or legacy."""
    pad = "    " * indent
    if flexible:
        src.emit("n = buf[pos]", indent)
        src.lines.append(f"{pad}if n < 128: pos += 1")
        src.lines.append(f"{pad}else: n, pos = _uv(buf, pos)")
        src.lines.append(f"{pad}n -= 1")
    else:
        width = 2 if width_unpack == "_I16" else 4
        src.emit(f"n = {width_unpack}(buf, pos)[0]", indent)
        src.lines.append(f"{pad}pos += {width}")


def _skip_variable(src: _Source, kafka_type: str, flexible: bool, indent: int = 0) -> None:
    """Step over a string, bytes or records value by its length; kio checks it against the buffer."""
    _length(src, flexible, "_I16" if kafka_type == "string" else "_I32", indent)
    src.lines.append("    " * indent + "if n > 0: pos += n")


def _array(src: _Source, field_name: str, flexible: bool, nullable: bool) -> None:
    """An array's count: null only where the schema allows it, and never more elements than bytes left."""
    _length(src, flexible, "_I32")
    src.lines.append("if n < 0:")
    src.lines.append("    pass" if nullable else f"    _null({field_name!r})")
    src.lines.append(f"elif n > end - pos: _too_many({field_name!r}, n, end - pos)")


def _generate(cls: type, top: bool) -> Callable[..., int]:
    flexible = bool(cls.__flexible__)
    src = _Source()
    plain = [f for f in fields(cls) if get_field_tag(f) is None]
    tagged = [f for f in fields(cls) if get_field_tag(f) is not None]
    walk_all = not top or (flexible and any(_field_needs_check(f) for f in tagged))
    if not walk_all:  # the top level stops after its last array: nothing later can allocate
        last = max(i for i, f in enumerate(plain) if _field_needs_check(f))
        plain = plain[: last + 1]
    for field in plain:
        _field(src, cls, field, flexible)
    if flexible and walk_all:
        _tagged_fields(src, tagged)
    src.flush()
    if top:  # a walk that runs off the end: kio would fail there too, so the frame is unparseable
        body = "\n        ".join(src.lines)
        source = (
            "def check(buf, pos):\n    end = len(buf)\n    try:\n"
            f"        {body}\n    except (IndexError, _struct_error):\n"
            "        raise _Unparseable('truncated: the request ends inside a field') from None\n"
        )
        src.env.update(_struct_error=struct.error, _Unparseable=Unparseable)
    else:
        body = "\n    ".join(src.lines) or "pass"
        source = f"def check(buf, pos, end):\n    {body}\n    return pos\n"
    exec(compile(source, f"<bounds {cls.__module__}.{cls.__qualname__}>", "exec"), src.env)  # noqa: S102 - built from kio's field list
    return src.env["check"]  # type: ignore[return-value]


def _field_needs_check(field: object) -> bool:
    kind = classify_field(field)  # type: ignore[arg-type]
    if isinstance(kind, PrimitiveTupleField | EntityTupleField):
        return True
    return isinstance(kind, EntityField) and _needs_check(kind.type_)


def _field(src: _Source, cls: type, field: object, flexible: bool) -> None:
    kind = classify_field(field)  # type: ignore[arg-type]
    name = f"{cls.__name__}.{field.name}"  # type: ignore[attr-defined]
    kafka_type = field.metadata.get("kafka_type", "")  # type: ignore[attr-defined]
    if isinstance(kind, PrimitiveField):
        if kafka_type in _FIXED_SIZE:
            src.skip += _FIXED_SIZE[kafka_type]
        elif kafka_type in _VARIABLE:
            _skip_variable(src, kafka_type, flexible)
        else:  # pragma: no cover - every request type is listed; tests compile every class
            raise NotImplementedError(f"{name}: no bounds check for {kafka_type!r}")
    elif isinstance(kind, PrimitiveTupleField):
        _array(src, name, flexible, is_optional(field))  # type: ignore[arg-type]
        if kafka_type in _FIXED_SIZE:
            src.lines.append(f"else: pos += n * {_FIXED_SIZE[kafka_type]}")
        else:
            src.lines.append("else:")
            src.lines.append("    for _ in range(n):")
            _skip_variable(src, kafka_type, flexible, indent=2)
    elif isinstance(kind, EntityTupleField):
        _array(src, name, flexible, is_optional(field))  # type: ignore[arg-type]
        size = _fixed_size(kind.type_)
        if size is not None:
            src.lines.append(f"else: pos += n * {size}")
        else:
            inner = src.name(_nested(kind.type_))
            src.lines.append("else:")
            src.lines.append("    for _ in range(n):")
            src.lines.append(f"        pos = {inner}(buf, pos, end)")
    elif isinstance(kind, EntityField):
        inner = src.name(_nested(kind.type_))
        if is_optional(field):  # type: ignore[arg-type]  # KIP-893 nullable struct: a marker byte first (negative: null)
            src.emit(f"if buf[pos] < 128: pos = {inner}(buf, pos + 1, end)")
            src.lines.append("else: pos += 1")
        else:
            src.emit(f"pos = {inner}(buf, pos, end)")
    else:  # pragma: no cover - kio's classification is exhaustive
        raise NotImplementedError(name)


def _tagged_fields(src: _Source, tagged: list) -> None:
    """The tagged section: each value's size must fit what is left; known ones with arrays are checked
    within their own bytes."""
    src.emit("tags, pos = _uv(buf, pos)")
    src.lines.append("for _ in range(tags):")
    src.lines.append("    tag, pos = _uv(buf, pos)")
    src.lines.append("    size, pos = _uv(buf, pos)")
    src.lines.append("    if size > end - pos: _too_many('tagged field', size, end - pos)")
    for field in tagged:
        kind = classify_field(field)
        if isinstance(kind, EntityField) and _needs_check(kind.type_):
            inner = src.name(_nested(kind.type_))
            src.lines.append(f"    if tag == {get_field_tag(field)}: {inner}(buf, pos, pos + size)")
    src.lines.append("    pos += size")


@functools.cache
def _nested(cls: type) -> Callable[[bytes, int, int], int]:
    return _generate(cls, top=False)


@functools.cache
def checker(cls: type) -> Checker | None:
    """The check of a request body of ``cls`` (buffer, offset of the body), or None when the class holds
    no array and kio can be trusted with it as it is. Raises Unparseable."""
    if not _needs_check(cls):
        return None
    return _generate(cls, top=True)
