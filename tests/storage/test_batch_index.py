"""Batch indexes sealed at a clean close: the next open reads them instead of scanning segments, and
only when they describe the segment file exactly as it is; anything else falls back to the scan."""

import os

import pytest

from groupd.storage.log import INDEX_SUFFIX, Log, LogConfig


def filled(path, batches=40):
    log = Log.open(path, LogConfig(segment_bytes=1_500))
    for i in range(batches):
        log.append_records([(b"k%d" % (i % 9), b"v%d" % i), (b"x", b"y" * (i % 7))], 1_000 + i)
    log.flush()
    return log


def shape(log):
    return (
        [(s.base_offset, s.size, s.next_offset, [s.index.entry(i) for i in range(len(s.index))]) for s in log.segments],
        log.log_end_offset,
        [bytes(c) for c in log.chunks()],
    )


def reopen(path, monkeypatch, scans_allowed):
    scanned = []
    real = Log._scan

    def counting(seg, size, verify):
        scanned.append(seg.base_offset)
        return real(seg, size, verify)

    monkeypatch.setattr(Log, "_scan", staticmethod(counting))
    log = Log.open(path, LogConfig(segment_bytes=1_500))
    assert (len(scanned) > 0) == scans_allowed, scanned
    return log, scanned


def test_a_clean_close_lets_the_next_open_skip_the_scan(tmp_path, monkeypatch):
    log = filled(tmp_path / "p")
    before = shape(log)
    assert len(log.segments) > 2
    log.close()
    assert len(list((tmp_path / "p").glob(f"*{INDEX_SUFFIX}"))) == len(before[0])
    again, _ = reopen(tmp_path / "p", monkeypatch, scans_allowed=False)
    assert shape(again) == before
    again.append_records([(b"after", b"1")], 5_000)  # and the log goes on from there
    assert again.log_end_offset == before[1] + 1
    again.close()


def test_an_unflushed_close_writes_no_index(tmp_path, monkeypatch):
    """The blocks of rolled segments are in their side files, but without the trailer only a clean
    close appends none is trusted: every segment is scanned."""
    log = filled(tmp_path / "p")
    log.append_records([(b"k", b"unflushed")], 9_000)
    before = shape(log)
    log.close()
    again, scanned = reopen(tmp_path / "p", monkeypatch, scans_allowed=True)
    assert scanned == [s[0] for s in before[0]]
    assert shape(again) == before
    again.close()


@pytest.mark.parametrize("change", ["appended", "torn tail", "damaged index", "touched"])
def test_an_index_that_does_not_describe_the_file_is_ignored(tmp_path, monkeypatch, change):
    log = filled(tmp_path / "p")
    before = shape(log)
    log.close()
    last = sorted((tmp_path / "p").glob("*.log"))[-1]
    if change == "appended":  # a later run appended and crashed before closing
        log, _ = reopen(tmp_path / "p", monkeypatch, scans_allowed=False)
        log.append_records([(b"new", b"1")], 9_000)
        log.flush()
        before = shape(log)
        for seg in log.segments:
            os.close(seg.fd)  # no close(): no new index
    elif change == "torn tail":
        with open(last, "ab") as f:
            f.write(b"\x00\x01torn")
    elif change == "damaged index":
        index = last.with_suffix(INDEX_SUFFIX)
        data = bytearray(index.read_bytes())
        data[40] ^= 0xFF
        index.write_bytes(bytes(data))
    else:
        st = os.stat(last)
        os.utime(last, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    log, scanned = reopen(tmp_path / "p", monkeypatch, scans_allowed=True)
    assert scanned == [int(last.stem)]  # only the segment whose index no longer fits
    assert shape(log) == before  # the torn tail was cut by the scan's recovery
    log.close()


def test_indexes_go_with_their_segments(tmp_path, monkeypatch):
    log = filled(tmp_path / "p")
    first = log.segments[0].path
    log.close()
    assert first.with_suffix(INDEX_SUFFIX).exists()
    log = Log.open(tmp_path / "p", LogConfig(segment_bytes=1_500))
    log.delete_records_before(log.segments[1].base_offset)
    assert not first.exists() and not first.with_suffix(INDEX_SUFFIX).exists()
    log.close()
    first.with_suffix(INDEX_SUFFIX).write_bytes(b"left over")  # an index whose segment is gone
    Log.open(tmp_path / "p", LogConfig(segment_bytes=1_500)).close()
    assert not first.with_suffix(INDEX_SUFFIX).exists()


def test_compaction_voids_the_index_of_what_it_rewrites(tmp_path, monkeypatch):
    log = filled(tmp_path / "p")
    log.close()
    log = Log.open(tmp_path / "p", LogConfig(segment_bytes=1_500, cleanup_policy="compact"))
    log.compact(10_000)
    log.flush()
    compacted = shape(log)
    for seg in log.segments:
        os.close(seg.fd)  # a crash after compaction: the old indexes must not describe the new files
    log, _ = reopen(tmp_path / "p", monkeypatch, scans_allowed=True)
    # (a segment compacted to nothing is scanned as empty: its next offset is not kept, as before)
    assert [s[:2] + s[3:] for s in shape(log)[0]] == [s[:2] + s[3:] for s in compacted[0]]
    assert shape(log)[1:] == compacted[1:]
    log.close()


def test_a_segment_unchanged_since_its_index_keeps_the_file(tmp_path):
    """A close rewrites only the indexes of segments that changed: a store of many idle partitions
    stops without rewriting each one's index (and the next open still reads them)."""
    from groupd.storage.batch import build_batch
    from groupd.storage.log import INDEX_SUFFIX, Log, LogConfig

    lg = Log.open(tmp_path, LogConfig(segment_bytes=1024))
    for i in range(20):
        lg.append(build_batch([(None, bytes([i]) * 200)], timestamp_ms=1000))
    lg.flush()
    lg.close()
    indexes = sorted(tmp_path.glob(f"*{INDEX_SUFFIX}"))
    assert len(indexes) > 2
    stamps = {p: p.stat().st_mtime_ns for p in indexes}

    lg = Log.open(tmp_path, LogConfig(segment_bytes=1024))
    lg.append(build_batch([(None, b"new")], timestamp_ms=1000))  # only the last segment changes
    lg.flush()
    lg.close()
    rewritten = [p for p in sorted(tmp_path.glob(f"*{INDEX_SUFFIX}")) if stamps.get(p) != p.stat().st_mtime_ns]
    assert rewritten == [indexes[-1]]
    lg = Log.open(tmp_path, LogConfig(segment_bytes=1024))
    assert lg.log_end_offset == 21 and all(seg.indexed for seg in lg.segments)
    lg.close()
