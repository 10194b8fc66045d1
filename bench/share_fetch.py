"""Share groups (KIP-932) on one partition: ShareFetch + acknowledge throughput with 1, 8 and 32 members,
the redelivery latency after an acquisition lock expires, and a consumer reading the same topic with
Fetch + OffsetCommit for comparison, in one run against one in-process broker over loopback sockets.

    .venv/bin/python -m bench.share_fetch [records] [seconds]     (default 200000 60)

Each member is a connection looping ShareFetch (MaxRecords 500, its previous records ACCEPTed in the
same request, as librdkafka piggy-backs them) until the topic is drained; the persister is the share
coordinator, writing __share_group_state (fsync off, as the other benches run by default). Bounded in
records and seconds per phase.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench import client
from bench.run import groupd_overrides
from groupd.broker.app import Broker
from groupd.broker.config import default_config
from groupd.coordinator.share.config import ShareGroupConfig
from groupd.coordinator.share_state.persister import SharePartitionKey
from groupd.protocol.api_table import ApiKey
from groupd.storage.batch import build_batch

SHARE_FETCH, FETCH, PRODUCE, OFFSET_COMMIT = (
    int(ApiKey.SHARE_FETCH),
    int(ApiKey.FETCH),
    int(ApiKey.PRODUCE),
    int(ApiKey.OFFSET_COMMIT),
)
PER_BATCH = 100  # records per produced batch


async def fill(conn: client.Conn, topic: str, n: int) -> None:
    for i in range(0, n, PER_BATCH):
        batch = bytes(build_batch([(None, b"x" * 100)] * min(PER_BATCH, n - i), timestamp_ms=1000))
        r = await conn.call(
            PRODUCE,
            9,
            {
                "transactional_id": None,
                "acks": -1,
                "timeout": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
            },
        )
        assert r.responses[0].partition_responses[0].error_code == 0


def share_fetch_body(
    group: str,
    member: str,
    tid: uuid.UUID,
    epoch: int,
    acks: list,
    max_wait: int = 500,
    partitions: tuple[int, ...] = (0,),
) -> dict[str, Any]:
    """A ShareFetch of these partitions of one topic, ACCEPTing ``acks`` (offset ranges) of the first."""
    batches = [{"first_offset": f, "last_offset": last, "acknowledge_types": [1]} for f, last in acks]
    return {
        "group_id": group,
        "member_id": member,
        "share_session_epoch": epoch,
        "max_wait": max_wait,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "max_records": 500,
        "batch_size": 500,
        "share_acquire_mode": 0,
        "is_renew_ack": False,
        "topics": [
            {
                "topic_id": tid,
                "partitions": [
                    {"partition_index": p, "acknowledgement_batches": batches if i == 0 else []}
                    for i, p in enumerate(partitions)
                ],
            }
        ],
        "forgotten_topics_data": [],
    }


async def share_member(
    port: int, group: str, member: str, tid: uuid.UUID, done: dict[str, int], total: int, deadline: float
) -> None:
    conn = await client.Conn.open("127.0.0.1", port)
    epoch, acks = 0, []
    try:
        while done["n"] < total and time.monotonic() < deadline:
            r = await conn.call(SHARE_FETCH, 1, share_fetch_body(group, member, tid, epoch, acks, max_wait=200))
            if r.error_code:
                raise RuntimeError(f"ShareFetch answered {r.error_code}")
            epoch += 1
            acks = [
                (a.first_offset, a.last_offset) for t in r.responses for p in t.partitions for a in p.acquired_records
            ]
            done["n"] += sum(last - f + 1 for f, last in acks)
        if acks:  # the last ones, and the session closed
            await conn.call(SHARE_FETCH, 1, share_fetch_body(group, member, tid, -1, acks, max_wait=0))
    finally:
        await conn.close()


async def share_throughput(
    broker: Broker, port: int, tid: uuid.UUID, members: int, total: int, seconds: float
) -> dict[str, Any]:
    group = f"share-{members}"
    await broker.share_persister.initialize(SharePartitionKey(group, tid, 0), 0, 0)
    done = {"n": 0}
    started = time.perf_counter()
    deadline = time.monotonic() + seconds
    await asyncio.gather(*(share_member(port, group, f"m{i}", tid, done, total, deadline) for i in range(members)))
    took = time.perf_counter() - started
    return {
        "members": members,
        "records": done["n"],
        "seconds": round(took, 2),
        "records_per_s": round(done["n"] / took),
    }


async def consumer_throughput(port: int, topic: str, total: int, seconds: float) -> dict[str, Any]:
    """One consumer of a classic group's partition: Fetch from its position and commit after each answer."""
    conn = await client.Conn.open("127.0.0.1", port)
    offset = 0
    started = time.perf_counter()
    deadline = time.monotonic() + seconds
    try:
        while offset < total and time.monotonic() < deadline:
            r = await conn.call(
                FETCH,
                11,
                {
                    "replica_id": -1,
                    "max_wait": 200,
                    "min_bytes": 1,
                    "max_bytes": 1 << 20,
                    "isolation_level": 0,
                    "session_id": 0,
                    "session_epoch": -1,
                    "rack_id": "",
                    "forgotten_topics_data": [],
                    "topics": [
                        {
                            "topic": topic,
                            "partitions": [
                                {
                                    "partition": 0,
                                    "current_leader_epoch": -1,
                                    "fetch_offset": offset,
                                    "log_start_offset": -1,
                                    "partition_max_bytes": 1 << 20,
                                }
                            ],
                        }
                    ],
                },
            )
            data = r.responses[0].partitions[0].records or b""
            last = offset - 1
            pos = 0
            while pos + 61 <= len(data):  # batch headers: base offset, length, last offset delta at 23
                base = int.from_bytes(data[pos : pos + 8], "big")
                last = base + int.from_bytes(data[pos + 23 : pos + 27], "big")
                pos += 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
            if last >= offset:
                offset = last + 1
                await conn.call(
                    OFFSET_COMMIT,
                    8,
                    {
                        "group_id": "classic",
                        "generation_id_or_member_epoch": -1,
                        "member_id": "",
                        "group_instance_id": None,
                        "retention_time_ms": -1,
                        "topics": [
                            {
                                "name": topic,
                                "partitions": [
                                    {
                                        "partition_index": 0,
                                        "committed_offset": offset,
                                        "committed_leader_epoch": -1,
                                        "committed_metadata": None,
                                    }
                                ],
                            }
                        ],
                    },
                )
    finally:
        await conn.close()
    took = time.perf_counter() - started
    return {"records": offset, "seconds": round(took, 2), "records_per_s": round(offset / took)}


async def redelivery_latency(broker: Broker, port: int, rounds: int = 5, lock_ms: int = 300) -> dict[str, Any]:
    """A acquires every record there is and goes quiet; B long-polls; how long after A's lock deadline B
    gets them."""
    group = "redelivery"
    tid = broker.create_topic("bench-redelivery", 1, {}).topic_id
    broker.share_partitions.config_for = lambda g: (
        ShareGroupConfig(record_lock_duration_ms=lock_ms) if g == group else ShareGroupConfig()
    )
    await broker.share_persister.initialize(SharePartitionKey(group, tid, 0), 0, 0)
    a, b = await client.Conn.open("127.0.0.1", port), await client.Conn.open("127.0.0.1", port)
    late: list[float] = []
    ea = eb = 0
    try:
        for _ in range(rounds):
            await fill(a, "bench-redelivery", 10)
            r = await a.call(SHARE_FETCH, 1, share_fetch_body(group, "A", tid, ea, [], max_wait=1000))
            ea += 1
            got = [
                (x.first_offset, x.last_offset) for t in r.responses for p in t.partitions for x in p.acquired_records
            ]
            acquired_at = time.monotonic()
            r = await b.call(SHARE_FETCH, 1, share_fetch_body(group, "B", tid, eb, [], max_wait=5000))
            eb += 1
            redelivered = [x for t in r.responses for p in t.partitions for x in p.acquired_records]
            if got and redelivered:
                late.append((time.monotonic() - acquired_at) * 1000 - lock_ms)
            # B accepts them so the next round starts on fresh records
            await b.call(
                SHARE_FETCH,
                1,
                share_fetch_body(
                    group, "B", tid, eb, [(x.first_offset, x.last_offset) for x in redelivered], max_wait=0
                ),
            )
            eb += 1
    finally:
        await a.close()
        await b.close()
    return {
        "lock_ms": lock_ms,
        "rounds": len(late),
        "late_ms_median": round(statistics.median(late), 1) if late else None,
        "late_ms_max": round(max(late), 1) if late else None,
    }


async def main(total: int, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        broker = Broker(default_config(**groupd_overrides(False, Path(tmp), 0)))
        await broker.start()
        while not broker.coordinator.is_loaded():
            await asyncio.sleep(0.01)
        try:
            port = broker.port
            topic = broker.create_topic("bench-share", 1, {})
            conn = await client.Conn.open("127.0.0.1", port)
            await fill(conn, "bench-share", total)
            await conn.close()
            out: dict[str, Any] = {"records": total}
            out["consumer"] = await consumer_throughput(port, "bench-share", total, seconds)
            out["share"] = [await share_throughput(broker, port, topic.topic_id, m, total, seconds) for m in (1, 8, 32)]
            out["redelivery"] = await redelivery_latency(broker, port)
            return out
        finally:
            await broker.stop()


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    print(json.dumps(asyncio.run(main(n, secs)), indent=1))
