"""Segment files opened on demand and closed when idle (storage/open_files.py): the descriptors a process
holds follow the partitions in use, bounded by ``log.max.open.files``, and a file closed while idle reads
and takes appends as before; a file with appends not yet synced is never closed."""

from __future__ import annotations

import contextlib
import os
import sys
import threading

import pytest

from groupd.storage.batch import iter_records
from groupd.storage.log import Log, LogConfig
from groupd.storage.open_files import OpenFiles

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="counts descriptors in /proc/self/fd")

LIMIT = 16  # the floor: fewer is raised to it


def descriptors(under: object = None) -> int:
    """Descriptors this process holds open; with ``under``, only those on files below that directory (the
    process-wide count also moves with whatever other threads of a test worker open and close)."""
    if under is None:
        return len(os.listdir("/proc/self/fd"))
    prefix, held = str(under) + "/", 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            held += os.readlink(f"/proc/self/fd/{fd}").startswith(prefix)
    return held


def values(lg: Log) -> list[bytes]:
    return [r.value for _, b in lg.batches() for r in iter_records(b)]


def test_forty_logs_of_three_segments_hold_at_most_the_bound(tmp_path):
    files = OpenFiles()
    files.configure(LIMIT)
    before = descriptors(tmp_path)
    logs = [Log.open(tmp_path / f"t-{p}", LogConfig(segment_bytes=1024), files=files) for p in range(40)]
    for round_ in range(30):  # about three segments each
        for p, lg in enumerate(logs):
            lg.append_records([(b"k", b"%d-%d" % (p, round_) + b"x" * 60)], round_)
            lg.flush()
    assert all(len(lg.segments) >= 3 for lg in logs)
    assert len(files.files) <= LIMIT and descriptors(tmp_path) - before <= LIMIT
    assert files.closed_idle > 0
    for p, lg in enumerate(logs):  # every file again, closed ones reopened on demand
        assert [v[: v.index(b"x")] for v in values(lg)] == [b"%d-%d" % (p, r) for r in range(30)]
        assert lg.read(15, 1 << 20)[:8] == (15).to_bytes(8, "big")
        assert lg.offset_for_timestamp(20) == (20, 20)
    assert len(files.files) <= LIMIT and descriptors(tmp_path) - before <= LIMIT
    for lg in logs:
        lg.close()
    assert files.files == {} and descriptors(tmp_path) == before


def test_reopened_logs_find_everything_and_files_with_unsynced_appends_stay_open(tmp_path):
    files = OpenFiles()
    files.configure(LIMIT)
    dirty = Log.open(tmp_path / "dirty", files=files)
    dirty.append_records([(b"k", b"unsynced")], 1)  # not flushed: its file must stay open
    logs = [Log.open(tmp_path / f"t-{p}", files=files) for p in range(3 * LIMIT)]
    for lg in logs:
        lg.append_records([(b"k", b"v")], 1)
        lg.flush()
    assert dirty.segments[0].handle >= 0 and len(files.files) <= LIMIT + 1
    dirty.flush()
    for lg in (dirty, *logs):
        lg.close()
    again = Log.open(tmp_path / "dirty", files=files)
    assert values(again) == [b"unsynced"]
    again.close()


def test_only_the_configuring_thread_closes_files_and_a_worker_opened_log_closes_its_own(tmp_path):
    """Files are closed only by the event loop's thread (which alone reads and appends); a log opened on
    a worker thread while the bound is exceeded closes its own files before anyone sees it."""
    files = OpenFiles()
    files.configure(LIMIT)
    logs = [Log.open(tmp_path / f"t-{p}", files=files) for p in range(LIMIT)]
    opened: list[Log] = []
    worker = threading.Thread(
        target=lambda: opened.extend(Log.open(tmp_path / f"w-{p}", files=files) for p in range(LIMIT))
    )
    worker.start()
    worker.join()
    assert all(lg.segments[0].handle >= 0 for lg in logs[: LIMIT // 2])  # the worker closed none of these
    assert all(lg.segments[0].handle < 0 for lg in opened[1:])  # ... but its own, once over the bound
    opened[-1].append_records([(b"k", b"v")], 1)  # reopened on the owner's thread, which closes others
    opened[-1].flush()
    assert len(files.files) <= LIMIT and values(opened[-1]) == [b"v"]
    for lg in (*logs, *opened):
        lg.close()
