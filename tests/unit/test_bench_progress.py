"""`make bench` says what it is doing: one line per step with its number of the whole run and the time
so far (it printed nothing for about a quarter of an hour before)."""

from __future__ import annotations

import io
import subprocess

from bench import run
from bench.progress import Progress
from tests.harness import BrokerProcess


def test_progress_lines_count_steps_and_time():
    now = [100.0]
    out = io.StringIO()
    p = Progress(12, out, clock=lambda: now[0])
    p.step("groupd-fsync: rebalance: 3000 groups of 3 members formed")
    now[0] += 75
    p.step("groupd-fsync: commits: 8 committers for 4 s")
    p.skip(3, "Tansu is not available")
    p.step("start-up replay")
    assert out.getvalue().splitlines() == [
        "[bench  1/12, 0:00] groupd-fsync: rebalance: 3000 groups of 3 members formed",
        "[bench  2/12, 1:15] groupd-fsync: commits: 8 committers for 4 s",
        "[bench] skipping 3 steps: Tansu is not available",
        "[bench 3/9, 1:15] start-up replay",
    ]


def test_the_total_is_every_step_of_a_run():
    per_target = len(run.target_steps(quick=True))
    assert per_target == 15 and len(run.target_steps(quick=True, scale_groups=10)) == 16
    # calibration twice, groupd-fsync (with scale), groupd-nofsync, Tansu, the replay, the storage engines
    assert run.total_steps(quick=True) == 2 + 16 + 15 + 15 + 1 + 1


async def test_run_target_prints_a_line_as_each_step_starts(tmp_path, monkeypatch):
    """The real run_target against a real broker, its plan cut to two cheap real scenarios."""
    plan = [s for s in run.target_steps(quick=True) if s[0] in ("commits_1", "fetch_wakeup")]
    monkeypatch.setattr(run, "target_steps", lambda quick, scale_groups=0: plan)
    proc = BrokerProcess(tmp_path / "data").start()
    out = io.StringIO()
    try:
        result = await run.run_target("groupd-test", proc.proc, proc.port, True, Progress(2, out))
    finally:
        proc.kill()
    lines = out.getvalue().splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == [
        "groupd-test: commits: 1 committers for 2 s", "groupd-test: fetch wake-up latency: 100 samples"]
    assert lines[0].startswith("[bench 1/2, 0:0") and lines[1].startswith("[bench 2/2, 0:0")
    assert "error" not in result["commits_1"] and "error" not in result["fetch_wakeup"]


def test_make_bench_runs_bench_run():
    plan = subprocess.run(
        ["make", "-n", "bench"], cwd=run.ROOT, capture_output=True, text=True, timeout=30, check=True
    ).stdout
    assert "-m bench.run" in plan
