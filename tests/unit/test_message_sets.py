"""Message sets (magic 0/1) <-> record batches v2, checked against kafka-python's own legacy-format
code (an independent writer and reader of the old formats).

Kafka facts (LogValidator, RecordsUtil.downConvert, AbstractLegacyRecordBatch of Kafka 3.9): a produced
set becomes one v2 batch with the messages' keys, values and timestamps (magic 0: -1) and the set's
compression; a fetched v2 batch becomes messages with the same offsets and timestamps, control batches
left out, an uncompressed batch's records below the fetch offset left out, a compressed one as one
wrapper (its offset the last inner one; magic 1 inner offsets relative).
"""

import pytest
from kafka.record import MemoryRecords
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from storage import message_sets
from storage.batch import build_batch, build_control_batch, iter_records, parse_header
from storage.errors import CorruptBatch, UnsupportedCompression

NONE, GZIP, SNAPPY = 0, 1, 2
ROWS = [(b"k0", b"v0", 1000), (None, b"v1", 1001), (b"k2", None, 1005)]


def legacy_set(magic, codec, rows=ROWS):
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i, (k, v, ts) in enumerate(rows):
        builder.append(i, ts if magic else None, k, v)
    return bytes(builder.build())


def read_legacy(data):
    records = MemoryRecords(data)
    out = []
    while records.has_next():
        batch = records.next_batch()
        out += [(r.offset, r.timestamp, r.key, r.value) for r in batch]
    return out


@pytest.mark.parametrize(("magic", "codec"), [(0, NONE), (1, NONE), (0, GZIP), (1, GZIP)])
def test_produced_set_becomes_one_v2_batch(magic, codec):
    data = legacy_set(magic, codec)
    assert message_sets.is_message_set(data)
    batch = message_sets.to_record_batch(data)
    header = parse_header(batch)
    assert header.magic == 2 and header.record_count == 3 and header.compression == codec and header.producer_id == -1
    got = [(r.offset, r.key, r.value, r.timestamp) for r in iter_records(batch)]
    stamps = [ts if magic else -1 for _, _, ts in ROWS]
    assert got == [(i, k, v, stamps[i]) for i, (k, v, _) in enumerate(ROWS)]


def test_snappy_set_is_refused_and_damage_is_corrupt():
    with pytest.raises(UnsupportedCompression):
        message_sets.to_record_batch(legacy_set(1, SNAPPY))
    data = bytearray(legacy_set(1, NONE))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptBatch):
        message_sets.to_record_batch(bytes(data))


def stored(base, rows, compressed=False):
    batch = bytearray(build_batch([(k, v) for k, v, _ in rows], timestamp_ms=rows[0][2], timestamps=[ts for *_, ts in rows], mutable=True))
    batch[0:8] = base.to_bytes(8, "big")
    if compressed:
        batch = bytearray(message_sets._compressed(bytes(batch), GZIP))
    return bytes(batch)


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_batches_down_convert_record_by_record(magic):
    data = stored(10, ROWS) + bytes(build_control_batch(5, 0, True, timestamp_ms=2000)) + stored(13, ROWS[:1])
    out, count = message_sets.down_convert(data, magic, first_offset=11)
    got = read_legacy(out)
    ts = (lambda t: t) if magic else (lambda t: None)  # magic 0 has no timestamp (kafka-python: None)
    assert got == [(11, ts(1001), None, b"v1"), (12, ts(1005), b"k2", None), (13, ts(1000), b"k0", b"v0")]
    assert count == 3


@pytest.mark.parametrize("magic", [0, 1])
def test_compressed_batch_down_converts_to_one_wrapper_with_all_its_records(magic):
    data = stored(20, ROWS, compressed=True)
    out, count = message_sets.down_convert(data, magic, first_offset=21)
    assert count == 3
    first = MemoryRecords(out).next_batch()
    assert first.compression_type == GZIP  # one gzip wrapper
    got = read_legacy(out)
    assert [(o, k, v) for o, _, k, v in got] == [(20, b"k0", b"v0"), (21, None, b"v1"), (22, b"k2", None)]
    if magic == 1:
        assert [t for _, t, _, _ in got] == [1000, 1001, 1005]


def test_a_batch_cut_by_the_fetch_limit_is_left_out():
    data = stored(0, ROWS) + stored(3, ROWS)[:30]
    out, count = message_sets.down_convert(data, 1, 0)
    assert count == 3 and len(read_legacy(out)) == 3


def test_round_trip_through_both_conversions():
    batch = message_sets.to_record_batch(legacy_set(1, GZIP))
    out, _ = message_sets.down_convert(batch, 1, 0)
    assert [(k, v, t) for _, t, k, v in read_legacy(out)] == [(k, v, t) for k, v, t in ROWS]
