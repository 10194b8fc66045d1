"""The syncfs helper process: rounds answered through it, and a helper that dies costs nothing acknowledged."""

import asyncio
import sys

import pytest

from groupd.storage.committer import GroupCommitter
from groupd.storage.log import Log, LogConfig
from groupd.storage.synchelper import SyncHelper

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="syncfs is Linux-only; elsewhere the thread path runs")


def offsets_logs(tmp_path, n=3):
    logs = []
    for i in range(n):
        lg = Log.open(tmp_path / f"__consumer_offsets-{i}", LogConfig())
        lg.write_behind = True
        logs.append(lg)
    return logs


async def test_rounds_go_through_the_helper(tmp_path):
    committer = GroupCommitter(shared=True)
    await committer.start_helper(tmp_path)
    assert committer.helper is not None and committer.helper.alive
    logs = offsets_logs(tmp_path)
    for i, lg in enumerate(logs):
        lg.append_records([(b"k", b"%d" % i)], 1)
    await asyncio.gather(*(committer.durable(lg) for lg in logs))
    assert committer.fsyncs == 1 and not any(lg.dirty for lg in logs)
    assert all(lg.size_bytes > 0 and lg.segments[-1].path.stat().st_size == lg.size_bytes for lg in logs)
    proc = committer.helper.proc
    await committer.close()
    assert proc.poll() is not None  # the helper exits with the committer
    for lg in logs:
        lg.close()


async def test_a_dead_helper_falls_back_to_the_thread(tmp_path):
    committer = GroupCommitter(shared=True)
    await committer.start_helper(tmp_path)
    logs = offsets_logs(tmp_path, 2)
    committer.helper.proc.kill()
    committer.helper.proc.wait()
    for lg in logs:
        lg.append_records([(b"k", b"v")], 1)
    await asyncio.wait_for(asyncio.gather(*(committer.durable(lg) for lg in logs)), 10)  # synced from here instead
    assert not committer.helper.alive
    logs[0].append_records([(b"k", b"w")], 1)
    await asyncio.wait_for(committer.durable(logs[0]), 10)  # later rounds use the flush thread
    assert not any(lg.dirty for lg in logs)
    await committer.close()
    for lg in logs:
        lg.close()


async def test_helper_answers_in_order(tmp_path):
    helper = await SyncHelper.start(tmp_path)
    answers: list[tuple[int, int | OSError]] = []
    for i in range(20):
        helper.sync_then(lambda outcome, i=i: answers.append((i, outcome)))
    async with asyncio.timeout(10):
        while len(answers) < 20:
            await asyncio.sleep(0.005)
    assert answers == [(i, 0) for i in range(20)]
    helper.close()
    assert helper.proc.poll() is not None
