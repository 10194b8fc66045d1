"""The primitives of Kafka's record schemas, as ``__consumer_offsets`` keys and values use them: int16
version prefix, fixed-width ints, strings, bytes and arrays in their classic (int16/int32 length) and
flexible (unsigned varint length + 1) forms, and tagged fields. coordinator/records.py (offsets, classic
groups) and coordinator/consumer/records.py (consumer groups) build on it.
"""

from __future__ import annotations

import struct

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")


class RecordFormatError(ValueError):
    """Bytes that are not a valid record of the version they claim."""


class Writer:
    __slots__ = ("buf", "flexible")

    def __init__(self, version: int, flexible: bool) -> None:
        self.buf = bytearray(_H.pack(version))
        self.flexible = flexible

    def int16(self, v: int) -> None:
        self.buf += _H.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _Q.pack(v)

    def uvarint(self, v: int) -> None:
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)

    def string(self, s: str | None) -> None:
        if s is None:
            if self.flexible:
                self.uvarint(0)
            else:
                self.int16(-1)
            return
        data = s.encode()
        if self.flexible:
            self.uvarint(len(data) + 1)
        else:
            self.int16(len(data))
        self.buf += data

    def bytes_(self, b: bytes) -> None:
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            self.int32(len(b))
        self.buf += b

    def array_len(self, n: int) -> None:
        if self.flexible:
            self.uvarint(n + 1)
        else:
            self.int32(n)

    def tags(self) -> None:
        if self.flexible:
            self.uvarint(0)


class Reader:
    __slots__ = ("data", "pos", "flexible")

    def __init__(self, data: bytes, pos: int, flexible: bool) -> None:
        self.data = data
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> int:
        start = self.pos
        end = start + n
        if n < 0 or end > len(self.data):
            raise RecordFormatError(f"record truncated at byte {start} (wanted {n})")
        self.pos = end
        return start

    def int16(self) -> int:
        return _H.unpack_from(self.data, self._take(2))[0]

    def int32(self) -> int:
        return _I.unpack_from(self.data, self._take(4))[0]

    def int64(self) -> int:
        return _Q.unpack_from(self.data, self._take(8))[0]

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            if self.pos >= len(self.data):
                raise RecordFormatError("varint truncated")
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise RecordFormatError("varint too long")

    def string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.int16()
        if n < 0:
            return None
        start = self._take(n)
        try:
            return self.data[start : start + n].decode()
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"invalid UTF-8 string: {exc}") from None

    def bytes_(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        if n < 0:
            return b""
        start = self._take(n)
        return bytes(self.data[start : start + n])

    def array_len(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.int32()
        return max(n, 0)

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


def key_version(data: bytes) -> int:
    if len(data) < 2:
        raise RecordFormatError("key shorter than its version")
    return _H.unpack_from(data, 0)[0]
