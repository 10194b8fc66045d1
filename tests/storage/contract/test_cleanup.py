"""Contract: retention and compaction by the engine (storage/engine.py PartitionLog.apply_retention and
compact), for every engine in conftest.py. The local engine works in whole segments and never touches the
active one; the assertions hold for any engine that works in smaller units too."""

from __future__ import annotations

from groupd.storage.batch import build_batch, iter_records
from groupd.storage.engine import LogConfig, PartitionLog, StorageEngine

from .conftest import EngineFactory

DAY_MS = 86_400_000


def records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record of the log (reads may stop at a segment's end: batches() does not)."""
    out = []
    for _header, batch in log.batches():
        for r in iter_records(batch):
            out.append((r.offset, None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value)))
    return out


def test_time_retention_drops_old_batches_and_keeps_the_newest(engine: StorageEngine) -> None:
    log = engine.open_partition("t", 0, LogConfig(segment_bytes=200, retention_ms=DAY_MS))
    now = 10 * DAY_MS
    for i in range(12):
        log.append(build_batch([(b"k%d" % i, b"v" * 40)], timestamp_ms=now - 3 * DAY_MS if i < 8 else now))
    log.flush()
    assert log.apply_retention(now) > 0
    assert 0 < log.log_start_offset <= 8  # every old batch may go, no new one
    assert [o for o, _, _ in records(log)][-4:] == [8, 9, 10, 11]
    log.close()


def test_size_retention_keeps_about_retention_bytes(engines: EngineFactory) -> None:
    engine = engines()
    log = engine.open_partition("t", 0, LogConfig(segment_bytes=200, retention_bytes=400, retention_ms=-1))
    for i in range(20):
        log.append(build_batch([(b"k%d" % i, b"v" * 40)], timestamp_ms=1_000))
    log.flush()
    before = log.size_bytes
    assert log.apply_retention(2_000) > 0
    assert log.size_bytes < before and log.log_start_offset > 0
    assert log.log_end_offset == 20 and records(log)[-1][0] == 19
    start = log.log_start_offset
    log.close()
    again = engines().open_partition("t", 0, LogConfig(segment_bytes=200, retention_bytes=400, retention_ms=-1))
    assert again.log_start_offset == start  # durable
    again.close()


def test_compact_policy_is_not_deleted_by_retention(engine: StorageEngine) -> None:
    log = engine.open_partition("t", 0, LogConfig(segment_bytes=200, retention_ms=0, cleanup_policy="compact"))
    for i in range(6):
        log.append(build_batch([(b"k", b"v%d" % i)], timestamp_ms=1_000))
    log.flush()
    assert log.apply_retention(10 * DAY_MS) == 0 and log.log_start_offset == 0
    log.close()


def test_compaction_keeps_the_last_value_of_every_key_at_its_offset(engines: EngineFactory) -> None:
    config = LogConfig(segment_bytes=300, cleanup_policy="compact")
    engine = engines()
    log = engine.open_partition("t", 0, config)
    written = []
    for i in range(30):
        key, value = b"k%d" % (i % 4), b"v%d" % i
        log.append(build_batch([(key, value)], timestamp_ms=1_000 + i))
        written.append((i, key, value))
    log.flush()
    stats = log.compact(now_ms=2_000)
    assert stats.records_after < stats.records_before
    after = records(log)
    assert len(after) < 30
    assert set(after) <= set(written)  # every record kept is as written, at its offset
    newest = {key: (o, key, value) for o, key, value in written}
    assert set(newest.values()) <= set(after)  # the last of every key stays
    assert log.log_end_offset == 30
    log.compact(now_ms=2_000)
    assert records(log) == after  # a second pass changes nothing
    log.close()
    again = engines().open_partition("t", 0, config)
    assert records(again) == after
    again.close()
