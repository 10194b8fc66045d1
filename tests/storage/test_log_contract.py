"""Log: append/read, recovery of torn tails, rolling, sparse index lookups, I/O failures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from groupd.storage.batch import build_batch, iter_batches, iter_records, parse_header
from groupd.storage.errors import OffsetOutOfRange, RecordTooLarge, StorageError
from groupd.storage.log import Log, LogConfig


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def records_of(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for pos, header in iter_batches(data):
        out += [(r.offset, r.key, r.value) for r in iter_records(data[pos : pos + header.size])]
    return out


def open_log(path: Path, clock: Clock | None = None, **cfg) -> Log:
    return Log.open(path, LogConfig(**cfg), now_ms=clock or Clock())


def test_append_read_round_trip(tmp_path):
    log = open_log(tmp_path / "p")
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    assert log.append_records([(b"a", b"1"), (b"b", b"2")], 1000) == (0, 1)
    batch = build_batch([(b"c", b"3")], base_offset=999, timestamp_ms=1001)
    assert log.append(batch) == (2, 2)
    assert log.log_end_offset == 3 and log.high_watermark == 3
    data = log.read(0, 1 << 20)
    assert records_of(data) == [(0, b"a", b"1"), (1, b"b", b"2"), (2, b"c", b"3")]
    # stored bytes are the produced bytes with only the base offset rewritten
    assert data[-len(batch) + 8 :] == batch[8:]
    assert log.read(3, 100) == b""
    with pytest.raises(OffsetOutOfRange):
        log.read(4, 100)
    assert log.size_bytes == len(data)
    log.close()


def test_read_mid_batch_and_max_bytes(tmp_path):
    log = open_log(tmp_path / "p")
    for i in range(10):
        log.append_records([(b"k", b"%d" % j) for j in range(5)], 1000 + i)  # offsets 5i..5i+4
    one = parse_header(log.read(0, 1)).size
    data = log.read(12, 1)  # less than one batch: still the whole batch holding 12
    assert parse_header(data).base_offset == 10 and len(data) == one
    data = log.read(12, 3 * one + 5)
    assert [h.base_offset for _, h in iter_batches(data)] == [10, 15, 20]
    assert len(data) == 3 * one
    log.close()


def test_recovery_keeps_complete_batches(tmp_path):
    log = open_log(tmp_path / "p")
    for i in range(50):
        log.append_records([(b"k%d" % i, b"v" * i)], 1000 + i)
    log.close()
    log = open_log(tmp_path / "p")
    assert log.log_end_offset == 50
    assert [r[0] for r in records_of(log.read(0, 1 << 20))] == list(range(50))
    assert log.append_records([(b"x", b"y")], 2000) == (50, 50)
    log.close()


def _segment_file(path: Path) -> Path:
    (f,) = sorted(path.glob("*.log"))
    return f


def test_torn_tail_truncated_at_every_byte(tmp_path, caplog):
    src = tmp_path / "src"
    log = open_log(src)
    for i in range(3):
        log.append_records([(b"k%d" % i, b"value-%d" % i)], 1000 + i)
    good = log.size_bytes
    log.append_records([(b"last", b"x" * 40), (None, b"y")], 2000)
    full = _segment_file(src).read_bytes()
    log.close()
    last_size = len(full) - good
    target = tmp_path / "p"
    target.mkdir()
    for cut in range(last_size):
        for f in target.iterdir():
            f.unlink()
        (target / "00000000000000000000.log").write_bytes(full[: good + cut])
        log = open_log(target)
        assert log.log_end_offset == 3, cut
        assert log.size_bytes == good
        assert os.path.getsize(target / "00000000000000000000.log") == good
        log.close()
    assert "truncated" in caplog.text


def test_corrupt_last_batch_is_cut(tmp_path, caplog):
    path = tmp_path / "p"
    log = open_log(path)
    log.append_records([(b"a", b"1")], 1)
    good = log.size_bytes
    log.append_records([(b"b", b"2")], 2)
    log.close()
    f = _segment_file(path)
    raw = bytearray(f.read_bytes())
    raw[-1] ^= 0xFF
    f.write_bytes(raw)
    log = open_log(path)
    assert log.log_end_offset == 1 and log.size_bytes == good
    assert "CRC mismatch" in caplog.text
    log.close()


def test_roll_by_size_and_sparse_index_on_many_segments(tmp_path):
    path = tmp_path / "p"
    log = open_log(path, segment_bytes=2000, index_interval_bytes=150)
    sizes = []
    for i in range(400):
        n = 1 + i % 4
        log.append_records([(b"k%d" % i, b"v" * (i % 30))] * n, 1000 + i)
        sizes.append(n)
    assert len(log.segments) > 20
    for p in path.glob("*.log"):
        assert p.stat().st_size <= 2000
        assert len(p.name) == 24
    end = log.log_end_offset
    for reopen in (False, True):
        if reopen:
            log.close()
            log = open_log(path, segment_bytes=2000, index_interval_bytes=150)
            assert log.log_end_offset == end
        for offset in range(0, end, 7):
            header = parse_header(log.read(offset, 1))
            assert header.base_offset <= offset <= header.last_offset
    log.close()


def test_roll_by_time(tmp_path):
    clock = Clock(10_000)
    log = open_log(tmp_path / "p", clock, segment_ms=1000)
    log.append_records([(b"a", b"1")], clock.now)
    clock.now += 500
    log.append_records([(b"a", b"2")], clock.now)
    assert len(log.segments) == 1
    clock.now += 501
    log.append_records([(b"a", b"3")], clock.now)
    assert len(log.segments) == 2
    assert sorted(p.name for p in (tmp_path / "p").glob("*.log")) == [
        "00000000000000000000.log", "00000000000000000002.log"]
    log.close()


def test_record_too_large(tmp_path):
    log = open_log(tmp_path / "p", max_message_bytes=200)
    with pytest.raises(RecordTooLarge):
        log.append_records([(b"k", b"v" * 300)], 1)
    assert log.log_end_offset == 0
    log.close()


def test_write_failure_leaves_no_partial_batch(tmp_path, monkeypatch):
    log = open_log(tmp_path / "p")
    log.append_records([(b"a", b"1")], 1)
    good = log.size_bytes
    real_pwrite = os.pwrite

    def half_then_fail(fd, data, pos):
        real_pwrite(fd, bytes(data[:20]), pos)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", half_then_fail)
    with pytest.raises(StorageError) as info:
        log.append_records([(b"b", b"2" * 100)], 2)
    monkeypatch.setattr(os, "pwrite", real_pwrite)
    assert isinstance(info.value.__cause__, OSError)
    assert log.log_end_offset == 1 and log.size_bytes == good
    assert os.path.getsize(_segment_file(tmp_path / "p")) == good
    assert log.append_records([(b"c", b"3")], 3) == (1, 1)
    assert [r[1] for r in records_of(log.read(0, 1 << 20))] == [b"a", b"c"]
    log.close()


def test_fsync_failure_is_storage_error_and_log_goes_offline(tmp_path, monkeypatch):
    log = open_log(tmp_path / "p")
    log.append_records([(b"a", b"1")], 1)

    def broken(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(StorageError) as info:
        log.flush()
    assert isinstance(info.value.__cause__, OSError)
    monkeypatch.undo()
    assert log.failed and log.unflushed_messages == 1
    with pytest.raises(StorageError):
        log.append_records([(b"b", b"2")], 2)
    with pytest.raises(StorageError):
        log.flush()
    log.close()
    log = open_log(tmp_path / "p")  # reopening recovers from what is on disk
    assert log.log_end_offset == 1
    log.close()


def test_flush_tracks_dirty_state(tmp_path):
    log = open_log(tmp_path / "p")
    log.flush()
    assert not log.dirty and log.unflushed_messages == 0
    log.append_records([(b"a", b"1"), (b"b", b"2")], 1)
    assert log.dirty and log.unflushed_messages == 2
    log.flush()
    assert not log.dirty and log.unflushed_messages == 0
    log.close()
    with pytest.raises(StorageError):
        log.append_records([(b"a", b"1")], 1)


def test_timestamps(tmp_path):
    log = open_log(tmp_path / "p", segment_bytes=300)
    for i, ts in enumerate([100, 300, 200, 500, 400]):
        log.append_records([(b"k%d" % i, b"v")], ts)
    assert len(log.segments) > 1
    assert log.offset_for_timestamp(50) == (0, 100)
    assert log.offset_for_timestamp(250) == (1, 300)
    assert log.offset_for_timestamp(450) == (3, 500)
    assert log.offset_for_timestamp(501) is None
    assert log.max_timestamp() == (500, 3)
    log.close()
    log = open_log(tmp_path / "p", segment_bytes=300)
    assert log.offset_for_timestamp(250) == (1, 300) and log.max_timestamp() == (500, 3)
    log.close()


def test_batches_replay(tmp_path):
    log = open_log(tmp_path / "p", segment_bytes=5000)
    for i in range(300):
        log.append_records([(b"k%d" % i, b"v%d" % i), (None, b"x")], i)
    got = [(h.base_offset, bytes(v)[:8]) for h, v in log.batches()]
    assert [b for b, _ in got] == list(range(0, 600, 2))
    assert [h.base_offset for h, _ in log.batches(301)][:2] == [300, 302]
    recs = [r for _, v in log.batches() for r in iter_records(v)]
    assert [r.offset for r in recs] == list(range(600))
    log.close()


def _batch_with_timestamps(pairs: list[tuple[bytes, int]]) -> bytes:
    """A batch whose records carry their own timestamps."""
    return build_batch(
        [(k, b"v") for k, _ in pairs], timestamp_ms=min(t for _, t in pairs), timestamps=[t for _, t in pairs]
    )


def test_offset_for_timestamp_is_record_precise(tmp_path):
    log = open_log(tmp_path / "p", segment_bytes=400)
    log.append(_batch_with_timestamps([(b"a", 100), (b"b", 300), (b"c", 200)]))  # 0..2
    log.append(_batch_with_timestamps([(b"d", 250), (b"e", 600), (b"f", 600)]))  # 3..5
    log.append(_batch_with_timestamps([(b"g", 50)]))  # 6
    assert log.offset_for_timestamp(0) == (0, 100)
    assert log.offset_for_timestamp(150) == (1, 300)
    assert log.offset_for_timestamp(260) == (1, 300)
    assert log.offset_for_timestamp(301) == (4, 600)
    assert log.offset_for_timestamp(601) is None
    assert log.max_timestamp() == (600, 4)
    log.delete_records_before(2)
    assert log.offset_for_timestamp(150) == (2, 200)  # never below the log start offset
    log.close()


def test_delete_records_up_to_the_end_empties_the_log(tmp_path):
    path = tmp_path / "p"
    log = open_log(path)
    for i in range(5):
        log.append_records([(b"k%d" % i, b"v")], i)
    assert log.delete_records_before(5) == 5
    assert log.size_bytes == 0 and log.read(5, 100) == b""
    assert log.append_records([(b"z", b"z")], 9) == (5, 5)
    log.close()
    log = open_log(path)
    assert (log.log_start_offset, log.log_end_offset) == (5, 6)
    log.close()


def test_flush_in_a_thread_while_appending(tmp_path):
    import threading

    log = open_log(tmp_path / "p", segment_bytes=20_000)
    stop = threading.Event()
    flushes = 0

    def flusher():
        nonlocal flushes
        while not stop.is_set():
            log.flush()
            flushes += 1

    t = threading.Thread(target=flusher)
    t.start()
    try:
        for i in range(3000):
            assert log.append_records([(b"k%d" % i, b"v" * 20)], i) == (i, i)
    finally:
        stop.set()
        t.join(10)
    assert flushes > 0 and len(log.segments) > 3
    log.close()
    log = open_log(tmp_path / "p", segment_bytes=20_000)
    assert log.log_end_offset == 3000
    assert [r[0] for r in records_of(log.read(2990, 1 << 20))] == list(range(2990, 3000))
    log.close()
