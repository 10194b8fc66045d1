"""Every failed write or sync of a log reaches the LogDirFailureChannel (Kafka's name), whose handler
halts the broker (groupd/server.py; tests/store/test_full_disk.py runs it for real). Here the handler records."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from groupd.storage.errors import StorageError
from groupd.storage.journal import Journal
from groupd.storage.log import Log, LogConfig
from groupd.storage.logdirfailure import channel


@pytest.fixture
def reported(monkeypatch):
    seen: list[tuple[str, BaseException]] = []
    monkeypatch.setattr(channel, "handler", lambda what, exc: seen.append((what, exc)))
    return seen


class _NoSpace:
    """``os`` as storage modules see it, with pwrite failing as on a full disk."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    @staticmethod
    def pwrite(fd, data, offset):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_failed_append_to_a_data_partition_is_reported(tmp_path, reported, monkeypatch):
    import groupd.storage.log as log_module

    lg = Log.open(tmp_path / "d-0")
    lg.append_records([(b"a", b"1")], 1)
    with monkeypatch.context() as patched:
        patched.setattr(log_module, "os", _NoSpace(os))
        with pytest.raises(StorageError):
            lg.append_records([(b"b", b"2")], 1)
    assert len(reported) == 1
    what, exc = reported[0]
    assert what.startswith("write to ") and "d-0" in what and exc.errno == errno.ENOSPC
    assert lg.log_end_offset == 1  # nothing half-written is left behind
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
        patched.setattr(log_module, "os", _NoSpace(os))
        with pytest.raises(StorageError):
            lg.write_pending()
    assert len(reported) == 1 and lg.failed
    lg.close()


def test_a_failed_journal_write_and_a_failed_journal_sync_are_reported(tmp_path, reported, monkeypatch):
    import groupd.storage.journal as journal_module

    journal = Journal(tmp_path)
    with monkeypatch.context() as patched:
        patched.setattr(journal_module, "os", _NoSpace(os))
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


def test_preparing_the_journal_on_a_full_disk_names_the_file(tmp_path, monkeypatch):
    import groupd.storage.journal as journal_module

    journal = Journal(tmp_path, checkpoint_bytes=1 << 20)
    with monkeypatch.context() as patched:
        patched.setattr(journal_module, "os", _NoSpace(os))
        with pytest.raises(StorageError, match=r"preparing .*__consumer_offsets\.journal\.0 failed: .*No space left"):
            journal.reset()
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
