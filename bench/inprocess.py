"""The broker's own CPU cost per request, without sockets: ``python -m bench.inprocess commits``.

The load generator's scenarios run in the broker's process, their connections joined to the broker's
``Connection`` objects by in-memory transports that deliver each send on the next loop turn (as a
socket read would). No kernel, no second process, no wake-ups across CPUs: what is left is Python, the
broker's and the load generator's, and it is far steadier than a loopback run on a shared VM. This is
the A/B tool for hot-path changes; ``make bench`` remains the measure of the whole.

Reports operations/s and process CPU per operation (broker plus load generator: the load generator's
share is the same on both sides of an A/B).

``--without store`` (commits only) skips the offsets log's append, so commits are acknowledged without
their record ever being written; ``--without coordinator`` has the OffsetCommit handler answer at once.
Neither is a broker anyone should run: they take a commit's cost apart, layer by layer."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import client, scenarios
from bench.run import groupd_overrides
from groupd.broker.app import Broker
from groupd.broker.config import default_config
from groupd.broker.network.connection import Connection
from groupd.broker.routes import HANDLERS
from groupd.protocol.api_table import ApiKey
from groupd.storage.log import Log

WITHOUT = ("nothing", "store", "coordinator")
OFFSET_COMMIT = int(ApiKey.OFFSET_COMMIT)


class _Pipe:
    """One direction of an in-memory connection: what is written reaches ``deliver`` next loop turn."""

    def __init__(self, deliver: Any, lost: Any) -> None:
        self.loop = asyncio.get_running_loop()
        self.deliver, self.lost = deliver, lost  # lost(): connection_lost of the side that writes here
        self.closed = False
        self.peer: _Pipe | None = None

    def write(self, data: bytes | bytearray) -> None:
        if not self.closed:
            self.loop.call_soon(self.deliver, bytes(data))

    def writelines(self, parts: Any) -> None:
        self.write(b"".join(parts))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.peer is not None:
                self.peer.close()
            self.loop.call_soon(self.lost)

    def abort(self) -> None:
        self.close()

    def set_write_buffer_limits(self, high: int = 0, low: int = 0) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def _connect(broker: Broker) -> client.Conn:
    conn = client.Conn()
    server = Connection(broker)
    to_broker = _Pipe(server.data_received, lambda: conn._lost(None))
    to_client = _Pipe(conn._feed, lambda: server.connection_lost(None))
    to_broker.peer, to_client.peer = to_client, to_broker
    conn.transport = to_broker  # type: ignore[assignment]
    server.connection_made(to_client)
    return conn


@contextlib.contextmanager
def _without(layer: str) -> Iterator[None]:
    """Take one layer out of the commit path for the run (see the module's docstring), then put it back."""
    if layer == "nothing":
        yield
        return
    from groupd.broker.handlers.offsets import _commit_response
    from groupd.coordinator.api import PartitionError

    def answer_at_once(broker: Broker, ctx: Any, req: Any) -> Any:
        return _commit_response(
            ctx, [PartitionError(t.name, p.partition_index, 0) for t in req.topics for p in t.partitions]
        )

    saved_append, saved_handler = Log.append_records, HANDLERS[OFFSET_COMMIT]
    if layer == "store":
        Log.append_records = lambda self, records, timestamp_ms=None: (0, 0)  # type: ignore[method-assign]
    else:
        HANDLERS[OFFSET_COMMIT] = answer_at_once
    try:
        yield
    finally:
        Log.append_records, HANDLERS[OFFSET_COMMIT] = saved_append, saved_handler  # type: ignore[method-assign]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _instrument(state: str) -> None:
    """Under ``valgrind --tool=callgrind --instr-atstart=no`` with GROUPD_BENCH_CALLGRIND=1: count only the
    scenario's own phase (start-up and shutdown, which grow with the groups held, left out)."""
    if os.environ.get("GROUPD_BENCH_CALLGRIND"):
        subprocess.run(["callgrind_control", "-i", state, str(os.getpid())], check=True, capture_output=True)
    counter = sys.modules.get("bench.bytecodes")  # python -m bench.bytecodes counts the same phase
    if counter is not None:
        counter.phase(state)


async def run(
    scenario: str, fsync: bool, data: Path, without: str = "nothing", postgresql: str = "", **params: Any
) -> dict[str, Any]:
    with _without(without):
        out = await _run(scenario, fsync, data, postgresql, **params)
    return out if without == "nothing" else {**out, "without": without}


async def _run(scenario: str, fsync: bool, data: Path, postgresql: str, **params: Any) -> dict[str, Any]:
    settings = groupd_overrides(fsync, data, 0)
    if params.get("initial_delay_ms"):
        settings["group.initial.rebalance.delay.ms"] = str(params["initial_delay_ms"])
    if postgresql:  # the PostgreSQL engine over this database (storage.postgresql.url)
        settings.update({"storage.engine": "postgresql", "storage.postgresql.url": postgresql})
    broker = Broker(default_config(**settings))
    await broker.start()
    while not broker.coordinator.is_loaded():
        await asyncio.sleep(0.01)
    opened = client.Conn.open

    async def open_here(cls: type, host: str, port: int) -> client.Conn:
        return _connect(broker)

    client.Conn.open = classmethod(open_here)  # type: ignore[method-assign, assignment]
    try:
        _instrument("on")
        started = _cpu()
        if scenario == "commits":
            stats = await scenarios.commits(
                "in-process",
                0,
                params["committers"],
                max_seconds=params["seconds"],
                max_count=params.get("commits", 200_000),
            )
        elif scenario == "heartbeats":
            stats = await scenarios.heartbeats("in-process", 0, params["groups"], params["heartbeats"])
        elif scenario == "produce":  # acks=all, then every record fetched back
            produced = await scenarios.produce_fetch("in-process", 0, params["partitions"], -1, params["seconds"])
            cpu = _cpu() - started
            return {"scenario": f"produce-{params['partitions']}p", **produced, "cpu_s": round(cpu, 2)}
        else:
            stats = await scenarios.rebalance(
                "in-process",
                0,
                params["groups"],
                concurrency=params.get("concurrency", 32),
                warmup=min(2, params["concurrency"]) if params.get("concurrency", 32) < 32 else None,
                max_seconds=params["seconds"] * 10,
            )
        cpu = _cpu() - started
        _instrument("off")
    finally:
        client.Conn.open = opened  # type: ignore[method-assign]
        await broker.stop()
    out = stats.summary()
    out["cpu_us_per_op"] = round(cpu / max(stats.count, 1) * 1e6, 1)
    return {k: v for k, v in out.items() if not isinstance(v, (list, dict))}


def main() -> None:
    cli = argparse.ArgumentParser(prog="python -m bench.inprocess", description=__doc__)
    cli.add_argument("scenario", choices=["commits", "rebalance", "heartbeats", "produce"])
    cli.add_argument("--partitions", type=int, default=1, help="produce: to this many partitions")
    cli.add_argument("--committers", type=int, default=64)
    cli.add_argument("--groups", type=int, default=2000)
    cli.add_argument("--seconds", type=float, default=4)
    cli.add_argument(
        "--commits",
        type=int,
        default=200_000,
        help="commits: stop after this many (a fixed amount of work, e.g. to count instructions)",
    )
    cli.add_argument(
        "--heartbeats", type=int, default=10_000, help="heartbeats: answered heartbeats in all (a fixed amount of work)"
    )
    cli.add_argument(
        "--initial-delay-ms",
        type=int,
        default=0,
        help="rebalance: group.initial.rebalance.delay.ms; past the members' joins, each group forms in one "
        "generation whatever the machine's speed (a fixed amount of work, e.g. under valgrind)",
    )
    cli.add_argument(
        "--concurrency",
        type=int,
        default=32,
        help="rebalance: groups formed at a time (1 with --initial-delay-ms: one generation each, under valgrind)",
    )
    cli.add_argument("--fsync", choices=["on", "off"], default="on")
    cli.add_argument("--without", choices=WITHOUT, default="nothing", help="commits: a layer taken out, to measure it")
    cli.add_argument("--postgresql", default="", metavar="URL", help="run on the PostgreSQL engine over this database")
    args = cli.parse_args()
    if args.without != "nothing" and args.scenario != "commits":
        cli.error("--without applies to the commits scenario")
    import uvloop

    from groupd.server import tune_gc

    tune_gc()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        result = uvloop.run(
            run(
                args.scenario,
                args.fsync == "on",
                Path(tmp),
                args.without,
                args.postgresql,
                committers=args.committers,
                commits=args.commits,
                groups=args.groups,
                heartbeats=args.heartbeats,
                partitions=args.partitions,
                seconds=args.seconds,
                initial_delay_ms=args.initial_delay_ms,
                concurrency=args.concurrency,
            )
        )
        result["wall_s"] = round(time.perf_counter() - t0, 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
