"""What a stored batch costs in memory, and what a read costs, for a partition log (issue 40).

``python -m bench.index_memory [--batches N] [--partitions P] [--reads R]`` appends N small batches
(one 10-byte record each) spread over P partition logs in a temporary directory, and reports the
Python heap the logs hold afterwards (tracemalloc, after a gc) per stored batch and per GiB stored, then
times R reads of one batch at random offsets, R ListOffsets-style timestamp lookups, and a reopen after
a clean close. Run it with ``PYTHONPATH`` naming a checkout to measure that checkout's storage/log.py.
Bounded: N and R are counts; nothing runs for longer than it takes to do them."""

from __future__ import annotations

import argparse
import gc
import random
import tempfile
import time
import tracemalloc
from pathlib import Path

from groupd.storage.batch import build_batch
from groupd.storage.log import Log, LogConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--reads", type=int, default=20_000)
    args = parser.parse_args()
    per = args.batches // args.partitions
    with tempfile.TemporaryDirectory() as tmp:
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        logs = [Log.open(Path(tmp) / f"t-{p}", LogConfig(), now_ms=lambda: 0) for p in range(args.partitions)]
        opened = tracemalloc.get_traced_memory()[0]
        stored = 0
        t0 = time.perf_counter()
        for lg in logs:
            for i in range(per):
                batch = build_batch([(None, b"v" * 10)], timestamp_ms=i)
                stored += len(batch)
                lg.append(batch)
        append_s = time.perf_counter() - t0
        for lg in logs:
            lg.flush()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        held = after - opened
        print(f"batches {per * args.partitions} over {args.partitions} logs, {stored / (1 << 20):.1f} MiB stored")
        print(f"heap held by the index: {held / 1024:.0f} KiB = {held / (per * args.partitions):.2f} bytes per batch,")
        per_gib = held / stored * (1 << 30) / (1 << 20)
        print(f"  {per_gib:.1f} MiB per GiB stored (the logs' own objects: {opened - before} B)")
        print(f"append: {append_s / (per * args.partitions) * 1e6:.1f} us per batch")
        rng = random.Random(1)
        t0 = time.perf_counter()
        for _ in range(args.reads):
            lg = logs[rng.randrange(len(logs))]
            lg.read(rng.randrange(per), 1)
        read_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(args.reads):
            lg = logs[rng.randrange(len(logs))]
            lg.offset_for_timestamp(rng.randrange(per))
        ts_s = time.perf_counter() - t0
        print(f"read one batch at a random offset: {read_s / args.reads * 1e6:.1f} us")
        print(f"offset for a random timestamp: {ts_s / args.reads * 1e6:.1f} us")
        for lg in logs:
            lg.close()
        t0 = time.perf_counter()
        logs = [Log.open(Path(tmp) / f"t-{p}", LogConfig(), now_ms=lambda: 0) for p in range(args.partitions)]
        print(f"reopen after a clean close: {(time.perf_counter() - t0) * 1000:.1f} ms for {args.partitions} logs")
        for lg in logs:
            lg.close()


if __name__ == "__main__":
    main()
