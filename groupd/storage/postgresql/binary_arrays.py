"""One-dimensional PostgreSQL arrays in the binary wire format, for the group-commit round's parameters.

A round sends every batch it commits as six arrays (schema.py's round statements). Adapting Python lists
through psycopg's array dumpers costs the rounds' thread more than the rest of the round: it looks for the
element type of every list, upgrades it, and dumps element by element in Python; and the integer arrays
went as text, which the server parses again. The format is small and fixed (PostgreSQL's ``array_send``):
a header of five big-endian int32 (dimensions 1, no NULLs, the element type's oid, the length, the lower
bound 1), then each element as its int32 length and its bytes. One ``struct.pack`` builds an integer array.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

INT4_OID, INT8_OID, BYTEA_OID = 23, 20, 17
INT4_ARRAY_OID, INT8_ARRAY_OID, BYTEA_ARRAY_OID = 1007, 1016, 1001

_HEADER = struct.Struct(">5i")
_LENGTH = struct.Struct(">i")


def int8_array(values: Sequence[int]) -> bytes:
    """``bigint[]``: each element is its length (8) and the value."""
    n = len(values)
    return struct.pack(f">5i{'iq' * n}", 1, 0, INT8_OID, n, 1, *_with_length(8, values))


def int4_array(values: Sequence[int]) -> bytes:
    """``integer[]``: each element is its length (4) and the value."""
    n = len(values)
    return struct.pack(f">5i{'ii' * n}", 1, 0, INT4_OID, n, 1, *_with_length(4, values))


def bytea_array(values: Sequence[bytes | bytearray]) -> bytes:
    """``bytea[]``: each element is its length and its bytes, as they are (joined once, not copied first)."""
    parts: list[bytes | bytearray] = [_HEADER.pack(1, 0, BYTEA_OID, len(values), 1)]
    for value in values:
        parts.append(_LENGTH.pack(len(value)))
        parts.append(value)
    return b"".join(parts)


def _with_length(size: int, values: Sequence[int]) -> list[int]:
    out = [size] * (2 * len(values))
    out[1::2] = values
    return out
