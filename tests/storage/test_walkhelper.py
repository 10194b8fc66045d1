"""Start-up walk helpers: what a helper process walks and answers equals the broker's own walk over the
same ranges, and its failures come back as CorruptBatch (the data) or OSError (the helper)."""

import contextlib
import os
import random

import pytest

from groupd.storage.batch import BATCH_OVERHEAD, collect_latest
from groupd.storage.errors import CorruptBatch
from groupd.storage.log import Log, LogConfig
from groupd.storage.walkhelper import WalkHelpers, split_by_bytes, walk_ranges


def a_log(path, records=3_000, keys=200, seed=7):
    rng = random.Random(seed)
    log = Log.open(path, LogConfig(segment_bytes=20_000))
    for i in range(0, records, 5):
        log.append_records(
            [(b"k%d" % rng.randrange(keys), None if rng.random() < 0.1 else b"v%d" % (i + j)) for j in range(5)], 1
        )
    log.flush()
    return log


def whole_walk(log):
    latest: dict = {}
    seen = sum(collect_latest(c, latest) for c in log.chunks())
    return seen, latest


def test_split_by_bytes_keeps_order_and_balance():
    ranges = [("f", i * 10, i * 10 + 10) for i in range(10)]
    parts = split_by_bytes(ranges, 3)
    assert [r for p in parts for r in p] == ranges
    assert [len(p) for p in parts] == [4, 3, 3]
    assert split_by_bytes([], 2) == [[], []]


def test_helpers_walk_what_the_broker_would(tmp_path, monkeypatch):
    import groupd.storage.log as storage_log

    monkeypatch.setattr(storage_log, "READ_CHUNK", 2_000)  # many ranges over several segments
    log = a_log(tmp_path / "p")
    ranges = [(str(seg.path), s, e) for seg, s, e in log.chunk_ranges()]
    assert len({path for path, _, _ in ranges}) > 3
    mine, *theirs = split_by_bytes(ranges, 3)
    helpers = WalkHelpers.spawn(2)
    try:
        helpers.send(theirs)
        seen, latest = walk_ranges(mine)
        for n, found in helpers.receive():
            seen += n
            latest.update(found)  # later ranges supersede earlier ones key by key
        assert (seen, latest) == whole_walk(log)
        helpers.send(theirs)  # a helper serves request after request
        assert len(helpers.receive()) == 2
    finally:
        helpers.close()
        log.close()
    assert all(p.returncode == 0 for p in helpers.procs)


def test_a_damaged_range_is_corrupt_and_a_dead_helper_is_an_oserror(tmp_path):
    log = a_log(tmp_path / "p", records=50)
    seg = log.segments[0]
    with open(seg.path, "r+b") as f:  # the first record's length now runs past its batch
        f.seek(BATCH_OVERHEAD)
        f.write(b"\x7e")
    helpers = WalkHelpers.spawn(1)
    try:
        helpers.send([[(str(seg.path), 0, seg.size)]])
        with pytest.raises(CorruptBatch, match="runs past"):
            helpers.receive()
        helpers.send([[(str(seg.path), 0, seg.size + 100)]])  # past the end of the file
        with pytest.raises(CorruptBatch, match="ends at"):
            helpers.receive()
        helpers.procs[0].kill()
        helpers.procs[0].wait()
        with pytest.raises(OSError):
            helpers.send([[(str(seg.path), 0, seg.size)]])
            helpers.receive()
    finally:
        helpers.close()
        log.close()


def test_helpers_inherit_no_descriptors(tmp_path):
    r, w = os.pipe()  # inheritable or not, a helper must not hold it
    os.set_inheritable(w, True)
    helpers = WalkHelpers.spawn(1)
    try:
        helpers.send([[]])  # an answer means the helper runs its own loop: spawned, exec'd, set up
        assert helpers.receive() == [(0, {})]
        pid = helpers.procs[0].pid
        held = set()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(FileNotFoundError):  # one closed between the listing and the read
                held.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        assert held and f"pipe:[{os.fstat(w).st_ino}]" not in held
    finally:
        helpers.close()
        os.close(r)
        os.close(w)
