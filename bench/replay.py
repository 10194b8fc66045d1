"""Start-up replay speed: write N offset-commit records into one offsets partition, then load it the way
the coordinator does at start-up (the same ``replay``), and report records/s.

Three starts of the same store: after a clean shutdown (segment indexes written at close, the walk
shared with one helper process: the defaults), after an unclean one (every segment scanned, the last
CRC-checked), and with ``num.recovery.threads.per.data.dir=1`` (the broker walks alone). A fourth store
where every record is a survivor (a compacted store: one record per key) measures decoding and replay
rather than the walk."""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from groupd.broker.config import default_config
from groupd.coordinator.records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value
from groupd.coordinator.service import GroupCoordinator
from groupd.storage.local import LocalEngine
from groupd.storage.log import INDEX_SUFFIX, Log, LogConfig


def write_store(directory: Path, records: int, key_of: Callable[[int], OffsetCommitKey], per_batch: int) -> None:
    log = Log.open(directory / "__consumer_offsets-0", LogConfig(segment_bytes=100 * 1024 * 1024))
    batch = []
    for i in range(records):
        batch.append((encode_key(key_of(i)), encode_value(OffsetCommitValue(i, "", 1_700_000_000_000))))
        if len(batch) == per_batch or i == records - 1:
            log.append_records(batch, 1_700_000_000_000)
            batch = []
    log.flush()
    log.close()  # a clean close: segment indexes written


def load(directory: Path, walkers: int = 2) -> dict:
    """One start-up of the coordinator over ``directory``, in a fresh process set up as ``groupd/server.py``
    sets up the broker (uvloop, its GC tuning): records/s from start to loaded."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.replay", "--load", str(directory), "--walkers", str(walkers)],
        capture_output=True, text=True, check=True, timeout=600, cwd=Path(__file__).resolve().parents[1],
    )
    return json.loads(done.stdout)


def _load_here(directory: Path, walkers: int) -> dict:
    import uvloop

    from groupd.server import tune_gc

    tune_gc()
    started = time.perf_counter()
    coordinator = GroupCoordinator(default_config(**{
        "log.dirs": str(directory), "offsets.topic.num.partitions": "1",
        "num.recovery.threads.per.data.dir": str(walkers),
    }), LocalEngine(directory))
    uvloop.run(_load_only(coordinator))
    seconds = time.perf_counter() - started
    state = coordinator.shards[0].state
    n = coordinator.loaded_records
    offsets = sum(len(ps) for by_topic in state.offsets.committed.values() for ps in by_topic.values())
    return {
        "count": n,
        "seconds": round(seconds, 3),
        "per_second": round(n / seconds, 1),
        "groups": len(state.groups),
        "offsets": offsets,
    }


def replay_bench(records: int = 1_000_000, groups: int = 10_000, per_batch: int = 10) -> dict:
    out: dict = {"scenario": "replay"}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_store(root, records, lambda i: OffsetCommitKey(f"group-{i % groups}", "topic", i % 12), per_batch)
        out.update(load(root))
        out["alone"] = load(root, walkers=1)
        for index in (root / "__consumer_offsets-0").glob(f"*{INDEX_SUFFIX}"):
            index.unlink()  # as after a crash: nothing to trust but the segments
        out["unclean"] = load(root)
    with tempfile.TemporaryDirectory() as tmp:
        # every record a survivor: 100 groups x 12 partitions x one topic per 1,200 records
        root = Path(tmp)
        write_store(
            root,
            max(1_200, records // 5),
            lambda i: OffsetCommitKey(f"group-{i % 100}", f"topic-{i // 1_200}", i // 100 % 12),
            per_batch,
        )
        out["all_survivors"] = load(root)
    return out


async def _load_only(coordinator: GroupCoordinator) -> None:
    await coordinator.start()
    while not coordinator.is_loaded():
        await asyncio.sleep(0.01)
    await coordinator.stop()


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__)
    cli.add_argument("--load", type=Path, help="(internal) load this directory once and print the figures")
    cli.add_argument("--walkers", type=int, default=2)
    cli.add_argument("--records", type=int, default=1_000_000)
    args = cli.parse_args()
    print(json.dumps(_load_here(args.load, args.walkers) if args.load else replay_bench(args.records), indent=1))
