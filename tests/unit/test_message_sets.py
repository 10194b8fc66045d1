"""Message sets (magic 0/1) <-> record batches v2, checked against kafka-python's own legacy-format
code (an independent writer and reader of the old formats, with every codec).

Kafka facts (LogValidator, RecordsUtil.downConvert, LazyDownConversionRecords(Send),
MemoryRecordsBuilder, AbstractLegacyRecordBatch of Kafka 3.9): a produced set becomes one v2 batch with
the messages' keys, values and timestamps (magic 0: -1), compressed with the topic's compression.type or,
for ``producer``, the set's codec; a compressed set is one wrapper of uncompressed messages (else
INVALID_RECORD), never zstd. A fetched v2 batch becomes messages with the same offsets and timestamps,
control batches left out, an uncompressed batch's records below the fetch offset left out, a compressed
one as one wrapper with the batch's codec (its offset the last inner one, its timestamp the largest inner
one or the LogAppendTime; magic 1 inner offsets relative to the first record, magic 0 absolute). A zstd
batch cannot be down-converted: as the first batch converted it fails the partition, later it ends the
answer before the 128 KiB chunk holding it.
"""

import zlib

import pytest

from groupd.storage import codecs, message_sets
from groupd.storage.batch import build_batch, build_control_batch, iter_records, parse_header
from groupd.storage.errors import CorruptBatch, InvalidRecord, UnsupportedCompression
from tests.legacy_sets import XxhashShim, read_legacy
from tests.legacy_sets import legacy_set as _legacy_set

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
ROWS = [(b"k0", b"v0", 1000), (None, b"v1", 1001), (b"k2", None, 1005)]


def legacy_set(magic, codec, rows=ROWS):
    return _legacy_set(magic, codec, rows)


@pytest.fixture(autouse=True)
def _kafka_python_xxhash(monkeypatch):
    import kafka.codec

    monkeypatch.setattr(kafka.codec, "xxhash", XxhashShim())


ALL = [(m, c) for m in (0, 1) for c in (NONE, GZIP, SNAPPY, LZ4)]


@pytest.mark.parametrize(("magic", "codec"), ALL)
def test_produced_set_becomes_one_v2_batch(magic, codec):
    data = legacy_set(magic, codec)
    assert message_sets.is_message_set(data)
    batch = message_sets.to_record_batch(data)
    header = parse_header(batch)
    assert header.magic == 2 and header.record_count == 3 and header.compression == codec and header.producer_id == -1
    got = [(r.offset, r.key, r.value, r.timestamp) for r in iter_records(batch)]
    stamps = [ts if magic else -1 for _, _, ts in ROWS]
    assert got == [(i, k, v, stamps[i]) for i, (k, v, _) in enumerate(ROWS)]


def test_damage_is_corrupt():
    data = bytearray(legacy_set(1, NONE))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptBatch):
        message_sets.to_record_batch(bytes(data))


@pytest.mark.parametrize(("source", "topic", "stored_as"), [
    (SNAPPY, GZIP, GZIP), (GZIP, NONE, NONE), (NONE, LZ4, LZ4), (LZ4, ZSTD, ZSTD), (LZ4, None, LZ4),
])
def test_the_topics_compression_type_decides_the_stored_codec(source, topic, stored_as):
    batch = message_sets.to_record_batch(legacy_set(1, source), topic)
    assert parse_header(batch).compression == stored_as
    assert [(r.key, r.value, r.timestamp) for r in iter_records(batch)] == [(k, v, t) for k, v, t in ROWS]


def _wrapper(magic, codec, inner):
    """One compressed message around ``inner`` (kafka-python writes no zstd wrapper, Kafka reads none)."""
    data = bytearray(_legacy_set(magic, NONE, [(None, codecs.compress(codec, inner, magic), 1000)]))
    data[17] = codec  # the attributes: the codec
    data[12:16] = zlib.crc32(bytes(data[16:])).to_bytes(4, "big")
    return bytes(data)


def test_what_kafkas_log_validator_refuses_is_invalid_record():
    with pytest.raises(InvalidRecord):  # zstd has no magic 0/1 wrapper
        message_sets.to_record_batch(_wrapper(1, ZSTD, legacy_set(1, NONE)))
    with pytest.raises(InvalidRecord):  # Compressed outer record has more than one batch
        message_sets.to_record_batch(legacy_set(1, GZIP) + legacy_set(1, SNAPPY))
    with pytest.raises(InvalidRecord):  # ... an inner record with a compression attribute set
        message_sets.to_record_batch(_wrapper(1, GZIP, legacy_set(1, SNAPPY)))
    assert parse_header(message_sets.to_record_batch(legacy_set(1, NONE) + legacy_set(0, NONE))).record_count == 6


def stored(base, rows, compressed=NONE):
    batch = bytearray(
        build_batch(
            [(k, v) for k, v, _ in rows], timestamp_ms=rows[0][2], timestamps=[ts for *_, ts in rows], mutable=True
        )
    )
    batch[0:8] = base.to_bytes(8, "big")
    if compressed:
        batch = bytearray(message_sets.compressed_batch(bytes(batch), compressed))
    return bytes(batch)


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_batches_down_convert_record_by_record(magic):
    data = stored(10, ROWS) + bytes(build_control_batch(5, 0, True, timestamp_ms=2000)) + stored(13, ROWS[:1])
    out, count = message_sets.down_convert(data, magic, first_offset=11)
    got = read_legacy(out)
    ts = (lambda t: t) if magic else (lambda t: None)  # magic 0 has no timestamp (kafka-python: None)
    assert got == [(11, ts(1001), None, b"v1"), (12, ts(1005), b"k2", None), (13, ts(1000), b"k0", b"v0")]
    assert count == 3


@pytest.mark.parametrize(("magic", "codec"), [(m, c) for m in (0, 1) for c in (GZIP, SNAPPY, LZ4)])
def test_compressed_batch_down_converts_to_one_wrapper_with_all_its_records(magic, codec):
    data = stored(20, ROWS, compressed=codec)
    out, count = message_sets.down_convert(data, magic, first_offset=21)
    assert count == 3
    wrappers = list(message_sets.read_messages(out))
    assert [(w.offset, w.magic, w.codec) for w in wrappers] == [(22, magic, codec)]
    assert wrappers[0].timestamp == (1005 if magic else -1)  # the largest inner timestamp
    got = read_legacy(out)  # kafka-python reads the wrapper
    assert [(o, k, v) for o, _, k, v in got] == [(20, b"k0", b"v0"), (21, None, b"v1"), (22, b"k2", None)]
    if magic == 1:
        assert [t for _, t, _, _ in got] == [1000, 1001, 1005]


@pytest.mark.parametrize("magic", [0, 1])
def test_inner_offsets_are_relative_to_the_first_record_for_magic_1_and_absolute_for_magic_0(magic):
    batch = build_batch(
        [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], timestamp_ms=7, offset_deltas=[0, 2, 5], base_offset=20
    )
    out, _ = message_sets.down_convert(message_sets.compressed_batch(batch, LZ4), magic, 0)
    (wrapper,) = message_sets.read_messages(out)
    inner = [m.offset for m in message_sets.read_messages(codecs.decompress(LZ4, wrapper.value, magic))]
    assert wrapper.offset == 25
    assert inner == ([0, 2, 5] if magic else [20, 22, 25])
    assert [o for o, *_ in read_legacy(out)] == [20, 22, 25]


def test_log_append_time_marks_the_wrapper_and_its_messages_with_the_batch_time():
    batch = bytearray(build_batch([(b"a", b"1"), (b"b", b"2")], timestamp_ms=7, attributes=0x08, mutable=True))
    batch[35:43] = (5000).to_bytes(8, "big")  # maxTimestamp: the append time
    out, _ = message_sets.down_convert(message_sets.compressed_batch(bytes(batch), SNAPPY), 1, 0)
    (wrapper,) = message_sets.read_messages(out)
    assert wrapper.log_append_time and wrapper.timestamp == 5000
    inner = list(message_sets.read_messages(codecs.decompress(SNAPPY, wrapper.value, 1)))
    assert all(m.log_append_time and m.timestamp == 5000 for m in inner)


def test_a_zstd_batch_first_refuses_the_partition_even_behind_control_batches():
    zstd = stored(10, ROWS, compressed=ZSTD)
    with pytest.raises(UnsupportedCompression):
        message_sets.down_convert(zstd, 1, 10)
    with pytest.raises(UnsupportedCompression):
        message_sets.down_convert(bytes(build_control_batch(9, 0, True, timestamp_ms=2000)) + zstd, 1, 9)


def test_a_zstd_batch_later_ends_the_answer_before_its_128k_chunk():
    first, small, zstd = stored(0, ROWS, GZIP), stored(3, ROWS), stored(6, ROWS, compressed=ZSTD)
    out, count = message_sets.down_convert(first + small + zstd, 1, 0)
    assert count == 3 and [o for o, *_ in read_legacy(out)] == [0, 1, 2]  # ``small`` shares zstd's chunk
    big = stored(3, [(b"k", bytes(message_sets.CHUNK_BYTES), 1)])  # a chunk alone
    out, count = message_sets.down_convert(first + big + zstd, 1, 0)
    assert count == 4 and [o for o, *_ in read_legacy(out)] == [0, 1, 2, 3]


def test_a_batch_cut_by_the_fetch_limit_is_left_out():
    data = stored(0, ROWS) + stored(3, ROWS)[:30]
    out, count = message_sets.down_convert(data, 1, 0)
    assert count == 3 and len(read_legacy(out)) == 3


@pytest.mark.parametrize(("magic", "codec"), ALL)
def test_round_trip_through_both_conversions(magic, codec):
    batch = message_sets.to_record_batch(legacy_set(magic, codec))
    out, _ = message_sets.down_convert(batch, magic, 0)
    assert list(message_sets.read_messages(out))[0].codec == codec
    assert [(k, v, t) for _, t, k, v in read_legacy(out)] == [(k, v, t if magic else None) for k, v, t in ROWS]


def test_kafka_pythons_magic_0_lz4_set_carries_the_broken_header_checksum_and_is_read():
    data = legacy_set(0, LZ4)
    (wrapper,) = message_sets.read_messages(data)
    assert wrapper.value[6] == (codecs.xxh32(wrapper.value[:6]) >> 8) & 0xFF  # KAFKA-3160
    assert [r.value for r in iter_records(message_sets.to_record_batch(data))] == [v for _, v, _ in ROWS]
