"""Share coordinator micro-benchmark: WriteShareGroupState through the in-process Persister (each answer
after its record is durable, fsync on) with 1 and 32 writers, and the start-up replay of
``__share_group_state``.

    .venv/bin/python -m bench.share_state_bench [--seconds 2] [--states 1000] [--updates 20]

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
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.seconds, args.states, args.updates)), indent=1))
