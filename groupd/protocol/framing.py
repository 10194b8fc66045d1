"""Kafka's framing: every request and response is an int32 size followed by that many bytes."""

from __future__ import annotations

import struct

SIZE = struct.Struct(">i")
HEADER_PREFIX = struct.Struct(">hhi")  # api_key, api_version, correlation_id
DEFAULT_MAX_REQUEST_BYTES = 104_857_600


class FrameError(Exception):
    """The peer sent a frame we must not read; the connection is closed."""


def check_size(size: int, max_bytes: int) -> None:
    if size < 0:
        raise FrameError(f"negative frame size {size}")
    if size > max_bytes:
        raise FrameError(f"frame size {size} exceeds socket.request.max.bytes {max_bytes}")
    if size < HEADER_PREFIX.size:
        raise FrameError(f"frame size {size} is shorter than a request header")


def frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload
