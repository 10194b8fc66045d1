"""Load scenarios over raw sockets. Every scenario is bounded in count and in time."""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from bench.client import Conn, Template, nested
from groupd.protocol import codec
from groupd.protocol.api_table import ApiKey

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
    extra: dict[str, Any] = field(default_factory=dict)  # figures outside the timed part (a warm-up's)

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
            **self.extra,
        }


async def _timed(stats: Stats, coros: Any) -> Stats:
    """Run the workers together; the scenario's time is the wall time of all of them."""
    began = time.perf_counter()
    await asyncio.gather(*coros)
    stats.seconds = time.perf_counter() - began
    return stats


_PROTOCOLS = ({"name": "range", "metadata": SUBSCRIPTION},)  # the values writer takes nested dicts


def _join_body(group: str, member_id: str, session_ms: int = 30_000) -> dict[str, Any]:
    return {
        "group_id": group, "session_timeout": session_ms, "rebalance_timeout": 30_000, "member_id": member_id,
        "group_instance_id": None, "protocol_type": "consumer", "protocols": _PROTOCOLS,
    }




async def _member(conn: Conn, group: str, member_id: str, session_ms: int = 30_000, expected: int = 3) -> int | None:
    """Join with the id, then sync (the leader sends the assignment); rejoin while the group rebalances.

    Every member got its id first, so the coordinator counts them all as pending; yet with
    group.initial.rebalance.delay.ms=0 the initial join phase may close (as in Kafka, on its timer) before
    every member's second JoinGroup is in. A real client learns that from its next heartbeat; here the
    leader, which sees fewer than ``expected`` members, hands out empty assignments instead, and every
    member of such a generation rejoins at once. Returns the generation synced in, or None if it
    failed (a generation may be 0: Tansu's first is)."""
    for _ in range(10):
        join = await conn.call(ApiKey.JOIN_GROUP, JOIN_V, _join_body(group, member_id, session_ms), timeout=None)
        if join.error_code == REBALANCE_IN_PROGRESS:
            continue
        if join.error_code != 0:
            return None
        assignments: Any = ()
        if join.leader == join.member_id:
            given = ASSIGNMENT if len(join.members) >= expected else b""
            assignments = [{"member_id": m.member_id, "assignment": given} for m in join.members]
        sync = await conn.call(ApiKey.SYNC_GROUP, SYNC_V, {
            "group_id": group, "generation_id": join.generation_id, "member_id": join.member_id,
            "group_instance_id": None, "assignments": assignments,
        }, timeout=None)
        if sync.error_code == REBALANCE_IN_PROGRESS or (sync.error_code == 0 and not sync.assignment):
            continue
        return join.generation_id if sync.error_code == 0 else None
    return None


async def rebalance(
    host: str,
    port: int,
    groups: int,
    members: int = 3,
    concurrency: int = 32,
    max_seconds: float = 60,
    prefix: str | None = None,
    warmup: int | None = None,
) -> Stats:
    """G groups x M members join+sync, ``concurrency`` groups at a time; latency first join -> last sync.

    Each member uses its own connection, taken from a pool as a running consumer keeps its connection
    to the coordinator across rebalances: what is measured is the coordinator, not TCP set-up.

    ``warmup`` groups (default: one wave, ``concurrency``) are formed first and left out of the
    figures, which are the broker's steady state: on a broker just started, the first wave's
    groups took 2-3x as long as any later one (its code paths, log segments and journal all cold),
    and with 32 of 3,000 samples in it that one wave alone set the p99. Its slowest group is
    reported as ``warmup_max_ms``, so that cost stays visible."""
    stats = Stats("rebalance")
    prefix = prefix or f"bench-{os.getpid()}-{time.monotonic_ns()}"
    deadline = time.monotonic() + max_seconds
    pool: asyncio.Queue[list[Conn]] = asyncio.Queue()
    opened: list[Conn] = []
    for _ in range(min(concurrency, groups)):
        conns = [await Conn.open(host, port) for _ in range(members)]
        opened += conns
        pool.put_nowait(conns)

    async def form_one(into: Stats, group: str, by: float | None) -> None:
        conns = await pool.get()
        try:
            if by is not None and time.monotonic() > by:
                return
            started = time.perf_counter()
            await asyncio.wait_for(_form(conns, group), 60)  # a peer may sleep ~16 s in a join, twice
            into.latencies.append(time.perf_counter() - started)
            into.count += 1
        except (TimeoutError, ConnectionError):
            into.errors += 1
        finally:
            pool.put_nowait(conns)

    warmup = min(concurrency, groups) if warmup is None else warmup
    if warmup:
        warm = Stats("warmup")
        await asyncio.gather(*(form_one(warm, f"{prefix}-warmup-{i}", None) for i in range(warmup)))
        stats.extra = {
            "warmup_groups": warmup,
            "warmup_errors": warm.errors,
            "warmup_max_ms": round(max(warm.latencies, default=0) * 1000, 3),
        }

    try:
        return await _timed(stats, (form_one(stats, f"{prefix}-{i}", deadline) for i in range(groups)))
    finally:
        for c in opened:
            await c.close()


async def ensure_topic(host: str, port: int, topic: str, partitions: int = 1) -> None:
    conn = await Conn.open(host, port)
    t = nested(ApiKey.CREATE_TOPICS, 5, "CreatableTopic")
    await conn.call(
        ApiKey.CREATE_TOPICS,
        5,
        {
            "topics": (t(name=topic, num_partitions=partitions, replication_factor=1, assignments=(), configs=()),),
            "timeout": 5000,
            "validate_only": False,
        },
    )
    await conn.close()


def _commit_template(group: str, generation: int, member_id: str, topic: str) -> Template:
    """An OffsetCommit of ``topic``'s partition 0 whose offset each send fills in (commits, steady)."""
    tcls = nested(ApiKey.OFFSET_COMMIT, COMMIT_V, "OffsetCommitRequestTopic")
    pcls = nested(ApiKey.OFFSET_COMMIT, COMMIT_V, "OffsetCommitRequestPartition")
    partition = pcls(
        partition_index=0, committed_offset=Template.MARKER, committed_leader_epoch=-1, committed_metadata=""
    )
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "group_instance_id": None,
        "retention_time": -1,
        "topics": (tcls(name=topic, partitions=(partition,)),),
    }
    return Template(ApiKey.OFFSET_COMMIT, COMMIT_V, body)


async def commits(
    host: str, port: int, committers: int, max_seconds: float = 5, max_count: int = 200_000, same_group: bool = False
) -> Stats:
    """Simple OffsetCommits (generation -1), one in flight per committer, each on its own connection."""
    topic = "bench-commits"
    await ensure_topic(host, port, topic)
    stats = Stats(f"commits-{committers}{'-samegroup' if same_group else ''}")
    stop_at = time.monotonic() + max_seconds
    tag = f"{os.getpid()}-{time.monotonic_ns()}"

    async def committer(i: int) -> None:
        conn = await Conn.open(host, port)
        group = f"commit-{tag}" if same_group else f"commit-{tag}-{i}"
        template = _commit_template(group, -1, "", topic)
        offset = 0
        try:
            while time.monotonic() < stop_at and stats.count < max_count:
                offset += 1
                started = time.perf_counter()
                resp = await template.send(conn, offset)  # the scenario as a whole is bounded below
                stats.latencies.append(time.perf_counter() - started)
                stats.count += 1
                if resp.topics[0].partitions[0].error_code != 0:
                    stats.errors += 1
        finally:
            await conn.close()

    # one bound for the whole scenario, not a timer per commit: that cost the load generator a fifth
    # of its CPU per commit, on the two cores it shares with the broker
    return await asyncio.wait_for(_timed(stats, (committer(i) for i in range(committers))), max_seconds + 30)


def cpu_seconds(pid: int) -> float:
    """User + system CPU a process has used so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """Resident memory of a process in MiB (Linux /proc)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def steady(
    host: str,
    port: int,
    groups: int,
    max_seconds: float = 10,
    hb_interval: float = 0.5,
    commit_interval: float = 1.0,
    pid: int | None = None,
    setup_seconds: float = 60,
) -> dict[str, Any]:
    """Steady state: G three-member groups formed, then every member heartbeats each ``hb_interval``
    and commits its position each ``commit_interval`` with its generation and
    member id, as a consumer with auto-commit does, each on its own connection.

    With the broker's ``pid``, the broker's CPU is sampled over the steady phase only (group forming
    excluded) and reported as % of one core per 1,000 members."""
    prefix = f"steady-{os.getpid()}-{time.monotonic_ns()}"
    topic = "bench-steady"
    await ensure_topic(host, port, topic)
    formed: list[tuple[Conn, str, str, int]] = []
    setup = Stats("steady-setup")
    sem = asyncio.Semaphore(64)
    setup_deadline = time.monotonic() + setup_seconds

    async def form(i: int) -> None:
        """A group that does not form in time (a peer may sleep in its join loop) is left out."""
        async with sem:
            if time.monotonic() >= setup_deadline:
                setup.errors += 1
                return
            conns = [await Conn.open(host, port) for _ in range(3)]
            group = f"{prefix}-{i}"
            try:
                pairs = await asyncio.wait_for(_form(conns, group), max(0.1, setup_deadline - time.monotonic()))
            except (TimeoutError, ConnectionError):
                setup.errors += 1
                for c in conns:
                    await c.close()
                return
            for c, (member, generation) in zip(conns, pairs, strict=True):
                formed.append((c, group, member, generation))
            setup.count += 1

    began = time.perf_counter()
    await asyncio.gather(*(form(i) for i in range(groups)))
    setup.seconds = time.perf_counter() - began
    hb, commits = Stats("steady-heartbeats"), Stats("steady-commits")
    stop_at = time.monotonic() + max_seconds

    async def member(c: Conn, group: str, member_id: str, generation: int, phase: float) -> None:
        beat = {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": None}
        commit = _commit_template(group, generation, member_id, topic)
        await asyncio.sleep(phase * hb_interval)
        now = time.monotonic()
        next_beat, next_commit, position = now, now + phase * commit_interval, 0
        while (now := time.monotonic()) < stop_at:
            if now >= next_beat:
                started = time.perf_counter()
                resp = await c.call(ApiKey.HEARTBEAT, HB_V, beat)
                hb.latencies.append(time.perf_counter() - started)
                hb.count += 1
                hb.errors += resp.error_code != 0
                next_beat += hb_interval
            if now >= next_commit:
                position += 100
                started = time.perf_counter()
                resp = await commit.send(c, position)
                commits.latencies.append(time.perf_counter() - started)
                commits.count += 1
                commits.errors += resp.topics[0].partitions[0].error_code != 0
                next_commit += commit_interval
            await asyncio.sleep(max(0.0, min(next_beat, next_commit, stop_at) - time.monotonic()))

    n = len(formed)
    cpu0 = cpu_seconds(pid) if pid is not None else 0.0
    began = time.perf_counter()
    await asyncio.gather(*(member(c, g, m, gen, i / max(n, 1)) for i, (c, g, m, gen) in enumerate(formed)))
    hb.seconds = commits.seconds = time.perf_counter() - began
    out: dict[str, Any] = {
        "scenario": "steady",
        "groups": setup.count,
        "groups_not_formed": setup.errors,
        "members": n,
        "form_seconds": round(setup.seconds, 2),
        "hb_interval_s": hb_interval,
        "commit_interval_s": commit_interval,
        "heartbeats": hb.summary(),
        "commits": commits.summary(),
    }
    if pid is not None and n:
        busy = cpu_seconds(pid) - cpu0
        out["broker_cpu_pct"] = round(busy / hb.seconds * 100, 2)
        out["broker_cpu_pct_per_1000_members"] = round(busy / hb.seconds * 100 / (n / 1000), 2)
    for c, *_ in formed:
        await c.close()
    return out


def _produce_body(topic: str, partition: int, records: bytes, acks: int) -> dict[str, Any]:
    t = nested(ApiKey.PRODUCE, 9, "TopicProduceData")
    p = nested(ApiKey.PRODUCE, 9, "PartitionProduceData")
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout": 10_000,
        "topic_data": (t(name=topic, partition_data=(p(index=partition, records=records),)),),
    }


def _fetch_body(
    topic: str, partition: int, offset: int, max_wait: int = 500, max_bytes: int = 8 << 20
) -> dict[str, Any]:
    t = nested(ApiKey.FETCH, 11, "FetchTopic")
    p = nested(ApiKey.FETCH, 11, "FetchPartition")
    return {
        "replica_id": -1,
        "max_wait": max_wait,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": (
            t(
                topic=topic,
                partitions=(
                    p(
                        partition=partition,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=max_bytes,
                    ),
                ),
            ),
        ),
        "forgotten_topics_data": (),
        "rack_id": "",
    }


async def produce_fetch(
    host: str, port: int, partitions: int, acks: int, seconds: float = 3, record_bytes: int = 1024, per_batch: int = 100
) -> dict[str, Any]:
    """Produce 1 KiB records in batches of 100 to every partition for ``seconds``, then read them all back."""
    from groupd.storage.batch import build_batch

    topic = f"pf-{partitions}-{acks}-{os.getpid()}-{time.monotonic_ns()}"
    await ensure_topic(host, port, topic, partitions)
    batch = build_batch([(None, os.urandom(record_bytes))] * per_batch, timestamp_ms=int(time.time() * 1000))
    produced = 0
    stop_at = time.monotonic() + seconds

    async def producer(p: int) -> None:
        nonlocal produced
        conn = await Conn.open(host, port)
        inflight: list[asyncio.Future] = []
        while time.monotonic() < stop_at:
            inflight.append(conn.request(ApiKey.PRODUCE, 9, _produce_body(topic, p, batch, acks)))
            if len(inflight) >= 4:  # a client keeps a few batches in flight
                await inflight.pop(0)
                produced += per_batch
        for f in inflight:
            await f
            produced += per_batch
        await conn.close()

    began = time.perf_counter()
    await asyncio.gather(*(producer(p) for p in range(partitions)))
    produce_s = time.perf_counter() - began
    consumed_bytes = 0

    async def consumer(p: int, end: int) -> None:
        nonlocal consumed_bytes
        conn = await Conn.open(host, port)
        offset = 0
        give_up = time.monotonic() + 60
        while offset < end and time.monotonic() < give_up:
            resp = await conn.call(ApiKey.FETCH, 11, _fetch_body(topic, p, offset))
            if not resp.responses or not resp.responses[0].partitions:
                continue  # an empty answer (a peer may send one instead of waiting): ask again
            part = resp.responses[0].partitions[0]
            data = part.records or b""
            consumed_bytes += len(data)
            pos = 0
            while pos + 61 <= len(data):
                base = int.from_bytes(data[pos : pos + 8], "big")
                length = int.from_bytes(data[pos + 8 : pos + 12], "big")
                last_delta = int.from_bytes(data[pos + 23 : pos + 27], "big")
                offset = base + last_delta + 1
                pos += 12 + length
        await conn.close()

    conn = await Conn.open(host, port)
    lt, lp = nested(ApiKey.LIST_OFFSETS, 7, "ListOffsetsTopic"), nested(ApiKey.LIST_OFFSETS, 7, "ListOffsetsPartition")
    resp = await conn.call(
        ApiKey.LIST_OFFSETS,
        7,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": (
                lt(
                    name=topic,
                    partitions=tuple(
                        lp(partition_index=p, current_leader_epoch=-1, timestamp=-1) for p in range(partitions)
                    ),
                ),
            ),
        },
    )
    latest = {p.partition_index: p.offset for p in resp.topics[0].partitions}
    ends = [latest[p] for p in range(partitions)]
    await conn.close()
    began = time.perf_counter()
    await asyncio.gather(*(consumer(p, ends[p]) for p in range(partitions)))
    consume_s = time.perf_counter() - began
    mb = produced * record_bytes / 1e6
    return {
        "scenario": f"produce_fetch-{partitions}p-acks{acks}",
        "records": produced,
        "produce_mb_s": round(mb / produce_s, 1),
        "produce_records_s": round(produced / produce_s, 1),
        "consume_mb_s": round(consumed_bytes / 1e6 / consume_s, 1) if consume_s else 0.0,
    }


async def wakeup_latency(host: str, port: int, samples: int = 200) -> Stats:
    """Produce one record while a fetch long-polls; time until the fetch returns it."""
    from groupd.storage.batch import build_batch

    topic = f"wake-{os.getpid()}-{time.monotonic_ns()}"
    await ensure_topic(host, port, topic, 1)
    fetcher, producer = await Conn.open(host, port), await Conn.open(host, port)
    stats = Stats("fetch-wakeup")
    began = time.perf_counter()
    for offset in range(samples):
        waiting = fetcher.request(ApiKey.FETCH, 11, _fetch_body(topic, 0, offset, max_wait=5000))
        await asyncio.sleep(0.002)
        sent = time.perf_counter()
        await producer.call(ApiKey.PRODUCE, 9, _produce_body(topic, 0, build_batch([(None, b"x")], timestamp_ms=1), 1))
        await asyncio.wait_for(waiting, 10)
        stats.latencies.append(time.perf_counter() - sent)
        stats.count += 1
    stats.seconds = time.perf_counter() - began
    await fetcher.close()
    await producer.close()
    return stats


async def heartbeats(host: str, port: int, groups: int, count: int, max_seconds: float = 600) -> Stats:
    """A steady member's own cost, as a fixed amount of work: ``groups`` three-member groups formed, then
    their members heartbeat back to back (each waits for its answer) until ``count`` heartbeats are
    answered in all. Run twice with two counts and subtract, so the forming cancels out (the
    in-process bench under callgrind: instructions per heartbeat)."""
    formed: list[tuple[Conn, str, str, int]] = []
    for i in range(groups):
        conns = [await Conn.open(host, port) for _ in range(3)]
        group = f"hb-{os.getpid()}-{i}"
        for c, (member, generation) in zip(conns, await _form(conns, group), strict=True):
            formed.append((c, group, member, generation))
    stats = Stats("heartbeats")
    left = [count]
    stop_at = time.monotonic() + max_seconds

    async def member(c: Conn, group: str, member_id: str, generation: int) -> None:
        beat = {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": None}
        while left[0] > 0 and time.monotonic() < stop_at:
            left[0] -= 1
            started = time.perf_counter()
            resp = await c.call(ApiKey.HEARTBEAT, HB_V, beat)
            stats.latencies.append(time.perf_counter() - started)
            stats.count += 1
            stats.errors += resp.error_code != 0

    began = time.perf_counter()
    await asyncio.gather(*(member(*f) for f in formed))
    stats.seconds = time.perf_counter() - began
    for c, *_ in formed:
        await c.close()
    return stats


async def _form(conns: list[Conn], group: str, session_ms: int = 30_000) -> list[tuple[str, int]]:
    """Every member's id (JoinGroup v4+ with an empty id: the coordinator answers MEMBER_ID_REQUIRED
    and holds the id pending), then each member joins and syncs on its own (``_member``). The ids
    are awaited as futures, not a task per member: a task cost the load generator about as much as
    a request, on the two cores it shares with the broker."""
    firsts = await asyncio.gather(
        *(c.request(ApiKey.JOIN_GROUP, JOIN_V, _join_body(group, "", session_ms)) for c in conns)
    )
    ids = [j.member_id for j in firsts]
    gens = await asyncio.gather(
        *(_member(c, group, m, session_ms, expected=len(conns)) for c, m in zip(conns, ids, strict=True))
    )
    if any(g is None for g in gens):
        raise ConnectionError(f"group {group} did not form")
    return list(zip(ids, gens, strict=True))


async def churn(host: str, port: int, groups: int = 50, max_seconds: float = 10) -> Stats:
    """Members joining and leaving continuously in many groups: each group forms with two members, both
    leave (LeaveGroup v3 batch), and again, until time runs out. Latency: one form+leave cycle."""
    stats = Stats("churn")
    prefix = f"churn-{os.getpid()}-{time.monotonic_ns()}"
    stop_at = time.monotonic() + max_seconds
    leaver = nested(ApiKey.LEAVE_GROUP, 3, "MemberIdentity")

    async def run(i: int) -> None:
        conns = [await Conn.open(host, port) for _ in range(2)]
        group = f"{prefix}-{i}"
        try:
            while time.monotonic() < stop_at:
                started = time.perf_counter()
                formed = await _form(conns, group)
                resp = await conns[0].call(
                    ApiKey.LEAVE_GROUP,
                    3,
                    {
                        "group_id": group,
                        "members": tuple(leaver(member_id=m, group_instance_id=None) for m, _ in formed),
                    },
                )
                stats.latencies.append(time.perf_counter() - started)
                stats.count += 1
                if resp.error_code != 0:
                    stats.errors += 1
        except (TimeoutError, ConnectionError):
            stats.errors += 1
        finally:
            for c in conns:
                await c.close()

    return await _timed(stats, (run(i) for i in range(groups)))


async def scale(
    host: str,
    port: int,
    groups: int,
    pid: int | None = None,
    concurrency: int = 64,
    hb_seconds: float = 5,
    max_seconds: float = 600,
) -> dict[str, Any]:
    """Hold G three-member groups (long sessions), measure broker RSS, then heartbeat p99 on a sample.

    Connections are pooled: a member's connection is free again once its group is formed, as a client's
    would be between requests, so 100,000 groups need only ``concurrency`` x 3 sockets."""
    prefix = f"scale-{os.getpid()}-{time.monotonic_ns()}"
    pool: asyncio.Queue[list[Conn]] = asyncio.Queue()
    for _ in range(concurrency):
        await pool.put([await Conn.open(host, port) for _ in range(3)])
    members: list[tuple[str, str, int]] = []
    give_up = time.monotonic() + max_seconds
    formed = 0

    async def form(i: int) -> None:
        nonlocal formed
        conns = await pool.get()
        try:
            if time.monotonic() > give_up:
                return
            formed += 1
            for m, generation in await _form_long(conns, f"{prefix}-{i}"):
                members.append((f"{prefix}-{i}", m, generation))
        finally:
            await pool.put(conns)

    began = time.perf_counter()
    await asyncio.gather(*(form(i) for i in range(groups)))
    formed_s = time.perf_counter() - began
    out: dict[str, Any] = {
        "scenario": f"scale-{groups}",
        "groups": formed,
        "members": len(members),
        "form_seconds": round(formed_s, 1),
    }
    if pid is not None:
        out["broker_rss_mib"] = round(rss_mib(pid), 1)
    hb = Stats("scale-heartbeats")
    sample = members[:: max(1, len(members) // 3000)]
    conns = [c for group in [await pool.get() for _ in range(concurrency)] for c in group]
    stop_at = time.monotonic() + hb_seconds
    began = time.perf_counter()

    async def beat(conn: Conn, batch: list[tuple[str, str, int]]) -> None:
        while time.monotonic() < stop_at:
            for group, member, generation in batch:
                started = time.perf_counter()
                resp = await conn.call(
                    ApiKey.HEARTBEAT,
                    HB_V,
                    {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": None},
                )
                hb.latencies.append(time.perf_counter() - started)
                hb.count += 1
                hb.errors += resp.error_code != 0
                if time.monotonic() >= stop_at:
                    return

    await asyncio.gather(*(beat(c, sample[i :: len(conns)]) for i, c in enumerate(conns)))
    hb.seconds = time.perf_counter() - began
    out["heartbeats"] = hb.summary()
    for c in conns:
        await c.close()
    return out


async def _form_long(conns: list[Conn], group: str) -> list[tuple[str, int]]:
    """Like _form, with the longest session Kafka allows by default, so the groups stay held."""
    return await _form(conns, group, session_ms=1_800_000)


def _next_offset_v2(data: bytes, offset: int) -> int:
    """The offset after the last whole record batch v2 in a fetch answer."""
    pos = 0
    while pos + 61 <= len(data):
        base = int.from_bytes(data[pos : pos + 8], "big")
        length = int.from_bytes(data[pos + 8 : pos + 12], "big")
        if pos + 12 + length > len(data):
            break
        offset = base + int.from_bytes(data[pos + 23 : pos + 27], "big") + 1
        pos += 12 + length
    return offset


def _next_offset_message_set(data: bytes, offset: int) -> int:
    """The offset after the last whole message (magic 0/1) in a fetch answer."""
    pos = 0
    while pos + 12 <= len(data):
        entry_offset = int.from_bytes(data[pos : pos + 8], "big", signed=True)
        size = int.from_bytes(data[pos + 8 : pos + 12], "big")
        if pos + 12 + size > len(data):
            break
        offset = entry_offset + 1
        pos += 12 + size
    return offset


async def down_conversion(
    host: str,
    port: int,
    records: int = 20_000,
    record_bytes: int = 1024,
    per_batch: int = 100,
    max_seconds: float = 60,
    pid: int | None = None,
    compression: str = "none",
) -> dict[str, Any]:
    """The cost of Fetch v0-3's down-conversion (issue 32): the same ``records`` (v2 batches of
    ``per_batch``) read once by a Fetch v12 reader (the stored bytes as they are) and once by a Fetch v3
    reader (each batch rewritten as magic 1 messages; a compressed batch decompressed and recompressed
    as one wrapper of its codec). MB/s counts record values, the same payload for both; each read is
    bounded by ``max_seconds``. With the broker's ``pid``, its CPU seconds per GB read too: on a shared
    machine a steadier measure of the cost than wall-clock MB/s. ``compression`` (none, gzip, snappy,
    lz4) compresses the batches; their values are then hex text, which compresses about 2:1."""
    from groupd.storage.batch import build_batch
    from groupd.storage.codecs import BY_NAME
    from groupd.storage.message_sets import compressed_batch

    topic = f"dc-{os.getpid()}-{time.monotonic_ns()}"
    await ensure_topic(host, port, topic, 1)
    codec_id = BY_NAME.get(compression, 0)
    value = os.urandom(record_bytes // 2).hex().encode() if codec_id else os.urandom(record_bytes)
    batch = build_batch([(None, value)] * per_batch, timestamp_ms=int(time.time() * 1000))
    if codec_id:
        batch = compressed_batch(batch, codec_id)
    conn = await Conn.open(host, port)
    written = 0
    while written < records:
        pending = [
            conn.request(ApiKey.PRODUCE, 9, _produce_body(topic, 0, batch, 1))
            for _ in range(min(8, (records - written) // per_batch or 1))
        ]
        for f in pending:
            await f
        written += per_batch * len(pending)
    out: dict[str, Any] = {
        "scenario": "down_conversion",
        "records": written,
        "record_bytes": record_bytes,
        "compression": compression,
    }
    for version, label, advance in ((12, "v12", _next_offset_v2), (3, "v3", _next_offset_message_set)):
        t, p = nested(ApiKey.FETCH, version, "FetchTopic"), nested(ApiKey.FETCH, version, "FetchPartition")
        offset, began = 0, time.perf_counter()
        cpu0 = cpu_seconds(pid) if pid else 0.0
        give_up = time.monotonic() + max_seconds
        while offset < written and time.monotonic() < give_up:
            body = {
                "replica_id": -1,
                "max_wait": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": (
                    codec.make(
                        t,
                        topic=topic,
                        partitions=(
                            codec.make(
                                p,
                                partition=0,
                                current_leader_epoch=-1,
                                fetch_offset=offset,
                                log_start_offset=-1,
                                partition_max_bytes=1 << 20,
                            ),
                        ),
                    ),
                ),
                "forgotten_topics_data": (),
                "rack_id": "",
            }
            resp = await conn.call(ApiKey.FETCH, version, body)
            data = bytes(resp.responses[0].partitions[0].records or b"")
            offset = advance(data, offset)
        seconds = time.perf_counter() - began
        out[f"fetch_{label}_mb_s"] = round(offset * record_bytes / 1e6 / seconds, 1) if seconds else 0.0
        out[f"fetch_{label}_records"] = offset
        if pid and offset:
            out[f"fetch_{label}_broker_cpu_s_per_gb"] = round(
                (cpu_seconds(pid) - cpu0) / (offset * record_bytes / 1e9), 1
            )
    await conn.close()
    v3, v12 = out["fetch_v3_mb_s"], out["fetch_v12_mb_s"]
    out["v3_over_v12"] = round(v3 / v12, 3) if v12 else 0.0
    return out
