"""The consumer group protocol (KIP-848) over raw sockets, side by side with the classic protocol in one run.

Two figures, each against its classic counterpart on the same broker:

- ``heartbeats``: M members (groups of S) heartbeating at the interval the broker gives them
  (ConsumerGroupHeartbeat's HeartbeatIntervalMs), after their groups reached Stable; latency, p99 and the
  broker's CPU per 1,000 members. The classic side: the same groups formed by JoinGroup/SyncGroup,
  Heartbeat at the same interval.
- ``to_stable``: a group of 3 from its first heartbeat until ConsumerGroupDescribe says Stable, members
  behaving as a client does (a heartbeat at the interval, and at once to acknowledge a new assignment).
  The classic side: 3-member groups from the first JoinGroup to the last SyncGroup (``rebalance``).

A member here is the protocol's client side and nothing more: it takes each assignment as soon as it
gets one (revoking is instant) and acknowledges it with its next heartbeat. Every loop is bounded in
count and in time.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Any

from bench.client import Conn
from bench.scenarios import HB_V, Stats, _form, cpu_seconds, ensure_topic, rebalance
from groupd.protocol import codec
from groupd.protocol.api_table import ApiKey
from groupd.protocol.request import encode_request

CGH_V, CGD_V = 1, 1  # ConsumerGroupHeartbeat v1 (the member names its id), ConsumerGroupDescribe v1
UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH = 25, 110


class Member:
    """One consumer-protocol member: its epoch and the partitions it owns (topic id -> partitions)."""

    __slots__ = ("conn", "group", "member_id", "epoch", "owned", "ack", "interval_s", "errors")

    def __init__(self, conn: Conn, group: str) -> None:
        self.conn, self.group = conn, group
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: dict[uuid.UUID, tuple[int, ...]] = {}
        self.ack = False  # a new assignment to acknowledge with the next heartbeat
        self.interval_s = 5.0
        self.errors = 0

    def body(self, topic: str) -> dict[str, Any]:
        """A join (epoch 0) sends everything; later heartbeats only what changed, as clients do: the
        owned partitions once, to acknowledge an assignment."""
        joining = self.epoch == 0
        owned = None
        if joining or self.ack:
            owned = tuple({"topic_id": t, "partitions": ps} for t, ps in sorted(self.owned.items()))
        return {
            "group_id": self.group, "member_id": self.member_id, "member_epoch": self.epoch, "instance_id": None,
            "rack_id": None, "rebalance_timeout": 30_000 if joining else -1,
            "subscribed_topic_names": (topic,) if joining else None, "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": owned,
        }

    async def beat(self, topic: str) -> Any:
        sent_ack = self.ack
        resp = await self.conn.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, CGH_V, self.body(topic))
        if resp.error_code:
            self.errors += 1
            if resp.error_code in (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH):
                self.epoch, self.owned = 0, {}  # rejoin, as a client does
            return resp
        if sent_ack:
            self.ack = False
        self.epoch = resp.member_epoch
        self.interval_s = codec.millis(resp.heartbeat_interval) / 1000
        if resp.assignment is not None:
            self.owned = {tp.topic_id: tuple(sorted(tp.partitions)) for tp in resp.assignment.topic_partitions}
            self.ack = True
        return resp


async def _describe_state(conn: Conn, group: str) -> str:
    resp = await conn.call(
        ApiKey.CONSUMER_GROUP_DESCRIBE, CGD_V, {"group_ids": (group,), "include_authorized_operations": False}
    )
    return resp.groups[0].group_state


async def _settle(members: list[Member], topic: str, partitions: int, deadline: float) -> bool:
    """Heartbeat as clients do until the group is Stable (by ConsumerGroupDescribe): a member with an
    assignment to acknowledge at once, the others at their interval. False if the deadline passed."""
    next_at = [0.0] * len(members)
    while time.monotonic() < deadline:
        now = time.monotonic()
        due = [i for i, m in enumerate(members) if m.ack or m.epoch == 0 or now >= next_at[i]]
        if due:
            await asyncio.gather(*(members[i].beat(topic) for i in due))
            for i in due:
                next_at[i] = time.monotonic() + members[i].interval_s
        if not any(m.ack or m.epoch == 0 for m in members):
            held = [p for m in members for ps in m.owned.values() for p in ps]
            settled = len(held) == partitions and len(set(held)) == partitions and len({m.epoch for m in members}) == 1
            if settled and await _describe_state(members[0].conn, members[0].group) == "Stable":
                return True
        wake = min([*next_at, deadline])
        await asyncio.sleep(max(0.0, min(wake - time.monotonic(), 0.05)) if not any(m.ack for m in members) else 0)
    return False


async def to_stable(host: str, port: int, groups: int = 20, concurrency: int = 4, max_seconds: float = 60) -> Stats:
    """Groups of 3 from the first heartbeat to Stable, ``concurrency`` groups at a time."""
    stats = Stats("consumer-to-stable")
    prefix = f"kip848-{os.getpid()}-{time.monotonic_ns()}"
    topic = "bench-kip848-3"
    await ensure_topic(host, port, topic, 3)
    deadline = time.monotonic() + max_seconds
    pool: asyncio.Queue[list[Conn]] = asyncio.Queue()
    opened = [[await Conn.open(host, port) for _ in range(3)] for _ in range(min(concurrency, groups))]
    for conns in opened:
        pool.put_nowait(conns)

    async def one(i: int) -> None:
        conns = await pool.get()
        members = [Member(c, f"{prefix}-{i}") for c in conns]
        try:
            if time.monotonic() > deadline:
                return
            started = time.perf_counter()
            if await _settle(members, topic, 3, min(deadline, time.monotonic() + 30)):
                stats.latencies.append(time.perf_counter() - started)
                stats.count += 1
            else:
                stats.errors += 1
            for m in members:  # leave, so the connection is free for the next group
                m.epoch = -1
                await m.conn.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, CGH_V, m.body(topic))
        except (TimeoutError, ConnectionError):
            stats.errors += 1
        finally:
            pool.put_nowait(conns)

    try:
        return await _timed_gather(stats, [one(i) for i in range(groups)])
    finally:
        for conns in opened:
            for c in conns:
                await c.close()


async def _timed_gather(stats: Stats, coros: list[Any]) -> Stats:
    began = time.perf_counter()
    await asyncio.gather(*coros)
    stats.seconds = time.perf_counter() - began
    return stats


async def _beat_at_interval(stop_at: float, interval_s: float, n: int, beat: Any, stats: Stats) -> None:
    """Call ``beat(i)`` for each of ``n`` members every ``interval_s``, phases spread over the interval."""

    async def one(i: int) -> None:
        await asyncio.sleep(i / max(n, 1) * interval_s)
        next_at = time.monotonic()
        while (now := time.monotonic()) < stop_at:
            if now >= next_at:
                started = time.perf_counter()
                error = await beat(i)
                stats.latencies.append(time.perf_counter() - started)
                stats.count += 1
                stats.errors += error != 0
                next_at += interval_s
            await asyncio.sleep(max(0.0, min(next_at, stop_at) - time.monotonic()))

    await _timed_gather(stats, [one(i) for i in range(n)])


async def heartbeats(
    host: str,
    port: int,
    members: int = 1000,
    group_size: int = 10,
    seconds: float = 10,
    pid: int | None = None,
    setup_seconds: float = 90,
) -> dict[str, Any]:
    """``members`` consumer-protocol members in groups of ``group_size`` brought to Stable, then heartbeating
    at the broker's interval for ``seconds``; then the same groups with the classic protocol at the same
    interval. Latencies, and the broker's CPU per 1,000 members (with its ``pid``)."""
    prefix = f"kip848hb-{os.getpid()}-{time.monotonic_ns()}"
    topic = f"bench-kip848-{group_size}"
    await ensure_topic(host, port, topic, group_size)
    n_groups = max(1, members // group_size)
    conns = [await Conn.open(host, port) for _ in range(n_groups * group_size)]
    out: dict[str, Any] = {"scenario": "consumer_protocol_heartbeats", "members": len(conns), "group_size": group_size}
    try:
        cm = [Member(c, f"{prefix}-c{i // group_size}") for i, c in enumerate(conns)]
        sem = asyncio.Semaphore(16)
        setup_deadline = time.monotonic() + setup_seconds
        settled = 0

        async def settle(g: int) -> None:
            nonlocal settled
            async with sem:
                ok = await _settle(cm[g * group_size : (g + 1) * group_size], topic, group_size, setup_deadline)
                settled += ok

        began = time.perf_counter()
        await asyncio.gather(*(settle(g) for g in range(n_groups)))
        out["consumer_groups_stable"], out["consumer_setup_s"] = settled, round(time.perf_counter() - began, 2)
        interval = cm[0].interval_s
        out["interval_s"] = interval
        # steady heartbeats are the same bytes every time: encoded once, as the classic ones below, so
        # the load generator's cost is the same on both sides and small
        frames = [encode_request(ApiKey.CONSUMER_GROUP_HEARTBEAT, CGH_V, m.body(topic), 0, "bench") for m in cm]

        async def consumer_beat(i: int) -> int:
            return (await conns[i].send_frame(ApiKey.CONSUMER_GROUP_HEARTBEAT, CGH_V, bytearray(frames[i]))).error_code

        out["consumer"] = await _measure(consumer_beat, len(cm), interval, seconds, pid)
        for m in cm:  # leave: the same connections serve the classic groups
            m.epoch = -1
            await m.conn.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, CGH_V, m.body(topic))

        classic: list[tuple[str, str, int]] = []
        formed = 0

        async def form(g: int) -> None:
            nonlocal formed
            async with sem:
                group = f"{prefix}-k{g}"
                try:
                    pairs = await asyncio.wait_for(_form(conns[g * group_size : (g + 1) * group_size], group), 60)
                except (TimeoutError, ConnectionError):
                    return
                classic.extend((group, m, gen) for m, gen in pairs)
                formed += 1

        await asyncio.gather(*(form(g) for g in range(n_groups)))
        out["classic_groups_stable"] = formed
        beats = [
            encode_request(
                ApiKey.HEARTBEAT,
                HB_V,
                {"group_id": g, "generation_id": gen, "member_id": m, "group_instance_id": None},
                0,
                "bench",
            )
            for g, m, gen in classic
        ]

        async def classic_beat(i: int) -> int:
            return (await conns[i].send_frame(ApiKey.HEARTBEAT, HB_V, bytearray(beats[i]))).error_code

        out["classic"] = await _measure(classic_beat, len(beats), interval, seconds, pid)
    finally:
        for c in conns:
            await c.close()
    c, k = out["consumer"], out["classic"]
    out["p99_consumer_over_classic"] = round(c["p99_ms"] / k["p99_ms"], 2) if k.get("p99_ms") else None
    if c.get("broker_cpu_us_per_heartbeat") and k.get("broker_cpu_us_per_heartbeat"):
        out["cpu_consumer_over_classic"] = round(c["broker_cpu_us_per_heartbeat"] / k["broker_cpu_us_per_heartbeat"], 2)
    return out


async def _measure(beat: Any, n: int, interval: float, seconds: float, pid: int | None) -> dict[str, Any]:
    stats = Stats("heartbeats")
    cpu0 = cpu_seconds(pid) if pid is not None else 0.0
    await _beat_at_interval(time.monotonic() + seconds, interval, n, beat, stats)
    summary = stats.summary()
    if pid is not None and n and stats.seconds:
        busy = cpu_seconds(pid) - cpu0
        summary["broker_cpu_pct_per_1000_members"] = round(busy / stats.seconds * 100 / (n / 1000), 2)
        # what one heartbeat costs the broker: the figure a loaded machine (whose scheduler starves the
        # broker, and the load generator with it) changes least
        summary["broker_cpu_us_per_heartbeat"] = round(busy / max(stats.count, 1) * 1e6, 1)
    return summary


async def speaks_consumer_protocol(host: str, port: int) -> bool:
    """Whether the broker advertises ConsumerGroupHeartbeat (a peer without it is reported, not waited on)."""
    conn = await Conn.open(host, port)
    try:
        resp = await conn.call(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "bench", "client_software_version": "1"}
        )
    finally:
        await conn.close()
    return any(k.api_key == ApiKey.CONSUMER_GROUP_HEARTBEAT for k in resp.api_keys)


async def side_by_side(
    host: str,
    port: int,
    members: int = 1000,
    group_size: int = 10,
    seconds: float = 10,
    groups_of_3: int = 20,
    pid: int | None = None,
) -> dict[str, Any]:
    """Both figures and their classic counterparts, in one run, as ratios (consumer / classic)."""
    if not await speaks_consumer_protocol(host, port):
        return {"error": "no ConsumerGroupHeartbeat (API 68) in ApiVersions"}
    out = await heartbeats(host, port, members, group_size, seconds, pid)
    stable = (await to_stable(host, port, groups_of_3)).summary()
    classic = (await rebalance(host, port, groups_of_3, 3, concurrency=4, max_seconds=60, warmup=0)).summary()
    out["to_stable"] = {
        "consumer": stable,
        "classic": classic,
        "p50_consumer_over_classic": round(stable["p50_ms"] / classic["p50_ms"], 2) if classic["p50_ms"] else None,
    }
    return out
