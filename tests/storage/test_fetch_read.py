"""A Fetch's read of the local log (``Log.read`` through ``Segment.locate``): the batch holding the offset
is found in the run its index entry names, read once, and a read that ends inside that run is answered
from that same read. These tests hold it to a full scan where compaction leaves holes anywhere in a run,
at its edges too (the offset then lies past the run's last batch, and the next run's first batch
answers), before and after a clean reopen and a truncation; and count its reads of the files."""

from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.storage import segment_index
from groupd.storage.batch import build_batch, parse_header
from groupd.storage.log import _FIND, _REACH, INDEX_SUFFIX, Log, LogConfig
from tests.storage.test_sparse_index import _agree, small_blocks


def _keyed(log: Log, keys: list[int], sizes: list[int]) -> None:
    for i, key in enumerate(keys):
        log.append(build_batch([(str(key).encode(), b"v" * sizes[i % len(sizes)])], timestamp_ms=i))
    log.flush()


@settings(max_examples=40, deadline=None)
@given(
    keys=st.lists(st.integers(0, 12), min_size=2, max_size=120),
    sizes=st.lists(st.integers(0, 200), min_size=1, max_size=5),
    interval=st.sampled_from([0, 100, 300, 4096]),
    width=st.sampled_from([1, 2, 64]),
    cached=st.sampled_from([1, 256]),
    cut=st.floats(0, 1),
)
def test_reads_agree_with_a_full_scan_across_holes(keys, sizes, interval, width, cached, cut):
    with small_blocks(width, cached), tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p"
        cfg = LogConfig(segment_bytes=3000, index_interval_bytes=interval, cleanup_policy="compact")
        log = Log.open(path, cfg, now_ms=lambda: 0)
        _keyed(log, keys, sizes)
        log.compact(10**6)  # keys repeat in any order: holes inside runs and at their edges
        _agree(log)
        log.close()
        log = Log.open(path, cfg, now_ms=lambda: 0)  # the side files a clean close left
        _agree(log)
        start, end = log.log_start_offset, log.log_end_offset
        log.truncate_to(start + int(cut * (end - start)))
        _agree(log)
        _keyed(log, keys[:7], sizes)
        _agree(log)
        log.close()


def test_an_offset_past_its_runs_last_batch_is_answered_by_the_next_run(tmp_path):
    """One index entry per batch (interval 0): an offset compacted away between two runs lies past the
    first run's only batch, so the read walks on to the next run's first batch."""
    cfg = LogConfig(segment_bytes=600, index_interval_bytes=0, cleanup_policy="compact")
    log = Log.open(tmp_path / "p", cfg, now_ms=lambda: 0)
    _keyed(log, [0, 1, 1, 2, 3, 3, 4, 5, 6, 7, 8, 9], [40])  # offsets 1 and 4 are overwritten by 2 and 5
    log.compact(10**6)
    first = log.segments[0]
    assert first.next_offset > 4, "offsets 1 and 4 lie in the first, compacted segment"
    gone = {1, 4}
    for offset in gone:
        assert base_offsets(log.read(offset, 1)) == [offset + 1], offset
    assert all(base_offsets(log.read(o, 1)) == [o] for o in range(first.next_offset) if o not in gone)
    log.close()


def base_offsets(data: bytes) -> list[int]:
    """The base offsets of the batches in ``data``."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        out.append(int.from_bytes(data[pos : pos + 8], "big"))
        pos += 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
    return out


def test_a_read_of_one_batch_reads_the_log_once(tmp_path, monkeypatch):
    """A batch inside its run: one pread of the segment (the run), and of the side file only when its
    index block is not cached; the batch is cut from the run's read (three reads of the log before)."""
    with small_blocks(4, 256):
        log = Log.open(tmp_path / "p", LogConfig(index_interval_bytes=1000), now_ms=lambda: 0)
        _keyed(log, list(range(400)), [100])
        seg = log.segments[0]
        assert seg.index.spilled > 2, "most blocks in the side file"
        reads: list[int] = []
        real = os.pread

        def counting(fd: int, n: int, at: int) -> bytes:
            reads.append(fd)
            return real(fd, n, at)

        monkeypatch.setattr(os, "pread", counting)
        segment_index.CACHE.blocks.clear()
        for offset in (5, 37, 150):
            del reads[:]
            data = log.read(offset, 1)
            assert base_offsets(data) == [offset]
            assert reads.count(seg.handle) == 1
            assert reads.count(seg.index.reader) == 1  # its block was not cached
            del reads[:]
            assert log.read(offset, 1) == data
            assert reads == [seg.handle]  # cached now
        assert seg.index.path == seg.path.with_suffix(INDEX_SUFFIX)
        log.close()


def test_a_read_of_many_batches_reads_little_past_them(tmp_path, monkeypatch):
    """Where a read's byte limit falls inside the segment, the batches' end is found by walking the
    headers of the run holding the limit only (the index names it), not 16 KiB of the log."""
    log = Log.open(tmp_path / "p", LogConfig(index_interval_bytes=1000), now_ms=lambda: 0)
    _keyed(log, list(range(400)), [100])
    asked: list[int] = []
    real = os.pread
    segment = log.segments[0]

    def counting(fd: int, n: int, at: int) -> bytes:
        if fd == segment.handle:  # the log's reads, not its index blocks'
            asked.append(n)
        return real(fd, n, at)

    monkeypatch.setattr(os, "pread", counting)
    for offset, max_bytes in ((3, 3000), (100, 5000), (250, 2500)):
        del asked[:]
        data = log.read(offset, max_bytes)
        got = base_offsets(data)
        assert got[0] == offset and len(data) <= max_bytes
        assert len(data) + 170 > max_bytes, "as many whole batches as fit"
        # the run holding the offset, the run holding the limit (each with a header past it), the batches
        assert sum(asked) <= len(data) + 2 * (1000 + 170 + 43), asked
    log.close()


def test_the_header_fields_a_read_unpacks_are_kafkas():
    """Kafka's DefaultRecordBatch: baseOffset at 0, batchLength at 8, lastOffsetDelta at 23, maxTimestamp
    at 35 (recordCount at 57, RECORD_BATCH_OVERHEAD 61): what one unpack a header reads."""
    batch = build_batch(
        [(None, b"a"), (None, b"b"), (None, b"c")], base_offset=40, timestamp_ms=7, timestamps=[9, 8, 7]
    )
    header = parse_header(batch, 0)
    assert struct.calcsize(">qi11x") == 23 and struct.calcsize(">qi11xi8x") == 35
    assert _FIND.unpack_from(batch) == (40, len(batch) - 12, 2)
    assert _REACH.unpack_from(batch) == (40, len(batch) - 12, 2, header.max_timestamp) == (40, len(batch) - 12, 2, 9)
