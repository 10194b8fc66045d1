"""Reading a segment's index blocks (storage/segment_index.py): the one-step lookups a Fetch and a
ListOffsets use (``run_of``, ``floor_start``, ``run_reaching``) agree with a plain walk over every entry,
whether the entries are in the side file, the cache or the tail; and the side file is read through one
descriptor kept beside the segment's, counted against ``log.max.open.files`` and closed with it, never
left open on a file that was replaced or removed."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.broker.config import default_config
from groupd.storage import segment_index
from groupd.storage.batch import build_batch
from groupd.storage.engines import ENGINES
from groupd.storage.errors import StorageError
from groupd.storage.log import INDEX_SUFFIX, Log, LogConfig
from groupd.storage.open_files import OpenFiles
from groupd.storage.segment_index import SegmentIndex
from tests.storage.test_sparse_index import _agree, small_blocks

# entries as a log adds them: offsets and positions growing, timestamps in any order
entries = st.lists(st.tuples(st.integers(1, 5), st.integers(1, 300), st.integers(0, 40)), min_size=1, max_size=80)


def _build(path: Path | None, steps: list[tuple[int, int, int]], seal: bool) -> tuple[SegmentIndex, list]:
    """An index of one entry per step (interval 1), and the entries it was given."""
    index = SegmentIndex(1, path)
    offset, position, added = 0, 0, []
    for gap, size, ts in steps:
        index.add(offset, position, ts)
        added.append((offset, position, ts))
        offset, position = offset + gap, position + size
    if seal:
        index.seal()
    return index, added


def _fill(lg: Log, n: int) -> Log:
    """``n`` batches of one 30-byte record (timestamps 0..n-1), synced."""
    for i in range(n):
        lg.append(build_batch([(None, b"v" * 30)], timestamp_ms=i))
    lg.flush()
    return lg


@settings(max_examples=60, deadline=None)
@given(steps=entries, width=st.sampled_from([1, 2, 3, 8]), cached=st.sampled_from([1, 3, 64]), seal=st.booleans())
def test_one_step_lookups_agree_with_a_walk_over_every_entry(steps, width, cached, seal):
    with tempfile.TemporaryDirectory() as tmp, small_blocks(width, cached):
        index, added = _build(Path(tmp) / "0.batches", steps, seal)
        assert seal is False or not index.positions, "a sealed index keeps only the coarse level"
        offsets = [o for o, _p, _t in added]
        starts = [p for _o, p, _t in added]
        for offset in range(-1, offsets[-1] + 3):
            i = max(max((k for k, o in enumerate(offsets) if o <= offset), default=0), 0)
            end = starts[i + 1] if i + 1 < len(starts) else -1
            assert index.run_of(offset) == (starts[i], end), offset
        for position in range(-1, starts[-1] + 3):
            below = [p for p in starts if p <= position]
            assert index.floor_start(position) == (below[-1] if below else -1), position
        timestamps = [t for _o, _p, t in added]

        def bounds(k: int) -> tuple[int, int] | None:
            return None if k < 0 else (starts[k], starts[k + 1] if k + 1 < len(starts) else -1)

        for ts in range(-1, 43):
            want = next((k for k, t in enumerate(timestamps) if t >= ts), -1)
            assert index.run_reaching(ts) == bounds(want), ts
        top = max(timestamps)
        assert index.run_reaching(top, exactly=True) == bounds(timestamps.index(top))
        index.close_reader()


def _fds_on(directory: Path) -> list[str]:
    """What this process's descriptors point at inside ``directory`` (deleted files marked so)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory)):
            out.append(target)
    return out


needs_proc = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/fd")


@needs_proc
def test_the_side_file_is_opened_once_and_counted_against_the_bound(tmp_path):
    with small_blocks(2, 1):  # a cache of one block: every other read goes to a side file
        files = OpenFiles()
        files.configure(16)
        cfg = LogConfig(segment_bytes=1 << 20, index_interval_bytes=0)
        logs = [Log.open(tmp_path / f"t-{p}", cfg, now_ms=lambda: 0, files=files) for p in range(12)]
        for lg in logs:
            _fill(lg, 40)
        for _ in range(3):
            for lg in logs:
                for offset in (0, 20, 2, 22):
                    assert lg.read(offset, 1)[:8] == offset.to_bytes(8, "big")
        side_files = [t for t in _fds_on(tmp_path) if t.endswith(INDEX_SUFFIX)]
        assert side_files, "blocks were read through kept descriptors"
        assert len(side_files) == len(set(side_files)), "one descriptor per side file, not one per read"
        assert len(_fds_on(tmp_path)) <= 16 and len(files.files) <= 16, "segment and side files both counted"
        assert files.closed_idle > 0
        for lg in logs:
            _agree(lg)
            lg.close()
        assert files.files == {} and _fds_on(tmp_path) == []


@needs_proc
def test_no_descriptor_is_left_on_a_replaced_or_removed_side_file(tmp_path):
    with small_blocks(2, 1):
        cfg = LogConfig(segment_bytes=3000, index_interval_bytes=0, cleanup_policy="compact")
        lg = Log.open(tmp_path / "p", cfg, now_ms=lambda: 0)
        for i in range(200):
            lg.append(build_batch([(str(i % 5).encode(), b"v" * 30)], timestamp_ms=i))
        lg.flush()
        for offset in range(0, 200, 7):  # side files of every segment read, their descriptors kept
            lg.read(offset, 1)
        assert any(t.endswith(INDEX_SUFFIX) for t in _fds_on(tmp_path))
        lg.compact(now_ms=0)  # each cleaned segment's side file is written anew
        lg.truncate_to(lg.log_end_offset - 60)  # later segments removed
        assert not [t for t in _fds_on(tmp_path) if t.endswith("(deleted)")]
        _agree(lg)
        assert not [t for t in _fds_on(tmp_path) if t.endswith("(deleted)")]
        lg.close()
        assert _fds_on(tmp_path) == []


def test_a_side_file_that_cannot_be_opened_is_a_storage_error_not_a_traceback(tmp_path):
    with small_blocks(2, 1):
        cfg = LogConfig(segment_bytes=1 << 20, index_interval_bytes=0)
        lg = _fill(Log.open(tmp_path / "p", cfg, now_ms=lambda: 0), 20)
        seg = lg.segments[0]
        seg.index.close_reader()
        segment_index.CACHE.blocks.clear()
        seg.path.with_suffix(INDEX_SUFFIX).unlink()
        with pytest.raises(StorageError, match="reading the index"):
            lg.read(0, 1)
        lg.close()


def test_forgetting_or_moving_the_side_file_closes_its_descriptor(tmp_path):
    with small_blocks(2, 1):
        steps = [(1, 10, t) for t in range(9)]
        for replace in ("forget", "attach"):
            index, _added = _build(tmp_path / f"{replace}.batches", steps, seal=True)
            segment_index.CACHE.blocks.clear()
            assert index.run_of(5) == (50, 60) and index.reader >= 0
            kept = index.reader
            if replace == "forget":
                index.forget_file()
                assert not (tmp_path / "forget.batches").exists()
            else:
                index.attach(tmp_path / "moved.batches")
            assert index.reader == -1
            with pytest.raises(OSError):
                os.fstat(kept)


def test_the_block_cache_is_sized_by_log_index_cache_blocks(tmp_path):
    saved = segment_index.CACHE.limit
    try:
        with small_blocks(2, 50):
            lg = _fill(Log.open(tmp_path / "p", LogConfig(index_interval_bytes=0), now_ms=lambda: 0), 160)  # 80 blocks
            for offset in range(0, 160, 2):
                lg.read(offset, 1)
            assert len(segment_index.CACHE.blocks) == 50
            engine = ENGINES["local"](
                default_config(**{"log.dirs": str(tmp_path / "data"), "log.index.cache.blocks": 7})
            )
            engine.open()
            assert segment_index.CACHE.limit == 7 and len(segment_index.CACHE.blocks) == 7, "trimmed at once"
            for offset in range(0, 160, 3):
                lg.read(offset, 1)
                assert len(segment_index.CACHE.blocks) <= 7
            _agree(lg)
            lg.close()
    finally:
        segment_index.CACHE.resize(saved)
    assert default_config()["log.index.cache.blocks"] == 256


@needs_proc
def test_replay_reads_blocks_through_a_descriptor_of_its_own(tmp_path):
    """Start-up replay (``Log.chunks``) runs on worker threads, where the event loop may close the kept
    descriptor at any moment: its block reads open the side file for themselves and close it after."""
    with small_blocks(2, 1):
        cfg = LogConfig(segment_bytes=1 << 20, index_interval_bytes=0)
        lg = _fill(Log.open(tmp_path / "p", cfg, now_ms=lambda: 0), 40)
        index = lg.segments[0].index
        index.close_reader()
        segment_index.CACHE.blocks.clear()
        replayed = b"".join(bytes(c) for c in lg.chunks())
        assert replayed == b"".join(bytes(view) for _h, view in lg.batches())
        assert index.spilled == 19 and not segment_index.CACHE.blocks, "19 blocks read, none cached"
        assert index.reader == -1, "the kept descriptor was not opened"
        assert not [t for t in _fds_on(tmp_path) if t.endswith(INDEX_SUFFIX)], "nor is its own left open"
        lg.close()
