"""Byte compatibility with an independent v2 codec (kafka-python's, a test dependency already)."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from groupd.storage.batch import build_batch, iter_records, validate_batch


def test_kafka_python_reads_our_batches():
    raw = build_batch(
        [(b"k1", b"v1"), (None, b"v2"), (b"k3", None)], base_offset=40, timestamp_ms=1_700_000_000_123,
        headers=[[("h", b"x")], [], []], producer_id=9, producer_epoch=1, base_sequence=3,
    )
    batch = DefaultRecordBatch(bytearray(raw))
    assert batch.validate_crc()
    assert (batch.base_offset, batch.last_offset_delta, batch.producer_id, batch.base_sequence) == (40, 2, 9, 3)
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == [
        (40, 1_700_000_000_123, b"k1", b"v1", [("h", b"x")]),
        (41, 1_700_000_000_123, None, b"v2", []),
        (42, 1_700_000_000_123, b"k3", None, []),
    ]


def test_we_read_kafka_python_batches_of_every_codec():
    for codec in (0, 1, 2, 3, 4):  # none, gzip, snappy, lz4, zstd
        builder = DefaultRecordBatchBuilder(
            magic=2, compression_type=codec, is_transactional=False, producer_id=-1, producer_epoch=-1,
            base_sequence=-1, batch_size=1 << 20,
        )
        builder.append(0, timestamp=1000, key=b"a", value=b"1" * 200, headers=[("x", b"y")])
        builder.append(1, timestamp=1005, key=None, value=b"2", headers=[])
        builder.append(2, timestamp=999, key=b"c", value=None, headers=[])
        raw = bytes(builder.build())
        header = validate_batch(raw)
        assert header.compression == codec and header.max_timestamp == 1005
        got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in iter_records(raw)]
        assert got == [
            (0, 1000, b"a", b"1" * 200, (("x", b"y"),)),
            (1, 1005, None, b"2", ()),
            (2, 999, b"c", None, ()),
        ]
