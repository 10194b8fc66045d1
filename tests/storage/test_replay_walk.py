"""The start-up replay walk: ``collect_latest`` over whole chunks agrees with the record decoder, and
``Log.chunks`` covers the log exactly once in order."""

import gzip
import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.storage.batch import BATCH_OVERHEAD, build_batch, collect_latest, iter_records
from groupd.storage.errors import CorruptBatch
from groupd.storage.log import Log, LogConfig


def reference(batches):
    """The same fold through the full record decoder: last value of each key, keys in first-seen order."""
    latest = {}
    for b in batches:
        for r in iter_records(b):
            if r.key is not None:
                latest[bytes(r.key)] = None if r.value is None else bytes(r.value)
    return latest


def gzipped(plain: bytes) -> bytes:
    buf = bytearray(plain[:BATCH_OVERHEAD] + gzip.compress(plain[BATCH_OVERHEAD:]))
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">h", buf, 21, 1)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


records = st.lists(
    st.tuples(st.one_of(st.none(), st.binary(max_size=300)), st.one_of(st.none(), st.binary(max_size=300))),
    min_size=1, max_size=20,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(records, st.booleans(), st.integers(0, 2**40)), min_size=1, max_size=8))
def test_same_survivors_in_the_same_order_as_the_decoder(batches):
    built = []
    for recs, compress, ts in batches:
        plain = build_batch(
            recs,
            timestamp_ms=ts,
            timestamps=[ts + 70_000 * i for i in range(len(recs))],
            offset_deltas=[200 * i for i in range(len(recs))],
        )
        built.append(gzipped(plain) if compress else plain)
    latest: dict = {}
    seen = collect_latest(b"".join(built), latest)
    assert seen == sum(len(r) for r, _, _ in batches)
    assert list(latest.items()) == list(reference(built).items())


def test_a_damaged_chunk_is_corrupt_not_an_index_error():
    batch = build_batch([(b"k", b"v" * 50)], timestamp_ms=1)
    with pytest.raises(CorruptBatch):
        collect_latest(batch[:-10], {})  # claims more bytes than the chunk has
    broken = bytearray(batch)
    broken[BATCH_OVERHEAD] = 0x7E  # the record's length now runs past its batch
    with pytest.raises(CorruptBatch):
        collect_latest(bytes(broken), {})
    for negative in (0x01, 0x03):  # zigzag -1 and -2: a record cannot have a negative length
        broken[BATCH_OVERHEAD] = negative
        with pytest.raises(CorruptBatch, match="negative record length"):
            collect_latest(bytes(broken), {})


def test_chunks_cover_every_batch_once(tmp_path, monkeypatch):
    import groupd.storage.log as storage_log

    monkeypatch.setattr(storage_log, "READ_CHUNK", 300)  # many chunks, cut at batch boundaries
    log = Log.open(tmp_path / "p", LogConfig(segment_bytes=2_000))
    for i in range(60):
        log.append_records([(b"k%d" % (i % 7), b"v%d" % i)], 1)
    assert len(log.segments) > 2
    everything = [b for _h, b in log.batches()]
    assert b"".join(bytes(c) for c in log.chunks()) == b"".join(bytes(b) for b in everything)
    log.delete_records_before(log.segments[1].base_offset + 1)  # a segment reaching below the start
    latest: dict = {}
    for chunk in log.chunks():
        collect_latest(chunk, latest)
    assert latest == reference([b for _h, b in log.batches()])
    log.close()
