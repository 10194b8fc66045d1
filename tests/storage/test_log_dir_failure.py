"""Every failed write or sync of a log reaches the LogDirFailureChannel (Kafka's name), whose handler
halts the broker (groupd/server.py; tests/store/test_full_disk.py runs it for real), except a data
partition's append with no room, which is refused and leaves the log usable. Here the handler records."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from groupd.storage.batch import iter_records
from groupd.storage.errors import DiskFull, StorageError
from groupd.storage.journal import Journal
from groupd.storage.log import Log, LogConfig
from groupd.storage.logdirfailure import channel


@pytest.fixture
def reported(monkeypatch):
    seen: list[tuple[str, BaseException]] = []
    monkeypatch.setattr(channel, "handler", lambda what, exc: seen.append((what, exc)))
    return seen


class _NoSpace:
    """``os`` as storage modules see it, with pwrite failing as on a full disk (or with another errno)."""

    def __init__(self, real, code=errno.ENOSPC):
        self._real = real
        self._code = code

    def __getattr__(self, name):
        return getattr(self._real, name)

    def pwrite(self, fd, data, offset):
        raise OSError(self._code, os.strerror(self._code))


def test_a_failed_append_to_a_data_partition_is_reported(tmp_path, reported, monkeypatch):
    import groupd.storage.log as log_module

    lg = Log.open(tmp_path / "d-0")
    lg.append_records([(b"a", b"1")], 1)
    with monkeypatch.context() as patched:
        patched.setattr(log_module, "os", _NoSpace(os, errno.EIO))
        with pytest.raises(StorageError):
            lg.append_records([(b"b", b"2")], 1)
    assert len(reported) == 1
    what, exc = reported[0]
    assert what.startswith("write to ") and "d-0" in what and exc.errno == errno.EIO
    assert lg.log_end_offset == 1  # nothing half-written is left behind
    lg.close()


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EFBIG])
def test_an_append_with_no_room_is_refused_and_the_next_one_succeeds(tmp_path, reported, monkeypatch, code):
    """Nothing of the refused append stays and nothing before it was touched, so the log stays usable:
    DiskFull (a StorageError: Produce answers KAFKA_STORAGE_ERROR), no failed directory, and once the
    disk has room again the next append is stored at the very next offset."""
    import groupd.storage.log as log_module

    lg = Log.open(tmp_path / "d-0")
    lg.append_records([(b"a", b"1")], 1)
    with monkeypatch.context() as patched:
        patched.setattr(log_module, "os", _NoSpace(os, code))
        for _ in range(3):
            with pytest.raises(DiskFull):
                lg.append_records([(b"b", b"2")], 1)
    assert reported == [] and not lg.failed
    assert lg.append_records([(b"c", b"3")], 1) == (1, 1)
    lg.flush()
    assert [r.value for _, b in lg.batches() for r in iter_records(b)] == [b"1", b"3"]
    lg.close()


def flush_with_eio(lg, monkeypatch):
    """One record appended, then a flush whose fsync fails with EIO."""
    lg.append_records([(b"a", b"1")], 1)

    def broken(fd):
        raise OSError(errno.EIO, "I/O error")

    with monkeypatch.context() as patched:
        patched.setattr(os, "fsync", broken)
        with pytest.raises(StorageError):
            lg.flush()


def test_a_failed_fsync_is_reported(tmp_path, reported, monkeypatch):
    lg = Log.open(tmp_path / "d-1")
    flush_with_eio(lg, monkeypatch)
    assert [exc.errno for _, exc in reported] == [errno.EIO]
    lg.close()


def test_a_failed_write_out_of_a_journaled_partition_is_reported(tmp_path, reported, monkeypatch):
    import groupd.storage.log as log_module

    lg = Log.open(tmp_path / "__consumer_offsets-0")
    lg.write_behind = True
    lg.append_records([(b"a", b"1")], 1)
    with monkeypatch.context() as patched:
        patched.setattr(log_module, "os", _NoSpace(os, errno.EIO))
        with pytest.raises(StorageError):
            lg.write_pending()
    assert len(reported) == 1 and lg.failed
    lg.close()


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EFBIG])
def test_a_write_out_with_no_room_stays_pending_and_is_written_once_there_is_room(
    tmp_path, reported, monkeypatch, code
):
    """A journaled partition's batches are durable in the journal before its own file is written: a
    write-out the disk has no room for loses nothing, so it is refused (DiskFull) and tried again."""
    import groupd.storage.log as log_module

    lg = Log.open(tmp_path / "__consumer_offsets-0")
    lg.write_behind = True
    lg.append_records([(b"a", b"1")], 1)
    with monkeypatch.context() as patched:
        patched.setattr(log_module, "os", _NoSpace(os, code))
        with pytest.raises(DiskFull):
            lg.write_pending()
        with pytest.raises(DiskFull):
            lg.flush()
    assert reported == [] and not lg.failed and lg.unwritten_batches == 1 and lg.dirty
    lg.flush()
    assert lg.unwritten_batches == 0 and not lg.dirty
    lg.close()
    again = Log.open(tmp_path / "__consumer_offsets-0")
    assert [r.value for _, b in again.batches() for r in iter_records(b)] == [b"1"]
    again.close()


def test_a_failed_journal_write_and_a_failed_journal_sync_are_reported(tmp_path, reported, monkeypatch):
    import groupd.storage.journal as journal_module

    journal = Journal(tmp_path)
    with monkeypatch.context() as patched:
        patched.setattr(journal_module, "os", _NoSpace(os, errno.EIO))
        with pytest.raises(StorageError):
            journal.append([(0, bytes(100))])
    journal.sync_failed(OSError(errno.EIO, "I/O error"))
    assert [what.split()[0] for what, _ in reported] == ["write", "sync"]
    assert all("__consumer_offsets.journal.0" in what for what, _ in reported)
    journal.close()


def test_without_a_handler_a_failure_only_takes_the_log_offline(tmp_path, monkeypatch):
    monkeypatch.setattr(channel, "handler", None)
    lg = Log.open(tmp_path / "d-2")
    flush_with_eio(lg, monkeypatch)
    assert lg.failed
    lg.close()


def test_preparing_the_journal_on_a_full_disk_leaves_it_unfilled_until_a_round_finds_room(
    tmp_path, monkeypatch, reported
):
    """A start on a full disk after a clean stop: the journal files stay empty (nothing in them to lose),
    rounds append to them, and once one finds room the files are filled to their size."""
    import groupd.storage.journal as journal_module

    journal = Journal(tmp_path, checkpoint_bytes=1 << 20)
    with monkeypatch.context() as patched:
        patched.setattr(journal_module, "os", _NoSpace(os))
        journal.reset()
        assert journal.unfilled and [p.stat().st_size for p in journal.paths] == [0, 0]
        with pytest.raises(DiskFull):
            journal.append([(0, bytes(100))])
    assert reported == [] and journal.failed is None
    journal.append([(0, bytes(100))])
    assert not journal.unfilled and [p.stat().st_size for p in journal.paths] == [journal.prefill_bytes] * 2
    journal.close()


def test_a_compaction_with_no_room_leaves_the_segment_and_no_partial_file(tmp_path, monkeypatch):
    import groupd.storage.log as log_module

    lg = Log.open(tmp_path / "c-0", LogConfig(segment_bytes=200, cleanup_policy="compact"))
    for i in range(12):
        lg.append_records([(b"k", b"%d" % i)], 1)
    lg.flush()
    before = [(h.base_offset, bytes(b)) for h, b in lg.batches()]

    class _Full:
        """A file made on a disk with no room for its data."""

        def __init__(self, path, mode="r"):
            Path(path).touch()

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patched:
        patched.setattr(log_module, "open", _Full, raising=False)
        with pytest.raises(StorageError, match="compacting .* failed: .*No space left"):
            lg.compact(now_ms=10**13)
    assert not list((tmp_path / "c-0").glob("*.cleaned"))
    assert [(h.base_offset, bytes(b)) for h, b in lg.batches()] == before
    assert lg.compact(now_ms=10**13).records_after < len(before)  # with room again it compacts
    lg.close()
