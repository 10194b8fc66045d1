"""Compaction of a log holding transactions, as Kafka's cleaner does it (core/src/main/scala/kafka/log/
LogCleaner.scala, CleanedTransactionMetadata; LogCleanerManager: nothing at or beyond the first unstable
offset is cleaned): aborted records go, markers stay while their transaction's records remain and then
age out after delete.retention.ms, records of open transactions stay. A load of the compacted offsets
store builds the state the uncompacted one did."""

from __future__ import annotations

import random

import pytest

from groupd.coordinator import shard
from groupd.coordinator.shard import replay_walked
from groupd.storage.batch import (
    TRANSACTIONAL,
    TxnWalk,
    build_batch,
    build_control_batch,
    collect_latest,
    iter_records,
)
from groupd.storage.log import Log, LogConfig
from tests.unit.coordinator.test_txn_replay import committed, finish_all, log_bytes, pending, random_history

T0 = 1_000_000
RETENTION = 1_000


def open_log(path, clock):
    return Log.open(
        path,
        LogConfig(segment_bytes=300, delete_retention_ms=RETENTION, cleanup_policy="compact"),
        now_ms=lambda: clock[0],
    )


def tx(records, pid=7, epoch=0):
    return build_batch(records, timestamp_ms=T0, producer_id=pid, producer_epoch=epoch, attributes=TRANSACTIONAL)


def marker(pid=7, commit=True, epoch=0):
    return build_control_batch(pid, epoch, commit, timestamp_ms=T0)


def contents(log):
    """(offset, kind, key, value) of every record left; markers as ("marker", producer)."""
    out = []
    for h, batch in log.batches():
        for r in iter_records(batch):
            kind = "marker" if h.is_control else ("tx" if h.is_transactional else "plain")
            out.append(
                (
                    r.offset,
                    kind,
                    h.producer_id if h.is_control else bytes(r.key),
                    None if h.is_control or r.value is None else bytes(r.value),
                )
            )
    return out


def fill(log, n=12):
    for i in range(n):
        log.append_records([(b"filler%d" % (i % 2), b"x" * 40)], T0)


def test_aborted_records_go_and_their_marker_ages_out(tmp_path):
    clock = [T0]
    log = open_log(tmp_path / "p", clock)
    log.append_records([(b"k", b"plain")], T0)
    log.append(tx([(b"k", b"aborted")]))
    log.append(marker(commit=False))
    fill(log)
    clock[0] = T0 + 10
    log.compact(clock[0])
    left = contents(log)
    assert (1, "tx", b"k", b"aborted") not in left
    assert (0, "plain", b"k", b"plain") in left  # the aborted write outranked nothing
    assert (2, "marker", 7, None) in left  # within delete.retention.ms
    clock[0] = T0 + RETENTION + 10
    log.compact(clock[0])
    assert (2, "marker", 7, None) not in contents(log)


def test_a_commit_marker_stays_while_its_transaction_keeps_records(tmp_path):
    clock = [T0]
    log = open_log(tmp_path / "p", clock)
    log.append_records([(b"k", b"plain")], T0)
    log.append(tx([(b"k", b"committed"), (b"j", b"also")]))
    log.append(marker(commit=True))
    fill(log)
    clock[0] = T0 + RETENTION + 10
    log.compact(clock[0])
    left = contents(log)
    assert (0, "plain", b"k", b"plain") not in left  # outranked by the committed write
    assert (1, "tx", b"k", b"committed") in left and (2, "tx", b"j", b"also") in left
    assert (3, "marker", 7, None) in left
    # once later plain writes outrank every record of the transaction, the marker ages out too
    log.append_records([(b"k", b"p2"), (b"j", b"p3")], T0)
    fill(log)
    log.compact(clock[0])
    left = contents(log)
    assert not [r for r in left if r[1] in ("tx", "marker")]


def test_nothing_from_the_first_unstable_offset_on_is_cleaned(tmp_path):
    clock = [T0]
    log = open_log(tmp_path / "p", clock)
    log.append_records([(b"k", b"plain")], T0)
    fill(log, 6)
    log.append(tx([(b"k", b"open")]))
    fill(log, 12)
    before = contents(log)
    clock[0] = T0 + RETENTION + 10
    log.compact(clock[0])
    after = contents(log)
    assert (0, "plain", b"k", b"plain") in after  # an open transaction outranks nothing
    first_tx = next(r[0] for r in before if r[1] == "tx")
    assert [r for r in after if r[0] >= first_tx] == [r for r in before if r[0] >= first_tx]
    log.append(marker(commit=False))
    fill(log)
    log.compact(clock[0])
    after = contents(log)
    assert (0, "plain", b"k", b"plain") in after and not [r for r in after if r[1] == "tx"]


def load(log) -> shard.ShardState:
    state = shard.ShardState(0)
    latest: dict = {}
    txn = TxnWalk()
    for chunk in log.chunks():
        collect_latest(chunk, latest, txn)
    replay_walked(state, latest, txn, 0)
    return state


@pytest.mark.parametrize("seed", range(60))
def test_a_compacted_store_loads_as_the_uncompacted_one(tmp_path, seed):
    rng = random.Random(seed)
    c = random_history(rng, rng.randint(5, 60), tombstones=seed % 2 == 0)
    clock = [T0]
    log = Log.open(
        tmp_path / "p",
        LogConfig(segment_bytes=rng.choice([200, 400, 800]), delete_retention_ms=RETENTION, cleanup_policy="compact"),
        now_ms=lambda: clock[0],
    )
    for batch in log_bytes(c.results):
        log.append(batch)
    log.append_records([(b"\x00\x02\x00\x01z", None)], T0)  # something in the active segment
    want = load(log)
    for step in (10, RETENTION + 10, 2 * RETENTION):
        clock[0] = T0 + step
        log.compact(clock[0])
        got = load(log)
        assert committed(got) == committed(want)
        assert finish_all(got, True) == finish_all(want, True)
        assert finish_all(got, False) == finish_all(want, False)
        assert pending(got) == pending(want)
    log.close()
