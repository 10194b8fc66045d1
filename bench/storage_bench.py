"""Storage micro-benchmark: group-commit throughput (append + fsync) and replay speed, through the
storage seam (groupd/storage/engine.py) over the local engine, as the broker writes.

    .venv/bin/python -m bench.storage_bench [--seconds 2.5] [--dir /path/on/the/disk/to/test]

Bounded in time (well under 30 s by default). Numbers are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import tempfile
import time
from pathlib import Path

from groupd.storage.batch import build_batch, iter_records
from groupd.storage.engine import LogConfig, PartitionLog
from groupd.storage.local import LocalEngine


def open_log(directory: Path) -> PartitionLog:
    return LocalEngine(directory.parent).open_partition(directory.name, 0, LogConfig())


async def group_commit(directory: Path, writers: int, seconds: float) -> dict[str, float]:
    """``writers`` tasks each append a small record and wait until it is durable, in a loop."""
    log = open_log(directory)
    committer = LocalEngine(directory.parent).durability()
    rounds: list[int] = []  # waiters of each fsync round
    committer.observers.append(lambda _seconds, waiters: rounds.append(waiters))
    deadline = time.perf_counter() + seconds
    done = 0
    latencies: list[float] = []

    async def writer(i: int) -> None:
        nonlocal done
        record = [(b"group-%d" % i, b"x" * 60)]
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            log.append_records(record, 1)
            await committer.durable(log)
            latencies.append(time.perf_counter() - t0)
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(writer(i) for i in range(writers)))
    elapsed = time.perf_counter() - start
    await committer.close()
    log.close()
    latencies.sort()
    return {
        "writers": writers,
        "appends_per_s": done / elapsed,
        "fsyncs_per_s": len(rounds) / elapsed,
        "avg_waiters_per_fsync": sum(rounds) / max(1, len(rounds)),
        "p50_ms": latencies[len(latencies) // 2] * 1000 if latencies else 0.0,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000 if latencies else 0.0,
    }


def replay(directory: Path, records: int, per_batch: int) -> dict[str, float]:
    """Append ``records`` small records in batches of ``per_batch``; time a cold-ish full replay."""
    log = open_log(directory)
    batch = build_batch(
        [(b"offset-key-%04d" % i, b"offset-value-%04d" % i) for i in range(per_batch)], timestamp_ms=1
    )
    t0 = time.perf_counter()
    for _ in range(records // per_batch):
        log.append(batch)
    log.flush()
    append_s = time.perf_counter() - t0
    log.close()
    log = open_log(directory)
    t1 = time.perf_counter()
    count = 0
    for header, _view in log.batches():
        count += header.record_count
    batches_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    decoded = 0
    for _header, view in log.batches():
        for _record in iter_records(view):
            decoded += 1
    decode_s = time.perf_counter() - t2
    log.close()
    t3 = time.perf_counter()
    log = open_log(directory)  # indexes every batch, CRC-checks the last segment
    open_s = time.perf_counter() - t3
    log.close()
    assert count == decoded == records - records % per_batch
    return {
        "records": count,
        "per_batch": per_batch,
        "append_records_per_s": count / append_s,
        "batches_records_per_s": count / batches_s,
        "decode_records_per_s": decoded / decode_s,
        "open_s": open_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.5, help="duration of each group-commit run")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="storage-bench-", dir=args.dir))
    try:
        with contextlib.suppress(ImportError):
            import uvloop

            asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        print(f"directory: {root}")
        for writers in (1, 8, 64):
            r = asyncio.run(group_commit(root / f"gc-{writers}", writers, args.seconds))
            print(
                f"group commit  writers={writers:3d}: {r['appends_per_s']:9.0f} durable appends/s, "
                f"{r['fsyncs_per_s']:7.0f} fsyncs/s, {r['avg_waiters_per_fsync']:6.1f} waiters/fsync, "
                f"p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms"
            )
        for per_batch in (10, 1):
            records = args.records if per_batch > 1 else args.records // 4
            r = replay(root / f"replay-{per_batch}", records, per_batch)
            print(
                f"replay {r['records']:8d} records, {per_batch:2d}/batch: append {r['append_records_per_s']:10.0f}/s, "
                f"batches() {r['batches_records_per_s']:10.0f} records/s, "
                f"batches()+iter_records {r['decode_records_per_s']:9.0f} records/s, "
                f"open {r['open_s']:.2f} s"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
