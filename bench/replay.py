"""Start-up replay speed: write N offset-commit records into one offsets partition, then load it the way
the coordinator does at start-up (the same ``replay``), and report records/s."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from broker.config import default_config
from coordinator.records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value
from coordinator.service import GroupCoordinator
from storage.log import Log, LogConfig


def replay_bench(records: int = 1_000_000, groups: int = 10_000, per_batch: int = 10) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        log = Log.open(Path(tmp) / "__consumer_offsets-0", LogConfig(segment_bytes=100 * 1024 * 1024))
        batch = []
        written = 0
        for i in range(records):
            key = encode_key(OffsetCommitKey(f"group-{i % groups}", "topic", i % 12))
            batch.append((key, encode_value(OffsetCommitValue(i, "", 1_700_000_000_000))))
            if len(batch) == per_batch:
                log.append_records(batch, 1_700_000_000_000)
                written += len(batch)
                batch = []
        if batch:
            log.append_records(batch, 1_700_000_000_000)
        log.flush()
        log.close()
        started = time.perf_counter()
        coordinator = GroupCoordinator(default_config(**{"log.dirs": tmp, "offsets.topic.num.partitions": "1"}))
        asyncio.run(_load_only(coordinator))
        seconds = time.perf_counter() - started
        state = coordinator.shards[0].state
        n = coordinator.loaded_records
        offsets = sum(len(ps) for g in state.groups.values() for ps in g.offsets.values())
        return {"scenario": "replay", "count": n, "seconds": round(seconds, 3), "per_second": round(n / seconds, 1), "groups": len(state.groups), "offsets": offsets}


async def _load_only(coordinator: GroupCoordinator) -> None:
    await coordinator.start()
    while not coordinator.is_loaded():
        await asyncio.sleep(0.01)
    await coordinator.stop()


if __name__ == "__main__":
    import json

    print(json.dumps(replay_bench(), indent=1))
