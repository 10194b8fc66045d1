"""Retention, DeleteRecords and compaction; leftovers of interrupted work are cleaned at open."""

from __future__ import annotations

from pathlib import Path

import pytest

from groupd.storage.batch import build_batch, iter_records
from groupd.storage.errors import OffsetOutOfRange
from groupd.storage.log import Log, LogConfig


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_log(path: Path, clock: Clock | None = None, **cfg) -> Log:
    return Log.open(path, LogConfig(**cfg), now_ms=clock or Clock())


def all_records(log: Log):
    return [(r.offset, r.key, r.value) for _, v in log.batches() for r in iter_records(v)]


def fill(log: Log, n: int, ts0: int = 0, per_batch: int = 1) -> None:
    for i in range(n):
        log.append_records([(b"k%d" % i, b"v%d" % i)] * per_batch, ts0 + i)


def test_retention_by_time(tmp_path):
    log = open_log(tmp_path / "p", segment_bytes=400, retention_ms=1000)
    fill(log, 40, ts0=10_000)  # timestamps 10000..10039, many segments
    segments = len(log.segments)
    assert segments > 4
    assert log.apply_retention(now_ms=10_500) == 0
    # everything older than 1000 ms at 11_020: segments whose max timestamp < 10_020
    deleted = log.apply_retention(now_ms=11_020)
    assert 0 < deleted < segments
    assert len(log.segments) == segments - deleted
    first = all_records(log)[0][0]
    assert log.log_start_offset == first and first <= 20
    with pytest.raises(OffsetOutOfRange):
        log.read(first - 1, 100)
    # never the active segment
    assert log.apply_retention(now_ms=10**12) >= 1 and len(log.segments) == 1
    assert log.log_end_offset == 40
    log.close()
    log = open_log(tmp_path / "p", segment_bytes=400, retention_ms=1000)
    assert log.log_start_offset == log.log_end_offset - len(all_records(log))
    log.close()


def test_retention_by_bytes(tmp_path):
    log = open_log(tmp_path / "p", segment_bytes=500, retention_ms=-1, retention_bytes=1200)
    fill(log, 60)
    assert log.apply_retention(now_ms=10**15) > 0
    assert log.size_bytes <= 1200 + 500
    assert log.size_bytes > 1200 - 500
    assert all_records(log)[-1][0] == 59
    log.close()


def test_compact_only_policy_keeps_old_segments(tmp_path):
    log = open_log(tmp_path / "p", segment_bytes=300, retention_ms=1, cleanup_policy="compact")
    fill(log, 30)
    n = len(log.segments)
    assert log.apply_retention(now_ms=10**15) == 0 and len(log.segments) == n
    log.close()


def test_delete_records_before_persists(tmp_path):
    path = tmp_path / "p"
    log = open_log(path, segment_bytes=300)
    fill(log, 30)
    n = len(log.segments)
    assert log.delete_records_before(17) == 17
    assert log.log_start_offset == 17 and len(log.segments) < n
    with pytest.raises(OffsetOutOfRange):
        log.read(16, 100)
    assert log.read(17, 1)
    assert log.delete_records_before(5) == 17  # never moves back
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(31)
    log.close()
    log = open_log(path, segment_bytes=300)
    assert log.log_start_offset == 17 and log.log_end_offset == 30
    assert all_records(log)[-1][0] == 29
    assert log.delete_records_before(30) == 30
    assert log.read(30, 100) == b""
    log.close()


def test_compaction_keeps_newest_per_key_and_drops_old_tombstones(tmp_path):
    clock = Clock()
    path = tmp_path / "p"
    cfg = dict(segment_bytes=600, cleanup_policy="compact", delete_retention_ms=1000)
    log = open_log(path, clock, **cfg)
    expected: dict[bytes, tuple[int, bytes | None]] = {}
    for i in range(120):
        key = b"key-%d" % (i % 7)
        value = None if i % 11 == 0 else b"value-%d" % i
        ts = 1_000 if value is None and i < 60 else 5_000 + i  # early tombstones are old
        base, _ = log.append(build_batch([(key, value), (None, b"unkeyed")], timestamp_ms=ts))
        expected[key] = (base, value)
    end = log.log_end_offset
    before = all_records(log)
    stats = log.compact(now_ms=5_500)
    assert stats.segments > 0 and stats.records_after < stats.records_before
    after = all_records(log)
    active_base = log.segments[-1].base_offset
    closed = [r for r in after if r[0] < active_base]
    keys = [k for _, k, _ in closed]
    assert len(keys) == len(set(keys)) and None not in keys
    for offset, key, value in closed:
        assert expected[key] == (offset, value)  # only the newest of each key survives
    assert [r for r in after if r[0] >= active_base] == [r for r in before if r[0] >= active_base]
    assert set(after) <= set(before)  # offsets and contents preserved
    for key, (offset, value) in expected.items():  # newest of every key is still there (or was old tombstone)
        assert (offset, key, value) in after or (value is None)
    assert log.log_end_offset == end
    # idempotent
    again = log.compact(now_ms=5_500)
    assert again.records_after == again.records_before and all_records(log) == after
    # reads by offset still work across the holes
    for offset in range(log.log_start_offset, end):
        data = log.read(offset, 1)
        assert data
    log.close()
    log = open_log(path, clock, **cfg)
    assert all_records(log) == after and log.log_end_offset == end
    assert not list(path.glob("*.cleaned"))
    log.close()


def test_new_tombstones_survive_until_delete_retention(tmp_path):
    path = tmp_path / "p"
    log = open_log(path, segment_bytes=200, cleanup_policy="compact", delete_retention_ms=1000)
    log.append_records([(b"a", b"1")], 100)
    log.append_records([(b"a", None)], 200)
    for i in range(10):
        log.append_records([(b"z%d" % i, b"x")], 300)
    assert len(log.segments) > 2
    log.compact(now_ms=1100)  # tombstone is 900 ms old: kept
    assert [(o, k, v) for o, k, v in all_records(log) if k == b"a"] == [(1, b"a", None)]
    log.compact(now_ms=1300)
    assert [r for r in all_records(log) if r[1] == b"a"] == []
    log.close()


def test_leftover_cleaned_file_is_removed(tmp_path):
    path = tmp_path / "p"
    log = open_log(path)
    fill(log, 3)
    log.close()
    (path / "00000000000000000000.log.cleaned").write_bytes(b"partial")
    log = open_log(path)
    assert not list(path.glob("*.cleaned")) and log.log_end_offset == 3
    log.close()


def test_fetch_moves_past_a_segment_emptied_by_compaction(tmp_path):
    """A fetch inside a range compaction removed entirely must return the next batch, never stall."""
    log = open_log(tmp_path / "p", segment_bytes=250, cleanup_policy="compact")
    for _ in range(6):
        log.append_records([(b"same", b"x" * 20)], 1)
    log.append_records([(b"other", b"y")], 1)
    assert len(log.segments) > 2
    log.compact(now_ms=10)
    data = log.read(0, 1)
    records = list(iter_records(data))
    assert records and records[0].offset >= 5  # only the newest "same" and "other" survive
    log.close()
