"""The sparse index (one entry per index.interval.bytes, Kafka's offset and time indexes) answers every
lookup as a full scan of the batches does: reads at every offset, with and without an upper bound,
timestamp lookups at every timestamp, the largest timestamp; after a clean reopen (the index file), an
unclean one (a scan), and a truncation; with blocks of every width read back through a cache of any
size (storage/segment_index.py). And its memory: entries per stored byte, not per batch, and resident
only for the blocks' coarse level and the active segment's last block."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.storage import segment_index
from groupd.storage.batch import build_batch, iter_records, parse_header
from groupd.storage.log import Log, LogConfig

batch_shapes = st.lists(
    st.tuples(st.integers(1, 4), st.integers(0, 300), st.integers(0, 50)),  # records, value size, timestamp
    min_size=1,
    max_size=60,
)


def _scan(log: Log) -> list[tuple[int, bytes]]:
    """(segment base, batch bytes) of every stored batch, read whole: the reference."""
    bases = [info.base_offset for info in log.segments_info()]
    out = []
    for header, view in log.batches():
        seg = max(b for b in bases if b <= header.base_offset)
        out.append((seg, bytes(view)))
    return out


def _expected_read(batches, offset: int, max_bytes: int, upto: int | None) -> bytes:
    first = next((i for i, (_, b) in enumerate(batches) if parse_header(b, 0).last_offset >= offset), None)
    if first is None:
        return b""
    seg = batches[first][0]
    out = b""
    for s, b in batches[first:]:
        h = parse_header(b, 0)
        if s != seg or (upto is not None and h.base_offset >= upto) or (out and len(out) + len(b) > max_bytes):
            break
        out += b
    return out


def _expected_for_timestamp(batches, ts: int):
    for _, b in batches:
        h = parse_header(b, 0)
        if h.max_timestamp >= ts:
            for r in iter_records(b):
                if r.timestamp >= ts:
                    return r.offset, r.timestamp
    return None


def _expected_max_timestamp(batches):
    best = None
    for _, b in batches:
        h = parse_header(b, 0)
        if best is None or h.max_timestamp > best[0]:
            offset = next((r.offset for r in iter_records(b) if r.timestamp == h.max_timestamp), h.last_offset)
            best = (h.max_timestamp, offset)
    return best


def _agree(log: Log) -> None:
    batches = _scan(log)
    end = log.log_end_offset
    for offset in range(log.log_start_offset, end):
        for max_bytes in (1, 500, 5000):
            assert log.read(offset, max_bytes) == _expected_read(batches, offset, max_bytes, None), (offset, max_bytes)
        upto = min(end, offset + 3)
        assert log.read(offset, 5000, upto=upto) == _expected_read(batches, offset, 5000, upto), (offset, upto)
    timestamps = {r.timestamp for _, b in batches for r in iter_records(b)}
    for ts in sorted(timestamps | {t + 1 for t in timestamps} | {-1}):
        assert log.offset_for_timestamp(ts) == _expected_for_timestamp(batches, ts), ts
    assert log.max_timestamp() == _expected_max_timestamp(batches)


class small_blocks:
    """Index blocks ``width`` entries wide and a cache of ``cached`` blocks, for the logs opened inside."""

    def __init__(self, width: int, cached: int) -> None:
        self.width, self.cached = width, cached

    def __enter__(self) -> None:
        self.saved = segment_index.BLOCK, segment_index.CACHE.limit
        segment_index.BLOCK, segment_index.CACHE.limit = self.width, self.cached
        segment_index.CACHE.blocks.clear()

    def __exit__(self, *exc: object) -> None:
        segment_index.BLOCK, segment_index.CACHE.limit = self.saved
        segment_index.CACHE.blocks.clear()


@settings(max_examples=40, deadline=None)
@given(
    shapes=batch_shapes,
    interval=st.sampled_from([0, 64, 512, 4096]),
    segment_bytes=st.integers(1500, 20_000),
    cut=st.floats(0, 1),
    width=st.sampled_from([1, 2, 3, 8, 64]),
    cached=st.sampled_from([1, 4, 256]),
)
def test_lookups_agree_with_a_full_scan(shapes, interval, segment_bytes, cut, width, cached):
    with small_blocks(width, cached), tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p"
        cfg = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval)
        log = Log.open(path, cfg, now_ms=lambda: 0)
        for n, size, ts in shapes:
            records = [(None, bytes(size))] * n
            log.append(build_batch(records, timestamp_ms=ts, timestamps=[ts + (i * 7) % 5 for i in range(n)]))
        log.flush()
        _agree(log)
        unclean = Log.open(path, cfg, now_ms=lambda: 0)  # as after a crash: no index file, a scan
        _agree(unclean)
        unclean.close()
        log.close()  # writes the index files
        log = Log.open(path, cfg, now_ms=lambda: 0)
        _agree(log)
        target = int(log.log_end_offset * cut)
        log.truncate_to(target)
        assert log.log_end_offset <= max(target, 0) or target == 0
        _agree(log)
        log.append(build_batch([(None, b"after")], timestamp_ms=99))
        _agree(log)
        log.close()
        log = Log.open(path, cfg, now_ms=lambda: 0)
        _agree(log)
        log.close()


def test_index_memory_follows_bytes_not_batches(tmp_path):
    """10,000 batches of ~80 bytes: Kafka's 4096-byte interval keeps one entry per ~50 batches; of those
    entries only one per block, and the last block's, stay in memory."""
    log = Log.open(tmp_path / "p", LogConfig(), now_ms=lambda: 0)
    for i in range(10_000):
        log.append(build_batch([(None, b"v" * 10)], timestamp_ms=i))
    seg = log.segments[-1]
    stored, index = seg.size, seg.index
    assert stored // 8192 <= len(index) <= stored // 4096 + 1, "one entry per run of at least 4096 bytes"
    width = segment_index.BLOCK
    blocks = -(-len(index) // width)
    assert len(index.first_offsets) == len(index.first_positions) == len(index.block_ts) == blocks
    assert 1 <= len(index.positions) <= width, "the tail: the last block, no more"
    assert index.resident_bytes() == 24 * (blocks + len(index.positions))
    assert log.read(9_999, 100) and next(iter_records(log.read(5_000, 1))).offset == 5_000
    assert log.offset_for_timestamp(7_777) == (7_777, 7_777)
    log.close()
