"""Write-behind logs (the offsets store): appends reach the file in the flush, never lost before it
acknowledges, and every read or maintenance path sees them at once."""

import asyncio
import os

import pytest

from groupd.storage.batch import iter_records
from groupd.storage.committer import GroupCommitter
from groupd.storage.errors import StorageError
from groupd.storage.log import Log, LogConfig, flush_many


def open_log(path, **cfg):
    log = Log.open(path, LogConfig(**cfg))
    log.write_behind = True
    return log


def keys(log):
    return [bytes(r.key) for _h, batch in log.batches() for r in iter_records(batch)]


def file_bytes(log):
    return sum(os.path.getsize(s.path) for s in log.segments)


def test_append_waits_for_the_flush_to_reach_the_file(tmp_path):
    log = open_log(tmp_path / "p-0")
    log.append_records([(b"a", b"1")], 1)
    log.append_records([(b"b", b"2")], 1)
    assert file_bytes(log) == 0 and log.log_end_offset == 2
    log.flush()
    assert file_bytes(log) == log.size_bytes > 0
    reopened = Log.open(tmp_path / "p-0", LogConfig())
    assert keys(reopened) == [b"a", b"b"]
    reopened.close()
    log.close()


def test_reads_and_compaction_see_unwritten_batches(tmp_path):
    log = open_log(tmp_path / "p-0", segment_bytes=200)
    for i in range(12):
        log.append_records([(b"k%d" % (i % 3), b"v%d" % i)], 1)
    assert keys(log)[:3] == [b"k0", b"k1", b"k2"]  # batches() settles the unwritten ones first
    assert log.read(0, 1 << 20)
    assert len(log.segments) > 1
    log.compact(now_ms=10)
    assert sorted(set(keys(log))) == [b"k0", b"k1", b"k2"]
    log.flush()
    log.close()


def test_close_writes_what_is_pending(tmp_path):
    log = open_log(tmp_path / "p-0")
    log.append_records([(b"a", b"1")], 1)
    log.close()
    reopened = Log.open(tmp_path / "p-0", LogConfig())
    assert keys(reopened) == [b"a"]
    reopened.close()


def test_unflushed_appends_are_not_in_the_file_after_a_crash(tmp_path):
    log = open_log(tmp_path / "p-0")
    log.append_records([(b"a", b"1")], 1)
    log.flush()
    log.append_records([(b"b", b"2")], 1)  # never acknowledged: no flush covered it
    crashed = Log.open(tmp_path / "p-0", LogConfig())  # the process died here (no close)
    assert keys(crashed) == [b"a"]
    crashed.close()


def test_flush_many_writes_and_syncs_every_log(tmp_path):
    logs = [open_log(tmp_path / f"p-{i}") for i in range(3)]
    for i, log in enumerate(logs):
        log.append_records([(b"k", b"%d" % i)], 1)
    flush_many(logs)
    assert all(file_bytes(log) == log.size_bytes for log in logs)
    assert not any(log.dirty for log in logs)
    for log in logs:
        log.close()


def test_a_failed_write_takes_the_log_offline(tmp_path):
    log = open_log(tmp_path / "p-0")
    log.append_records([(b"a", b"1")], 1)
    os.close(log.segments[-1].fd)  # the write will fail with EBADF
    with pytest.raises(StorageError):
        log.flush()
    assert log.failed
    with pytest.raises(StorageError):
        log.append_records([(b"b", b"2")], 1)


async def test_a_cancelled_waiter_does_not_cancel_the_round_for_others(tmp_path):
    log = open_log(tmp_path / "p-0")
    committer = GroupCommitter(shared=True)
    log.append_records([(b"a", b"1")], 1)
    first = asyncio.create_task(committer.durable(log))
    second = asyncio.create_task(committer.durable(log))
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.wait_for(second, 5)  # the shared round still completes
    assert file_bytes(log) == log.size_bytes
    await committer.close()
    log.close()
