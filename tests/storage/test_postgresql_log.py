"""The PostgreSQL engine's reads below its tail cache: range scans of the batch table (the contract tests'
logs are small enough to be served from the cache alone, so here the cache is made tiny)."""

from __future__ import annotations

import pytest

from groupd.storage import engines
from groupd.storage.batch import build_batch, iter_batches, iter_records
from groupd.storage.engine import LogConfig
from groupd.storage.postgresql import log as pg_log


def offsets(data: bytes) -> list[int]:
    return [r.offset for pos, h in iter_batches(data) for r in iter_records(data[pos : pos + h.size])]


@pytest.fixture
def tiny_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg_log, "TAIL_CACHE_BYTES", 300)


@pytest.mark.usefixtures("tiny_cache")
def test_reads_below_the_cache_are_range_scans_byte_for_byte(postgresql_url: str) -> None:
    config = {"storage.engine": "postgresql", "storage.postgresql.url": postgresql_url}
    engine = engines.build(config)
    log = engine.open_partition("t", 0)
    sent = [build_batch([(b"k%d" % i, b"v%d" % i), (None, b"x")], timestamp_ms=1_000 + i) for i in range(40)]
    for b in sent:
        log.append(b)
    log.flush()
    assert isinstance(log, pg_log.PgPartitionLog) and len(log.tail) < 10  # the rest is only in the database
    whole = log.read(0, 1 << 20)
    assert offsets(whole) == list(range(80))
    stored = [whole[pos : pos + h.size] for pos, h in iter_batches(whole)]
    assert [b[8:] for b in stored] == [b[8:] for b in sent]  # byte for byte but the base offset
    assert offsets(log.read(7, 1)) == [6, 7]  # the batch holding 7, alone: at least one
    one = len(sent[0])
    assert offsets(log.read(10, one * 3)) == list(range(10, 16))  # max_bytes in whole batches
    assert log.offset_for_timestamp(1_005) == (10, 1_005)
    assert [h.base_offset for h, _ in log.batches(31)] == list(range(30, 80, 2))
    log.close()
    again = engines.build(config).open_partition("t", 0)
    assert (again.log_start_offset, again.log_end_offset, again.size_bytes) == (0, 80, sum(map(len, sent)))
    assert offsets(again.read(0, 1 << 20)) == list(range(80))
    again.close()


@pytest.mark.usefixtures("tiny_cache")
def test_headers_chunks_and_retention_page_through_the_table(
    postgresql_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Headers (only the first 61 bytes of each stored batch leave the database), the replay's runs of batch
    bytes and retention, over pages smaller than the log and a tail of a few batches: the same batches as
    ``batches()``, whole and in order."""
    monkeypatch.setattr(pg_log, "REPLAY_ROWS", 7)
    config = {"storage.engine": "postgresql", "storage.postgresql.url": postgresql_url}
    log = engines.build(config).open_partition("t", 0)
    for i in range(40):
        log.append(build_batch([(b"k%d" % i, b"v" * (i + 1))], timestamp_ms=1_000 + i, producer_id=5, base_sequence=i))
    log.flush()
    assert isinstance(log, pg_log.PgPartitionLog) and 0 < len(log.tail) < 10
    whole = [(h, bytes(view)) for h, view in log.batches()]
    assert [(h.base_offset, h.size, h.base_sequence, h.max_timestamp) for h in log.headers()] == [
        (h.base_offset, h.size, h.base_sequence, h.max_timestamp) for h, _ in whole
    ]
    assert b"".join(bytes(c) for c in log.chunks()) == b"".join(data for _h, data in whole)
    log.config = LogConfig(retention_ms=10)
    assert log.apply_retention(now_ms=1_035) == 25  # timestamps 1000..1024 are more than 10 ms old
    assert log.log_start_offset == 25 and [h.base_offset for h in log.headers()] == list(range(25, 40))
    log.close()
