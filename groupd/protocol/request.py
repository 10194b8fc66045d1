"""Request header parsing and response framing (header v0-v2 in, v0-v1 out)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from groupd.protocol import bounds, codec, unknown_tags
from groupd.protocol.api_table import API_TABLE
from groupd.protocol.framing import HEADER_PREFIX

API_VERSIONS_KEY = codec.API_VERSIONS_KEY


class UnknownApi(Exception):
    """An api key that is not in the table: Kafka closes the connection."""


class UnsupportedVersion(Exception):
    """A version outside the table's range: Kafka closes the connection (ApiVersions excepted)."""


@dataclass(slots=True, unsafe_hash=True)  # a value, but not frozen: one per request, and a frozen init costs 4x
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(body: bytes) -> tuple[int, int, int]:
    """api_key, api_version and correlation_id: enough to answer even when the rest is unreadable."""
    return HEADER_PREFIX.unpack_from(body, 0)


def parse_request(body: bytes, api_key: int | None = None, api_version: int = 0) -> tuple[RequestHeader, Any]:
    """Split a frame body into its header and its kio request entity (``api_key`` and ``api_version``:
    what ``peek_header`` already read, if the caller did).

    Raises UnknownApi/UnsupportedVersion before touching the body, bounds.Unparseable when a count is
    null where the schema forbids it or larger than the bytes left (before kio reserves memory for it),
    and kio's errors when the body does not decode. Tagged fields kio does not know (in the header or
    anywhere in the body) are skipped as Kafka skips them: only when kio refuses the frame for one is it
    walked and rewritten without them (groupd/protocol/unknown_tags), so the common path is kio's read alone.
    """
    if api_key is None:
        api_key, api_version, _ = peek_header(body)
    readers = _readers.get((api_key, api_version))
    if readers is None:
        readers = _readers_of(api_key, api_version)
    read_header, check_body, read_body = readers
    try:  # costs nothing unless kio raises (Python 3.11's exceptions are zero-cost until raised)
        kio_header, used = read_header(body, 0)
        if check_body is not None:
            check_body(body, used)
        request, _ = read_body(body, used)
        return RequestHeader(api_key, api_version, kio_header.correlation_id, kio_header.client_id), request
    except KeyError:  # kio's "Unknown tagged field tag: N", where Kafka's reader skips the field
        stripped = unknown_tags.strip(
            body, codec.request_header_class(api_key, api_version), codec.request_class(api_key, api_version)
        )
        if stripped is None:
            raise
    return parse_request(stripped, api_key, api_version)  # read again, without them


# (api key, version) -> the header's kio reader, the body's bounds check (groupd/protocol/bounds; None when the
# body holds no array) and the body's kio reader, resolved once per pair in the table
_readers: dict[tuple[int, int], tuple[Any, Any, Any]] = {}


def _readers_of(api_key: int, api_version: int) -> tuple[Any, Any, Any]:
    spec = API_TABLE.get(api_key)
    if spec is None:
        raise UnknownApi(f"unknown api key {api_key}")
    if not spec.supports(api_version):
        raise UnsupportedVersion(f"{spec.name} v{api_version} is outside {spec.min_version}-{spec.max_version}")
    body_class = codec.request_class(api_key, api_version)
    readers = _readers[api_key, api_version] = (
        codec.reader(codec.request_header_class(api_key, api_version)),
        bounds.checker(body_class),
        codec.reader(body_class),
    )
    return readers


# Small responses that repeat byte for byte (a coordinator lookup's, a leave's): their encoded body is
# remembered by value. kio entities are frozen dataclasses, so equal answers hash alike; hashing one
# costs well under a microsecond where encoding costs several. (Heartbeat and OffsetCommit handlers keep
# their answers' bytes themselves, as Encoded.)
CACHED_BODIES = frozenset({10, 13, 18})  # FindCoordinator, LeaveGroup, ApiVersions
_BODY_CACHE_MAX = 4096
_bodies: dict[Any, bytes] = {}


def encode_request(api_key: int, version: int, body: Any, correlation_id: int, client_id: str) -> bytes:
    """A whole request frame, size prefix included, as a client sends it (tests, bench, tools).
    ``body`` is a kio entity or a dict of newest-shape values."""
    entity = codec.make(codec.request_class(api_key, version), **body) if isinstance(body, dict) else body
    header = codec.request_header_class(api_key, version)(
        request_api_key=api_key, request_api_version=version, correlation_id=correlation_id, client_id=client_id
    )
    payload = codec.encode(header) + codec.encode(entity)
    return struct.pack(">i", len(payload)) + payload


_HEADER_V0 = struct.Struct(">ii")  # size, correlation id
_HEADER_V1 = struct.Struct(">iiB")  # size, correlation id, empty tagged fields


class Encoded:
    """A response body already written from its values (``codec.encode_values``), with the error code
    the metrics count; it stands where the response entity would."""

    __slots__ = ("body", "error_code")

    def __init__(self, body: bytes, error_code: int) -> None:
        self.body = body
        self.error_code = error_code


def encode_body(api_key: int, response: Any) -> bytes:
    if type(response) is Encoded:
        return response.body
    if api_key not in CACHED_BODIES:
        return codec.encode(response)
    body = _bodies.get(response)
    if body is None:
        if len(_bodies) >= _BODY_CACHE_MAX:
            _bodies.clear()
        body = _bodies[response] = codec.encode(response)
    return body


def encode_response(api_key: int, api_version: int, correlation_id: int, response: Any) -> bytes:
    """A whole response frame: size, response header (v0: correlation id; v1: and no tagged fields), body."""
    head, body = encode_response_parts(api_key, api_version, correlation_id, response)
    return head + body


def encode_response_parts(api_key: int, api_version: int, correlation_id: int, response: Any) -> tuple[bytes, bytes]:
    """The frame as (size and header, body): a large body (a Fetch) goes to the socket without a copy."""
    body = encode_body(api_key, response)
    if codec.response_header_class(api_key, api_version) is codec.ResponseHeaderV0:
        return _HEADER_V0.pack(len(body) + 4, correlation_id), body
    return _HEADER_V1.pack(len(body) + 5, correlation_id, 0), body
