"""The offsets store's journal: rounds made durable by one fdatasync, checkpoints, and a power loss
(every write since the last sync undone) that costs nothing acknowledged."""

import asyncio
import os
import sys

import pytest

import groupd.storage.committer as committer_mod
from groupd.storage.batch import iter_batches
from groupd.storage.committer import GroupCommitter
from groupd.storage.errors import StorageError
from groupd.storage.journal import Journal, entry, read_entries
from groupd.storage.log import Log, LogConfig, build_batch

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="the syncfs helper is Linux-only")


def batch(key: bytes, value: bytes) -> bytearray:
    return build_batch([(key, value)], timestamp_ms=1_700_000_000_000, mutable=True)


def test_entries_read_back_up_to_the_first_invalid_one():
    first, second = batch(b"a", b"1"), batch(b"b", b"2")
    data = entry(3, first) + entry(7, second)
    assert [(p, bytes(b)) for p, b in read_entries(data)] == [(3, bytes(first)), (7, bytes(second))]
    assert [p for p, _ in read_entries(data[:-1])] == [3]  # a torn tail
    flipped = bytearray(data)
    flipped[len(entry(3, first)) + 20] ^= 1
    assert [p for p, _ in read_entries(flipped)] == [3]  # a damaged entry ends the file
    assert list(read_entries(bytes(4096))) == []  # zeros are no entry
    assert list(read_entries(b"")) == []


def open_logs(root, n, segment_bytes=100 << 20):
    logs = {}
    for p in range(n):
        lg = Log.open(root / f"__consumer_offsets-{p}", LogConfig(segment_bytes=segment_bytes))
        lg.write_behind = True
        lg.journal_partition = p
        logs[p] = lg
    return logs


def contents(lg: Log) -> list[tuple[int, bytes]]:
    return [(h.base_offset, bytes(b)) for h, b in lg.batches()]


def test_recover_appends_what_a_partition_lacks_and_skips_what_it_has(tmp_path):
    logs = open_logs(tmp_path, 1)
    lg = logs[0]
    bufs = []
    for i in range(5):
        lg.append_records([(b"k%d" % i, b"v")], 1)
        bufs.append(bytes(lg._unwritten[-1][2]))
    journal = Journal(tmp_path)
    journal.append([(0, b) for b in bufs])
    lg.write_pending()
    os.ftruncate(lg.segments[-1].fd, len(bufs[0]) + len(bufs[1]))  # the last three are lost
    lg.close()
    reopened = open_logs(tmp_path, 1)
    assert reopened[0].log_end_offset == 2
    assert journal.recover(reopened) == 3
    assert [off for off, _ in contents(reopened[0])] == [0, 1, 2, 3, 4]
    assert [b for _, b in contents(reopened[0])] == bufs
    assert journal.recover(reopened) == 0  # a second reading adds nothing
    journal.close()
    reopened[0].close()


def test_entries_left_from_an_earlier_turn_of_a_file_are_skipped(tmp_path):
    logs = open_logs(tmp_path, 1)
    lg = logs[0]
    bufs = []
    for i in range(6):
        lg.append_records([(b"k", b"%d" % i)], 1)
        bufs.append(bytes(lg._unwritten[-1][2]))
    lg.write_pending()
    journal = Journal(tmp_path)
    journal.append([(0, b) for b in bufs[:4]])  # an earlier turn, durable in the partition since
    journal.switch()
    journal.switch()  # back to the first file, written over from its start
    journal.append([(0, b) for b in bufs[4:]])
    assert [bytes(b) for _, b in read_entries(journal.paths[0].read_bytes())] == bufs[4:] + bufs[2:4]
    os.ftruncate(lg.segments[-1].fd, sum(map(len, bufs[:4])))  # the last turn's two are lost
    lg.close()
    reopened = open_logs(tmp_path, 1)
    assert journal.recover(reopened) == 2
    assert [b for _, b in contents(reopened[0])] == bufs
    journal.close()
    reopened[0].close()


def test_reset_fills_both_files_with_zeros_that_read_as_no_entry(tmp_path):
    journal = Journal(tmp_path, checkpoint_bytes=3 << 20)
    journal.append([(0, batch(b"k", b"v"))])
    journal.reset()
    assert [p.stat().st_size for p in journal.paths] == [4 << 20, 4 << 20]
    assert journal.recover({}) == 0 and (journal.current, journal.position) == (0, 0)
    journal.reset(prefill=False)
    assert [p.stat().st_size for p in journal.paths] == [0, 0]
    journal.close()


def test_recover_stops_a_partition_at_a_gap(tmp_path, caplog):
    logs = open_logs(tmp_path, 2)
    for lg in logs.values():
        lg.append_records([(b"k", b"v")], 1)
    journal = Journal(tmp_path)
    far = batch(b"x", b"y")
    far[0:8] = (5).to_bytes(8, "big")  # offset 5 of partition 0, which ends at 1
    near = bytes(logs[1]._unwritten[-1][2])
    logs[1]._unwritten.clear()  # partition 1 never wrote its batch: the journal has it
    logs[1].segments[-1].next_offset = 0
    journal.append([(0, far), (1, near), (9, near)])
    assert journal.recover(logs) == 1
    assert logs[0].log_end_offset == 1 and logs[1].log_end_offset == 1
    assert "left out" in caplog.text  # the gap of partition 0, and partition 9, which is not here
    journal.close()


async def rounds(committer, logs, count, start=0):
    """``count`` rounds, each appending one record to every log and waiting for it to be durable."""
    expected = {}
    for i in range(start, start + count):
        for p, lg in logs.items():
            lg.append_records([(b"key-%d" % p, b"value-%d" % i)], 1)
        await asyncio.gather(*(committer.durable(lg) for lg in logs.values()))
    for p, lg in logs.items():
        expected[p] = contents(lg)
    return expected


def lose_unsynced(logs, durable_sizes):
    """A power loss: each log's last segment goes back to the size it had when last synced (or goes
    away, if it was made since), with a torn page of garbage after it; sealed segments are whole."""
    for lg in logs.values():
        lg._unwritten.clear()
        last = lg.segments[-1]
        for seg in lg.segments:
            os.close(seg.fd)
        lg.segments = []
        size = durable_sizes.get(last.path)
        if size is None:
            last.path.unlink()
            continue
        with open(last.path, "r+b") as f:
            f.truncate(size)
            f.seek(size)
            f.write(b"\x07" * 300)


def lose_and_recover(root, logs, committer, durable, expected, segment_bytes=100 << 20):
    """The helper and journal go, unsynced writes are lost, and a new journal restores every batch."""
    committer.helper.close()
    committer.journal.close()
    lose_unsynced(logs, durable)
    reopened = open_logs(root, len(logs), segment_bytes)
    assert all(contents(reopened[p]) != expected[p] for p in reopened)  # the loss is real
    after = Journal(root)
    assert after.recover(reopened) > 0
    for p, lg in reopened.items():
        assert contents(lg) == expected[p]
        lg.close()
    after.close()


def synced_sizes(logs):
    return {lg.segments[-1].path: lg.segments[-1].path.stat().st_size for lg in logs.values()}


@linux_only
@pytest.mark.parametrize("segment_bytes", [100 << 20, 600])
async def test_a_power_loss_costs_nothing_acknowledged(tmp_path, segment_bytes, monkeypatch):
    monkeypatch.setattr(committer_mod, "_WRITE_OUT_FROM", 4)  # some batches reach the logs' files between checkpoints
    logs = open_logs(tmp_path, 3, segment_bytes)
    journal = Journal(tmp_path)
    committer = GroupCommitter(shared=True)
    committer.journal = journal
    await committer.start_helper(tmp_path)
    assert committer.helper is not None
    expected = await rounds(committer, logs, 41)
    assert journal.checkpoints == 0 and committer.fsyncs == 41
    if segment_bytes < 100 << 20:
        assert all(len(lg.segments) > 3 for lg in logs.values())  # rolled, each roll sealing a segment
        assert all(seg.path.stat().st_size == seg.size for lg in logs.values() for seg in lg.segments[:-1])
    lose_and_recover(tmp_path, logs, committer, {}, expected, segment_bytes)  # nothing synced but sealed segments


@linux_only
async def test_checkpoints_switch_files_and_write_the_logs_out(tmp_path):
    logs = open_logs(tmp_path, 2)
    journal = Journal(tmp_path, checkpoint_bytes=600)
    committer = GroupCommitter(shared=True)
    committer.journal = journal
    await committer.start_helper(tmp_path)
    await rounds(committer, logs, 6)  # about 170 bytes of journal a round
    assert journal.checkpoints == 1 and journal.current == 1
    for i in range(6, 40, 4):
        await rounds(committer, logs, 4, start=i)
        if committer.checkpointing is not None:
            await committer.checkpointing
    assert journal.checkpoints >= 3  # the first file is written over, its earlier turn's entries after
    durable = synced_sizes(logs)  # as the last checkpoint wrote them out and synced them
    journal.checkpoint_bytes = 1 << 30  # the last round is in the journal only
    expected = await rounds(committer, logs, 1, start=40)
    assert journal.position > 0 and committer.checkpointing is None
    # the last one in the journal only
    assert all(durable[lg.segments[-1].path] < lg.size_bytes for lg in logs.values())
    # the checkpoint made the files durable as they were then; everything since is in the journal
    lose_and_recover(tmp_path, logs, committer, durable, expected)


@linux_only
async def test_a_failed_journal_write_fails_this_round_and_every_later_one(tmp_path):
    logs = open_logs(tmp_path, 2)
    journal = Journal(tmp_path)
    committer = GroupCommitter(shared=True)
    committer.journal = journal
    await committer.start_helper(tmp_path)
    await rounds(committer, logs, 1)
    os.close(journal.fds[journal.current])  # the next pwrite fails (EBADF)
    with pytest.raises(StorageError):
        await rounds(committer, logs, 1, start=1)
    with pytest.raises(StorageError):
        await rounds(committer, logs, 1, start=2)
    journal.fds[journal.current] = os.open(journal.paths[journal.current], os.O_RDWR)
    committer.helper.close()
    journal.close()


def test_batches_of_every_round_stay_whole_in_the_log(tmp_path):
    """What a journaled log writes to its own file later is the same bytes the journal got."""
    logs = open_logs(tmp_path, 1)
    lg = logs[0]
    for i in range(10):
        lg.append_records([(b"k", b"%d" % i)], 1)
    bufs, count = lg.take_for_journal()
    assert count == 10 and len(bufs) == 10
    assert lg.take_for_journal()[0] == []
    lg.write_pending()
    data = lg.segments[-1].path.read_bytes()
    assert [bytes(data[pos : pos + h.size]) for pos, h in iter_batches(data, 0)] == [bytes(b) for b in bufs]
    lg.close()


@linux_only
async def test_a_failed_checkpoint_fails_every_later_round(tmp_path, monkeypatch):
    monkeypatch.setattr(committer_mod, "syncfs_errno", lambda _directory: 5)  # EIO
    logs = open_logs(tmp_path, 2)
    journal = Journal(tmp_path, checkpoint_bytes=300)
    committer = GroupCommitter(shared=True)
    committer.journal = journal
    await committer.start_helper(tmp_path)
    await rounds(committer, logs, 3)
    assert journal.checkpoints == 1
    if committer.checkpointing is not None:
        await committer.checkpointing
    assert journal.failed is not None and all(lg.failed for lg in logs.values())
    with pytest.raises(StorageError):
        await rounds(committer, logs, 1, start=3)
    committer.helper.close()
    journal.close()


@linux_only
async def test_a_round_writes_out_a_few_logs_and_leaves_the_rest_to_later_rounds(tmp_path, monkeypatch):
    """Logs filled at one rate reach the write-out size together; writing them all out in one round
    stalled the event loop (44 logs, 4-8 ms) and every commit in flight with it. A round writes out at
    most ``_WRITE_OUTS_PER_ROUND`` of them; the others wait for the rounds after it."""
    monkeypatch.setattr(committer_mod, "_WRITE_OUT_FROM", 4)
    monkeypatch.setattr(committer_mod, "_WRITE_OUTS_PER_ROUND", 3)
    logs = open_logs(tmp_path, 10)
    journal = Journal(tmp_path, checkpoint_bytes=1 << 30)
    committer = GroupCommitter(shared=True)
    committer.journal = journal
    await committer.start_helper(tmp_path)
    writes: list[int] = []
    per_round: list[int] = []
    for lg in logs.values():

        def counted(original=lg.write_pending):
            writes.append(1)
            return original()

        lg.write_pending = counted
    launch = committer._launch_journaled

    def counting_launch(*args):
        before = len(writes)
        launch(*args)
        per_round.append(len(writes) - before)

    committer._launch_journaled = counting_launch
    expected = await rounds(committer, logs, 16)
    assert max(per_round) == 3  # ten logs due in the same round, three written out
    assert len(writes) >= 20  # ... and every log written out in the rounds after, twice or more
    assert all(lg.unwritten_batches < 4 + 4 for lg in logs.values())
    lose_and_recover(tmp_path, logs, committer, {}, expected)
