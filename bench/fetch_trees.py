"""What a client meets: one Fetch, or one ListOffsets by timestamp, through a socket, on several checkouts.

``python -m bench.fetch_trees --tree before=/work/wt/pre-index --tree after=. --batches 1000000
--partitions 200 --rounds 3`` starts one broker per tree (``python -m groupd`` with ``PYTHONPATH``
naming the tree, its own data directory, 127.0.0.1 on a free port, fsync off), produces the same
batches of one record to each (``--batches`` over ``--partitions`` of one topic, one Produce a batch per
partition), then times requests answered one at a time, the trees in turn 100 requests at a time (the
order reversed every other turn): a Fetch of one partition at a random offset with
``partition_max_bytes`` 1 (one batch) and 1 MiB (what a consumer asks), and a ListOffsets of one
partition at a random timestamp. Each round draws its own offsets (the same for every tree), so no tree
finds its index blocks cached by an earlier round's draws. Prints the p50 and p99 of each and the
broker's CPU per request (/proc, 10 ms ticks), then the median p50 over the rounds and its ratio to the
first tree's. Bounded: batches, reads and rounds are counts; a broker not listening within 60 s fails
the run."""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.client import Conn, nested
from bench.run import free_port, wait_port
from bench.scenarios import ensure_topic
from groupd.protocol.api_table import ApiKey
from groupd.storage.batch import build_batch

TOPIC = "reads"
_CHUNK = 100  # requests sent to one tree before the next tree's turn, so load that drifts falls on all
FETCH_V, LIST_V, PRODUCE_V = 11, 7, 9


class Broker:
    """One tree's broker, in a process of its own."""

    def __init__(self, name: str, tree: Path, data: Path) -> None:
        self.name, self.port = name, free_port()
        overrides = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(data),
            "metrics.listener": "",  # no endpoint (the counters are kept all the same)
            "log.level": "WARN",
            "log.flush.interval.messages": str(2**62),
        }
        args = [sys.executable, "-m", "groupd"]
        for k, v in overrides.items():
            args += ["--override", f"{k}={v}"]
        env = dict(os.environ, PYTHONPATH=str(tree))
        self.proc = subprocess.Popen(args, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, timeout=60)

    def cpu(self) -> float:
        """The broker process's CPU seconds so far (user and system, /proc)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


async def fill(port: int, partitions: int, per: int, value: bytes) -> None:
    """``per`` batches of one record into each partition, timestamps 0..per-1, four Produces in flight."""
    await ensure_topic("127.0.0.1", port, TOPIC, partitions)
    tcls, pcls = (
        nested(ApiKey.PRODUCE, PRODUCE_V, "TopicProduceData"),
        nested(ApiKey.PRODUCE, PRODUCE_V, "PartitionProduceData"),
    )
    conn = await Conn.open("127.0.0.1", port)
    inflight: list[asyncio.Future] = []
    for i in range(per):
        batch = build_batch([(None, value)], timestamp_ms=i)
        data = tuple(pcls(index=p, records=batch) for p in range(partitions))
        body = {
            "transactional_id": None,
            "acks": 1,
            "timeout": 10_000,
            "topic_data": (tcls(name=TOPIC, partition_data=data),),
        }
        inflight.append(conn.request(ApiKey.PRODUCE, PRODUCE_V, body))
        if len(inflight) >= 4:
            await inflight.pop(0)
    for f in inflight:
        await f
    await conn.close()


def fetch_body(partition: int, offset: int, max_bytes: int) -> dict[str, Any]:
    t, p = nested(ApiKey.FETCH, FETCH_V, "FetchTopic"), nested(ApiKey.FETCH, FETCH_V, "FetchPartition")
    part = p(
        partition=partition,
        current_leader_epoch=-1,
        fetch_offset=offset,
        log_start_offset=-1,
        partition_max_bytes=max_bytes,
    )
    return {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 52_428_800,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": (t(topic=TOPIC, partitions=(part,)),),
        "forgotten_topics_data": (),
        "rack_id": "",
    }


def list_body(partition: int, ts: int) -> dict[str, Any]:
    t, p = (
        nested(ApiKey.LIST_OFFSETS, LIST_V, "ListOffsetsTopic"),
        nested(ApiKey.LIST_OFFSETS, LIST_V, "ListOffsetsPartition"),
    )
    part = p(partition_index=partition, current_leader_epoch=-1, timestamp=ts)
    return {"replica_id": -1, "isolation_level": 0, "topics": (t(name=TOPIC, partitions=(part,)),)}


async def timed(conn: Conn, bodies: list[tuple[int, dict[str, Any]]], check: Callable[[Any], bool]) -> list[float]:
    """Each request sent alone and its answer awaited: the seconds each took."""
    took = []
    for api_key, body in bodies:
        version = FETCH_V if api_key == ApiKey.FETCH else LIST_V
        t0 = time.perf_counter()
        resp = await conn.call(api_key, version, body)
        took.append(time.perf_counter() - t0)
        if not check(resp):
            raise SystemExit(f"a bad answer: {resp}")
    return took


def fetched(resp: Any) -> bool:
    part = resp.responses[0].partitions[0]
    return part.error_code == 0 and bool(part.records)


def listed(resp: Any) -> bool:
    part = resp.topics[0].partitions[0]
    return part.error_code == 0 and part.offset >= 0


async def measure(args: argparse.Namespace, brokers: list[Broker]) -> None:
    per = args.batches // args.partitions
    measures: dict[str, tuple[Callable[[random.Random], tuple[int, dict[str, Any]]], Callable[[Any], bool]]] = {
        "Fetch, one batch at a random offset": (
            lambda r: (ApiKey.FETCH, fetch_body(r.randrange(args.partitions), r.randrange(per), 1)),
            fetched,
        ),
        "Fetch, 1 MiB from a random offset": (
            lambda r: (ApiKey.FETCH, fetch_body(r.randrange(args.partitions), r.randrange(per), 1 << 20)),
            fetched,
        ),
        "ListOffsets, a random timestamp": (
            lambda r: (ApiKey.LIST_OFFSETS, list_body(r.randrange(args.partitions), r.randrange(per))),
            listed,
        ),
    }
    p50s: dict[str, dict[str, list[float]]] = {what: {b.name: [] for b in brokers} for what in measures}
    for r in range(args.rounds):
        conns = {b.name: await Conn.open("127.0.0.1", b.port) for b in brokers}
        for what, (make, check) in measures.items():
            rng = random.Random(r * 1000 + len(what))
            bodies = [make(rng) for _ in range(args.reads)]
            took: dict[str, list[float]] = {b.name: [] for b in brokers}
            cpu = dict.fromkeys(took, 0.0)
            for c, at in enumerate(range(0, len(bodies), _CHUNK)):  # the trees in turn, chunk by chunk
                for b in brokers if (r + c) % 2 == 0 else brokers[::-1]:
                    before = b.cpu()
                    took[b.name] += await timed(conns[b.name], bodies[at : at + _CHUNK], check)
                    cpu[b.name] += b.cpu() - before
            for name, got in took.items():
                got.sort()
                p50s[what][name].append(statistics.median(got) * 1e6)
                p99 = got[int(len(got) * 0.99)] * 1e6
                print(
                    f"round {r + 1} {name}: {what}: p50 {p50s[what][name][-1]:.1f} us, p99 {p99:.1f} us, "
                    f"broker CPU {cpu[name] / len(got) * 1e6:.0f} us a request",
                    flush=True,
                )
        for conn in conns.values():
            await conn.close()
    base = brokers[0].name
    for what, by_tree in p50s.items():
        print(what)
        for name, got in by_tree.items():
            median = statistics.median(got)
            print(
                f"  {name}: p50 {', '.join(f'{v:.1f}' for v in got)} us; median {median:.1f}; "
                f"/ {base} {median / statistics.median(by_tree[base]):.2f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH, the first one the base")
    parser.add_argument("--batches", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--reads", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    trees = [(name, Path(path).resolve()) for name, path in (t.split("=", 1) for t in args.tree)]
    work = Path(tempfile.mkdtemp(prefix="fetch-trees-"))
    brokers: list[Broker] = []
    try:
        for name, tree in trees:
            brokers.append(Broker(name, tree, work / name))
        for b in brokers:
            t0 = time.perf_counter()
            asyncio.run(fill(b.port, args.partitions, args.batches // args.partitions, b"v" * args.value_bytes))
            print(f"{b.name}: {args.batches} batches produced in {time.perf_counter() - t0:.0f} s", flush=True)
        asyncio.run(measure(args, brokers))
    finally:
        for b in brokers:
            b.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
