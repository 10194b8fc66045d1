"""The load generator's scenarios run against groupd and do what they claim, on a tiny scale.

Speed is never asserted here (bench/ measures it); what is checked is that each scenario completes
without errors, so `make bench` cannot rot unnoticed."""

import os

import pytest

from bench import scenarios
from tests.wire.test_groups import start_broker


async def test_rebalance_forms_every_group(tmp_path):
    b = await start_broker(tmp_path)
    try:
        stats = await scenarios.rebalance("127.0.0.1", b.port, groups=12, members=3, concurrency=4, max_seconds=20)
        assert (stats.count, stats.errors) == (12, 0)
        summary = stats.summary()
        assert summary["p999_ms"] >= summary["p50_ms"] > 0
        # one untimed wave (= concurrency) is formed first, outside the figures, and reported apart
        assert (summary["warmup_groups"], summary["warmup_errors"]) == (4, 0)
        assert summary["warmup_max_ms"] > 0
    finally:
        await b.stop()


async def test_commits_and_churn_run_without_errors(tmp_path):
    b = await start_broker(tmp_path)
    try:
        commits = await scenarios.commits("127.0.0.1", b.port, committers=4, max_seconds=0.5)
        assert commits.count > 4 and commits.errors == 0
        churn = await scenarios.churn("127.0.0.1", b.port, groups=3, max_seconds=0.5)
        assert churn.count >= 3 and churn.errors == 0
    finally:
        await b.stop()


async def test_steady_state_heartbeats_commits_and_reports_cpu(tmp_path):
    b = await start_broker(tmp_path)
    try:
        out = await scenarios.steady(
            "127.0.0.1", b.port, groups=4, max_seconds=1.0, hb_interval=0.2, commit_interval=0.3, pid=os.getpid()
        )
        assert out["members"] == 12
        assert out["heartbeats"]["count"] >= 12 * 3 and out["heartbeats"]["errors"] == 0
        # commits carry the member's generation: a wrong one would come back ILLEGAL_GENERATION
        assert out["commits"]["count"] >= 12 * 2 and out["commits"]["errors"] == 0
        assert out["broker_cpu_pct_per_1000_members"] > 0
    finally:
        await b.stop()


def test_replay_loads_every_record_in_each_of_its_starts():
    from bench.replay import replay_bench

    r = replay_bench(records=6_000, groups=50, per_batch=10)
    for start in (r, r["alone"], r["unclean"]):
        assert (start["count"], start["groups"], start["offsets"]) == (6_000, 50, 300)  # (i % 50, i % 12) pairs
    assert (r["all_survivors"]["count"], r["all_survivors"]["offsets"]) == (1_200, 1_200)


async def test_in_process_runs_count_every_answer(tmp_path):
    """bench/inprocess.py: the load generator's scenarios against a broker joined by in-memory transports."""
    from bench import client, inprocess

    opened = client.Conn.open
    commits = await inprocess.run("commits", True, tmp_path / "a", committers=4, seconds=0.3)
    assert commits["count"] > 4 and commits["errors"] == 0 and commits["cpu_us_per_op"] > 0
    groups = await inprocess.run("rebalance", False, tmp_path / "b", groups=6, seconds=2)
    assert (groups["count"], groups["errors"]) == (6, 0)
    assert client.Conn.open == opened  # the socket path is back for everyone else


async def test_in_process_commits_stop_at_a_count(tmp_path):
    """--commits N: a fixed amount of work (what an instruction count under valgrind compares); each
    committer checks the count before its next send, so at most one per committer goes past it."""
    from bench import inprocess

    out = await inprocess.run("commits", False, tmp_path, committers=4, commits=40, seconds=30)
    assert 40 <= out["count"] < 44 and out["errors"] == 0


async def test_in_process_layers_come_out_and_go_back(tmp_path):
    """--without store / coordinator: a commit's cost taken apart; the broker is whole again after."""
    from bench import inprocess
    from groupd.broker.routes import HANDLERS
    from groupd.storage.log import Log

    handler, append = HANDLERS[inprocess.OFFSET_COMMIT], Log.append_records
    for layer in ("store", "coordinator"):
        out = await inprocess.run("commits", True, tmp_path / layer, without=layer, committers=4, seconds=0.3)
        assert out["without"] == layer and out["count"] > 4 and out["errors"] == 0
        assert (HANDLERS[inprocess.OFFSET_COMMIT], Log.append_records) == (handler, append)
    whole = await inprocess.run("commits", True, tmp_path / "whole", committers=4, seconds=0.3)
    assert "without" not in whole and whole["errors"] == 0


def test_the_table_shows_the_machine_at_both_ends_of_the_run():
    """A shared VM drifts within a run: the table gives its figures from the start and the end."""
    from bench.run import markdown

    start = {"python_loop_5m_s": 0.2, "loopback_rtt_us": 130.0, "loopback_rtt_cross_cpu_us": 127.0, "syncfs_ms": 0.2}
    end = {**start, "loopback_rtt_us": 351.0, "syncfs_ms": 0.63}
    table = markdown(
        {"date": "2026-11-23", "machine": "2 cores", "calibration": start, "calibration_end": end, "targets": []}
    )
    assert "Machine: a 5M-iteration Python loop 0.2 s; loopback round trip 130.0 us" in table
    assert "At the run's end: a 5M-iteration Python loop 0.2 s; loopback round trip 351.0 us" in table
    assert "syncfs 0.63 ms" in table
    assert "At the run's end" not in markdown({"date": "d", "machine": "m", "calibration": start, "targets": []})


@pytest.mark.parametrize("compression", ["none", "lz4"])
async def test_down_conversion_reads_every_record_both_ways(tmp_path, compression):
    """bench's down_conversion scenario: a Fetch v12 and a Fetch v3 reader each reach the log end."""
    b = await start_broker(tmp_path)
    try:
        out = await scenarios.down_conversion(
            "127.0.0.1", b.port, records=400, record_bytes=100, max_seconds=20, compression=compression
        )
    finally:
        await b.stop()
    assert out["compression"] == compression
    assert out["fetch_v12_records"] == out["fetch_v3_records"] == 400
    assert out["fetch_v3_mb_s"] > 0 and out["fetch_v12_mb_s"] > 0 and out["v3_over_v12"] > 0


async def test_consumer_protocol_side_by_side_runs_without_errors(tmp_path):
    """bench/consumer_scenarios.py: consumer-protocol members reach Stable and heartbeat, the same groups
    with the classic protocol, groups of 3 timed to Stable; both sides counted, ratios reported."""
    from bench import consumer_scenarios

    b = await start_broker(
        tmp_path,
        **{
            "group.consumer.heartbeat.interval.ms": "100",
            "group.consumer.min.heartbeat.interval.ms": "100",
            "group.consumer.assignment.interval.ms": "0",
        },
    )
    try:
        out = await consumer_scenarios.side_by_side(
            "127.0.0.1", b.port, members=6, group_size=3, seconds=0.5, groups_of_3=2, pid=os.getpid()
        )
        assert (out["members"], out["consumer_groups_stable"], out["classic_groups_stable"]) == (6, 2, 2)
        assert out["interval_s"] == 0.1
        for side in ("consumer", "classic"):
            assert out[side]["count"] >= 6 and out[side]["errors"] == 0, out
        assert out["p99_consumer_over_classic"] > 0 and out["cpu_consumer_over_classic"] > 0
        assert (out["to_stable"]["consumer"]["count"], out["to_stable"]["consumer"]["errors"]) == (2, 0)
        assert (out["to_stable"]["classic"]["count"], out["to_stable"]["classic"]["errors"]) == (2, 0)
    finally:
        await b.stop()
