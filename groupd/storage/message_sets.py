"""Message sets (magic 0 and 1, Kafka before 0.11) <-> record batches v2, for Produce v0-2 and Fetch v0-3.

groupd stores only record batches v2. Kafka 3.9 still accepted the old requests and converted, and so
does groupd, the same way:

- In (Kafka's LogValidator with a v2 log): every message of a produced set becomes a record of one v2
  batch, offsets assigned by the log as for any batch, each message's timestamp kept (magic 0 has none:
  -1), no producer id. A wrapper stamped LogAppendTime gives its inner messages its own timestamp. The
  batch is compressed with the topic's compression.type, or with the set's codec for ``producer``.
- Out (Kafka's RecordsUtil.downConvert, ``message.downconversion.enable``): every v2 batch becomes
  magic 1 messages (Fetch v2-3) or magic 0 (Fetch v0-1), offsets and timestamps kept, headers dropped
  (the old formats have none), control batches left out. An uncompressed batch gives one message per
  record at or past the fetch offset; a compressed one gives one wrapper message, compressed with the
  batch's codec, holding all its records. zstd has no old-format wrapper (see ``down_convert``).

Layout of one entry: offset i64, size i32, crc u32 (CRC-32 of what follows), magic i8, attributes i8
(codec in bits 0-2; magic 1: bit 3 = LogAppendTime), timestamp i64 (magic 1 only), key and value as
i32-length bytes (-1 = null). Codecs and their old-format framing: storage/codecs.py.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from crc32c import crc32c

from groupd.storage import codecs
from groupd.storage.batch import BATCH_OVERHEAD, BatchHeader, build_batch, iter_batches, iter_records
from groupd.storage.errors import CorruptBatch, InvalidRecord, UnsupportedCompression

_ENTRY = struct.Struct(">qi")  # offset, message size
_CRC_MAGIC_ATTR = struct.Struct(">Ibb")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
NONE = codecs.NONE
LOG_APPEND_TIME = 0x08
NO_TIMESTAMP = -1


class Message:
    __slots__ = ("offset", "magic", "codec", "log_append_time", "timestamp", "key", "value")

    def __init__(
        self,
        offset: int,
        magic: int,
        codec: int,
        log_append_time: bool,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
    ) -> None:
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
        yield Message(
            offset, magic, attributes & 0x07, bool(attributes & LOG_APPEND_TIME) and magic == 1, timestamp, key, value
        )
        pos = end
    if pos != len(buf):
        raise CorruptBatch("trailing bytes after the last message")


def to_record_batch(data: bytes | memoryview, target: int | None = None) -> bytes:
    """A produced message set as one v2 batch (base offset 0: the log assigns it), compressed with
    ``target`` (a topic's compression.type), or with the set's own codec when ``target`` is None (the
    topic's ``producer``).

    As Kafka's LogValidator: the set's codec is its last compressed message's; a compressed set must be
    that one wrapper alone, holding only uncompressed messages, and zstd has no magic 0/1 wrapper; each
    of these is ``InvalidRecord`` (INVALID_RECORD)."""
    outer = list(read_messages(data))
    source = NONE
    for m in outer:
        if m.codec != NONE:
            source = m.codec
    if source != NONE and len(outer) > 1:
        raise InvalidRecord("Compressed outer record has more than one batch")
    records: list[tuple[bytes | None, bytes | None]] = []
    stamps: list[int] = []
    for m in outer:
        if m.codec == NONE:
            records.append((m.key, m.value))
            stamps.append(m.timestamp)
            continue
        if m.codec == codecs.ZSTD:
            raise InvalidRecord("Invalid wrapper compressionType found in legacy deep record iterator")
        if m.value is None:
            raise InvalidRecord("Found invalid compressed record set with null value")
        for inner in read_messages(codecs.decompress(m.codec, m.value, m.magic)):
            if inner.codec != NONE:
                raise InvalidRecord(
                    "Compressed outer record should not have an inner record with a compression attribute set"
                )
            records.append((inner.key, inner.value))
            stamps.append(m.timestamp if m.log_append_time else inner.timestamp)
    if not records:
        raise CorruptBatch("an empty message set")
    batch = build_batch(records, timestamp_ms=stamps[0], timestamps=stamps)
    codec = source if target is None else target
    return batch if codec == NONE else compressed_batch(batch, codec)


def compressed_batch(batch: bytes, codec: int) -> bytes:
    """``batch`` (uncompressed v2) with its records compressed by ``codec`` and the codec in its attributes."""
    body = codecs.compress(codec, batch[BATCH_OVERHEAD:], 2)
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


def _append_message(
    out: bytearray, offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None
) -> None:
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


CHUNK_BYTES = 128 * 1024  # LazyDownConversionRecordsSend's MAX_READ_SIZE: stored bytes converted at once


def down_convert(data: bytes | memoryview, magic: int, first_offset: int) -> tuple[bytes, int]:
    """Stored v2 batches as a magic 0/1 message set; returns (bytes, records converted). A batch cut at
    the end of ``data`` (a fetch's size limit) is left out, as a partial batch is for a client.

    zstd has no old-format wrapper, and Kafka 3.9 converts lazily (LazyDownConversionRecords): the
    first batch that gives any message is converted alone, and a zstd one there raises
    ``UnsupportedCompression`` (the partition answers UNSUPPORTED_COMPRESSION_TYPE); after it, batches
    are converted in chunks of up to 128 KiB of stored bytes, and a chunk holding a zstd batch ends the
    answer before that chunk (the client fetches again from there and is refused then)."""
    view = memoryview(data)
    batches = list(iter_batches(data))
    out = bytearray()
    converted = 0
    i = 0
    while i < len(batches) and not converted:
        pos, header = batches[i]
        converted = _convert_batch(out, view, pos, header, magic, first_offset)
        i += 1
    while i < len(batches):
        start, chunk = len(out), batches[i][1].size
        j = i + 1
        while j < len(batches) and chunk + batches[j][1].size <= CHUNK_BYTES:
            chunk += batches[j][1].size
            j += 1
        count = 0
        try:
            for pos, header in batches[i:j]:
                count += _convert_batch(out, view, pos, header, magic, first_offset)
        except UnsupportedCompression:
            del out[start:]
            break
        converted += count
        i = j
    return bytes(out), converted


def _convert_batch(
    out: bytearray, view: memoryview, pos: int, header: BatchHeader, magic: int, first_offset: int
) -> int:
    """One v2 batch appended to ``out`` as Kafka's RecordsUtil.convertRecordBatch writes it; the records
    written. Control batches give nothing; so do an uncompressed batch's records below ``first_offset``.
    A compressed batch gives one wrapper of all its records, compressed with its codec: inner offsets
    relative to its first record for magic 1, absolute for magic 0; the wrapper's offset its last
    record's, its timestamp (magic 1) the records' largest, or the batch's LogAppendTime."""
    if header.is_control:
        return 0
    if header.compression == codecs.ZSTD:
        raise UnsupportedCompression("Down-conversion of zstandard-compressed batches is not supported")
    records = list(iter_records(view[pos : pos + header.size], header))
    log_append = header.timestamp_type == 1 and magic == 1
    attr_ts = LOG_APPEND_TIME if log_append else 0
    if header.compression == NONE:
        count = 0
        for r in records:
            if r.offset >= first_offset:
                _append_message(out, r.offset, magic, attr_ts, r.timestamp, r.key, r.value)
                count += 1
        return count
    if not records:
        return 0
    base = records[0].offset if magic == 1 else 0
    inner = bytearray()
    for r in records:
        _append_message(inner, r.offset - base, magic, attr_ts, r.timestamp, r.key, r.value)
    wrapper_ts = max(r.timestamp for r in records) if magic == 1 else NO_TIMESTAMP
    body = codecs.compress(header.compression, bytes(inner), magic)
    _append_message(out, records[-1].offset, magic, header.compression | attr_ts, wrapper_ts, None, body)
    return len(records)
