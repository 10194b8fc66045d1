"""The storage engines side by side (issue 37): the same in-process scenarios (bench/inprocess.py: the broker
and the load in one process, no sockets) on ``local`` and on ``postgresql``, one after the other in one run.

    python -m bench.engines [--quick] [--json] [--db-latency-ms N]

Produce MB/s to 1 and 6 partitions (acks=all, 1 KiB records in batches of 100) and the fetch back; commits/s
and p99 at 1, 8 and 64 committers; rebalance groups/s; start-up load time (a broker stopped after N commits,
started again: from ``start()`` to its offsets loaded). PostgreSQL is a private server of the run's own
(tests/postgresql_server.py: initdb into a temp directory, a loopback port) with ``fsync`` on, as a
database that acknowledges what it keeps; without Debian's PostgreSQL binaries the column says so. With
``--db-latency-ms`` the broker reaches it through a relay that holds every answer back that long
(tests/pg_relay.py), as a database across a network: what each round trip to it costs shows."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import inprocess
from bench.run import groupd_overrides
from groupd.broker.app import Broker
from groupd.broker.config import default_config

ENGINES = ("local", "postgresql")
ROWS = [  # (scenario key, metric, label)
    ("produce-1p", "produce_mb_s", "produce MB/s, 1 partition"),
    ("produce-6p", "produce_mb_s", "produce MB/s, 6 partitions"),
    ("produce-6p", "consume_mb_s", "fetch MB/s, 6 partitions"),
    ("commits-1", "per_second", "commits/s, 1 committer"),
    ("commits-1", "p99_ms", "commit p99 ms, 1 committer"),
    ("commits-8", "per_second", "commits/s, 8 committers"),
    ("commits-8", "p99_ms", "commit p99 ms, 8 committers"),
    ("commits-64", "per_second", "commits/s, 64 committers"),
    ("commits-64", "p99_ms", "commit p99 ms, 64 committers"),
    ("rebalance", "per_second", "rebalance groups/s"),
    ("startup", "loaded_ms", "start-up to loaded ms"),
]


def steps(quick: bool) -> list[tuple[str, str, dict[str, Any]]]:
    seconds = 1.5 if quick else 4.0
    return [
        ("produce-1p", "produce", {"partitions": 1, "seconds": seconds}),
        ("produce-6p", "produce", {"partitions": 6, "seconds": seconds}),
        *((f"commits-{n}", "commits", {"committers": n, "seconds": seconds}) for n in (1, 8, 64)),
        ("rebalance", "rebalance", {"groups": 300 if quick else 1000, "seconds": seconds, "concurrency": 32}),
    ]


async def startup(data: Path, url: str, commits: int) -> dict[str, Any]:
    """``commits`` commits by 64 committers, the broker stopped, and a new one over the same storage timed
    from ``start()`` until its offsets are loaded."""
    await inprocess.run("commits", True, data, postgresql=url, committers=64, commits=commits, seconds=120)
    settings = groupd_overrides(True, data, 0)
    if url:
        settings.update({"storage.engine": "postgresql", "storage.postgresql.url": url})
    broker = Broker(default_config(**settings))
    began = time.perf_counter()
    await broker.start()
    while not broker.coordinator.is_loaded():
        await asyncio.sleep(0.002)
    loaded = (time.perf_counter() - began) * 1000
    await broker.stop()
    return {"loaded_ms": round(loaded, 1), "commits": commits}


async def engine_results(
    engine: str, url: Callable[[], str], quick: bool, say: Callable[[str], None] = lambda _line: None
) -> dict[str, Any]:
    """Every scenario on ``engine``, each over empty storage: a fresh directory and, from ``url()``, a fresh
    database ("" for the local engine), as the scenarios before must not be loaded by the start-up."""
    out: dict[str, Any] = {}
    for key, scenario, params in steps(quick):
        say(f"{engine}: {key}")
        with tempfile.TemporaryDirectory(prefix="groupd-engines-") as tmp:
            out[key] = await inprocess.run(scenario, True, Path(tmp), postgresql=url(), **params)
    say(f"{engine}: start-up")
    with tempfile.TemporaryDirectory(prefix="groupd-engines-") as tmp:
        out["startup"] = await startup(Path(tmp), url(), 5_000 if quick else 20_000)
    return out


def run(quick: bool, say: Callable[[str], None] = lambda _line: None, db_latency_ms: float = 0) -> dict[str, Any]:
    """Both engines, local first; {"local": {...}, "postgresql": {...} or {"error": why}}."""
    import uvloop

    results: dict[str, Any] = {"local": uvloop.run(engine_results("local", lambda: "", quick, say))}
    try:
        from tests.postgresql_server import PostgresServer

        server = PostgresServer(fsync=True)
    except (ImportError, RuntimeError) as exc:
        results["postgresql"] = {"error": str(exc)}
        return results
    from tests.pg_relay import Relay

    relay = Relay(server.port, db_latency_ms / 1000) if db_latency_ms > 0 else None
    try:
        url = server.database if relay is None else lambda: relay.url(server.database())
        results["postgresql"] = uvloop.run(engine_results("postgresql", url, quick, say))
    finally:
        if relay is not None:
            relay.close()
        server.close()
    return results


def markdown(results: dict[str, Any]) -> str:
    pg = results.get("postgresql", {})
    lines = [
        "| measure | local | postgresql | postgresql/local |",
        "| --- | --- | --- | --- |",
    ]
    for key, metric, label in ROWS:
        a = results.get("local", {}).get(key, {}).get(metric)
        b = pg.get(key, {}).get(metric)
        ratio = f"{b / a:.2f}x" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a else ""
        lines.append(f"| {label} | {_cell(a)} | {_cell(b)} | {ratio} |")
    if "error" in pg:
        lines.append(f"\npostgresql not measured: {pg['error']}")
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    return "n/a" if value is None else (f"{value:,.1f}" if isinstance(value, float) else f"{value:,}")


def main() -> None:
    cli = argparse.ArgumentParser(prog="python -m bench.engines", description=__doc__)
    cli.add_argument("--quick", action="store_true", help="shorter scenarios (1.5 s each), fewer groups and commits")
    cli.add_argument("--json", action="store_true", help="print the results as JSON (bench.run reads them)")
    cli.add_argument("--db-latency-ms", type=float, default=0, help="hold every answer of PostgreSQL back this long")
    args = cli.parse_args()
    from groupd.server import tune_gc

    tune_gc()
    results = run(
        args.quick,
        say=lambda line: print(f"[engines] {line}", flush=True, file=sys.stderr),
        db_latency_ms=args.db_latency_ms,
    )
    print(json.dumps(results) if args.json else markdown(results))


if __name__ == "__main__":
    main()
