"""The sparse index's side file (storage/segment_index.py): full blocks of entries go to a file beside the
segment and only a coarse level stays resident; a rolled segment keeps nothing else; the cache of decoded
blocks stays within its bound; a side file that is missing, torn or stale after a crash means a scan, as
before; and lookups agree with a full scan after compaction and retention too."""

from __future__ import annotations

import shutil
import sys
import tempfile
from array import array
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.storage import segment_index
from groupd.storage.batch import build_batch
from groupd.storage.log import INDEX_SUFFIX, Log, LogConfig
from tests.storage.test_sparse_index import _agree, small_blocks


def _fill(log: Log, n: int, first_ts: int = 0, key_space: int | None = None) -> None:
    for i in range(n):
        key = None if key_space is None else str(i % key_space).encode()
        log.append(build_batch([(key, b"v" * (i % 90))], timestamp_ms=first_ts + (i * 37) % 101))


def _crashed_copy(log: Log, tmp: Path) -> Path:
    """The partition's directory as a crash would leave it now: what is in the files, nothing closed."""
    log.flush()
    copy = tmp / "crashed"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(log.directory, copy)
    return copy


def test_rolled_segments_hold_only_the_coarse_level(tmp_path):
    with small_blocks(4, 256):
        log = Log.open(tmp_path / "p", LogConfig(segment_bytes=6000, index_interval_bytes=0), now_ms=lambda: 0)
        _fill(log, 400)
        assert len(log.segments) > 5
        empty = sys.getsizeof(array("q"))
        for seg in log.segments[:-1]:
            index = seg.index
            assert len(index) > 4 and not index.positions, "sealed at the roll: no fine entry resident"
            tail = (index.offsets, index.positions, index.max_ts)
            assert all(sys.getsizeof(a) == empty for a in tail), "nor any room kept for them"
            assert index.resident_bytes() == 24 * len(index.first_offsets) == 24 * -(-len(index) // 4)
            assert seg.path.with_suffix(INDEX_SUFFIX).stat().st_size == 4 * 24 * len(index.first_offsets)
        active = log.segments[-1].index
        assert 1 <= len(active.positions) <= 4
        for a in (active.offsets, active.positions, active.max_ts):  # no room kept from before a spill
            assert sys.getsizeof(a) <= empty + 8 * (4 + 8)
        _agree(log)
        crashed = Log.open(_crashed_copy(log, tmp_path), log.config, now_ms=lambda: 0)  # scanned: sealed too
        assert not any(seg.index.positions for seg in crashed.segments[:-1])
        _agree(crashed)
        crashed.close()
        log.close()


def test_the_block_cache_stays_within_its_bound(tmp_path):
    with small_blocks(2, 5):
        log = Log.open(tmp_path / "p", LogConfig(segment_bytes=4000, index_interval_bytes=0), now_ms=lambda: 0)
        _fill(log, 300)
        log.close()
        log = Log.open(tmp_path / "p", LogConfig(segment_bytes=4000, index_interval_bytes=0), now_ms=lambda: 0)
        misses = segment_index.CACHE.misses
        for offset in range(0, log.log_end_offset, 3):
            assert log.read(offset, 1)
            assert len(segment_index.CACHE.blocks) <= 5
        assert segment_index.CACHE.misses - misses > 50, "the blocks were read from the side files"
        for offset in range(20):  # one block over and over: read once, then served from the cache
            log.read(offset % 2, 1)
        before = segment_index.CACHE.misses
        for _ in range(20):
            log.read(0, 1)
        assert segment_index.CACHE.misses == before
        log.close()


def _damage_missing(path: Path) -> None:
    path.unlink()


def _damage_torn(path: Path) -> None:
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 7)


def _damage_flipped(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_missing_torn_or_corrupt_side_file_means_a_scan(tmp_path):
    for damage in (_damage_missing, _damage_torn, _damage_flipped):
        with small_blocks(3, 4):
            cfg = LogConfig(segment_bytes=5000, index_interval_bytes=100)
            directory = tmp_path / damage.__name__
            log = Log.open(directory, cfg, now_ms=lambda: 0)
            _fill(log, 250)
            log.close()
            for side in sorted(directory.glob(f"*{INDEX_SUFFIX}"))[::2]:
                damage(side)
            log = Log.open(directory, cfg, now_ms=lambda: 0)
            _agree(log)
            _fill(log, 30, first_ts=500)
            _agree(log)
            log.close()
            log = Log.open(directory, cfg, now_ms=lambda: 0)
            _agree(log)
            log.close()


def test_a_stale_side_file_after_a_crash_means_a_scan(tmp_path):
    """Cleanly closed, opened again and appended to (blocks spilled over the old trailer, or not yet),
    then a crash: the side files no longer describe their segments, and the scan answers as before."""
    with small_blocks(2, 3):
        cfg = LogConfig(segment_bytes=1 << 20, index_interval_bytes=0)
        log = Log.open(tmp_path / "p", cfg, now_ms=lambda: 0)
        _fill(log, 50)
        log.flush()
        log.close()  # flushed: the side files get their trailers
        for more in (1, 40):
            log = Log.open(tmp_path / "p", cfg, now_ms=lambda: 0)
            assert log.segments[-1].indexed is not None, "the clean close's index was used"
            _fill(log, more, first_ts=1000)
            crashed = Log.open(_crashed_copy(log, tmp_path), cfg, now_ms=lambda: 0)
            assert crashed.segments[-1].indexed is None, "a stale side file is not trusted"
            assert crashed.log_end_offset == log.log_end_offset
            _agree(crashed)
            crashed.close()
            log.close()


def test_appends_after_a_truncation_into_sealed_blocks(tmp_path):
    """A truncation back into a rolled (sealed) segment makes it the active one again: its last block
    comes back into memory and grows there."""
    with small_blocks(3, 2):
        cfg = LogConfig(segment_bytes=3000, index_interval_bytes=0)
        log = Log.open(tmp_path / "p", cfg, now_ms=lambda: 0)
        _fill(log, 120)
        second = log.segments[1]
        log.truncate_to(second.base_offset + 4)
        assert log.segments[-1] is second
        _agree(log)
        _fill(log, 60, first_ts=300)
        _agree(log)
        log.close()
        log = Log.open(tmp_path / "p", cfg, now_ms=lambda: 0)
        _agree(log)
        log.close()


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 200),
    keys=st.integers(1, 20),
    width=st.sampled_from([1, 2, 5]),
    interval=st.sampled_from([0, 200]),
    drop=st.floats(0, 1),
)
def test_lookups_agree_after_compaction_and_retention(n, keys, width, interval, drop):
    with small_blocks(width, 3), tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p"
        cfg = LogConfig(segment_bytes=2500, index_interval_bytes=interval, cleanup_policy="compact,delete")
        log = Log.open(path, cfg, now_ms=lambda: 0)
        _fill(log, n, key_space=keys)
        log.flush()
        log.compact(10**6)
        _agree(log)
        bases = [info.base_offset for info in log.segments_info()]
        log.delete_records_before(bases[min(int(drop * len(bases)), len(bases) - 1)])  # whole segments go
        _agree(log)
        log.close()
        log = Log.open(path, cfg, now_ms=lambda: 0)
        _agree(log)
        _fill(log, 10, first_ts=400, key_space=keys)
        _agree(log)
        log.close()


def test_a_timestamp_lookup_skips_batches_below_the_log_start(tmp_path):
    """Kafka searches a segment by timestamp from the log start offset: a record below it is never the
    answer, even when its batch is the first to reach the timestamp."""
    log = Log.open(tmp_path / "p", LogConfig(), now_ms=lambda: 0)
    log.append(build_batch([(None, b"a")], timestamp_ms=50))
    log.append(build_batch([(None, b"b")], timestamp_ms=20))
    log.append(build_batch([(None, b"c")], timestamp_ms=70))
    assert log.offset_for_timestamp(10) == (0, 50)
    log.delete_records_before(1)
    assert log.offset_for_timestamp(10) == (1, 20)
    assert log.offset_for_timestamp(40) == (2, 70), "offset 0 reaches 40 but lies below the log start"
    log.close()


def test_a_fetch_reads_one_index_block(tmp_path):
    """A read finds its first batch through one block; its end (the segment's end, or a READ_COMMITTED
    bound past the segment) needs none."""
    with small_blocks(2, 64):
        cfg = LogConfig(segment_bytes=20_000, index_interval_bytes=0)
        log = Log.open(tmp_path / "p", cfg, now_ms=lambda: 0)
        _fill(log, 300)
        log.flush()
        log.close()
        log = Log.open(tmp_path / "p", cfg, now_ms=lambda: 0)
        first = log.segments[0]
        middle = (first.base_offset + first.next_offset) // 2
        for upto in (None, log.log_end_offset):
            segment_index.CACHE.blocks.clear()
            misses = segment_index.CACHE.misses
            data = log.read(middle, 1 << 20, upto=upto)
            assert segment_index.CACHE.misses - misses == 1, "the block of the batch holding the offset"
            assert len(data) == first.size - first.first_from(middle)
        log.close()


def test_blocks_that_cannot_be_written_stay_in_memory(tmp_path, caplog):
    """No room for the side file (here: a directory in its place): the blocks stay in the tail, every
    lookup still answers, at most one warning line and no traceback; once it can be written, it is."""
    with small_blocks(2, 4):
        cfg = LogConfig(segment_bytes=1 << 20, index_interval_bytes=0)
        log = Log.open(tmp_path / "p", cfg, now_ms=lambda: 0)
        side = log.segments[0].path.with_suffix(INDEX_SUFFIX)
        side.mkdir()
        _fill(log, 30)
        index = log.segments[0].index
        assert index.spilled == 0 and len(index.positions) == 30
        _agree(log)
        assert len([r for r in caplog.records if "kept in memory" in r.message]) <= 1
        assert not any(r.exc_info for r in caplog.records)
        side.rmdir()
        _fill(log, 2, first_ts=200)
        assert index.spilled == 15 and len(index.positions) == 2
        _agree(log)
        log.flush()
        log.close()
        side.unlink()
        side.mkdir()  # an index that cannot even be removed: scanned, kept in memory
        log = Log.open(tmp_path / "p", cfg, now_ms=lambda: 0)
        assert log.log_end_offset == 32
        _agree(log)
        log.close()
