"""kio codec cache: one reader/writer per (api key, version), resolved once.

kio generates one frozen dataclass per API version from Kafka's JSON schemas; looking the classes up
and building readers/writers is costly, so it happens once per pair and is cached here.
"""

from __future__ import annotations

import datetime
import functools
import io
import sys
import uuid
from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader
from kio.serial._introspect import EntityField, EntityTupleField, classify_field

from groupd.protocol import old_schemas
from groupd.protocol.api_table import ApiKey
from groupd.protocol.fastwrite import NotCompiled, compile_values_writer, compile_writer

API_VERSIONS_KEY = int(ApiKey.API_VERSIONS)
ZERO_UUID = uuid.UUID(int=0)


@functools.cache
def request_class(api_key: int, version: int) -> type:
    """kio's class, or for a version Kafka 3.9 accepted and kio lacks, the generated one (old_schemas)."""
    return old_schemas.request_class(api_key, version) or load_request_schema(api_key, version)


@functools.cache
def response_class(api_key: int, version: int) -> type:
    return old_schemas.response_class(api_key, version) or load_response_schema(api_key, version)


@functools.cache
def reader(cls: type) -> Callable[[Any, int], tuple[Any, int]]:
    """kio's reader of ``cls``: (buffer, offset) -> (entity, bytes consumed)."""
    return entity_reader(cls)


def decode(cls: type, buf: bytes | memoryview, offset: int = 0) -> tuple[Any, int]:
    """Decode one entity of ``cls`` at ``offset``; returns (entity, bytes consumed)."""
    return reader(cls)(buf, offset)


def encode(entity: Any) -> bytes:
    """kio's bytes for ``entity``, written by a writer compiled from kio's schema (groupd/protocol/fastwrite)."""
    return compile_writer(type(entity))(entity)  # type: ignore[arg-type]  # a kio entity's class: hashable


def encode_values(cls: type, values: dict[str, Any]) -> bytes:
    """The bytes of ``make(cls, **values)``, written straight from the values (groupd/protocol/fastwrite)."""
    try:
        return compile_values_writer(cls)(values)
    except NotCompiled:
        return encode(_from_values(cls, values))


def _from_values(cls: type, values: dict[str, Any]) -> Any:
    """``make(cls, **values)`` where nested entities may be given as dicts of their values too."""
    nested = _nested_fields(cls)
    if nested:
        values = dict(values)
        for name, (inner, is_array) in nested.items():
            v = values.get(name)
            if is_array and v is not None:
                values[name] = tuple(_from_values(inner, x) if type(x) is dict else x for x in v)
            elif type(v) is dict:
                values[name] = _from_values(inner, v)
    return _builder(cls)(values)


@functools.cache
def _nested_fields(cls: type) -> dict[str, tuple[type, bool]]:
    out = {}
    for f in fields(cls):
        kind = classify_field(f)
        if isinstance(kind, EntityField | EntityTupleField):
            out[f.name] = (kind.type_, isinstance(kind, EntityTupleField))
    return out


def encode_into(out: io.BytesIO, entity: Any) -> None:
    out.write(compile_writer(type(entity))(entity))  # type: ignore[arg-type]  # a kio entity's class: hashable


@functools.cache
def is_flexible(api_key: int, version: int) -> bool:
    return bool(request_class(api_key, version).__flexible__)  # type: ignore[attr-defined]  # kio's class attribute


def request_header_class(api_key: int, version: int) -> type:
    return RequestHeaderV2 if is_flexible(api_key, version) else RequestHeaderV1


def response_header_class(api_key: int, version: int) -> type:
    # ApiVersions always answers with header v0 so a client can parse it before negotiating.
    if api_key == API_VERSIONS_KEY or not is_flexible(api_key, version):
        return ResponseHeaderV0
    return ResponseHeaderV1


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


def _duration(value: Any) -> Any:
    return _timedelta(value) if type(value) is int else value


@functools.lru_cache(maxsize=4096)
def _timedelta(ms: int) -> datetime.timedelta:
    """One shared timedelta per value (they are immutable): answers carry the same few durations."""
    return datetime.timedelta(milliseconds=ms)


def _error_code(value: Any) -> Any:
    if value is None or isinstance(value, ErrorCode):
        return value
    code = _ERROR_CODES.get(value)
    return ErrorCode(value) if code is None else code


_ERROR_CODES: dict[int, ErrorCode] = {int(e): e for e in ErrorCode}


@functools.cache
def _builder(cls: type) -> Callable[[dict[str, Any]], Any]:
    """One constructor call for ``cls`` from a dict of newest-shape values, generated once per class.

    Every response of every request goes through ``make``; a generic loop over the values with its
    conversions cost as much again as kio's constructor itself."""
    env: dict[str, Any] = {"_cls": cls, "_dur": _duration, "_err": _error_code}
    args = []
    for i, f in enumerate(fields(cls)):
        kafka_type = f.metadata.get("kafka_type", "")
        if f.default is not MISSING:
            env[f"_d{i}"] = f.default
            value = f"v.get({f.name!r}, _d{i})"
        elif f.default_factory is not MISSING:
            env[f"_f{i}"] = f.default_factory
            value = f"(v[{f.name!r}] if {f.name!r} in v else _f{i}())"
        else:
            value = f"v[{f.name!r}]"
        if kafka_type.startswith("timedelta"):
            value = f"_dur({value})"
        elif kafka_type == "error_code":
            value = f"_err({value})"
        args.append(f"{f.name}={value}")
    source = (
        "def build(v):\n"
        "    try:\n"
        f"        return _cls({', '.join(args)})\n"
        "    except KeyError as missing:\n"
        "        raise TypeError(f'{_cls.__name__} needs {missing}') from None\n"
    )
    exec(compile(source, f"<make {cls.__module__}.{cls.__qualname__}>", "exec"), env)  # noqa: S102 - built from kio's field list
    return env["build"]


def make(cls: type, **values: Any) -> Any:
    """Build a kio entity, dropping values the chosen version does not have.

    Handlers describe a response once, in the newest shape; each version keeps the fields it knows.
    Durations may be given as int milliseconds, error codes as ints.
    """
    return _builder(cls)(values)


def millis(value: datetime.timedelta) -> int:
    """A kio duration field back to int milliseconds."""
    return round(value.total_seconds() * 1000)


def nested(cls: type, name: str) -> type:
    """A nested entity class of the same schema version as ``cls`` (e.g. MetadataResponseTopic)."""
    return getattr(sys.modules[cls.__module__], name)


def has_field(cls: type, name: str) -> bool:
    return name in _field_names(cls)
