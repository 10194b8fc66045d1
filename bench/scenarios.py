"""Load scenarios over raw sockets. Every scenario is bounded in count and in time."""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from bench.client import Conn, nested

JOIN_V, SYNC_V, HB_V, COMMIT_V, META_V = 5, 3, 3, 8, 9
SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x05bench\xff\xff\xff\xff"
ASSIGNMENT = b"\x00\x00\x00\x00\x00\x01\x00\x05bench\x00\x00\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff"
REBALANCE_IN_PROGRESS = 27


@dataclass
class Stats:
    name: str
    count: int = 0
    errors: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies)

        def pct(p: float) -> float:
            return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 3) if lat else float("nan")

        return {
            "scenario": self.name,
            "count": self.count,
            "errors": self.errors,
            "seconds": round(self.seconds, 3),
            "per_second": round(self.count / self.seconds, 1) if self.seconds else 0.0,
            "p50_ms": pct(0.50),
            "p99_ms": pct(0.99),
            "p999_ms": pct(0.999),
            "mean_ms": round(statistics.fmean(lat) * 1000, 3) if lat else float("nan"),
        }


def _join_body(group: str, member_id: str) -> dict[str, Any]:
    proto = nested(11, JOIN_V, "JoinGroupRequestProtocol")
    return {
        "group_id": group, "session_timeout": 30_000, "rebalance_timeout": 30_000, "member_id": member_id,
        "group_instance_id": None, "protocol_type": "consumer", "protocols": (proto(name="range", metadata=SUBSCRIPTION),),
    }




async def _member_id(conn: Conn, group: str) -> str:
    """JoinGroup v4+ with an empty id: the coordinator answers MEMBER_ID_REQUIRED and holds the id pending."""
    join = await conn.call(11, JOIN_V, _join_body(group, ""))
    return join.member_id


async def _member(conn: Conn, group: str, member_id: str) -> bool:
    """Join with the id, then sync (the leader sends the assignment); rejoin while the group rebalances.

    Every member got its id first, so the coordinator counts them all as pending and completes the join
    phase once, the instant the last one arrives (Kafka's rule since KIP-394)."""
    for _ in range(10):
        join = await conn.call(11, JOIN_V, _join_body(group, member_id))
        if join.error_code == REBALANCE_IN_PROGRESS:
            continue
        if join.error_code != 0:
            return False
        assignments = ()
        if join.leader == join.member_id:
            a = nested(14, SYNC_V, "SyncGroupRequestAssignment")
            assignments = tuple(a(member_id=m.member_id, assignment=ASSIGNMENT) for m in join.members)
        sync = await conn.call(14, SYNC_V, {
            "group_id": group, "generation_id": join.generation_id, "member_id": join.member_id,
            "group_instance_id": None, "assignments": assignments,
        })
        if sync.error_code == REBALANCE_IN_PROGRESS:
            continue
        return sync.error_code == 0
    return False


async def rebalance(host: str, port: int, groups: int, members: int = 3, concurrency: int = 64, max_seconds: float = 60, prefix: str | None = None) -> Stats:
    """G groups x M members join+sync (members on their own connections); latency first join -> last sync."""
    stats = Stats("rebalance")
    prefix = prefix or f"bench-{os.getpid()}-{time.monotonic_ns()}"
    sem = asyncio.Semaphore(concurrency)
    deadline = time.monotonic() + max_seconds

    async def one(i: int) -> None:
        async with sem:
            if time.monotonic() > deadline:
                return
            conns = [await Conn.open(host, port) for _ in range(members)]
            try:
                group = f"{prefix}-{i}"
                started = time.perf_counter()
                ids = await asyncio.wait_for(asyncio.gather(*(_member_id(c, group) for c in conns)), 30)
                ok = await asyncio.wait_for(asyncio.gather(*(_member(c, group, m) for c, m in zip(conns, ids, strict=True))), 30)
                stats.latencies.append(time.perf_counter() - started)
                stats.count += 1
                stats.errors += sum(1 for x in ok if not x)
            except (TimeoutError, ConnectionError):
                stats.errors += 1
            finally:
                for c in conns:
                    await c.close()

    began = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(groups)))
    stats.seconds = time.perf_counter() - began
    return stats


async def ensure_topic(host: str, port: int, topic: str, partitions: int = 1) -> None:
    conn = await Conn.open(host, port)
    t = nested(19, 5, "CreatableTopic")
    await conn.call(19, 5, {"topics": (t(name=topic, num_partitions=partitions, replication_factor=1, assignments=(), configs=()),), "timeout": 5000, "validate_only": False})
    await conn.close()


async def commits(host: str, port: int, committers: int, max_seconds: float = 5, max_count: int = 200_000, same_group: bool = False) -> Stats:
    """Simple OffsetCommits (generation -1), one in flight per committer, each on its own connection."""
    topic = "bench-commits"
    await ensure_topic(host, port, topic)
    stats = Stats(f"commits-{committers}{'-samegroup' if same_group else ''}")
    tcls = nested(8, COMMIT_V, "OffsetCommitRequestTopic")
    pcls = nested(8, COMMIT_V, "OffsetCommitRequestPartition")
    stop_at = time.monotonic() + max_seconds
    tag = f"{os.getpid()}-{time.monotonic_ns()}"

    async def committer(i: int) -> None:
        conn = await Conn.open(host, port)
        group = f"commit-{tag}" if same_group else f"commit-{tag}-{i}"
        offset = 0
        try:
            while time.monotonic() < stop_at and stats.count < max_count:
                offset += 1
                body = {
                    "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                    "retention_time": -1,
                    "topics": (tcls(name=topic, partitions=(pcls(partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""),)),),
                }
                started = time.perf_counter()
                resp = await conn.call(8, COMMIT_V, body)
                stats.latencies.append(time.perf_counter() - started)
                stats.count += 1
                if resp.topics[0].partitions[0].error_code != 0:
                    stats.errors += 1
        finally:
            await conn.close()

    began = time.perf_counter()
    await asyncio.gather(*(committer(i) for i in range(committers)))
    stats.seconds = time.perf_counter() - began
    return stats


async def heartbeats(host: str, port: int, groups: int, max_seconds: float = 10, interval: float = 1.0) -> tuple[Stats, Stats]:
    """Form G three-member groups, then every member heartbeats each ``interval`` seconds."""
    prefix = f"hb-{os.getpid()}-{time.monotonic_ns()}"
    formed: list[tuple[Conn, str, str, int]] = []
    conns_per_group = 3
    join_stats = Stats("heartbeat-setup")
    sem = asyncio.Semaphore(64)

    async def form(i: int) -> None:
        async with sem:
            conns = [await Conn.open(host, port) for _ in range(conns_per_group)]
            group = f"{prefix}-{i}"

            ids = await asyncio.gather(*(_member_id(c, group) for c in conns))
            await asyncio.gather(*(_member(c, group, m) for c, m in zip(conns, ids, strict=True)))
            for c, m in zip(conns, ids, strict=True):
                formed.append((c, group, m, 1))  # the join phase completed once: generation 1
            join_stats.count += 1

    began = time.perf_counter()
    await asyncio.gather(*(form(i) for i in range(groups)))
    join_stats.seconds = time.perf_counter() - began
    hb = Stats("heartbeat")
    stop_at = time.monotonic() + max_seconds

    async def beat(c: Conn, group: str, member: str, generation: int, offset: float) -> None:
        await asyncio.sleep(offset)
        while time.monotonic() < stop_at:
            started = time.perf_counter()
            resp = await c.call(12, HB_V, {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": None})
            hb.latencies.append(time.perf_counter() - started)
            hb.count += 1
            if resp.error_code != 0:
                hb.errors += 1
            await asyncio.sleep(interval)

    began = time.perf_counter()
    n = len(formed)
    await asyncio.gather(*(beat(c, g, m, gen, interval * i / max(n, 1)) for i, (c, g, m, gen) in enumerate(formed)))
    hb.seconds = time.perf_counter() - began
    for c, *_ in formed:
        await c.close()
    return join_stats, hb
