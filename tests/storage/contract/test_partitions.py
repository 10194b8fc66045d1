"""Contract: a partition's log (storage/engine.py PartitionLog), for every engine in conftest.py."""

from __future__ import annotations

import pytest

from groupd.storage.batch import build_batch, iter_batches, iter_records, parse_header
from groupd.storage.engine import LogConfig, PartitionLog, StorageEngine
from groupd.storage.errors import OffsetOutOfRange, RecordTooLarge, StorageError

from .conftest import EngineFactory


def batch(first: int, count: int = 3, ts: int = 1_000) -> bytes:
    return build_batch([(b"k%d" % (first + i), b"v%d" % (first + i)) for i in range(count)], timestamp_ms=ts)


def offsets_of(data: bytes) -> list[int]:
    out: list[int] = []
    for pos, header in iter_batches(data):
        out += [r.offset for r in iter_records(data[pos : pos + header.size])]
    return out


def fill(log: PartitionLog, batches: int, per: int = 3) -> list[bytes]:
    stored = [batch(i * per, per, ts=1_000 + i) for i in range(batches)]
    for b in stored:
        log.append(b)
    return stored


def test_append_read_round_trip_is_byte_for_byte(engine: StorageEngine) -> None:
    log = engine.open_partition("t", 0)
    sent = batch(0)
    assert log.append(sent) == (0, 2)
    assert log.append(batch(3)) == (3, 5)
    data = log.read(0, 1 << 20)
    first = parse_header(data, 0)
    got = data[: first.size]
    # the base offset (the first 8 bytes) is the log's; 0 here, so every byte is the producer's
    assert got == sent
    assert offsets_of(data) == list(range(6))


def test_leader_epoch_is_stamped_and_the_rest_kept(engine: StorageEngine) -> None:
    log = engine.open_partition("t", 0)
    fill(log, 1)
    sent = batch(3)
    log.append(sent, leader_epoch=7)
    data = log.read(3, 1 << 20)
    header = parse_header(data, 0)
    assert header.base_offset == 3 and header.partition_leader_epoch == 7
    assert data[16 : header.size] == sent[16:]  # after baseOffset, length and partitionLeaderEpoch


def test_offsets_are_monotonic_and_end_offsets_follow(engine: StorageEngine) -> None:
    log = engine.open_partition("t", 0)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    last = -1
    for i in range(20):
        base, end = log.append_records([(b"k", b"v")] * (i % 4 + 1), 1_000)
        assert base == last + 1 and end >= base
        last = end
    assert log.log_end_offset == log.high_watermark == last + 1
    assert [h.base_offset for h in log.headers()] == [h.base_offset for h, _ in log.batches()]


def test_read_from_the_middle_returns_the_batch_holding_it(engine: StorageEngine) -> None:
    log = engine.open_partition("t", 0)
    fill(log, 10)
    data = log.read(14, 1 << 20)
    assert parse_header(data, 0).base_offset == 12  # whole batches: the one holding 14 first
    assert offsets_of(data)[-1] == 29


def test_read_limits_max_bytes_and_upto(engine: StorageEngine) -> None:
    log = engine.open_partition("t", 0)
    stored = fill(log, 10)
    one = len(stored[0])
    assert offsets_of(log.read(0, one * 2)) == list(range(6))
    assert offsets_of(log.read(0, 1)) == [0, 1, 2]  # at least one batch, so a fetch progresses
    assert offsets_of(log.read(0, 1 << 20, upto=9)) == list(range(9))  # batches starting below 9
    assert log.read(9, 1 << 20, upto=9) == b""
    assert log.read(30, 1 << 20) == b""  # at the log end


def test_read_outside_the_log_is_offset_out_of_range(engine: StorageEngine) -> None:
    log = engine.open_partition("t", 0)
    fill(log, 2)
    with pytest.raises(OffsetOutOfRange):
        log.read(7, 100)
    log.delete_records_before(3)
    with pytest.raises(OffsetOutOfRange):
        log.read(2, 100)
    assert issubclass(OffsetOutOfRange, StorageError)


def test_batches_from_an_offset(engine: StorageEngine) -> None:
    log = engine.open_partition("t", 0)
    fill(log, 5)
    assert [h.base_offset for h, _ in log.batches(7)] == [6, 9, 12]
    assert sum(len(c) for c in log.chunks()) == sum(h.size for h, _ in log.batches())


def test_timestamps(engine: StorageEngine) -> None:
    log = engine.open_partition("t", 0)
    fill(log, 5)  # batch i at 1000 + i
    assert log.offset_for_timestamp(1_003) == (9, 1_003)
    assert log.offset_for_timestamp(5_000) is None
    assert log.max_timestamp() == (1_004, 12)


def test_too_large_a_batch_is_refused(engine: StorageEngine) -> None:
    log = engine.open_partition("t", 0, LogConfig(max_message_bytes=200))
    with pytest.raises(RecordTooLarge):
        log.append(build_batch([(b"k", b"x" * 400)], timestamp_ms=1))
    assert log.log_end_offset == 0


def test_delete_records_raises_the_start_only(engine: StorageEngine) -> None:
    log = engine.open_partition("t", 0)
    fill(log, 4)
    assert log.delete_records_before(5) == 5
    assert log.log_start_offset == 5
    assert log.delete_records_before(2) == 5  # never lowered
    assert offsets_of(log.read(5, 1 << 20))[0] == 3  # the batch holding 5, whole
    assert min(h.last_offset for h, _ in log.batches()) >= 5
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(13)
    assert log.delete_records_before(12) == 12 == log.log_end_offset
    assert log.read(12, 100) == b""


def test_truncate_cuts_at_a_batch_boundary(engine: StorageEngine) -> None:
    log = engine.open_partition("t", 0)
    fill(log, 5)
    assert log.truncate_to(7) == 6  # the batch holding 7 goes whole
    assert log.log_end_offset == 6
    assert offsets_of(log.read(0, 1 << 20)) == list(range(6))
    assert log.truncate_to(20) == 6  # past the end: nothing to do
    assert log.append(batch(6)) == (6, 8)  # the offsets are taken again
    log.delete_records_before(3)
    with pytest.raises(OffsetOutOfRange):
        log.truncate_to(2)
    assert log.truncate_to(3) == 3 and log.read(3, 100) == b""


def test_truncate_across_segments(engine: StorageEngine) -> None:
    log = engine.open_partition("t", 0, LogConfig(segment_bytes=300))
    fill(log, 12)
    assert log.truncate_to(4) == 3
    assert offsets_of(log.read(0, 1 << 20)) == [0, 1, 2]
    assert log.append(batch(3)) == (3, 5)


def test_snapshots_and_flags(engine: StorageEngine) -> None:
    log = engine.open_partition("t", 0)
    fill(log, 1)
    log.save_snapshot("state", {"a": [1, 2]})
    assert log.load_snapshot("state") == {"a": [1, 2]}
    fill(log, 1)
    assert log.load_snapshot("state") is None  # describes an older log end
    assert not log.is_marked("transactional")
    log.mark("transactional")
    log.mark("transactional")
    assert log.is_marked("transactional")


def test_closed_log_refuses(engine: StorageEngine) -> None:
    log = engine.open_partition("t", 0)
    log.close()
    with pytest.raises(StorageError):
        log.append(batch(0))


def test_reopen_keeps_what_was_flushed(engines: EngineFactory) -> None:
    engine = engines()
    log = engine.open_partition("t", 0, LogConfig(segment_bytes=400))
    stored = fill(log, 8)
    log.delete_records_before(4)
    log.truncate_to(21)  # the last batch, 21-23, goes
    log.append(stored[-1])
    log.mark("flag")
    log.flush()
    before = log.read(4, 1 << 20)
    log.close()
    again = engines().open_partition("t", 0, LogConfig(segment_bytes=400))
    assert (again.log_start_offset, again.log_end_offset) == (4, 24)
    assert again.read(4, 1 << 20) == before
    assert again.is_marked("flag")
    assert again.read(21, 1 << 20)[8:] == stored[-1][8:]
    again.close()


def test_reopen_after_truncate(engines: EngineFactory) -> None:
    engine = engines()
    log = engine.open_partition("t", 0)
    fill(log, 4)
    log.truncate_to(5)
    log.flush()
    log.close()
    again = engines().open_partition("t", 0)
    assert again.log_end_offset == 3
    assert again.append(batch(3)) == (3, 5)
    again.close()
