"""Kafka's codec framings (groupd/storage/codecs.py), checked against independent writers and readers: kafka-python's
codec module, the lz4 package's LZ4 frames and zstandard's frames.

Kafka 3.9 facts (clients' compress package, snappy-java 1.1.10):
- snappy: Kafka writes snappy-java's SnappyOutputStream: header ``\\x82SNAPPY\\x00`` + i32 version 1 +
  i32 compatible version 1, then chunks (i32 length + a raw snappy block) of at most 32 KiB of input;
  SnappyInputStream also reads input without that header as one raw block (``Snappy.compress(byte[])``).
- lz4: Kafka's Lz4BlockOutputStream writes magic 0x184D2204, FLG 0x60 (version 1, independent blocks,
  no checksums), BD 0x40 (64 KiB), the header checksum byte ``(xxh32(descriptor) >> 8) & 0xFF`` — for
  magic 0 computed over the frame magic too (KAFKA-3160, ``useBrokenFlagDescriptorChecksum``); blocks
  that do not shrink are stored with the size's high bit set; end mark 0. Lz4BlockInputStream skips
  the checksum byte for magic 0 (``ignoreFlagDescriptorChecksum``) and checks it otherwise, refuses
  dependent blocks, checks block checksums.
"""

import gzip
import os
import struct

import lz4.frame
import pytest
import zstandard
from kafka import codec as kp

from groupd.storage import codecs
from groupd.storage.errors import CorruptBatch

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
PAYLOAD = b"".join(b"record %d of a kafka message set " % i for i in range(4000))  # ~140 KiB: several blocks


def test_xxh32_matches_published_values_and_lz4s_own_block_checksums():
    assert codecs.xxh32(b"") == 0x02CC5D05
    assert codecs.xxh32(b"a") == 0x550D7456
    assert codecs.xxh32(b"abc") == 0x32D153FF
    for n in (1, 15, 16, 17, 31, 64, 1000):
        data = os.urandom(n)
        frame = lz4.frame.compress(data, block_checksum=True, store_size=False, block_linked=False, compression_level=0)
        size = struct.unpack_from("<I", frame, 7)[0] & 0x7FFFFFFF
        block = frame[11 : 11 + size]
        assert struct.unpack_from("<I", frame, 11 + size)[0] == codecs.xxh32(block), n


# ---------------------------------------------------------------- snappy


def test_snappy_is_written_in_snappy_javas_stream_of_32k_chunks():
    out = codecs.compress(SNAPPY, PAYLOAD, 1)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    chunks, pos = 0, 16
    while pos < len(out):
        pos += 4 + struct.unpack_from(">i", out, pos)[0]
        chunks += 1
    assert pos == len(out) and chunks == -(-len(PAYLOAD) // (32 * 1024))
    assert kp.snappy_decode(out) == PAYLOAD  # kafka-python reads it


@pytest.mark.parametrize("xerial", [True, False])
def test_snappy_reader_takes_the_stream_and_a_plain_raw_block(xerial):
    data = kp.snappy_encode(PAYLOAD, xerial_compatible=xerial)
    assert data.startswith(b"\x82SNAPPY") == xerial
    assert codecs.decompress(SNAPPY, data, 1) == PAYLOAD


# ---------------------------------------------------------------- lz4


def test_lz4_frame_of_magic_1_and_2_has_a_correct_header_checksum():
    for magic in (1, 2):
        out = codecs.compress(LZ4, PAYLOAD, magic)
        assert out[:6] == bytes.fromhex("04224d18") + b"\x60\x40"
        assert out[6] == (codecs.xxh32(out[4:6]) >> 8) & 0xFF
        assert lz4.frame.decompress(out) == PAYLOAD  # a standard reader accepts it
        assert kp.lz4_decode(out) == PAYLOAD
        assert out[-4:] == b"\x00\x00\x00\x00"


def test_lz4_frame_of_magic_0_has_kafkas_broken_header_checksum_kafka_3160():
    out = codecs.compress(LZ4, PAYLOAD, 0)
    assert out[6] == (codecs.xxh32(out[:6]) >> 8) & 0xFF  # over the frame magic too
    assert out[6] != (codecs.xxh32(out[4:6]) >> 8) & 0xFF
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(out)  # a standard reader refuses it, as Kafka's magic 1 reader would
    with pytest.raises(CorruptBatch):
        codecs.decompress(LZ4, out, 1)
    assert codecs.decompress(LZ4, out, 0) == PAYLOAD  # magic 0: the checksum byte is skipped


def test_lz4_reader_of_magic_0_ignores_any_header_checksum_and_magic_1_checks_it():
    good = bytearray(lz4.frame.compress(PAYLOAD, block_linked=False, store_size=False))
    good[6] ^= 0x5A
    assert codecs.decompress(LZ4, bytes(good), 0) == PAYLOAD
    with pytest.raises(CorruptBatch):
        codecs.decompress(LZ4, bytes(good), 1)


@pytest.mark.parametrize("kwargs", [
    {"block_checksum": True, "content_checksum": True},
    {"store_size": True, "block_size": lz4.frame.BLOCKSIZE_MAX4MB},
])
def test_lz4_reader_takes_other_writers_independent_frames(kwargs):
    frame = lz4.frame.compress(PAYLOAD, block_linked=False, **kwargs)
    assert codecs.decompress(LZ4, frame, 2) == PAYLOAD


def test_lz4_reader_refuses_dependent_blocks_and_damaged_block_checksums():
    with pytest.raises(CorruptBatch):
        codecs.decompress(LZ4, lz4.frame.compress(PAYLOAD, block_linked=True), 2)
    frame = bytearray(lz4.frame.compress(PAYLOAD, block_linked=False, block_checksum=True))
    frame[20] ^= 0xFF
    with pytest.raises(CorruptBatch):
        codecs.decompress(LZ4, bytes(frame), 2)


def test_lz4_stores_an_incompressible_block_as_it_is():
    noise = os.urandom(1000)
    out = codecs.compress(LZ4, noise, 1)
    assert struct.unpack_from("<I", out, 7)[0] == 0x80000000 | 1000 and out[11:1011] == noise
    assert codecs.decompress(LZ4, out, 1) == noise


# ---------------------------------------------------------------- gzip and zstd, and damage


def test_zstd_and_gzip_both_ways():
    streamed = zstandard.ZstdCompressor(write_content_size=False).compress(PAYLOAD)
    assert codecs.decompress(ZSTD, streamed, 2) == PAYLOAD
    assert zstandard.ZstdDecompressor().decompressobj().decompress(codecs.compress(ZSTD, PAYLOAD, 2)) == PAYLOAD
    assert codecs.decompress(GZIP, gzip.compress(PAYLOAD), 1) == PAYLOAD
    assert gzip.decompress(codecs.compress(GZIP, PAYLOAD, 1)) == PAYLOAD


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_damage_is_a_corrupt_batch(codec):
    data = bytearray(codecs.compress(codec, PAYLOAD, 1))
    for i in range(len(data) // 3, len(data) // 3 + 8):
        data[i] ^= 0xA5
    with pytest.raises(CorruptBatch):
        codecs.decompress(codec, bytes(data[: len(data) // 2]), 1)


def test_lz4_frame_of_sarama_122_with_4m_blocks_and_a_content_checksum():
    """Sarama 1.22's (pierrec/lz4) magic 1 wrapper value of one message (k0, v0): FLG 0x64 (a content
    checksum), BD 0x70 (4 MiB blocks); its block starts with bytes that read as a small size prefix."""
    frame = bytes.fromhex("04224d186470b92100000016000100f00c1a3369e0650100000001a21c1014e6"
                          "000000026b3000000002763000000000dc47b2f3")
    inner = codecs.decompress(LZ4, frame, 1)
    assert len(inner) == 38 and inner[:8] == bytes(8) and inner.endswith(b"\x00\x00\x00\x02k0\x00\x00\x00\x02v0")
