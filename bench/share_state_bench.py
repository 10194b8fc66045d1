"""Share coordinator micro-benchmark: WriteShareGroupState through the in-process Persister (each answer
after its record is durable, fsync on) with 1 and 32 writers, and the start-up replay of
``__share_group_state``.

    .venv/bin/python -m bench.share_state_bench [--seconds 2] [--states 1000] [--updates 20]

``--remote N``: instead, two in-process cluster nodes over a private PostgreSQL (tests/postgresql_server.py,
fsync off: the RPCs are measured, not the disk); N share-partitions of one share group whose state node 2
holds are written from node 1 at once, each writer one write at a time, so every write is a
WriteShareGroupState to node 2 (groupd/cluster/share_state.py). It prints the writes a second and how
many requests carried them (calls per request: the batching of share_state_batches.py). Run the file with
PYTHONPATH at another tree to measure that tree's client (a tree without batching counts one request a call).

Bounded in time and count (well under a minute by default). Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from groupd.broker.app import Broker
from groupd.broker.config import default_config
from groupd.coordinator.share_state.persister import ACKNOWLEDGED, AVAILABLE, SharePartitionKey, StateBatch


def _config(root: Path) -> Any:
    return default_config(
        **{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(root), "metrics.listener": "", "log.level": "WARN"}
    )


def _batches(i: int) -> tuple[StateBatch, ...]:
    return (StateBatch(i, i, ACKNOWLEDGED, 1), StateBatch(i + 1, i + 4, AVAILABLE, 1))


async def _started(root: Path, keys: int) -> tuple[Broker, list[SharePartitionKey]]:
    """A broker with ``keys`` share-partitions initialized over an 8-partition topic."""
    b = Broker(_config(root))
    await b.start()
    topic = b.create_topic("bench", 8, {})
    ks = [SharePartitionKey(f"g{i}", topic.topic_id, i % 8) for i in range(keys)]
    await asyncio.gather(*(b.share_persister.initialize(k, 0, 0) for k in ks))
    return b, ks


async def writes(root: Path, writers: int, seconds: float) -> dict[str, float]:
    b, keys = await _started(root, writers)
    try:
        deadline = time.perf_counter() + seconds
        latencies: list[float] = []

        async def writer(k: SharePartitionKey) -> None:
            i = 0
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                await b.share_persister.write(k, 0, 0, -1, i, _batches(i))
                latencies.append(time.perf_counter() - t0)
                i += 1

        started = time.perf_counter()
        await asyncio.gather(*(writer(k) for k in keys))
        elapsed = time.perf_counter() - started
    finally:
        await b.stop()
    latencies.sort()
    return {
        "writers": writers,
        "writes_per_s": round(len(latencies) / elapsed),
        "p50_ms": round(latencies[len(latencies) // 2] * 1000, 2),
        "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 2),
    }


async def load(root: Path, states: int, updates: int) -> dict[str, float]:
    b, keys = await _started(root, states)
    try:

        async def history(k: SharePartitionKey) -> None:
            for i in range(updates):
                await b.share_persister.write(k, 0, 0, -1, i, _batches(i))

        await asyncio.gather(*(history(k) for k in keys))
    finally:
        await b.stop()
    b = Broker(_config(root))
    t0 = time.perf_counter()
    await b.share_coordinator.start()
    elapsed = time.perf_counter() - t0
    records = b.share_coordinator.loaded_records
    await b.share_coordinator.stop()
    return {
        "states": states,
        "records": records,
        "load_s": round(elapsed, 3),
        "records_per_s": round(records / elapsed),
    }


async def remote(writers: int, seconds: float) -> dict[str, float]:
    from groupd.coordinator.share_state.keys import state_partition
    from groupd.protocol.api_table import ApiKey
    from groupd.protocol.topic_names import SHARE_STATE_TOPIC
    from tests.cluster.stepped import STATE_SHARDS, step, two_started
    from tests.cluster.test_broker_nodes import metadata
    from tests.postgresql_server import running
    from tests.wire.test_quotas import create_topics_body

    root = Path(tempfile.mkdtemp(prefix="share-state-bench-"))
    try:
        with running() as server:
            async with two_started(root, server.database()) as both:
                one, two = both.nodes[1], both.nodes[2]
                assert one.cluster is not None
                await step(one, two)
                await both.clients[1].call(ApiKey.CREATE_TOPICS, 7, create_topics_body(7, [("bench", writers * 4)]))
                tid = (await metadata(both.clients[1], "bench")).topics[0].topic_id
                await step(one, two, one, two)
                keys = [
                    k
                    for g in range(writers * 4)
                    if one.cluster.leader(
                        SHARE_STATE_TOPIC, state_partition(k := SharePartitionKey("bench", tid, g), STATE_SHARDS)
                    )
                    == 2
                ][:writers]
                assert len(keys) == writers, "too few share-partitions whose state node 2 holds"
                assert not any(await asyncio.gather(*(one.share_persister.initialize(k, 0, 0) for k in keys)))
                client = one.cluster.share_state
                batches = getattr(client, "batches", None)  # absent in a tree without batching
                calls0, requests0 = client.remote_calls, batches.requests_sent if batches else client.remote_calls
                deadline = time.perf_counter() + seconds
                done = 0

                async def writer(k: SharePartitionKey) -> None:
                    nonlocal done
                    i = 0
                    while time.perf_counter() < deadline:
                        code = await one.share_persister.write(k, 0, 0, -1, i, _batches(i))
                        assert code == 0, code
                        done += 1
                        i += 1

                started = time.perf_counter()
                await asyncio.gather(*(writer(k) for k in keys))
                elapsed = time.perf_counter() - started
                calls = client.remote_calls - calls0
                requests = (batches.requests_sent if batches else client.remote_calls) - requests0
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "writers": writers,
        "writes_per_s": round(done / elapsed),
        "remote_calls": calls,
        "requests": requests,
        "calls_per_request": round(calls / max(requests, 1), 2),
    }


async def main(seconds: float, states: int, updates: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for writers in (1, 32):
        root = Path(tempfile.mkdtemp(prefix="share-state-bench-"))
        try:
            out[f"write_{writers}"] = await writes(root, writers, seconds)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    root = Path(tempfile.mkdtemp(prefix="share-state-bench-"))
    try:
        out["load"] = await load(root, states, updates)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--states", type=int, default=1000)
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--remote", type=int, default=0, help="writers from node 1 to node 2's share coordinator")
    args = parser.parse_args()
    if args.remote:
        print(json.dumps(asyncio.run(remote(args.remote, args.seconds)), indent=1))
    else:
        print(json.dumps(asyncio.run(main(args.seconds, args.states, args.updates)), indent=1))
