"""The memory of held groups (issue 40): a broker's RSS holding G three-member classic groups.

``python -m bench.held_groups [--groups G] [--fsync] [--seconds S]`` starts ``python -m groupd`` from this
checkout on a free loopback port (fsync off unless ``--fsync``: memory, not durability, is measured),
forms G groups of three members with long sessions through ``bench.scenarios.scale`` and prints the
broker's RSS before and after, per group, and a short heartbeat p99. Bounded: G groups, and forming
gives up after S seconds (what formed by then is reported)."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import tempfile
from pathlib import Path

from bench.run import start_groupd
from bench.scenarios import rss_mib, scale


async def measure(groups: int, fsync: bool, seconds: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="groupd-held-") as tmp:
        proc, port = start_groupd(fsync, Path(tmp) / "data")
        try:
            idle = rss_mib(proc.pid)
            out = await scale("127.0.0.1", port, groups, pid=proc.pid, hb_seconds=2, max_seconds=seconds)
            out["idle_rss_mib"] = round(idle, 1)
            held = float(out.get("broker_rss_mib", 0)) - idle
            out["held_mib_per_1000_groups"] = round(held / max(1, int(out["groups"])) * 1000, 2)
            return out
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=100_000)
    parser.add_argument("--fsync", action="store_true")
    parser.add_argument("--seconds", type=float, default=600)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.groups, args.fsync, args.seconds)), indent=1))


if __name__ == "__main__":
    main()
