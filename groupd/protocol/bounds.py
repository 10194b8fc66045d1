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
``groupd/protocol/fastwrite`` generates writers): it walks the body as kio will, jumping over fixed-size runs,
strings and byte fields by their lengths (kio checks those against the buffer itself), and looks at each
array count. It stops where nothing further can allocate: after the last array, and inside the last
element of the last array after that element's own last array; a request without arrays (a Heartbeat)
has no checker at all, so the hot path pays only for what can allocate.

The same generated walk, taken whole (``walker``), finds the tagged fields a request carries that kio's
schema does not know: Kafka's readers skip them, kio refuses them, and ``groupd/protocol/unknown_tags`` cuts
them out before kio reads the request again. A known tagged value is walked in place, as Kafka reads it
(its size is not consulted); an unknown one is stepped over by its size, which must fit what is left.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import fields
from typing import cast

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

from groupd.protocol.fastwrite import _uvarint

Checker = Callable[[bytes, int], None]


class Cuts:
    """What a whole walk found to cut: ``spans`` (start, stop, replacement) of the buffer, in the order
    the walk met them (an unknown tag's bytes, then its section's rewritten count), and ``tags`` (the
    entity class whose section held it, the tag) for each unknown tag."""

    __slots__ = ("spans", "tags")

    def __init__(self) -> None:
        self.spans: list[tuple[int, int, bytes]] = []
        self.tags: list[tuple[type, int]] = []


Walker = Callable[[bytes, int, int, "Cuts | None"], int]


class Unparseable(ValueError):
    """The request breaks a rule of Kafka's readers: the connection is closed, as Kafka closes it."""


TRUNCATED = "truncated: the request ends inside a field"


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


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
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
    raise Unparseable(
        f"{name}: tried to allocate a collection of size {count}, but there are only {remaining} bytes remaining"
    )


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
    if cls.__flexible__:  # type: ignore[attr-defined]  # kio entities' class attribute, untyped on ``type``
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
    """The generated function's lines and the names it closes over. Nested entities are written inline
    (a call per array element cost more than the element's own check)."""

    def __init__(self) -> None:
        self.env: dict[str, object] = {
            "_I16": _I16,
            "_I32": _I32,
            "_uv": read_uvarint,
            "_skip_compact": _skip_compact,
            "_tags": _tags,
            "_too_many": _too_many,
            "_null": _null,
            "_struct_error": struct.error,
            "_Unparseable": Unparseable,
            "_TRUNCATED": TRUNCATED,
            "cuts": None,  # the top-level check cuts nothing (a global: a local would cost a store on every request)
        }
        self.lines: list[str] = []
        self.skip = 0  # fixed-size bytes not yet added to pos
        self.n = 0

    def name(self, value: object) -> str:
        self.n += 1
        key = f"_k{self.n}"
        self.env[key] = value
        return key

    def flush(self, ind: int) -> None:
        if self.skip:
            self.lines.append("    " * ind + f"pos += {self.skip}")
            self.skip = 0

    def line(self, text: str, ind: int) -> None:
        self.flush(ind)
        self.lines.append("    " * ind + text)


def _skip_compact(buf: bytes, pos: int) -> int:
    """Past a compact string or bytes value whose length takes more than one varint byte."""
    raw, pos = read_uvarint(buf, pos)
    return pos + raw - 1 if raw > 1 else pos


def _tags(buf: bytes, pos: int, end: int, known: dict[int, Walker] | None, cuts: Cuts | None, owner: type) -> int:
    """Past a tagged-fields section that is not empty. A known tag's value is walked where it lies, as
    Kafka's generated reader reads it (the size is not used); any other tag is stepped over by its size,
    which must fit what is left (Kafka's ``readUnknownTaggedField``). With ``cuts``, each unknown tag's
    bytes are listed to be cut and the section's count is rewritten to what stays. Order and repeats are
    not checked: Kafka's reader checks neither (a repeated known tag: the last value is kept)."""
    start = pos
    count, pos = read_uvarint(buf, pos)
    counted = pos
    dropped = 0
    for _ in range(count):
        entry = pos
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if known is not None and tag in known:
            pos = known[tag](buf, pos, end, cuts)
            continue
        if size > end - pos:
            raise Unparseable(
                f"unknown tagged field {tag}: error reading byte array of {size} byte(s): only {end - pos} byte(s) "
                "available"
            )
        pos += size
        if cuts is not None:
            cuts.spans.append((entry, pos, b""))
            cuts.tags.append((owner, tag))
            dropped += 1
    if dropped:
        cuts.spans.append((start, counted, _uvarint(count - dropped)))  # type: ignore[union-attr]  # dropped > 0 only with cuts
    return pos


def _count(src: _Source, flexible: bool, width: int, ind: int) -> None:
    """Read a count into ``n``: compact (uvarint, 0 = null, so n is one less) or legacy (int16/int32)."""
    if flexible:
        src.line("n = buf[pos]", ind)
        src.line("if n < 128: pos += 1", ind)
        src.line("else: n, pos = _uv(buf, pos)", ind)
        src.line("n -= 1", ind)
    else:
        src.line(f"n = {'_I16' if width == 2 else '_I32'}(buf, pos)[0]", ind)
        src.line(f"pos += {width}", ind)


def _skip_variable(src: _Source, kafka_type: str, flexible: bool, ind: int) -> None:
    """Step over a string, bytes or records value by its length; kio checks it against the buffer."""
    if flexible:  # one varint byte holding length + 1 (0: null): the value ends ``raw`` bytes on
        src.line("n = buf[pos]", ind)
        src.line("if n < 128: pos += n or 1", ind)
        src.line("else: pos = _skip_compact(buf, pos)", ind)
    else:
        width = 2 if kafka_type == "string" else 4
        _count(src, False, width, ind)
        src.line("if n > 0: pos += n", ind)


def _generate(cls: type, top: bool) -> Callable[..., int]:
    src = _Source()
    if top:  # a walk that runs off the end: kio would fail there too, so the frame is unparseable
        _entity(src, cls, 2, top=True)
        src.flush(2)
        return _compile(
            src,
            "def walk(buf, pos):\n    end = len(buf)\n    try:\n",
            "\n        pass\n    except (IndexError, _struct_error):\n"
            "        raise _Unparseable(_TRUNCATED) from None\n",
            cls.__qualname__,
        )
    _entity(src, cls, 1, top=False)
    src.flush(1)
    return _compile(src, "def walk(buf, pos, end, cuts=None):\n", "\n    return pos\n", cls.__qualname__)


def _compile(src: _Source, head: str, tail: str, label: str) -> Callable[..., int]:
    """The function ``walk`` made of ``head``, the lines, ``tail``."""
    source = head + "\n".join(src.lines) + tail
    exec(compile(source, f"<bounds {label}>", "exec"), src.env)  # noqa: S102 - built from kio's field list
    return src.env["walk"]  # type: ignore[return-value]


def _entity(src: _Source, cls: type, ind: int, top: bool) -> None:
    """The lines walking one entity at indentation ``ind``.

    ``top``: nothing after this entity is read, so the walk stops after its last array; if that array's
    elements hold arrays, all but the last element are walked whole and the last one the same way
    (an OffsetCommit of one topic is checked up to its partitions count, whatever their number)."""
    flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]  # kio entities' class attribute
    plain = [f for f in fields(cls) if get_field_tag(f) is None]
    tagged = [f for f in fields(cls) if get_field_tag(f) is not None]
    walk_all = not top or (flexible and any(_field_needs_check(f) for f in tagged))
    if not walk_all:  # nothing after the last array can allocate
        last = max(i for i, f in enumerate(plain) if _field_needs_check(f))
        plain = plain[: last + 1]
    for i, field in enumerate(plain):
        _field(src, cls, field, flexible, ind, tail=not walk_all and i == len(plain) - 1)
    if flexible and walk_all:
        known = {get_field_tag(f): _tag_walker(cls, f.name) for f in tagged}
        src.line(f"if buf[pos]: pos = _tags(buf, pos, end, {src.name(known or None)}, cuts, {src.name(cls)})", ind)
        src.line("else: pos += 1", ind)
    src.flush(ind)


def _field_needs_check(field: object) -> bool:
    kind = classify_field(field)  # type: ignore[arg-type]
    if isinstance(kind, PrimitiveTupleField | EntityTupleField):
        return True
    return isinstance(kind, EntityField) and _needs_check(kind.type_)


def _array(src: _Source, name: str, flexible: bool, nullable: bool, ind: int) -> None:
    """An array's count: never more elements than bytes left, null only where the schema allows it.
    Leaves an open ``elif n > 0:`` for the caller's elements; a null check follows them."""
    _count(src, flexible, 4, ind)
    src.line(f"if n > end - pos: _too_many({name!r}, n, end - pos)", ind)


def _field(src: _Source, cls: type, field: object, flexible: bool, ind: int, tail: bool = False) -> None:
    """The lines for one field; ``tail``: the last thing read, so the walk need not get past it."""
    kind = classify_field(field)  # type: ignore[arg-type]
    name = f"{cls.__name__}.{field.name}"  # type: ignore[attr-defined]
    kafka_type = field.metadata.get("kafka_type", "")  # type: ignore[attr-defined]
    if cls.__name__ == "RequestHeader" and field.name == "client_id":  # type: ignore[attr-defined]
        flexible = False  # Kafka's RequestHeader.json: ClientId keeps its int16 length in header v2 too
    if isinstance(kind, PrimitiveField):
        if kafka_type in _FIXED_SIZE:
            src.skip += _FIXED_SIZE[kafka_type]
        elif kafka_type in _VARIABLE:
            _skip_variable(src, kafka_type, flexible, ind)
        else:  # pragma: no cover - every request type is listed; tests compile every class
            raise NotImplementedError(f"{name}: no bounds check for {kafka_type!r}")
        return
    if isinstance(kind, EntityField):
        if is_optional(field):  # type: ignore[arg-type]  # KIP-893 nullable struct: a marker byte first (negative: null)
            src.line("if buf[pos] < 128:", ind)
            src.line("pos += 1", ind + 1)
            _entity(src, kind.type_, ind + 1, top=tail)
            src.line("else: pos += 1", ind)
        else:
            _entity(src, kind.type_, ind, top=tail)
        return
    _array(src, name, flexible, is_optional(field), ind)  # type: ignore[arg-type]
    nested = isinstance(kind, EntityTupleField) and _needs_check(kind.type_)
    if tail and not nested:
        pass  # the count is all that can allocate (JoinGroup's protocols, SyncGroup's assignments)
    elif tail:  # every element but the last whole, the last up to its own last array
        src.line("elif n > 0:", ind)
        src.line("for _ in range(n - 1):", ind + 1)
        _entity(src, kind.type_, ind + 2, top=False)
        _entity(src, kind.type_, ind + 1, top=True)
    elif (
        size := _FIXED_SIZE.get(kafka_type) if isinstance(kind, PrimitiveTupleField) else _fixed_size(kind.type_)
    ) is not None:
        src.line(f"elif n > 0: pos += n * {size}", ind)
    else:
        src.line("elif n > 0:", ind)
        src.line("for _ in range(n):", ind + 1)
        if isinstance(kind, PrimitiveTupleField):
            _skip_variable(src, kafka_type, flexible, ind + 2)
        else:
            _entity(src, kind.type_, ind + 2, top=False)
    if not is_optional(field):  # type: ignore[arg-type]
        src.line(f"elif n < 0: _null({name!r})", ind)


@functools.cache
def walker(cls: type) -> Walker:
    """The whole walk of an entity of ``cls`` (buffer, offset, end, ``Cuts`` or None) -> offset after it,
    every tagged section included: the unknown tags' rewrite, and the tests' reference. Raises
    Unparseable, or IndexError / struct.error where it runs off the end."""
    return cast(Walker, _generate(cls, top=False))


@functools.cache
def _tag_walker(cls: type, name: str) -> Walker:
    """The walk of one known tagged field's value where it lies, in Kafka's flexible form."""
    field = next(f for f in fields(cls) if f.name == name)
    src = _Source()
    _field(src, cls, field, True, 1)
    src.flush(1)
    return cast(
        Walker, _compile(src, "def walk(buf, pos, end, cuts):\n", "\n    return pos\n", f"{cls.__qualname__}.{name}")
    )


@functools.cache
def checker(cls: type) -> Checker | None:
    """The check of a request body of ``cls`` (buffer, offset of the body), or None when the class holds
    no array and kio can be trusted with it as it is. Raises Unparseable."""
    if not _needs_check(cls):
        return None
    return cast(Checker, _generate(cls, top=True))  # at the top the walk only raises or passes
