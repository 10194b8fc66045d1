"""The jobs recover exactly the generations, storms, lag and statuses the scripted scenarios produced."""

from pathlib import Path

import pytest

from groupd.pipeline import jobs
from groupd.pipeline import store as reader
from tests.pipeline.conftest import STORM_GENERATIONS, T0

pytestmark = pytest.mark.timeout(900)  # Spark on a shared 2-core machine: minutes, not seconds


def test_reader_decodes_the_coordinators_records(store):
    dirs = reader.offsets_partitions(store["log_dirs"])
    rows = [r for d in dirs for r in reader.read_offsets_partition(d, "groups")]
    assert {r[0] for r in rows} == {"storm"}
    commits = [r for d in dirs for r in reader.read_offsets_partition(d, "commits")]
    assert {r[0] for r in commits} == {"steady", "lagging"} and len(commits) == 20
    assert reader.log_ends(store["log_dirs"]) == [("orders", 0, 0, 100)]


def test_data_source_reads_in_parallel(spark, store):
    from groupd.pipeline.datasource import DEFAULT_SPLITS, split

    dirs = reader.offsets_partitions(store["log_dirs"])
    groups = jobs.groups(spark, store["log_dirs"])
    assert groups.rdd.getNumPartitions() == min(len(dirs), DEFAULT_SPLITS) > 1
    spread = split(dirs, 3)
    assert len(spread) == min(3, len(dirs)) and sorted(p for g in spread for p in g) == sorted(map(str, dirs))
    # ten generations, then an eleventh when the members' sessions lapse and the group empties
    assert groups.count() == STORM_GENERATIONS + 1
    assert jobs.commits(spark, store["log_dirs"]).where("not is_tombstone").count() == 20


def test_rebalance_history(spark, store):
    history = jobs.rebalance_history(jobs.groups(spark, store["log_dirs"])).orderBy("generation").toPandas()
    n = STORM_GENERATIONS
    assert list(history["generation"]) == list(range(1, n + 2))
    assert list(history["member_count"]) == list(range(1, n + 1)) + [0]
    assert list(history["start_ms"][:n]) == [T0 + i * 5_000 for i in range(n)]
    assert list(history["duration_ms"][: n - 1]) == [5_000] * (n - 1)
    assert list(history["likely_cause"]) == ["group formed"] + ["join"] * (n - 1) + ["emptied"]
    assert all(len(j) == 1 for j in history["joined"][1:n]) and all(len(x) == 0 for x in history["left"][:n])
    assert len(history["left"][n]) == n, "everyone left when the sessions lapsed"


def test_storms(spark, store):
    history = jobs.rebalance_history(jobs.groups(spark, store["log_dirs"]))
    found = jobs.storms(history, min_rebalances=5, window_seconds=60).toPandas()
    assert list(found["group"]) == ["storm"] and int(found["max_rebalances_in_window"][0]) >= STORM_GENERATIONS
    assert jobs.storms(history, min_rebalances=12, window_seconds=60).count() == 0
    assert jobs.storms(history, min_rebalances=5, window_seconds=10).count() == 0


def test_lag_and_positions(spark, store):
    ends = jobs.log_ends(spark, store["log_dirs"])
    commits = jobs.commits(spark, store["log_dirs"])
    lag = {r["group"]: r["lag"] for r in jobs.lag(commits, ends).collect()}
    assert lag == {"steady": 0, "lagging": 60}
    steady = jobs.positions(commits).where("group = 'steady'").orderBy("commit_timestamp").toPandas()
    assert list(steady["offset"]) == [10 * (i + 1) for i in range(10)]
    over_time = jobs.lag_over_time(commits, ends).where("group = 'steady'").orderBy("commit_timestamp").toPandas()
    assert list(over_time["lag"]) == [100 - 10 * (i + 1) for i in range(10)]


def test_consumer_status_follows_burrows_rules(spark, store):
    ends = jobs.log_ends(spark, store["log_dirs"])
    commits = jobs.commits(spark, store["log_dirs"])
    status = {r["group"]: r["status"] for r in jobs.consumer_status(commits, ends, now_ms=store["now_ms"]).collect()}
    assert status == {"steady": "OK", "lagging": "STALL"}
    much_later = {
        r["group"]: r["status"]
        for r in jobs.consumer_status(commits, ends, now_ms=store["now_ms"] + 3_600_000).collect()
    }
    assert much_later == {"steady": "OK", "lagging": "STOP"}


def test_report_is_one_html_file(spark, store, tmp_path):
    """Self-contained: charts inlined as data URIs, no script, no stylesheet or image fetched from anywhere."""
    from groupd.pipeline.__main__ import run

    path = run("report", store["log_dirs"], tmp_path / "out", now_ms=store["now_ms"])
    html = Path(path).read_text()
    assert html.startswith("<!doctype html>") and "data:image/png;base64," in html
    assert "<script" not in html and "http://" not in html and "https://" not in html and "src='data:" in html
    assert "Groups at a glance" in html and "STALL" in html


def test_burrow_rules_in_burrows_order():
    t = [0, 10, 20, 30]
    assert jobs.burrow_status([1, 2, 3, 4], t, [0, 0, 0, 0], now_ms=35) == "OK"  # current lag zero
    assert jobs.burrow_status([1, 2, 3, 4], t, [3, 3, 3, 1], now_ms=100) == "STOP"  # 70 since last > 30 span
    assert jobs.burrow_status([4, 2, 3, 4], t, [3, 0, 4, 1], now_ms=35) == "OK"  # lag was zero in the window
    assert jobs.burrow_status([4, 2, 3, 4], t, [3, 5, 4, 3], now_ms=35) == "REWIND"
    assert jobs.burrow_status([4, 4, 4, 4], t, [3, 5, 6, 7], now_ms=35) == "STALL"
    assert jobs.burrow_status([1, 2, 3, 4], t, [3, 5, 5, 7], now_ms=35) == "WARN"  # never decreasing
    assert jobs.burrow_status([1, 2, 3, 4], t, [3, 5, 4, 7], now_ms=35) == "OK"


def test_reader_counts_transactional_commits_only_once_committed(tmp_path):
    """Offsets committed in a transaction are commits once the producer's COMMIT marker follows; an
    aborted transaction's, or one still open, never are (the coordinator drops or holds them)."""
    from groupd.coordinator.records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value
    from groupd.storage.batch import build_batch, build_control_batch
    from groupd.storage.log import Log

    d = tmp_path / "__consumer_offsets-0"
    log = Log.open(d)

    def commit(offset, pid=-1):
        rec = [(encode_key(OffsetCommitKey("g", "t", 0)), encode_value(OffsetCommitValue(offset, "", 1000)))]
        log.append(
            build_batch(
                rec,
                timestamp_ms=1000,
                producer_id=pid,
                producer_epoch=0 if pid >= 0 else -1,
                attributes=0x10 if pid >= 0 else 0,
            )
        )

    commit(1)
    commit(2, pid=7)
    commit(3, pid=8)
    log.append(build_control_batch(8, 0, False, timestamp_ms=1000))  # 8 aborts
    log.append(build_control_batch(7, 0, True, timestamp_ms=1000))  # 7 commits
    commit(4, pid=9)  # still open
    log.close()
    assert [r[3] for r in reader.read_offsets_partition(d, "commits")] == [1, 2]
