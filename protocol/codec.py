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
from dataclasses import fields
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader

from protocol.fastwrite import compile_writer

API_VERSIONS_KEY = 18
ZERO_UUID = uuid.UUID(int=0)


@functools.cache
def request_class(api_key: int, version: int) -> type:
    return load_request_schema(api_key, version)


@functools.cache
def response_class(api_key: int, version: int) -> type:
    return load_response_schema(api_key, version)


@functools.cache
def _reader(cls: type) -> Callable[[Any, int], tuple[Any, int]]:
    return entity_reader(cls)


def decode(cls: type, buf: bytes | memoryview, offset: int = 0) -> tuple[Any, int]:
    """Decode one entity of ``cls`` at ``offset``; returns (entity, bytes consumed)."""
    return _reader(cls)(buf, offset)


def encode(entity: Any) -> bytes:
    """kio's bytes for ``entity``, written by a writer compiled from kio's schema (protocol/fastwrite)."""
    return compile_writer(type(entity))(entity)


def encode_into(out: io.BytesIO, entity: Any) -> None:
    out.write(compile_writer(type(entity))(entity))


@functools.cache
def is_flexible(api_key: int, version: int) -> bool:
    return bool(request_class(api_key, version).__flexible__)


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


@functools.cache
def _plan(cls: type) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """The fields of ``cls``, and which of them are durations and error codes (converted by ``make``)."""
    fs = fields(cls)
    return (
        frozenset(f.name for f in fs),
        frozenset(f.name for f in fs if f.metadata.get("kafka_type", "").startswith("timedelta")),
        frozenset(f.name for f in fs if f.metadata.get("kafka_type") == "error_code"),
    )


_ERROR_CODES: dict[int, ErrorCode] = {int(e): e for e in ErrorCode}


def make(cls: type, **values: Any) -> Any:
    """Build a kio entity, dropping values the chosen version does not have.

    Handlers describe a response once, in the newest shape; each version keeps the fields it knows.
    Durations may be given as int milliseconds, error codes as ints.
    """
    names, durations, errors = _plan(cls)
    kept = {key: value for key, value in values.items() if key in names}
    for key in durations:
        value = kept.get(key)
        if type(value) is int:
            kept[key] = datetime.timedelta(milliseconds=value)
    for key in errors:
        value = kept.get(key)
        if value is not None and not isinstance(value, ErrorCode):
            code = _ERROR_CODES.get(value)
            kept[key] = ErrorCode(value) if code is None else code
    return cls(**kept)


def millis(value: datetime.timedelta) -> int:
    """A kio duration field back to int milliseconds."""
    return round(value.total_seconds() * 1000)


def nested(cls: type, name: str) -> type:
    """A nested entity class of the same schema version as ``cls`` (e.g. MetadataResponseTopic)."""
    return getattr(sys.modules[cls.__module__], name)


def has_field(cls: type, name: str) -> bool:
    return name in _field_names(cls)
