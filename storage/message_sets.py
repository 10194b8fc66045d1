"""Message sets (magic 0 and 1, Kafka before 0.11) <-> record batches v2, for Produce v0-2 and Fetch v0-3.

groupd stores only record batches v2. Kafka 3.9 still accepted the old requests and converted, and so
does groupd, the same way:

- In (Kafka's LogValidator with a v2 log): every message of a produced set becomes a record of one v2
  batch, offsets assigned by the log as for any batch, each message's timestamp kept (magic 0 has none:
  -1), the wrapper's compression kept (the batch is compressed with the same codec), no producer id.
  A wrapper stamped LogAppendTime gives its inner messages its own timestamp.
- Out (Kafka's RecordsUtil.downConvert, ``message.downconversion.enable``): every v2 batch becomes
  magic 1 messages (Fetch v2-3) or magic 0 (Fetch v0-1), offsets and timestamps kept, headers dropped
  (the old formats have none), control batches left out. An uncompressed batch gives one message per
  record at or past the fetch offset; a compressed one gives one wrapper message, compressed with the
  batch's codec, holding all its records (inner offsets relative for magic 1, absolute for magic 0; the
  wrapper's offset is its last inner one).

Layout of one entry: offset i64, size i32, crc u32 (CRC-32 of what follows), magic i8, attributes i8
(codec in bits 0-2; magic 1: bit 3 = LogAppendTime), timestamp i64 (magic 1 only), key and value as
i32-length bytes (-1 = null).

Codecs here: none and gzip (the standard library's). A set compressed with snappy or lz4 is refused
with ``UnsupportedCompression`` (Produce answers UNSUPPORTED_COMPRESSION_TYPE); such a v2 batch is
down-converted uncompressed.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterator

from crc32c import crc32c

from storage.batch import BATCH_OVERHEAD, build_batch, iter_batches, iter_records
from storage.errors import CorruptBatch, UnsupportedCompression

_ENTRY = struct.Struct(">qi")  # offset, message size
_CRC_MAGIC_ATTR = struct.Struct(">Ibb")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
NONE, GZIP = 0, 1
LOG_APPEND_TIME = 0x08
NO_TIMESTAMP = -1


class Message:
    __slots__ = ("offset", "magic", "codec", "log_append_time", "timestamp", "key", "value")

    def __init__(self, offset: int, magic: int, codec: int, log_append_time: bool, timestamp: int, key: bytes | None, value: bytes | None) -> None:
        self.offset, self.magic, self.codec, self.log_append_time = offset, magic, codec, log_append_time
        self.timestamp, self.key, self.value = timestamp, key, value


def is_message_set(data: bytes | memoryview) -> bool:
    """Whether produced bytes are a message set (magic 0/1) rather than record batches v2."""
    return len(data) >= 17 and data[16] in (0, 1)


def _read_bytes(buf: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptBatch("message field truncated")
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        return None, pos
    if pos + n > end:
        raise CorruptBatch("message field runs past the message")
    return bytes(buf[pos : pos + n]), pos + n


def read_messages(data: bytes | memoryview) -> Iterator[Message]:
    """The messages of a set, CRC checked; a trailing partial message (a fetch's cut) is not one."""
    buf = memoryview(data)
    pos = 0
    while len(buf) - pos >= 12:
        offset, size = _ENTRY.unpack_from(buf, pos)
        start, end = pos + 12, pos + 12 + size
        if size < 14:
            raise CorruptBatch(f"message size {size} is below the smallest message")
        if end > len(buf):
            raise CorruptBatch("message runs past the message set")
        crc, magic, attributes = _CRC_MAGIC_ATTR.unpack_from(buf, start)
        if magic not in (0, 1):
            raise CorruptBatch(f"message magic {magic} inside a message set")
        if zlib.crc32(buf[start + 4 : end]) != crc:
            raise CorruptBatch("message CRC mismatch")
        p = start + 6
        timestamp = NO_TIMESTAMP
        if magic == 1:
            (timestamp,) = _I64.unpack_from(buf, p)
            p += 8
        key, p = _read_bytes(buf, p, end)
        value, p = _read_bytes(buf, p, end)
        yield Message(offset, magic, attributes & 0x07, bool(attributes & LOG_APPEND_TIME) and magic == 1, timestamp, key, value)
        pos = end
    if pos != len(buf):
        raise CorruptBatch("trailing bytes after the last message")


def _decompress(codec: int, data: bytes | None) -> bytes:
    if codec == GZIP:
        try:
            return gzip.decompress(data or b"")
        except (OSError, EOFError, zlib.error) as exc:
            raise CorruptBatch(f"gzip message set cannot be decompressed: {exc}") from exc
    names = {2: "snappy", 3: "lz4", 4: "zstd"}
    raise UnsupportedCompression(f"{names.get(codec, codec)} message sets are not supported here")


def to_record_batch(data: bytes | memoryview) -> bytes:
    """A produced message set as one v2 batch (base offset 0: the log assigns it)."""
    records: list[tuple[bytes | None, bytes | None]] = []
    stamps: list[int] = []
    codec = NONE
    for m in read_messages(data):
        if m.codec == NONE:
            records.append((m.key, m.value))
            stamps.append(m.timestamp)
            continue
        codec = m.codec
        for inner in read_messages(_decompress(m.codec, m.value)):
            if inner.codec != NONE:
                raise CorruptBatch("a compressed message inside a compressed message")
            records.append((inner.key, inner.value))
            stamps.append(m.timestamp if m.log_append_time else inner.timestamp)
    if not records:
        raise CorruptBatch("an empty message set")
    base_ts = stamps[0]
    batch = build_batch(records, timestamp_ms=base_ts, timestamps=stamps)
    if codec == NONE:
        return batch
    return _compressed(batch, codec)


def _compressed(batch: bytes, codec: int) -> bytes:
    """``batch`` (uncompressed v2) with its records gzipped and the codec in its attributes."""
    body = gzip.compress(batch[BATCH_OVERHEAD:], compresslevel=6)
    head = bytearray(batch[:BATCH_OVERHEAD])
    attributes = struct.unpack_from(">h", head, 21)[0] | codec
    struct.pack_into(">h", head, 21, attributes)
    struct.pack_into(">i", head, 8, BATCH_OVERHEAD - 12 + len(body))
    crc = crc32c(bytes(head[21:]) + body)
    struct.pack_into(">I", head, 17, crc)
    return bytes(head) + body


_HEAD_V0 = struct.Struct(">bb")  # magic, attributes
_HEAD_V1 = struct.Struct(">bbq")  # magic, attributes, timestamp
_ENTRY_CRC = struct.Struct(">qiI")  # offset, message size, crc
_NULL = _I32.pack(-1)


def _message(offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None) -> bytes:
    out = bytearray()
    _append_message(out, offset, magic, attributes, timestamp, key, value)
    return bytes(out)


def _append_message(out: bytearray, offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None) -> None:
    """One message appended to ``out``, each part copied once (down-conversion's whole cost is copies)."""
    head = _HEAD_V1.pack(magic, attributes, timestamp) if magic == 1 else _HEAD_V0.pack(magic, attributes)
    klen = _NULL if key is None else _I32.pack(len(key))
    vlen = _NULL if value is None else _I32.pack(len(value))
    crc = zlib.crc32(klen, zlib.crc32(head))
    if key:
        crc = zlib.crc32(key, crc)
    crc = zlib.crc32(vlen, crc)
    if value:
        crc = zlib.crc32(value, crc)
    size = 4 + len(head) + 8 + (len(key) if key else 0) + (len(value) if value else 0)
    out += _ENTRY_CRC.pack(offset, size, crc)
    out += head
    out += klen
    if key:
        out += key
    out += vlen
    if value:
        out += value


def down_convert(data: bytes | memoryview, magic: int, first_offset: int) -> tuple[bytes, int]:
    """Stored v2 batches as a magic 0/1 message set; returns (bytes, records converted). A batch cut at
    the end of ``data`` (a fetch's size limit) is left out, as a partial batch is for a client."""
    out = bytearray()
    converted = 0
    for pos, header in iter_batches(data):
        if header.is_control:
            continue
        batch = memoryview(data)[pos : pos + header.size]
        records = list(iter_records(batch, header))
        log_append = header.timestamp_type == 1
        attr_ts = LOG_APPEND_TIME if (log_append and magic == 1) else 0
        codec = header.compression if header.compression == GZIP else NONE
        if codec == NONE:
            for r in records:
                if r.offset >= first_offset:
                    _append_message(out, r.offset, magic, attr_ts, r.timestamp, r.key, r.value)
                    converted += 1
            continue
        inner = bytearray()
        for i, r in enumerate(records):
            _append_message(inner, i if magic == 1 else r.offset, magic, 0, r.timestamp, r.key, r.value)
        wrapper_ts = header.max_timestamp if magic == 1 else NO_TIMESTAMP
        out += _message(records[-1].offset, magic, codec | attr_ts, wrapper_ts, None, gzip.compress(bytes(inner), compresslevel=6))
        converted += len(records)
    return bytes(out), converted
