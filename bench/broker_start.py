"""What a test pays for a broker (issue 41): ``groupd.testing.Broker()`` from ``start()`` to its first
answered ApiVersions, and its ``stop()``, per storage engine and place (a thread here, a child process),
and a module of N tests each with a fresh broker (start + a kafka-python producer's first send + stop).

    python -m bench.broker_start [--rounds 20] [--fresh 100]

Bounded in count: ``--rounds`` starts per variant, ``--fresh`` brokers in the module loop. The first
start in the process is reported apart (it imports the broker's modules)."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from groupd.testing import Broker


def timed_start_stop(**options: object) -> tuple[float, float]:
    broker = Broker(**options)  # type: ignore[arg-type]
    began = time.perf_counter()
    broker.start()  # returns once ApiVersions is answered
    started = time.perf_counter()
    broker.stop()
    return (started - began) * 1000, (time.perf_counter() - started) * 1000


def summary(name: str, samples: list[tuple[float, float]]) -> str:
    starts = sorted(s for s, _ in samples)
    stops = sorted(s for _, s in samples)
    return (
        f"{name:28} start median {statistics.median(starts):7.1f} ms  min {starts[0]:7.1f}  max {starts[-1]:7.1f}"
        f"   stop median {statistics.median(stops):6.1f} ms  (n={len(samples)})"
    )


def fresh_module(count: int) -> float:
    """``count`` tests, each: a fresh broker, one produced record acknowledged, the broker stopped."""
    from kafka import KafkaProducer

    began = time.perf_counter()
    for n in range(count):
        with Broker() as broker:
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
            producer.send("t", b"%d" % n).get(10)
            producer.close()
    return time.perf_counter() - began


FRESH_MODULE = """
import pytest
from kafka import KafkaProducer

@pytest.mark.parametrize("n", range({count}))
def test_fresh(groupd_fresh_broker, n):
    producer = KafkaProducer(bootstrap_servers=groupd_fresh_broker.bootstrap_servers)
    producer.send("t", b"x").get(10)
    producer.close()
"""


def pytest_module(count: int) -> tuple[float, str]:
    """A pytest run of one module of ``count`` tests, each taking ``groupd_fresh_broker`` and sending one
    record: what a user's suite pays, pytest's own start included (seconds, pytest's last line)."""
    registered = any(ep.name == "groupd" for ep in importlib.metadata.entry_points(group="pytest11"))
    plugin = [] if registered else ["-p", "groupd.testing.plugin"]
    with tempfile.TemporaryDirectory(prefix="groupd-bench-") as where:
        (Path(where) / "test_fresh.py").write_text(FRESH_MODULE.format(count=count))
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, "test_fresh.py"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=600,
        )
        seconds = time.perf_counter() - began
    return seconds, (done.stdout.strip().splitlines() or ["(no output)"])[-1]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.broker_start")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--subprocess-rounds", type=int, default=5)
    parser.add_argument("--fresh", type=int, default=100)
    args = parser.parse_args()
    logging.getLogger("groupd").setLevel(logging.WARNING)  # a line per start would be the bench's output
    first = timed_start_stop()
    print(f"{'first start (imports)':28} start {first[0]:7.1f} ms   stop {first[1]:6.1f} ms")
    for name, options in [("memory, thread", {}), ("local, thread", {"engine": "local"})]:
        print(summary(name, [timed_start_stop(**options) for _ in range(args.rounds)]), flush=True)
    for name, options in [
        ("memory, subprocess", {"subprocess": True}),
        ("local, subprocess", {"engine": "local", "subprocess": True}),
    ]:
        print(summary(name, [timed_start_stop(**options) for _ in range(args.subprocess_rounds)]), flush=True)
    if args.fresh:
        seconds = fresh_module(args.fresh)
        each = seconds / args.fresh * 1000
        print(f"{args.fresh} fresh brokers, each a kafka-python send: {seconds:.1f} s ({each:.0f} ms each)", flush=True)
        seconds, last = pytest_module(args.fresh)
        print(f"a pytest module of {args.fresh} tests on groupd_fresh_broker: {seconds:.1f} s ({last})")


if __name__ == "__main__":
    main()
