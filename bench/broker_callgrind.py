"""Broker-only instruction counts: ``python -m bench.broker_callgrind SCENARIO SMALL LARGE [--tree DIR]``.

The in-process bench (bench/inprocess.py under callgrind) counts the bench client too, which is the
same work before and after a change and dilutes a ratio. Here the broker runs as its own process under
``valgrind --tool=callgrind --instr-atstart=no``; after a warm-up the client (this process, outside
valgrind) switches instrumentation on (``callgrind_control -i on``), runs the scenario, and has the
counts dumped (``callgrind_control -d``) before the broker is killed. Two sizes are run and subtracted,
so what is the same in both (the warm-up, idle timers) cancels: instructions per rebalanced group, per
commit, per ListOffsets by timestamp or per Fetch of one batch (``listoffsets``, ``fetch``: at random
spots of a topic filled first), including uvloop's socket work, which is broker CPU too (the kernel's
reads are not counted).

``--held N`` forms N three-member groups with long sessions first (``bench.scenarios.scale``, before
instrumentation is on, so their forming is not counted), so each operation is counted with that many
groups held, as in a broker that holds many: its dicts, its timer heap and the garbage collector's
generations are that much larger.

``--tree`` points at another checkout (e.g. a worktree at an older commit) whose broker is measured with
this tree's client: ``server.py`` at its top if it has one (before the reshape), else ``-m groupd``.
Needs valgrind; slow (minutes); bounded by ``--seconds``."""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import fetch_trees, scenarios
from bench.client import Conn
from bench.run import free_port
from groupd.protocol.api_table import ApiKey

ROOT = Path(__file__).resolve().parent.parent


def _broker(tree: Path, port: int, data: str, scenario: str, out: str) -> subprocess.Popen[bytes]:
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": data, "metrics.listener": "", "log.level": "WARN",
        # one generation a group whatever valgrind's speed (see bench/HISTORY.md, session 19)
        "group.initial.rebalance.delay.ms": "500" if scenario == "rebalance" else "0",
        "log.flush.interval.messages": str(2**62),
    }  # fmt: skip
    cmd = [sys.executable, "server.py"] if (tree / "server.py").exists() else [sys.executable, "-m", "groupd"]
    args = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}", *cmd]
    for key, value in overrides.items():
        args += ["--override", f"{key}={value}"]
    env = dict(os.environ, PYTHONPATH=str(tree))
    return subprocess.Popen(args, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _wait_port(port: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the broker did not listen on {port} within {seconds:.0f} s")


async def _scenario(scenario: str, port: int, count: int, pid: int, seconds: float, held: int) -> None:
    control = ["callgrind_control"]
    if held:
        await scenarios.scale("127.0.0.1", port, held, concurrency=16, hb_seconds=0.1, max_seconds=seconds)
    if scenario == "rebalance":
        await scenarios.rebalance("127.0.0.1", port, 2, concurrency=1, max_seconds=seconds, prefix="warm")
        subprocess.run([*control, "-i", "on", str(pid)], check=True, capture_output=True)
        await scenarios.rebalance("127.0.0.1", port, count, concurrency=1, max_seconds=seconds, prefix="m")
    elif scenario in ("listoffsets", "fetch"):  # a filled topic (not counted), then ``count`` requests
        await _reads(scenario, port, count, [*control, "-i", "on", str(pid)])
    elif scenario == "heartbeats":  # five groups formed in both runs (they cancel), then ``count`` heartbeats
        subprocess.run([*control, "-i", "on", str(pid)], check=True, capture_output=True)
        await scenarios.heartbeats("127.0.0.1", port, 5, count, max_seconds=seconds)
    else:
        await scenarios.commits("127.0.0.1", port, 8, max_seconds=seconds, max_count=200)
        subprocess.run([*control, "-i", "on", str(pid)], check=True, capture_output=True)
        await scenarios.commits("127.0.0.1", port, 8, max_seconds=seconds, max_count=count)
    subprocess.run([*control, "-i", "off", str(pid)], check=True, capture_output=True)
    subprocess.run([*control, "-d", str(pid)], check=True, capture_output=True)


async def _reads(scenario: str, port: int, count: int, instrument: list[str]) -> None:
    """ListOffsets by timestamp, or Fetches of one batch, at random spots of 10 partitions of 2,000 batches
    (more than one index block each), answered one at a time (bench/fetch_trees.py's requests)."""
    await fetch_trees.fill(port, 10, 2000, b"v" * 100)
    rng = random.Random(1)
    if scenario == "listoffsets":
        bodies = [
            (ApiKey.LIST_OFFSETS, fetch_trees.list_body(rng.randrange(10), rng.randrange(2000))) for _ in range(count)
        ]
        check = fetch_trees.listed
    else:
        bodies = [
            (ApiKey.FETCH, fetch_trees.fetch_body(rng.randrange(10), rng.randrange(2000), 1)) for _ in range(count)
        ]
        check = fetch_trees.fetched
    conn = await Conn.open("127.0.0.1", port)
    await fetch_trees.timed(conn, bodies[:20], check)  # a warm-up, not counted
    subprocess.run(instrument, check=True, capture_output=True)
    await fetch_trees.timed(conn, bodies, check)
    await conn.close()


def _total(path: str) -> int:
    out = subprocess.run(["callgrind_annotate", path], capture_output=True, text=True, check=True).stdout
    match = re.search(r"([\d,]+) \(100.0%\)\s+PROGRAM TOTALS", out)
    if match is None:
        raise SystemExit(f"no totals in {path}")
    return int(match.group(1).replace(",", ""))


def measure(tree: Path, scenario: str, count: int, seconds: float, held: int = 0) -> int:
    """Instructions the broker of ``tree`` spends on ``count`` rebalanced groups, commits or heartbeats."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="broker-cg-") as tmp:
        out = f"{tmp}/callgrind.out"
        proc = _broker(tree, port, f"{tmp}/data", scenario, out)
        try:
            _wait_port(port, 300)
            time.sleep(8)  # the offsets partitions load, slowly under valgrind
            asyncio.run(_scenario(scenario, port, count, proc.pid, seconds, held))
        finally:
            proc.kill()
            proc.wait()
        return _total(f"{out}.1")  # the dump; the killed process writes no final file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", choices=("rebalance", "commits", "heartbeats", "listoffsets", "fetch"))
    parser.add_argument("small", type=int)
    parser.add_argument("large", type=int)
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument("--seconds", type=float, default=3000)
    parser.add_argument("--held", type=int, default=0, help="three-member groups held while counting")
    args = parser.parse_args()
    small = measure(args.tree.resolve(), args.scenario, args.small, args.seconds, args.held)
    large = measure(args.tree.resolve(), args.scenario, args.large, args.seconds, args.held)
    per = (large - small) / (args.large - args.small)
    unit = {
        "rebalance": "group",
        "commits": "commit",
        "heartbeats": "heartbeat",
        "listoffsets": "ListOffsets by timestamp",
        "fetch": "Fetch of one batch",
    }[args.scenario]
    print(f"{args.scenario}: {per:,.0f} broker instructions per {unit}")


if __name__ == "__main__":
    main()
