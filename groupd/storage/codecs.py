"""Kafka's record compression codecs, in the framing Kafka writes and reads for each message format.

Kafka wraps each codec in a stream of its own choosing, so a plain codec call does not make or read
Kafka's bytes:

- gzip (1): a gzip member (the standard library's).
- snappy (2): snappy-java's stream (``SnappyOutputStream``): a 16-byte header (``\\x82SNAPPY\\x00``,
  version 1, compatible version 1) then chunks of at most 32 KiB, each an i32 length and one raw snappy
  block. snappy-java's ``SnappyInputStream`` reads that stream, and reads anything not starting with
  that header as one whole raw snappy block (``Snappy.compress(byte[])``), so both are read here.
- lz4 (3): Kafka's own LZ4 frame (``Lz4BlockOutputStream``/``Lz4BlockInputStream``): FLG 0x60
  (version 1, independent blocks, no checksums), BD 0x40 (64 KiB blocks), each block an i32 LE size
  (high bit set: stored uncompressed), an end mark of 0. The header checksum byte of magic 0 is the
  one Kafka before 0.10 wrote wrongly (over the frame's magic number too, KAFKA-3160): magic 0 writes
  that one and its reader skips the byte; magic 1 and 2 write and check the correct one.
- zstd (4): one zstd frame; only in record batches v2 (Kafka refuses a zstd magic 0/1 wrapper).

cramjam provides the raw codecs (snappy blocks, lz4 blocks, zstd frames); the framing is here.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam

from groupd.storage.errors import CorruptBatch, UnsupportedCompression

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
# compression.type (a topic's) -> codec id; "producer" keeps the producer's
BY_NAME = {"uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}

_I32 = struct.Struct(">i")
_U32LE = struct.Struct("<I")

XERIAL_HEADER = b"\x82SNAPPY\x00" + _I32.pack(1) + _I32.pack(1)
XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size

LZ4_MAGIC = 0x184D2204
_LZ4_FLG = 0x60  # version 1, independent blocks, no block or content checksum, no content size
_LZ4_BD = 0x40  # 64 KiB blocks
LZ4_BLOCK = 64 * 1024
_UNCOMPRESSED = 0x80000000

GZIP_LEVEL = 6  # java.util.zip's default, what Kafka's GzipOutputStream uses at compression.gzip.level -1
ZSTD_LEVEL = 3  # Kafka's compression.zstd.level default


def compress(codec: int, data: bytes, magic: int) -> bytes:
    """``data`` compressed as Kafka writes ``codec`` for message format ``magic``."""
    if codec == GZIP:
        return gzip.compress(data, compresslevel=GZIP_LEVEL)
    if codec == SNAPPY:
        return _snappy_stream(data)
    if codec == LZ4:
        return _lz4_frame(data, broken_checksum=magic == 0)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=ZSTD_LEVEL))
    if codec == NONE:
        return data
    raise UnsupportedCompression(f"compression codec {codec} is unknown")


def decompress(codec: int, data: bytes | memoryview, magic: int) -> bytes:
    """What Kafka's reader of ``codec`` for message format ``magic`` reads; damage is ``CorruptBatch``."""
    if codec == NONE:
        return bytes(data)
    try:
        if codec == GZIP:
            return gzip.decompress(data)
        if codec == SNAPPY:
            return _read_snappy(bytes(data))
        if codec == LZ4:
            return _read_lz4_frame(memoryview(data), ignore_checksum=magic == 0)
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(bytes(data)))
    except (OSError, EOFError, zlib.error, cramjam.DecompressionError, struct.error) as exc:
        raise CorruptBatch(f"{NAMES[codec]} data cannot be decompressed: {exc}") from exc
    raise UnsupportedCompression(f"compression codec {codec} is unknown")


# ---------------------------------------------------------------- snappy (snappy-java's stream)


def _snappy_stream(data: bytes) -> bytes:
    out = bytearray(XERIAL_HEADER)
    view = memoryview(data)
    for pos in range(0, len(data), XERIAL_BLOCK):
        block = cramjam.snappy.compress_raw(view[pos : pos + XERIAL_BLOCK])
        out += _I32.pack(len(block))
        out += block
    return bytes(out)


def _read_snappy(data: bytes) -> bytes:
    if not data.startswith(XERIAL_HEADER[:8]) or len(data) < len(XERIAL_HEADER):
        return bytes(cramjam.snappy.decompress_raw(data))  # Snappy.compress(byte[]): one raw block
    (version,) = _I32.unpack_from(data, 8)
    if version < 1:
        raise CorruptBatch(f"snappy stream version {version} is below 1")
    out = bytearray()
    pos = len(XERIAL_HEADER)
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptBatch("snappy chunk length truncated")
        (size,) = _I32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise CorruptBatch("snappy chunk runs past the data")
        out += cramjam.snappy.decompress_raw(data[pos : pos + size])
        pos += size
    return bytes(out)


# ---------------------------------------------------------------- lz4 (Kafka's frame)


def _lz4_frame(data: bytes, broken_checksum: bool) -> bytes:
    head = _U32LE.pack(LZ4_MAGIC) + bytes((_LZ4_FLG, _LZ4_BD))
    out = bytearray(head)
    out.append((xxh32(head if broken_checksum else head[4:]) >> 8) & 0xFF)
    view = memoryview(data)
    for pos in range(0, len(data), LZ4_BLOCK):
        raw = view[pos : pos + LZ4_BLOCK]
        block = cramjam.lz4.compress_block(raw, store_size=False)
        if len(block) >= len(raw):
            out += _U32LE.pack(len(raw) | _UNCOMPRESSED)
            out += raw
        else:
            out += _U32LE.pack(len(block))
            out += block
    out += _U32LE.pack(0)
    return bytes(out)


def _read_lz4_frame(data: memoryview, ignore_checksum: bool) -> bytes:
    """Kafka's Lz4BlockInputStream: version 1, independent blocks, reserved bits 0, block sizes 64 KiB to
    4 MiB; the header checksum skipped for magic 0; block checksums checked; the content checksum read
    but not checked (as Kafka)."""
    if len(data) < 7 or _U32LE.unpack_from(data, 0)[0] != LZ4_MAGIC:
        raise CorruptBatch("not an LZ4 frame")
    flg, bd = data[4], data[5]
    if flg & 0x03 or not flg & 0x20 or flg >> 6 != 1:
        raise CorruptBatch(f"LZ4 frame flags {flg:#x} are not supported")
    size_code = (bd >> 4) & 0x07
    if bd & 0x8F or size_code < 4:
        raise CorruptBatch(f"LZ4 block descriptor {bd:#x} is not supported")
    max_block = 1 << (2 * size_code + 8)
    pos = 6 + (8 if flg & 0x08 else 0)
    if pos >= len(data):
        raise CorruptBatch("LZ4 frame header truncated")
    if not ignore_checksum and data[pos] != (xxh32(data[4:pos]) >> 8) & 0xFF:
        raise CorruptBatch("LZ4 frame descriptor checksum mismatch")
    pos += 1
    block_checksum = bool(flg & 0x10)
    # each compressed block is handed to cramjam as a one-block standard frame: its block decoder into
    # a buffer cannot be told the data carries no size prefix (a 4 MiB buffer misreads a block's first
    # bytes as one), and a frame's decoder returns exactly what the block holds
    descriptor = bytes((0x60, bd))
    single = _U32LE.pack(LZ4_MAGIC) + descriptor + bytes(((xxh32(descriptor) >> 8) & 0xFF,))
    out = bytearray()
    while True:
        if pos + 4 > len(data):
            raise CorruptBatch("LZ4 frame ends without an end mark")
        (word,) = _U32LE.unpack_from(data, pos)
        pos += 4
        size = word & ~_UNCOMPRESSED
        if size == 0:
            return bytes(out)
        if size > max_block or pos + size > len(data):
            raise CorruptBatch(f"LZ4 block of {size} bytes does not fit")
        block = data[pos : pos + size]
        if word & _UNCOMPRESSED:
            out += block
        else:
            out += cramjam.lz4.decompress(single + data[pos - 4 : pos + size].tobytes() + b"\x00\x00\x00\x00")
        pos += size
        if block_checksum:
            if pos + 4 > len(data) or _U32LE.unpack_from(data, pos)[0] != xxh32(block):
                raise CorruptBatch("LZ4 block checksum mismatch")
            pos += 4


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M


def xxh32(data: bytes | memoryview, seed: int = 0) -> int:
    """XXH32, the hash of LZ4 frame checksums (a few header bytes, or a block when a frame asks)."""
    buf = bytes(data)
    n = len(buf)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed & _M, (seed - _P1) & _M]
        lanes = struct.unpack_from(f"<{(n // 16) * 4}I", buf)
        for i in range(0, len(lanes), 4):
            for j in range(4):
                v[j] = (_rotl((v[j] + lanes[i + j] * _P2) & _M, 13) * _P1) & _M
        pos = (n // 16) * 16
        acc = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
    else:
        acc = (seed + _P5) & _M
    acc = (acc + n) & _M
    while pos + 4 <= n:
        (lane,) = struct.unpack_from("<I", buf, pos)
        acc = (_rotl((acc + lane * _P3) & _M, 17) * _P4) & _M
        pos += 4
    while pos < n:
        acc = (_rotl((acc + buf[pos] * _P5) & _M, 11) * _P1) & _M
        pos += 1
    acc ^= acc >> 15
    acc = (acc * _P2) & _M
    acc ^= acc >> 13
    acc = (acc * _P3) & _M
    acc ^= acc >> 16
    return acc
