"""Request header parsing and response framing (header v0-v2 in, v0-v1 out)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

from protocol import codec
from protocol.api_table import API_TABLE
from protocol.framing import HEADER_PREFIX, SIZE

API_VERSIONS_KEY = codec.API_VERSIONS_KEY


class UnknownApi(Exception):
    """An api key that is not in the table: Kafka closes the connection."""


class UnsupportedVersion(Exception):
    """A version outside the table's range: Kafka closes the connection (ApiVersions excepted)."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(body: bytes) -> tuple[int, int, int]:
    """api_key, api_version and correlation_id: enough to answer even when the rest is unreadable."""
    return HEADER_PREFIX.unpack_from(body, 0)


def parse_request(body: bytes) -> tuple[RequestHeader, Any]:
    """Split a frame body into its header and its kio request entity.

    Raises UnknownApi/UnsupportedVersion before touching the body, and kio's errors when the body does
    not decode.
    """
    api_key, api_version, _ = peek_header(body)
    spec = API_TABLE.get(api_key)
    if spec is None:
        raise UnknownApi(f"unknown api key {api_key}")
    if not spec.supports(api_version):
        raise UnsupportedVersion(f"{spec.name} v{api_version} is outside {spec.min_version}-{spec.max_version}")
    header_cls = codec.request_header_class(api_key, api_version)
    kio_header, used = codec.decode(header_cls, body, 0)
    request, _ = codec.decode(codec.request_class(api_key, api_version), body, used)
    header = RequestHeader(api_key, api_version, kio_header.correlation_id, kio_header.client_id)
    return header, request


def encode_response(api_key: int, api_version: int, correlation_id: int, response: Any) -> bytes:
    """A whole response frame: size, response header, body."""
    header_cls = codec.response_header_class(api_key, api_version)
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    codec.encode_into(out, header_cls(correlation_id=correlation_id))
    codec.encode_into(out, response)
    buf = out.getbuffer()
    SIZE.pack_into(buf, 0, len(buf) - 4)
    del buf
    return out.getvalue()
