"""Aggregate produce and commit throughput, and broker CPU per operation, of one groupd node and of three
cluster nodes over one private PostgreSQL on loopback (tests/postgresql_server.py), side by side.

    python -m bench.cluster_throughput [--seconds 10] [--workers 12]

Both runs use the PostgreSQL engine; "1 node" is a plain node (``cluster.enabled=false``), "3 nodes" three
cluster nodes. Each worker has one request in flight on its own connection to the node that leads its
partition (Produce, acks=all, one 10-record batch) or coordinates its group (OffsetCommit of a simple
group), found from the lease table, so no request is refused for going to the wrong node. Broker CPU is
the brokers' user plus system time (/proc) over the run, divided by the operations answered; database CPU
the same of the postmaster and its children. On a 2-core
machine three nodes share the two cores with the database and this load generator, so the question is
whether three nodes lose throughput against one, not whether they add any.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import struct
import tempfile
import time
from pathlib import Path

import uvloop
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from bench.cluster_takeover import owners
from groupd.coordinator.partitioning import partition_for
from groupd.protocol import codec
from groupd.protocol.api_table import ApiKey
from groupd.protocol.request import encode_request
from groupd.protocol.topic_names import OFFSETS_TOPIC
from groupd.storage.batch import build_batch
from tests.harness import BrokerProcess
from tests.postgresql_server import PostgresServer, running
from tests.wire.test_data_plane import produce_body
from tests.wire.test_groups import commit_body

TOPIC, PARTITIONS, SHARDS = "load", 6, 6
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def group_on(shard: int) -> str:
    """The first group name g<n> whose offsets live in ``shard``: one commit worker a shard, as one produce
    worker a partition, so every node gets its share of both kinds of load."""
    return next(f"g{n}" for n in range(10_000) if partition_for(f"g{n}", SHARDS) == shard)


class _Frames(asyncio.Protocol):
    """A connection's answers, whole frames in order, handed to the one waiter (one request in flight)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[bytes] | None = None

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) >= 4:
            size = _SIZE.unpack_from(self.buffer)[0]
            if len(self.buffer) >= 4 + size and self.waiter is not None and not self.waiter.done():
                frame = bytes(self.buffer[4 : 4 + size])
                del self.buffer[: 4 + size]
                self.waiter.set_result(frame)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("the broker closed the connection"))

    async def call(self, frame: bytes) -> bytes:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(frame)
        return await self.waiter


_SIZE = struct.Struct(">i")
_OFFSET_MARK = 0x0123456789ABCDEF  # a commit's offset in the frame built once, found there and replaced each time


def _error_code(api_key: int, version: int, frame: bytes) -> int:
    """The one partition's error code of a Produce or OffsetCommit answer (decoded by kio, as a client would)."""
    _header, used = codec.decode(codec.response_header_class(api_key, version), frame, 0)
    body, _ = codec.decode(codec.response_class(api_key, version), frame, used)
    if api_key == ApiKey.PRODUCE:
        return int(body.responses[0].partition_responses[0].error_code)
    return int(body.topics[0].partitions[0].error_code)


async def worker(port: int, kind: str, i: int, until: float, counts: list[int]) -> None:
    """One request in flight on its own connection until ``until``. The request is encoded once (its
    correlation id, and a commit's offset, patched in place each time) and each answer is decoded by kio
    without a timeout task: the load generator shares the cores with what it measures, so the less it costs,
    the more of them the brokers get (the run as a whole is bounded)."""
    loop = asyncio.get_running_loop()
    transport, conn = await loop.create_connection(_Frames, "127.0.0.1", port)
    conn.transport = transport  # connection_made may not have run yet
    if kind == "produce":
        batch = build_batch([(None, b"v%d" % k) for k in range(10)], timestamp_ms=int(time.time() * 1000))
        api_key, version = ApiKey.PRODUCE, 9
        frame = bytearray(encode_request(api_key, version, produce_body(TOPIC, i, batch), 0, "load"))
        offset_at = -1
    else:
        api_key, version = ApiKey.OFFSET_COMMIT, 8
        frame = bytearray(
            encode_request(api_key, version, commit_body(group_on(i), TOPIC, i, _OFFSET_MARK, ""), 0, "load")
        )
        offset_at = frame.index(struct.pack(">q", _OFFSET_MARK))
    n = 0
    try:
        while time.monotonic() < until:
            struct.pack_into(">i", frame, 8, n)  # size, api key, version, then the correlation id
            if offset_at >= 0:
                struct.pack_into(">q", frame, offset_at, n)
            answer = await conn.call(bytes(frame))
            n += 1
            counts[0 if kind == "produce" else 1] += _error_code(api_key, version, answer) == 0
    finally:
        transport.close()


def database_pids(server: PostgresServer) -> list[int]:
    """The postmaster and its children (every backend, the WAL writer...)."""
    postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
    children = [int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit() and _parent(d) == postmaster]
    return [postmaster, *children]


def _parent(proc: Path) -> int:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def _cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):  # a backend that ended meanwhile
            total += cpu_seconds(pid)
    return total


def measure(
    nodes: list[BrokerProcess], url: str | None, seconds: float, workers: int, database: list[int]
) -> tuple[float, float, float, float, float]:
    """(produce records/s, commits/s, and CPU ms per operation of the brokers, the database and this load
    generator)."""
    held = owners(url) if url is not None else {}

    def port_of(resource: tuple[str, int]) -> int:
        return nodes[held[resource] - 1].port if url is not None else nodes[0].port

    pids = [n.proc.pid for n in nodes if n.proc is not None]
    counts = [0, 0]

    async def run() -> None:
        until = time.monotonic() + seconds
        jobs = []
        for i in range(workers):  # even: a producer of partition i/2, odd: a committer of a group of shard i/2
            at = (i // 2) % PARTITIONS
            if i % 2 == 0:
                jobs.append(worker(port_of((TOPIC, at)), "produce", at, until, counts))
            else:
                jobs.append(worker(port_of((OFFSETS_TOPIC, at)), "commit", at, until, counts))
        async with asyncio.timeout(seconds + 30):
            await asyncio.gather(*jobs)

    before, db_before, own_before = _cpu(pids), _cpu(database), _own_cpu()
    started = time.monotonic()
    uvloop.run(run())
    elapsed = time.monotonic() - started
    cpu, db_cpu, own = _cpu(pids) - before, _cpu(database) - db_before, _own_cpu() - own_before
    ops = max(counts[0] + counts[1], 1)
    return counts[0] * 10 / elapsed, counts[1] / elapsed, 1000 * cpu / ops, 1000 * db_cpu / ops, 1000 * own / ops


def _own_cpu() -> float:
    times = os.times()
    return times.user + times.system


def start(tmp: Path, url: str, count: int) -> list[BrokerProcess]:
    settings: dict[str, object] = {
        "storage.engine": "postgresql",
        "storage.postgresql.url": url,
        "offsets.topic.num.partitions": SHARDS,
        "transaction.state.log.num.partitions": 3,
        "share.coordinator.state.topic.num.partitions": 3,
    }
    if count > 1:
        settings |= {"cluster.enabled": "true", "cluster.lease.ms": 4000}
    nodes = [BrokerProcess(tmp / f"{count}-{n}", {**settings, "node.id": n}).start() for n in range(1, count + 1)]
    KafkaAdminClient(bootstrap_servers=nodes[0].bootstrap).create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    return nodes


def _settle(url: str, count: int) -> None:
    """Wait until every partition and shard of the load has a live owner and every node owns some."""
    deadline = time.monotonic() + 30
    wanted = {(TOPIC, p) for p in range(PARTITIONS)} | {(OFFSETS_TOPIC, p) for p in range(SHARDS)}
    while not (wanted <= set(owners(url)) and len(set(owners(url).values())) == count):
        if time.monotonic() > deadline:
            raise TimeoutError("the cluster did not settle")
        time.sleep(0.1)
    time.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument(
        "--workers",
        default="12,48,144",
        help="comma-separated worker counts, each measured on both (default 12,48,144: a light load, and loads "
        "that keep every core busy; one node peaks near 96, three nodes above)",
    )
    args = parser.parse_args()
    loads = [int(w) for w in args.workers.split(",")]
    ops: dict[tuple[int, int], tuple[float, float]] = {}
    with running() as pg, tempfile.TemporaryDirectory() as tmp:
        for count in (1, 3):
            url = pg.database()
            nodes = start(Path(tmp), url, count)
            try:
                if count > 1:
                    _settle(url, count)
                for workers in loads:
                    produce, commits, cpu, db_cpu, own = measure(
                        nodes, url if count > 1 else None, args.seconds, workers, database_pids(pg)
                    )
                    ops[count, workers] = (produce, commits)
                    print(
                        f"{count} node{'s' if count > 1 else ''}, {workers} workers: {produce:,.0f} records/s "
                        f"produced (acks=all, 10 per batch), {commits:,.0f} commits/s, CPU per operation: brokers "
                        f"{cpu:.3f} ms, database {db_cpu:.3f} ms, load generator {own:.3f} ms ({args.seconds:.0f} s)"
                    )
            finally:
                for node in nodes:
                    node.kill()
    for workers in loads:
        (p1, c1), (p3, c3) = ops[1, workers], ops[3, workers]
        print(f"3 nodes / 1 node at {workers} workers: records {p3 / p1:.2f}, commits {c3 / c1:.2f}")
    best = {n: max((ops[n, w] for w in loads), key=lambda pc: pc[0] / 10 + pc[1]) for n in (1, 3)}
    print(
        f"at the busiest load of each (operations/s): records {best[3][0] / best[1][0]:.2f}, "
        f"commits {best[3][1] / best[1][1]:.2f}"
    )


if __name__ == "__main__":
    main()
