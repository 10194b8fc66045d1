"""The segment log: append/read, recovery of torn tails, roll, retention, compaction, group commit."""

import asyncio
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.storage.batch import build_batch, crc_ok, iter_records, parse_header, validate_batch
from groupd.storage.committer import GroupCommitter
from groupd.storage.errors import CorruptBatch, OffsetOutOfRange, StorageError, UnsupportedMagic
from groupd.storage.log import Log, LogConfig


class Clock:
    def __init__(self, t=1_000_000):
        self.t = t

    def __call__(self):
        return self.t


def records(n, prefix=b"k"):
    return [(prefix + str(i).encode(), b"v" * 10 + str(i).encode()) for i in range(n)]


def test_batch_round_trip_and_crc():
    batch = build_batch(records(3), timestamp_ms=5, headers=[[("h", b"x")], [], [("a", None)]])
    header = validate_batch(batch)
    assert header.record_count == 3 and header.last_offset == 2 and header.magic == 2
    recs = list(iter_records(batch))
    assert [r.key for r in recs] == [b"k0", b"k1", b"k2"]
    assert recs[0].headers == (("h", b"x"),) and recs[2].headers == (("a", None),)
    bad = bytearray(batch)
    bad[-1] ^= 1
    with pytest.raises(CorruptBatch):
        validate_batch(bytes(bad))
    old = bytearray(batch)
    old[16] = 1
    with pytest.raises(UnsupportedMagic):
        validate_batch(bytes(old))


def test_append_read_and_offsets(tmp_path):
    log = Log.open(tmp_path / "t-0")
    assert log.append_records(records(3), 10) == (0, 2)
    assert log.append_records(records(2), 11) == (3, 4)
    assert log.log_end_offset == 5
    data = log.read(0, 1 << 20)
    offsets = [r.offset for h in [0] for r in _all_records(data)]
    assert offsets == [0, 1, 2, 3, 4]
    # mid-batch read starts at the batch holding the offset
    assert [r.offset for r in _all_records(log.read(4, 1 << 20))] == [3, 4]
    # at least one batch even if max_bytes is tiny
    assert [r.offset for r in _all_records(log.read(0, 1))] == [0, 1, 2]
    assert log.read(5, 100) == b""
    with pytest.raises(OffsetOutOfRange):
        log.read(6, 100)


def _all_records(data):
    from groupd.storage.batch import iter_batches

    out = []
    for pos, h in iter_batches(data, 0):
        out.extend(iter_records(memoryview(data)[pos : pos + h.size]))
    return out


def test_reopen_keeps_everything(tmp_path):
    log = Log.open(tmp_path / "p")
    for i in range(20):
        log.append_records(records(5, prefix=str(i).encode()), 100 + i)
    log.flush()
    log.close()
    again = Log.open(tmp_path / "p")
    assert again.log_end_offset == 100
    assert sum(h.record_count for h, _ in again.batches()) == 100


def test_torn_tail_truncated_at_every_byte(tmp_path, caplog):
    src = Log.open(tmp_path / "src")
    src.append_records(records(4), 1)
    src.append_records(records(3, prefix=b"z"), 2)
    src.flush()
    path = src.active.path
    full = path.read_bytes()
    first_size = parse_header(full, 0).size
    src.close()
    for cut in range(first_size, len(full)):
        d = tmp_path / f"cut{cut}"
        d.mkdir()
        (d / path.name).write_bytes(full[:cut])
        log = Log.open(d)
        expected_end = 7 if cut == len(full) else 4
        assert log.log_end_offset == expected_end, cut
        assert (d / path.name).stat().st_size == first_size
        # the log keeps accepting writes after recovery
        assert log.append_records(records(1), 3)[0] == 4
        log.close()
    assert any("truncated" in r.message for r in caplog.records)


def test_corrupt_tail_crc_truncated(tmp_path):
    log = Log.open(tmp_path / "c")
    log.append_records(records(2), 1)
    log.append_records(records(2), 2)
    log.flush()
    path = log.active.path
    log.close()
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    again = Log.open(tmp_path / "c")
    assert again.log_end_offset == 2


def test_roll_by_size_and_time(tmp_path):
    clock = Clock()
    log = Log.open(tmp_path / "r", LogConfig(segment_bytes=300, segment_ms=1000), now_ms=clock)
    for _ in range(10):
        log.append_records(records(2), clock.t)
    assert len(log.segments) > 3
    n = len(log.segments)
    clock.t += 1000
    log.append_records([(b"a", b"b")], clock.t)
    assert len(log.segments) == n + 1
    names = sorted(p.name for p in (tmp_path / "r").glob("*.log"))
    assert names[0] == "00000000000000000000.log"
    assert all(len(n.split(".")[0]) == 20 for n in names)
    # index lookup across segments
    for offset in range(0, log.log_end_offset):
        got = _all_records(log.read(offset, 1))
        assert got[0].offset <= offset <= got[-1].offset


def test_retention_and_delete_records(tmp_path):
    clock = Clock(10_000)
    cfg = LogConfig(segment_bytes=200, retention_ms=5_000)
    log = Log.open(tmp_path / "ret", cfg, now_ms=clock)
    for i in range(10):
        log.append_records(records(2), 10_000 + i)
    assert log.apply_retention(12_000) == 0
    deleted = log.apply_retention(20_000)
    assert deleted == len(log.segments) + deleted - 1 and log.log_start_offset == log.active.base_offset
    log2 = Log.open(tmp_path / "dr", LogConfig(segment_bytes=200), now_ms=clock)
    for _ in range(10):
        log2.append_records(records(2), 1)
    assert log2.delete_records_before(7) == 7
    with pytest.raises(OffsetOutOfRange):
        log2.read(6, 100)
    log2.close()
    again = Log.open(tmp_path / "dr", LogConfig(segment_bytes=200))
    assert again.log_start_offset == 7
    with pytest.raises(OffsetOutOfRange):
        again.delete_records_before(10_000)


def test_retention_by_bytes(tmp_path):
    log = Log.open(tmp_path / "rb", LogConfig(segment_bytes=200, retention_bytes=400, retention_ms=-1))
    for _ in range(20):
        log.append_records(records(2), 1)
    log.apply_retention(2)
    assert log.size_bytes - log.active.size < 400 + 200


def test_compaction_keeps_newest_per_key(tmp_path):
    clock = Clock(1_000_000)
    log = Log.open(tmp_path / "cmp", LogConfig(segment_bytes=250, delete_retention_ms=100), now_ms=clock)
    for i in range(30):
        log.append_records([(f"k{i % 3}".encode(), str(i).encode())], clock.t)
    log.append_records([(b"gone", b"1")], clock.t)
    log.append_records([(b"gone", None)], clock.t)
    log.append_records([(b"k0", b"final")], clock.t)
    before_end = log.log_end_offset
    clock.t += 1000
    stats = log.compact(clock.t)
    assert stats.records_after < stats.records_before
    latest = {}
    for _h, batch in log.batches():
        for r in iter_records(batch):
            latest.setdefault(r.key, []).append((r.offset, r.value))
    assert latest[b"k0"][-1][1] == b"final"
    assert all(len(v) == 1 for k, v in latest.items() if k != b"gone")
    assert log.log_end_offset == before_end
    # idempotent and survives reopen
    log.compact(clock.t)
    log.close()
    again = Log.open(tmp_path / "cmp", LogConfig(segment_bytes=250))
    assert again.log_end_offset == before_end
    values = {r.key: r.value for _h, b in again.batches() for r in iter_records(b)}
    assert values[b"k1"] == b"28" and values[b"k2"] == b"29"


@pytest.mark.parametrize("codec", [2, 3, 4])
def test_compaction_reads_snappy_lz4_and_zstd_batches(tmp_path, codec):
    """Compressed batches' records take part in compaction like any (before groupd/storage/codecs.py an
    undecodable batch's records were all dropped by it)."""
    from groupd.storage.message_sets import compressed_batch

    clock = Clock(1_000_000)
    log = Log.open(tmp_path / "cmp", LogConfig(segment_bytes=250, delete_retention_ms=100), now_ms=clock)
    log.append(bytearray(compressed_batch(build_batch([(b"a", b"1"), (b"b", b"1")], timestamp_ms=clock.t), codec)))
    log.append(bytearray(compressed_batch(build_batch([(b"a", b"2")], timestamp_ms=clock.t), codec)))
    for i in range(6):  # the compressed batches' segment closes
        log.append_records([(b"c", str(i).encode())], clock.t)
    clock.t += 1000
    assert log.compact(clock.t).segments >= 1
    kept = {(r.key, r.value, r.offset) for _h, batch in log.batches() for r in iter_records(batch)}
    assert {(b"b", b"1", 1), (b"a", b"2", 2), (b"c", b"5", 8)} <= kept and (b"a", b"1", 0) not in kept


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.binary(max_size=8) | st.none(), st.binary(max_size=16) | st.none()),
            min_size=1,
            max_size=5,
        ),
        min_size=1,
        max_size=10,
    )
)
def test_replay_equals_appended(tmp_path_factory, batches):
    d = tmp_path_factory.mktemp("prop")
    log = Log.open(d / "p")
    for b in batches:
        log.append_records(b, 7)
    log.flush()
    log.close()
    replayed = [(r.key, r.value) for _h, b in Log.open(d / "p").batches() for r in iter_records(b)]
    assert replayed == [(bytes(k) if k is not None else None, v) for b in batches for k, v in b]
    offsets = [r.offset for _h, b in Log.open(d / "p").batches() for r in iter_records(b)]
    assert offsets == list(range(sum(len(b) for b in batches)))


async def test_group_commit_shares_fsyncs(tmp_path):
    log = Log.open(tmp_path / "gc")
    calls = 0
    real = log.flush

    def counting_flush():
        nonlocal calls
        calls += 1
        real()

    log.flush = counting_flush
    committer = GroupCommitter()

    async def writer(i):
        log.append_records([(b"k", str(i).encode())], 1)
        await committer.durable(log)

    await asyncio.gather(*(writer(i) for i in range(100)))
    assert calls < 20, calls
    assert committer.waiters_total == 100


async def test_failed_fsync_fails_every_waiter(tmp_path, monkeypatch):
    log = Log.open(tmp_path / "ff")
    log.append_records([(b"k", b"v")], 1)

    def broken(fd):
        raise OSError(5, "I/O error")

    monkeypatch.setattr(os, "fsync", broken)
    committer = GroupCommitter()
    results = await asyncio.gather(*(committer.durable(log) for _ in range(5)), return_exceptions=True)
    assert all(isinstance(r, StorageError) for r in results)
    monkeypatch.undo()
    # nothing was reported durable, and no later fsync may claim otherwise: after an fsync error the
    # kernel may have dropped the dirty pages, so the log stays offline (Kafka: log dir offline)
    assert log.failed and log.unflushed_messages == 1
    with pytest.raises(StorageError):
        await committer.durable(log)
    with pytest.raises(StorageError):
        log.append_records([(b"k", b"w")], 2)
    log.close()
    log = Log.open(tmp_path / "ff")  # reopening recovers from what is on disk
    assert log.log_end_offset == 1
    log.close()


def test_failed_write_leaves_no_partial_batch(tmp_path, monkeypatch):
    log = Log.open(tmp_path / "fw")
    log.append_records([(b"a", b"1")], 1)

    def broken(fd, data, offset):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", broken)
    with pytest.raises(StorageError):
        log.append_records([(b"b", b"2")], 1)
    monkeypatch.undo()
    assert log.log_end_offset == 1
    assert log.append_records([(b"c", b"3")], 1) == (1, 1)


def test_timestamps_lookup(tmp_path):
    log = Log.open(tmp_path / "ts")
    for i in range(5):
        log.append_records([(b"k", b"v")], 100 * (i + 1))
    assert log.offset_for_timestamp(250) == (2, 300)
    assert log.offset_for_timestamp(100) == (0, 100)
    assert log.offset_for_timestamp(9999) is None
    assert log.max_timestamp() == (500, 4)


def test_crc_ok_detects_flip():
    batch = bytearray(build_batch(records(2), timestamp_ms=1))
    assert crc_ok(batch, 0, parse_header(batch, 0))
    batch[70] ^= 1
    assert not crc_ok(batch, 0, parse_header(batch, 0))


def test_flush_many_makes_several_logs_durable_at_once(tmp_path, monkeypatch):
    import groupd.storage.log as log_module

    logs = [Log.open(tmp_path / f"p-{i}") for i in range(3)]
    for lg in logs:
        lg.append_records([(b"k", b"v")], 1)
    calls = []
    real = log_module._syncfs
    if real is not None:
        monkeypatch.setattr(log_module, "_syncfs", lambda fd: calls.append(fd) or real(fd))
    log_module.flush_many(logs)
    assert all(not lg.dirty for lg in logs)
    if real is not None:
        assert len(calls) == 1, "one syncfs for the whole round"


def test_flush_many_failure_takes_every_log_offline(tmp_path, monkeypatch):
    import ctypes

    import groupd.storage.log as log_module

    logs = [Log.open(tmp_path / f"q-{i}") for i in range(2)]
    for lg in logs:
        lg.append_records([(b"k", b"v")], 1)

    def failing(fd):
        ctypes.set_errno(5)
        return -1

    monkeypatch.setattr(log_module, "_syncfs", failing)
    with pytest.raises(StorageError):
        log_module.flush_many(logs)
    for lg in logs:
        with pytest.raises(StorageError):
            lg.append_records([(b"k", b"v")], 1)


async def test_shared_committer_one_round_for_many_logs(tmp_path):
    logs = [Log.open(tmp_path / f"s-{i}") for i in range(10)]
    committer = GroupCommitter(shared=True)

    async def writer(i):
        lg = logs[i % 10]
        lg.append_records([(b"k", str(i).encode())], 1)
        await committer.durable(lg)

    await asyncio.gather(*(writer(i) for i in range(100)))
    assert committer.fsyncs <= 3, committer.fsyncs
    assert all(not lg.dirty for lg in logs)


def test_compaction_leaves_young_segments_alone(tmp_path):
    clock = Clock(1_000_000)
    log = Log.open(tmp_path / "young", LogConfig(segment_bytes=250), now_ms=clock)
    for i in range(30):
        log.append_records([(b"same-key", str(i).encode())], clock.t + i * 1000)
    closed = len(log.segments) - 1
    before = sum(h.record_count for h, _ in log.batches())
    stats = log.compact(clock.t + 30_000, min_age_ms=3_600_000)
    assert stats.segments == 0 and sum(h.record_count for h, _ in log.batches()) == before
    stats = log.compact(clock.t + 30_000 + 3_600_000, min_age_ms=3_600_000)
    assert stats.segments == closed and sum(h.record_count for h, _ in log.batches()) < before


def test_compaction_with_transactions_as_kafkas_cleaner(tmp_path):
    """Aborted transactions' records go (and never shadow a committed value), committed ones keep their
    producer id, epoch and transactional bit, markers stay, and nothing at or past the first offset of a
    transaction still open is cleaned."""
    from groupd.storage.batch import build_batch, build_control_batch

    clock = Clock(1_000_000)
    log = Log.open(tmp_path / "tx", LogConfig(segment_bytes=120), now_ms=clock)

    def txn(pid, key, value):
        log.append(
            build_batch(
                [(key, value)],
                timestamp_ms=clock.t,
                producer_id=pid,
                producer_epoch=3,
                base_sequence=0,
                attributes=0x10,
            )
        )

    log.append_records([(b"k", b"plain")], clock.t)  # 0
    txn(1, b"k", b"aborted")  # 1
    log.append(build_control_batch(1, 3, False, timestamp_ms=clock.t))  # 2
    txn(2, b"k", b"committed")  # 3
    log.append(build_control_batch(2, 3, True, timestamp_ms=clock.t))  # 4
    log.append_records([(b"other", b"x")], clock.t)  # 5
    txn(3, b"k", b"open")  # 6: open, so this and later segments stay as they are
    log.append_records([(b"late", b"y")], clock.t)  # 7
    log.append_records([(b"late", b"z")], clock.t)  # 8
    assert len(log.segments) >= 4
    clock.t += 1000
    log.compact(clock.t)
    kept = [
        (
            h.base_offset,
            h.is_control,
            h.is_transactional,
            h.producer_id,
            h.producer_epoch,
            [r.value for r in iter_records(b)],
        )
        for h, b in log.batches()
    ]
    offsets = [k[0] for k in kept]
    assert 0 not in offsets and 1 not in offsets  # shadowed by the committed value; aborted
    assert (3, False, True, 2, 3, [b"committed"]) in kept
    assert [k[0] for k in kept if k[1]] == [2, 4]  # both markers kept
    assert {6, 7, 8} <= set(offsets)  # past the open transaction: untouched, "late" twice
