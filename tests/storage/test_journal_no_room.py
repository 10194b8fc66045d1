"""The offsets store on a full disk: a round the journal has no room for is refused, its batches leave the
logs they were placed in (segments rolled since, bytes already written out), the journal and the logs stay
usable, and neither a later round nor a start-up's journal reading brings a refused batch back.

The full disk is the kernel's own refusal, as in tests/store/test_full_disk.py: RLIMIT_FSIZE, lowered for
a moment in this process (Python ignores SIGXFSZ, so a write past it fails with EFBIG or comes up short).
"""

from __future__ import annotations

import contextlib
import resource
import sys

import pytest

from groupd.storage.batch import iter_records
from groupd.storage.errors import DiskFull
from groupd.storage.journal import Journal
from groupd.storage.log import Log, LogConfig
from groupd.storage.logdirfailure import channel

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE's EFBIG as a full disk is Linux's")


@contextlib.contextmanager
def file_size_limit(limit: int):
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def journaled(path, partition, config=None) -> Log:
    lg = Log.open(path, config)
    lg.write_behind = True
    lg.journal_partition = partition
    return lg


def take(logs) -> list:
    entries = []
    for lg in logs:
        bufs, _count = lg.take_for_journal()
        entries += [(lg.journal_partition, b) for b in bufs]
    return entries


def values(lg: Log) -> list[bytes]:
    return [r.value for _, b in lg.batches() for r in iter_records(b)]


@pytest.mark.parametrize("cut", ["nothing-written", "first-entry-written"])
def test_a_refused_round_leaves_no_batch_behind(tmp_path, monkeypatch, cut):
    reported: list = []
    monkeypatch.setattr(channel, "handler", lambda what, exc: reported.append(what))
    big = journaled(tmp_path / "__consumer_offsets-0", 0)
    small = journaled(tmp_path / "__consumer_offsets-1", 1, LogConfig(segment_bytes=300))
    journal = Journal(tmp_path)
    journal.reset(prefill=False)
    big.append_records([(b"k", b"x" * 3000)], 1)  # the journal's end moves past every segment file's
    small.append_records([(b"k", b"y0")], 1)
    journal.append(take([big, small]))
    small.write_pending()
    big.write_pending()
    segment_size = small.segments[0].size

    for value in (b"y1", b"y2", b"y3", b"y4"):  # the small partition rolls a segment among these
        small.append_records([(b"k", value)], 1)
    big.append_records([(b"k", b"x1")], 1)
    assert len(small.segments) == 2
    first_file = tmp_path / "__consumer_offsets-1" / "00000000000000000000.log"
    assert first_file.stat().st_size > segment_size  # the roll wrote the first segment out, refused ones too
    entries = take([small, big])
    first = 12 + len(entries[0][1])
    limit = journal.position + (1 if cut == "nothing-written" else first + 10)
    with file_size_limit(limit), pytest.raises(DiskFull):
        journal.append(entries)
    for lg in (small, big):
        lg.retract_taken()

    assert reported == [] and journal.failed is None and not small.failed and not big.failed
    assert (small.log_end_offset, big.log_end_offset) == (1, 1)
    assert len(small.segments) == 1 and first_file.stat().st_size == segment_size
    assert sorted(p.name for p in first_file.parent.glob("*.log")) == [first_file.name]
    assert values(small) == [b"y0"] and small.read(0, 1 << 20) == small.segments[0].pread(0, segment_size)

    # room again: the next append takes the offset the refused one had, and is journaled
    assert small.append_records([(b"k", b"y5")], 1) == (1, 1)
    journal.append(take([small, big]))
    assert values(small) == [b"y0", b"y5"]

    # a start-up reading this journal into the files as they are (nothing written out since) restores
    # the accepted batch and none of the refused ones
    reread = Journal(tmp_path)
    fresh = {0: Log.open(tmp_path / "__consumer_offsets-0"), 1: Log.open(tmp_path / "__consumer_offsets-1")}
    reread.recover(fresh)
    assert values(fresh[1]) == [b"y0", b"y5"] and values(fresh[0]) == [b"x" * 3000]
    for lg in (*fresh.values(), small, big):
        lg.close()
    reread.close()
    journal.close()
