"""GroupCommitter: shared fsync rounds, failure propagation, background policy."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from groupd.storage.committer import GroupCommitter
from groupd.storage.errors import StorageError
from groupd.storage.log import Log, LogConfig


class FakeLog:
    """Counts flushes; a flush can be held open to let callers pile up behind it."""

    def __init__(self) -> None:
        self.flushes = 0
        self.unflushed_messages = 0
        self.fail: BaseException | None = None
        self.started = threading.Event()
        self.release = threading.Event()
        self.release.set()

    @property
    def dirty(self) -> bool:
        return self.unflushed_messages > 0

    def append(self, n: int = 1) -> None:
        self.unflushed_messages += n

    def write_pending(self) -> None:
        pass

    def flush(self) -> None:
        self.started.set()
        assert self.release.wait(10)
        self.flushes += 1
        if self.fail is not None:
            raise self.fail
        self.unflushed_messages = 0


async def wait_for(predicate, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.001)


async def test_hundred_concurrent_waiters_share_one_fsync():
    log = FakeLog()
    committer = GroupCommitter()

    async def writer():
        log.append()
        await committer.durable(log)
        return log.flushes

    seen = await asyncio.gather(*(writer() for _ in range(100)))
    assert all(n >= 1 for n in seen)
    assert log.flushes <= 2
    assert committer.fsyncs == log.flushes and committer.waiters_total == 100
    await committer.close()


async def test_callers_during_an_fsync_share_the_next_one():
    log = FakeLog()
    log.release.clear()
    committer = GroupCommitter()
    first = asyncio.create_task(committer.durable(log))
    await wait_for(log.started.is_set)
    later = [asyncio.create_task(committer.durable(log)) for _ in range(50)]
    await asyncio.sleep(0)
    assert not first.done() and not any(t.done() for t in later)
    log.release.set()
    await asyncio.gather(first, *later)
    assert log.flushes == 2
    assert committer.last_batch_size == 50
    await committer.close()


async def test_failure_reaches_every_waiter_of_the_round():
    log = FakeLog()
    log.fail = OSError(5, "Input/output error")
    committer = GroupCommitter()
    results = await asyncio.gather(*(committer.durable(log) for _ in range(20)), return_exceptions=True)
    assert all(isinstance(r, StorageError) for r in results)
    assert all(isinstance(r.__cause__, OSError) for r in results)
    assert committer.fsyncs == 0
    log.fail = None
    await committer.durable(log)  # a later round can succeed again (for logs that allow it)
    await committer.close()


async def test_real_log_fsync_error_is_never_durable(tmp_path, monkeypatch):
    log = Log.open(tmp_path / "p", LogConfig())
    committer = GroupCommitter()
    log.append_records([(b"k", b"v")], 1)
    await committer.durable(log)

    def broken(fd):
        raise OSError(5, "Input/output error")

    log.append_records([(b"k", b"w")], 2)
    monkeypatch.setattr(os, "fsync", broken)
    results = await asyncio.gather(*(committer.durable(log) for _ in range(5)), return_exceptions=True)
    monkeypatch.undo()
    assert all(isinstance(r, StorageError) for r in results)
    with pytest.raises(StorageError):
        await committer.durable(log)  # the log is offline until reopened
    log.close()


async def test_real_log_appends_continue_during_fsync(tmp_path):
    log = Log.open(tmp_path / "p", LogConfig())
    committer = GroupCommitter()

    async def writer(i: int) -> int:
        base, _ = log.append_records([(b"k%d" % i, b"v")], 1)
        await committer.durable(log)
        return base

    bases = await asyncio.gather(*(writer(i) for i in range(200)))
    assert sorted(bases) == list(range(200))
    assert committer.fsyncs < 200 and not log.dirty
    await committer.close()
    log.close()


async def test_background_policy_by_count_and_time():
    log = FakeLog()
    committer = GroupCommitter(flush_interval_messages=10, flush_interval_ms=20)
    for _ in range(9):
        log.append()
        await committer.durable(log)  # returns at once
    assert log.flushes == 0
    log.append()
    await committer.durable(log)
    await wait_for(lambda: log.flushes == 1)
    log.append()
    await committer.durable(log)  # below the count: the timer flushes it
    await wait_for(lambda: log.flushes == 2)
    log.append()
    await committer.durable(log)
    await committer.close()  # close flushes what is pending
    assert log.flushes == 3 and log.unflushed_messages == 0


async def test_cancelled_waiter_does_not_cancel_the_round():
    log = FakeLog()
    log.release.clear()
    committer = GroupCommitter()
    a = asyncio.create_task(committer.durable(log))
    await wait_for(log.started.is_set)
    b = asyncio.create_task(committer.durable(log))
    c = asyncio.create_task(committer.durable(log))
    await asyncio.sleep(0)
    b.cancel()
    log.release.set()
    await a
    await c
    assert b.cancelled() and log.flushes == 2
    await committer.close()
