"""Record batch v2: encoding, CRC, header fields, record decoding."""

from __future__ import annotations

import gzip
import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.storage.batch import (
    BATCH_OVERHEAD,
    BatchHeader,
    Record,
    build_batch,
    crc_ok,
    iter_batches,
    iter_records,
    parse_header,
    set_base_offset,
    validate_batch,
)
from groupd.storage.batch import _read_varint as read_varint
from groupd.storage.batch import _write_varint as write_varint
from groupd.storage.errors import CorruptBatch, StorageError, UnsupportedCompression, UnsupportedMagic


def test_header_fields_and_round_trip():
    batch = build_batch(
        [(b"k1", b"v1"), (None, b"v2"), (b"k3", None)],
        base_offset=7, timestamp_ms=1_700_000_000_000,
        headers=[[("h", b"x")], [], [("n", None), ("m", b"")]],
        producer_id=42, producer_epoch=3, base_sequence=9,
    )
    h = validate_batch(batch)
    assert isinstance(h, BatchHeader)
    assert (h.base_offset, h.magic, h.record_count, h.last_offset_delta, h.last_offset) == (7, 2, 3, 2, 9)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, 9)
    assert h.size == len(batch) and h.batch_length == len(batch) - 12
    assert h.compression == 0 and not h.is_transactional and not h.is_control and h.timestamp_type == 0
    assert h.base_timestamp == h.max_timestamp == 1_700_000_000_000
    assert list(iter_records(batch)) == [
        Record(7, 1_700_000_000_000, b"k1", b"v1", (("h", b"x"),)),
        Record(8, 1_700_000_000_000, None, b"v2", ()),
        Record(9, 1_700_000_000_000, b"k3", None, (("n", None), ("m", b""))),
    ]


def test_known_bytes_layout():
    """A one-record batch laid out byte by byte as Kafka's DefaultRecordBatch does."""
    batch = build_batch([(b"a", b"b")], timestamp_ms=5)
    record = bytes([0, 0, 0, 2]) + b"a" + bytes([2]) + b"b" + bytes([0])  # attrs, ts delta, off delta, k, v, hdrs
    assert batch[BATCH_OVERHEAD:] == bytes([2 * len(record)]) + record
    assert struct.unpack_from(">qi", batch, 0) == (0, len(batch) - 12)
    assert batch[16] == 2
    assert struct.unpack_from(">I", batch, 17)[0] == crc32c(batch[21:])


def test_set_base_offset_keeps_crc():
    buf = bytearray(build_batch([(b"k", b"v")] * 3, timestamp_ms=1))
    set_base_offset(buf, 0, 1234)
    h = validate_batch(buf)
    assert h.base_offset == 1234 and [r.offset for r in iter_records(buf)] == [1234, 1235, 1236]


def test_crc_mismatch_detected_on_any_covered_byte():
    batch = build_batch([(b"key", b"value")], timestamp_ms=1)
    for i in range(21, len(batch)):
        bad = bytearray(batch)
        bad[i] ^= 0x40
        assert not crc_ok(bad, 0, parse_header(bad))
        with pytest.raises(CorruptBatch):
            validate_batch(bad)


def test_validate_rejects_magic_and_length():
    batch = bytearray(build_batch([(b"k", b"v")], timestamp_ms=1))
    old = bytearray(batch)
    old[16] = 1
    with pytest.raises(UnsupportedMagic):
        validate_batch(old)
    with pytest.raises(CorruptBatch):
        validate_batch(batch[:-1])
    with pytest.raises(CorruptBatch):
        validate_batch(batch + b"\x00")
    with pytest.raises(CorruptBatch):
        validate_batch(batch[:30])
    with pytest.raises(CorruptBatch):
        parse_header(batch[:60])


def test_iter_batches_stops_at_incomplete():
    a = build_batch([(b"k", b"v")], timestamp_ms=1)
    b = build_batch([(b"k2", b"v2")], timestamp_ms=2)
    buf = a + b
    assert [p for p, _ in iter_batches(buf)] == [0, len(a)]
    assert [p for p, _ in iter_batches(buf[:-1])] == [0]
    assert [p for p, _ in iter_batches(buf, len(a))] == [len(a)]
    with pytest.raises(StorageError):  # garbage is corrupt, not merely incomplete
        list(iter_batches(b"\x00" * 70))


def test_gzip_records_decoded_and_an_unknown_codec_refused():
    plain = build_batch([(b"k", b"v"), (b"k2", None)], timestamp_ms=10)
    h = parse_header(plain)
    compressed = gzip.compress(plain[BATCH_OVERHEAD:])
    buf = bytearray(plain[:BATCH_OVERHEAD] + compressed)
    struct.pack_into(">ih", buf, 8, len(buf) - 12, 0)
    struct.pack_into(">h", buf, 21, 1)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    assert validate_batch(buf).compression == 1
    assert [(r.key, r.value) for r in iter_records(buf)] == [(b"k", b"v"), (b"k2", None)]
    assert h.record_count == 2
    struct.pack_into(">h", buf, 21, 5)  # no codec has id 5
    with pytest.raises(UnsupportedCompression):
        list(iter_records(buf))


@pytest.mark.parametrize("codec", [2, 3, 4])
def test_snappy_lz4_and_zstd_batches_decoded(codec):
    from groupd.storage.message_sets import compressed_batch

    buf = compressed_batch(build_batch([(b"k", b"v"), (b"k2", None)], timestamp_ms=10), codec)
    assert validate_batch(buf).compression == codec
    assert [(r.key, r.value) for r in iter_records(buf)] == [(b"k", b"v"), (b"k2", None)]


def test_log_append_time_uses_max_timestamp():
    buf = bytearray(build_batch([(b"k", b"v")], timestamp_ms=10))
    struct.pack_into(">h", buf, 21, 0x08)
    struct.pack_into(">q", buf, 35, 99)
    assert parse_header(buf).timestamp_type == 1
    assert [r.timestamp for r in iter_records(buf)] == [99]


@pytest.mark.parametrize("n", [0, 1, -1, 63, -64, 64, 300, -300, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)])
def test_varint_round_trip(n):
    out = bytearray()
    write_varint(out, n)
    assert read_varint(bytes(out), 0) == (n, len(out))


def test_truncated_record_is_corrupt():
    batch = bytearray(build_batch([(b"key", b"value")], timestamp_ms=1))
    # claim one more record than encoded: decoding runs off the end
    struct.pack_into(">i", batch, 57, 2)
    with pytest.raises(CorruptBatch):
        list(iter_records(batch))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.one_of(st.none(), st.binary(max_size=80)), st.one_of(st.none(), st.binary(max_size=80))),
        min_size=1,
        max_size=70,
    )
)
def test_small_record_layout_is_the_general_layout(records):
    import groupd.storage.batch as batch_module

    header = {"timestamp_ms": 99, "base_offset": 7, "producer_id": 5, "producer_epoch": 1, "base_sequence": 3}
    fast = build_batch(records, **header)
    # the general writer, as build_batch lays records out when the fast path declines
    saved = batch_module._small_records
    batch_module._small_records = lambda _r: None
    try:
        general = build_batch(records, **header)
    finally:
        batch_module._small_records = saved
    assert fast == general
    mutable = build_batch(records, mutable=True, **header)
    assert isinstance(mutable, bytearray) and mutable == fast  # what the log writes its base offset into
    assert [(r.key, r.value) for r in iter_records(fast)] == [(k, v) for k, v in records]


def test_control_batch_is_kafkas_transaction_marker():
    """Kafka's EndTransactionMarker: a transactional control batch holding one record whose key is
    (version 0, type 0 abort / 1 commit) and whose value is (version 0, coordinator epoch)."""
    from groupd.storage.batch import (
        ABORT_MARKER,
        COMMIT_MARKER,
        build_control_batch,
        control_marker,
        iter_records,
        validate_batch,
    )

    for commit, kind in ((True, COMMIT_MARKER), (False, ABORT_MARKER)):
        raw = bytes(build_control_batch(42, 3, commit, timestamp_ms=1_700_000_000_000, coordinator_epoch=7))
        h = validate_batch(raw)
        assert (h.is_control, h.is_transactional, h.producer_id, h.producer_epoch, h.base_sequence, h.record_count) == (
            True,
            True,
            42,
            3,
            -1,
            1,
        )
        (rec,) = list(iter_records(raw))
        assert rec.key == struct.pack(">hh", 0, kind)
        assert rec.value == struct.pack(">hi", 0, 7)
        assert control_marker(raw) == kind
