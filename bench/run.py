"""``make bench``: groupd (fsync on, fsync off) and Tansu side by side in one run.

Writes bench/results/latest.json and bench/results/latest.md (a table with groupd/Tansu ratios). Every
scenario is bounded in count and time; brokers listen on 127.0.0.1 only and are stopped at the end.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import consumer_scenarios, scenarios
from bench.__main__ import use_uvloop
from bench.calibrate import calibrate, describe
from bench.progress import Progress
from bench.replay import replay_bench
from bench.scenarios import cpu_seconds, rss_mib
from groupd.protocol.api_table import replace_between

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
README_BEGIN = "<!-- bench:begin (written by make bench from bench/results/latest.md) -->"
README_END = "<!-- bench:end -->"
TANSU_SCRIPT = ROOT.parent / "shared" / "tools" / "get-tansu.sh"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {port}")


def groupd_overrides(fsync: bool, data: Path, port: int) -> dict[str, str]:
    """The broker settings of every bench run (in process too: bench/inprocess.py)."""
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(data), "metrics.listener": "",
        "group.initial.rebalance.delay.ms": "0", "log.level": "WARN",
        # consumer-protocol members heartbeat at the classic steady scenario's 0.5 s (Kafka: 5 s)
        "group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
    }
    if not fsync:
        overrides["log.flush.interval.messages"] = str(2**62)
    return overrides


def start_groupd(fsync: bool, data: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    args = [sys.executable, "-m", "groupd"]
    for k, v in groupd_overrides(fsync, data, port).items():
        args += ["--override", f"{k}={v}"]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    time.sleep(0.5)  # offsets partitions load
    return proc, port


def start_tansu() -> tuple[subprocess.Popen, int] | None:
    if not TANSU_SCRIPT.exists():
        return None
    try:
        binary = (
            subprocess.run(["bash", str(TANSU_SCRIPT)], capture_output=True, text=True, timeout=300, check=True)
            .stdout.strip()
            .splitlines()[-1]
        )
    except (subprocess.SubprocessError, IndexError):
        return None
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
            "--silent",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_port(port)
    return proc, port


def target_steps(quick: bool, scale_groups: int = 0) -> list[tuple[str, str, Any, float]]:
    """The scenarios run against one broker, in order: (result key, what it measures, a function of
    (host, port, pid) making the scenario, time limit in seconds). One list, so the progress lines
    count exactly what runs."""
    groups = 300 if quick else 3000  # a 1,000-group run lasted about half a second: too short to be steady
    steps: list[tuple[str, str, Any, float]] = [
        (
            "rebalance",
            f"rebalance: {groups} groups of 3 members formed",
            lambda h, p, pid: scenarios.rebalance(h, p, groups, 3, max_seconds=60),
            120,
        ),
    ]
    for n in (1, 8, 64, 256):
        seconds = 2 if quick else 4
        steps.append(
            (
                f"commits_{n}",
                f"commits: {n} committers for {seconds} s",
                lambda h, p, pid, n=n, seconds=seconds: scenarios.commits(h, p, n, max_seconds=seconds),
                180,
            )
        )
    members = 100 if quick else 300
    # steady state: 3 x members heartbeating every 0.5 s and committing every 1 s
    steps.append(
        (
            "steady",
            f"steady state: {members * 3} members heartbeating and committing",
            lambda h, p, pid: scenarios.steady(
                h,
                p,
                members,
                max_seconds=4 if quick else 8,
                hb_interval=0.5,
                commit_interval=1.0,
                pid=pid,
                setup_seconds=60,
            ),
            180,
        )
    )
    for partitions in (1, 6):
        for acks in (1, -1):
            steps.append(
                (
                    f"produce_fetch_{partitions}p_acks{acks}",
                    f"produce and fetch: {partitions} partitions, acks={acks}",
                    lambda h, p, pid, partitions=partitions, acks=acks: scenarios.produce_fetch(
                        h, p, partitions, acks, seconds=2 if quick else 3
                    ),
                    120,
                )
            )
    samples = 100 if quick else 200
    steps.append(
        (
            "fetch_wakeup",
            f"fetch wake-up latency: {samples} samples",
            lambda h, p, pid: scenarios.wakeup_latency(h, p, samples),
            120,
        )
    )
    # Fetch v3 (down-converted to magic 1 message sets) against Fetch v12 of the same records (issue 32)
    converted = 10_000 if quick else 20_000
    steps.append(
        (
            "down_conversion",
            f"down-conversion: {converted:,} records fetched as v3 and as v12",
            lambda h, p, pid: scenarios.down_conversion(h, p, records=converted, max_seconds=60, pid=pid),
            150,
        )
    )
    steps.append(
        (
            "down_conversion_lz4",
            f"down-conversion: {converted:,} records in lz4 batches fetched as v3 and as v12",
            lambda h, p, pid: scenarios.down_conversion(
                h, p, records=converted, max_seconds=60, pid=pid, compression="lz4"
            ),
            150,
        )
    )
    steps.append(
        (
            "churn",
            "churn: 50 groups joining and leaving",
            lambda h, p, pid: scenarios.churn(h, p, 50, max_seconds=3 if quick else 8),
            60,
        )
    )
    # the consumer protocol (KIP-848) and the classic one on the same broker, as ratios
    steps.append(
        (
            "consumer_protocol",
            "consumer protocol vs classic: 1,000 members heartbeating, groups of 3 to Stable",
            lambda h, p, pid: consumer_scenarios.side_by_side(
                h, p, 1000, 10, seconds=5 if quick else 10, groups_of_3=10 if quick else 20, pid=pid
            ),
            240,
        )
    )
    if scale_groups:
        steps.append(
            (
                "scale",
                f"scale: {scale_groups:,} groups held, heartbeats timed",
                lambda h, p, pid: scenarios.scale(h, p, scale_groups, pid=pid, hb_seconds=5, max_seconds=300),
                400,
            )
        )
    return steps


async def run_target(
    name: str, proc: subprocess.Popen, port: int, quick: bool, progress: Progress, scale_groups: int = 0
) -> dict[str, Any]:
    """Every scenario against one broker; one a peer cannot do is reported as an error, the rest still run."""
    host = "127.0.0.1"
    out: dict[str, Any] = {"target": name}
    for key, what, make, limit in target_steps(quick, scale_groups):
        progress.step(f"{name}: {what}")
        cpu0 = cpu_seconds(proc.pid)
        try:
            result = await asyncio.wait_for(make(host, port, proc.pid), limit)
            out[key] = result.summary() if isinstance(result, scenarios.Stats) else result
        except Exception as exc:
            out[key] = {"error": repr(exc)}
            continue
        if key == "rebalance":
            out["rebalance"]["broker_cpu_s"] = round(cpu_seconds(proc.pid) - cpu0, 2)
        if key == "steady":
            out["steady_heartbeats"], out["steady_commits"] = out["steady"]["heartbeats"], out["steady"]["commits"]
    out["rss_mib"] = round(rss_mib(proc.pid), 1)
    return out


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if a and b else "n/a"


def markdown(results: dict[str, Any]) -> str:
    rows = [
        f"Run {results['date']} on {results['machine']}. Rebalance: 3-member groups, join+sync, delay 0. "
        "Commits: simple OffsetCommit, one in flight per committer. Ratios are groupd (fsync on) / Tansu (memory).",
        "",
        *([describe(results["calibration"]), ""] if "calibration" in results else []),
        # the machine drifts within a run (a shared VM): the same figures again once the run is over
        *([describe(results["calibration_end"], "At the run's end"), ""] if "calibration_end" in results else []),
        "| scenario | metric | groupd fsync on | groupd fsync off | Tansu (memory) | groupd/Tansu |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    by = {r["target"]: r for r in results["targets"]}
    on, off, tansu = by.get("groupd-fsync"), by.get("groupd-nofsync"), by.get("tansu")
    keys = [
        "rebalance",
        "churn",
        "commits_1",
        "commits_8",
        "commits_64",
        "commits_256",
        "steady_heartbeats",
        "steady_commits",
    ]
    for key in keys:
        for metric in ("per_second", "p50_ms", "p99_ms", "p999_ms"):
            a = (on or {}).get(key, {}).get(metric)
            b = (off or {}).get(key, {}).get(metric)
            c = (tansu or {}).get(key, {}).get(metric)
            r = (
                ratio(a, c)
                if metric == "per_second"
                else (ratio(c, a) + " (lower is better: Tansu/groupd)" if a and c else "n/a")
            )
            rows.append(f"| {key} | {metric} | {a} | {b} | {c if c is not None else 'n/a'} | {r} |")
    cells = []
    for target in (on, off, tansu):
        st = (target or {}).get("steady", {})
        cells.append(
            f"{st['broker_cpu_pct_per_1000_members']}% of a core ({st['broker_cpu_pct']}% for {st['members']})"
            if "broker_cpu_pct_per_1000_members" in st
            else st.get("error", "n/a")[:60]
        )
    rows.append("| steady | broker CPU per 1,000 members | " + " | ".join(cells) + " | |")
    rows += [
        "",
        "| produce/fetch (1 KiB records, batches of 100) | groupd fsync on | groupd fsync off | Tansu (memory) |",
        "| --- | --- | --- | --- |",
    ]
    for partitions in (1, 6):
        for acks in (1, -1):
            key = f"produce_fetch_{partitions}p_acks{acks}"
            cells = []
            for target in (on, off, tansu):
                r = (target or {}).get(key, {})
                cells.append(
                    f"{r['produce_mb_s']} MB/s in, {r['consume_mb_s']} MB/s out"
                    if "produce_mb_s" in r
                    else r.get("error", "n/a")[:60]
                )
            rows.append(f"| {partitions} partition(s), acks={acks} | " + " | ".join(cells) + " |")
    cells = []
    for target in (on, off, tansu):
        r = (target or {}).get("fetch_wakeup", {})
        cells.append(f"p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms" if "p50_ms" in r else "n/a")
    rows.append("| fetch long-poll wake-up (produce -> fetch returns) | " + " | ".join(cells) + " |")
    for key, label in (
        ("down_conversion", "same 1 KiB records"),
        ("down_conversion_lz4", "same 1 KiB records in lz4 batches"),
    ):
        cells = []
        for target in (on, off, tansu):
            r = (target or {}).get(key, {})
            cpu = (
                f", broker CPU {r['fetch_v3_broker_cpu_s_per_gb']} vs {r['fetch_v12_broker_cpu_s_per_gb']} s/GB"
                if "fetch_v3_broker_cpu_s_per_gb" in r
                else ""
            )
            cells.append(
                f"v3 {r['fetch_v3_mb_s']} MB/s vs v12 {r['fetch_v12_mb_s']} MB/s ({r['v3_over_v12']}x){cpu}"
                if "v3_over_v12" in r
                else "n/a"
            )
        rows.append(f"| Fetch v3 (down-converted to magic 1) vs Fetch v12, {label} | " + " | ".join(cells) + " |")
    rows += ["", consumer_protocol_table(on, off, tansu)]
    rows.append("")
    if on is not None and "scale" in on:
        sc = on["scale"]
        hb = sc.get("heartbeats", {})
        rows.append(
            f"Held groups (groupd, fsync on): {sc['groups']:,} three-member groups ({sc['members']:,} members) formed "
            f"in {sc['form_seconds']} s, broker RSS {sc.get('broker_rss_mib', 'n/a')} MiB; heartbeats on a sample: "
            f"{hb.get('per_second')}/s, p99 {hb.get('p99_ms')} ms."
        )
        rows.append("")
    if "replay" in results:
        rp = results["replay"]
        rows.append(f"| start-up replay | records/s | {rp['per_second']} ({rp['count']} records) | | n/a | |")
        for key, label in (
            ("alone", "the broker walking alone (num.recovery.threads.per.data.dir=1)"),
            ("unclean", "after an unclean shutdown (every segment scanned)"),
            ("all_survivors", "every record a survivor (a compacted store)"),
        ):
            if key in rp:
                rows.append(
                    f"| start-up replay, {label} | records/s | {rp[key]['per_second']} ({rp[key]['count']} records) | "
                    "| n/a | |"
                )
    if "engines" in results:
        from bench.engines import markdown as engines_table  # bench.engines imports this module

        rows += ["", "Storage engines, in process (`python -m bench.engines`: broker and load in one process):", ""]
        en = results["engines"]
        rows.append(f"engines not measured: {en['error']}" if "error" in en and len(en) == 1 else engines_table(en))
    return "\n".join(rows) + "\n"


def consumer_protocol_table(*targets: dict[str, Any] | None) -> str:
    """The consumer protocol (KIP-848) against the classic one on each broker: ratios consumer / classic."""
    rows = [
        "| consumer protocol vs classic (same broker) | groupd fsync on | groupd fsync off | Tansu (memory) |",
        "| --- | --- | --- | --- |",
    ]
    cells: dict[str, list[str]] = {"hb": [], "cpu": [], "stable": []}
    for target in targets:
        r = (target or {}).get("consumer_protocol", {})
        if "consumer" not in r:
            for k in cells:
                cells[k].append(str(r.get("error", "n/a"))[:60])
            continue
        c, k = r["consumer"], r["classic"]
        cells["hb"].append(
            f"p99 {c['p99_ms']} vs {k['p99_ms']} ms ({r['p99_consumer_over_classic']}x), {c['per_second']}/s vs "
            f"{k['per_second']}/s"
        )
        cells["cpu"].append(
            f"{c.get('broker_cpu_us_per_heartbeat')} vs {k.get('broker_cpu_us_per_heartbeat')} us "
            f"({r.get('cpu_consumer_over_classic')}x); "
            f"{c.get('broker_cpu_pct_per_1000_members')}% vs {k.get('broker_cpu_pct_per_1000_members')}% of a core per "
            "1,000 members"
        )
        s, j = r["to_stable"]["consumer"], r["to_stable"]["classic"]
        cells["stable"].append(
            f"p50 {s['p50_ms']} vs {j['p50_ms']} ms ({r['to_stable']['p50_consumer_over_classic']}x), p99 "
            f"{s['p99_ms']} vs {j['p99_ms']} ms"
        )
    members = next(
        (t["consumer_protocol"]["members"] for t in targets if t and "members" in t.get("consumer_protocol", {})), 1000
    )
    rows.append(
        f"| {members} members in groups of 10 heartbeating every 0.5 s: consumer vs classic | "
        + " | ".join(cells["hb"])
        + " |"
    )
    rows.append("| broker CPU per heartbeat: consumer vs classic | " + " | ".join(cells["cpu"]) + " |")
    rows.append(
        "| a group of 3, first heartbeat to Stable vs first JoinGroup to last SyncGroup | "
        + " | ".join(cells["stable"])
        + " |"
    )
    return "\n".join(rows)


def engines_bench(quick: bool) -> dict[str, Any]:
    """bench/engines.py in a child process of its own (its brokers and PostgreSQL apart from this run's)."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.engines", "--json", *(["--quick"] if quick else [])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or [f"exited with {done.returncode}"])[-1]}
    return dict(json.loads(done.stdout))


def total_steps(quick: bool) -> int:
    """Every step of a run: calibration at both ends, the three targets, the replay."""
    scale_groups = 10_000 if quick else 100_000
    per_target = len(target_steps(quick))
    return 2 + (per_target + 1 if scale_groups else per_target) + per_target * 2 + 1 + 1


async def main_async(quick: bool, calibration: dict[str, Any], progress: Progress) -> dict[str, Any]:
    results: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": (
            f"{os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
            f"Python {platform.python_version()}"
        ),
        "targets": [],
        "calibration": calibration,
    }
    tmp = Path(tempfile.mkdtemp(prefix="groupd-bench-"))
    try:
        for name, fsync in (("groupd-fsync", True), ("groupd-nofsync", False)):
            proc, port = start_groupd(fsync, tmp / name)
            try:
                # 100,000 held groups (memory, heartbeat p99) once, on the default broker
                scale_groups = (10_000 if quick else 100_000) if fsync else 0
                results["targets"].append(await run_target(name, proc, port, quick, progress, scale_groups))
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
        tansu = start_tansu()
        if tansu is None:
            results["tansu"] = "not available (get-tansu.sh failed)"
            progress.skip(len(target_steps(quick)), "Tansu is not available (get-tansu.sh failed)")
        else:
            proc, port = tansu
            try:
                results["targets"].append(await run_target("tansu", proc, port, quick, progress))
            except Exception as exc:  # a peer that cannot do a scenario is reported, not fatal
                results["tansu_error"] = repr(exc)
            finally:
                proc.kill()
                proc.wait()
        records = 200_000 if quick else 1_000_000
        progress.step(f"start-up replay: {records:,} offset records read back")
        results["replay"] = await asyncio.to_thread(replay_bench, records)
        progress.step("storage engines: local and postgresql side by side, in process (bench/engines.py)")
        results["engines"] = await asyncio.to_thread(engines_bench, quick)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def main() -> None:
    quick = "--quick" in sys.argv
    progress = Progress(total_steps(quick))
    progress.step("calibration: Python loop, loopback round trip, syncfs")
    calibration = calibrate()  # before the event loop and any thread: it forks
    use_uvloop()
    results = asyncio.run(asyncio.wait_for(main_async(quick, calibration, progress), 1800))
    progress.step("calibration again, at the end")
    results["calibration_end"] = calibrate()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "latest.json").write_text(json.dumps(results, indent=1))
    (RESULTS / "latest.md").write_text(markdown(results))
    if not quick:  # docs/benchmarks.md shows the latest full run
        replace_between(str(ROOT / "docs" / "benchmarks.md"), README_BEGIN, README_END, markdown(results).rstrip("\n"))
    print(markdown(results))


if __name__ == "__main__":
    main()
