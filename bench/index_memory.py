"""What a stored batch costs in memory, and what a read costs, for a partition log (issue 40).

``python -m bench.index_memory [--batches N] [--partitions P] [--value-bytes V] [--reads R] [--rss]``
appends N batches of one V-byte record (170 bytes a batch with V=100) spread over P partition logs in a
temporary directory, and reports what the logs hold afterwards per stored batch and per GiB stored: the
Python heap (tracemalloc, after a gc), or with ``--rss`` the process's resident set (no tracemalloc, so
10 million appends fit in minutes). Then it times R reads of one batch at random offsets (a Fetch's
lookup; with many logs their index blocks are mostly not in the block cache), R reads at random offsets
of one log (its few blocks stay cached), R reads at the log end (a consumer that keeps up), and R
ListOffsets-style timestamp lookups, and a reopen after a clean close. Run it with ``PYTHONPATH`` naming
a checkout to measure that checkout's storage/log.py. Bounded: N and R are counts; nothing runs for longer
than it takes to do them."""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from groupd.storage.batch import build_batch
from groupd.storage.log import Log, LogConfig

MIB = 1 << 20
_INDEX_ARRAYS = ("offsets", "positions", "max_ts", "first_offsets", "first_positions", "block_ts")


def index_bytes(logs: list[Log]) -> int:
    """What the segments' index arrays allocate, headers and spare room included (exact, where RSS is
    blurred by the allocator): on the segment itself, or (storage/segment_index.py) on its index."""
    total = 0
    for lg in logs:
        for seg in lg.segments:
            holder = getattr(seg, "index", seg)
            total += sum(sys.getsizeof(getattr(holder, name)) for name in _INDEX_ARRAYS if hasattr(holder, name))
    return total


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def timed(reads: int, call: Callable[[random.Random], object]) -> str:
    """p50, p99 and the worst of ``reads`` calls, in microseconds."""
    rng = random.Random(1)
    took = []
    for _ in range(reads):
        t0 = time.perf_counter()
        call(rng)
        took.append(time.perf_counter() - t0)
    took.sort()
    p50, p99 = statistics.median(took), took[int(len(took) * 0.99)]
    return f"p50 {p50 * 1e6:.1f} us, p99 {p99 * 1e6:.1f} us, max {took[-1] * 1e6:.0f} us"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--value-bytes", type=int, default=10)
    parser.add_argument("--reads", type=int, default=20_000)
    parser.add_argument("--rss", action="store_true", help="the resident set instead of the traced heap")
    args = parser.parse_args()
    per = args.batches // args.partitions
    value = b"v" * args.value_bytes
    with tempfile.TemporaryDirectory() as tmp:
        gc.collect()
        if not args.rss:
            tracemalloc.start()
        logs = [Log.open(Path(tmp) / f"t-{p}", LogConfig(), now_ms=lambda: 0) for p in range(args.partitions)]
        gc.collect()
        opened = rss_bytes() if args.rss else tracemalloc.get_traced_memory()[0]
        stored = 0
        t0 = time.perf_counter()
        for i in range(per):
            batch = build_batch([(None, value)], timestamp_ms=i)
            for lg in logs:  # the partitions grow side by side, as under a producer's load
                lg.append(batch)
            stored += len(batch) * len(logs)
            if i % 1000 == 999:
                for lg in logs:
                    lg.flush()
        append_s = time.perf_counter() - t0
        for lg in logs:
            lg.flush()
        gc.collect()
        after = rss_bytes() if args.rss else tracemalloc.get_traced_memory()[0]
        if not args.rss:
            tracemalloc.stop()
        held = after - opened
        what = "resident set grew" if args.rss else "heap held by the logs"
        print(f"batches {per * args.partitions} over {args.partitions} logs, {stored / MIB:.1f} MiB stored")
        print(f"{what}: {held / 1024:.0f} KiB = {held / (per * args.partitions):.2f} bytes per batch,")
        print(f"  {held / stored * (1 << 30) / MIB:.2f} MiB per GiB stored")
        arrays = index_bytes(logs)
        print(f"index arrays: {arrays / 1024:.0f} KiB, {arrays / stored * (1 << 30) / MIB:.2f} MiB per GiB stored")
        print(f"append: {append_s / (per * args.partitions) * 1e6:.1f} us per batch ({append_s:.0f} s)")

        def random_read(rng: random.Random) -> object:
            return logs[rng.randrange(len(logs))].read(rng.randrange(per), 1)

        def cached_read(rng: random.Random) -> object:
            return logs[0].read(rng.randrange(per), 1)

        def tail_read(rng: random.Random) -> object:
            return logs[rng.randrange(len(logs))].read(per - 1 - rng.randrange(20), 1)

        def by_timestamp(rng: random.Random) -> object:
            return logs[rng.randrange(len(logs))].offset_for_timestamp(rng.randrange(per))

        print(f"read one batch at a random offset: {timed(args.reads, random_read)}")
        timed(args.reads, cached_read)  # its blocks into the cache first
        print(f"read one batch at a random offset of one log: {timed(args.reads, cached_read)}")
        print(f"read one batch near the log end: {timed(args.reads, tail_read)}")
        print(f"offset for a random timestamp: {timed(args.reads, by_timestamp)}")
        if args.rss:
            print(f"resident set after the reads: {(rss_bytes() - opened) / MIB:.1f} MiB over the opened logs")
        for lg in logs:
            lg.close()
        t0 = time.perf_counter()
        logs = [Log.open(Path(tmp) / f"t-{p}", LogConfig(), now_ms=lambda: 0) for p in range(args.partitions)]
        print(f"reopen after a clean close: {(time.perf_counter() - t0) * 1000:.1f} ms for {args.partitions} logs")
        for lg in logs:
            lg.close()


if __name__ == "__main__":
    main()
