"""``bench.index_memory`` run on several checkouts side by side, alternating, and their p50s compared.

``python -m bench.index_trees --tree before=/work/wt/pre-index --tree after=. --rounds 3 -- --batches
1000000 --partitions 200 --value-bytes 100 --rss`` runs this tree's bench/index_memory.py once per tree
per round, in a fresh process each, with ``PYTHONPATH`` naming the tree (so each measures its own
storage/log.py), the trees in turn and their order reversed every other round so that neither always
runs first on a machine whose load drifts. It prints every run's p50s and memory lines and, per measure, each tree's
median over the rounds and its ratio to the first tree's. Bounded: rounds times trees runs."""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

_P50 = re.compile(r"^(?P<what>[^:]+): p50 (?P<us>[0-9.]+) us")
_BENCH = Path(__file__).with_name("index_memory.py")


def run(tree: Path, args: list[str]) -> dict[str, float]:
    """One run of the bench against ``tree``: its p50 per measure, in microseconds."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run(
        [sys.executable, str(_BENCH), *args], env=env, check=True, capture_output=True, text=True
    ).stdout
    for line in out.splitlines():
        if "MiB per GiB" in line:  # what the index holds, printed as the run says it
            print(f"  {tree.name}: {line.strip()}")
    return {m["what"]: float(m["us"]) for line in out.splitlines() if (m := _P50.match(line))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH, the first one the base")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("bench_args", nargs=argparse.REMAINDER, help="after --: bench.index_memory's arguments")
    args = parser.parse_args()
    trees = [(name, Path(path).resolve()) for name, path in (t.split("=", 1) for t in args.tree)]
    passed = [a for a in args.bench_args if a != "--"]
    seen: dict[str, dict[str, list[float]]] = {name: {} for name, _ in trees}
    for r in range(args.rounds):
        for name, tree in trees if r % 2 == 0 else trees[::-1]:
            for what, us in run(tree, passed).items():
                seen[name].setdefault(what, []).append(us)
            print(f"round {r + 1} {name}: " + ", ".join(f"{v[-1]:.1f}" for v in seen[name].values()), flush=True)
    base = trees[0][0]
    for what, values in seen[base].items():
        print(what)
        for name, _ in trees:
            got = seen[name].get(what, [])
            median = statistics.median(got)
            ratio = median / statistics.median(values)
            print(f"  {name}: p50 {', '.join(f'{v:.1f}' for v in got)} us; median {median:.1f}; / {base} {ratio:.2f}")


if __name__ == "__main__":
    main()
