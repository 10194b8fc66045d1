"""The read-ahead attack of issue 26, measured: the broker's RSS while connections park a long-poll
Fetch and stream large frames behind it.

``python -m bench.readahead_attack [--root DIR] [--override key=value ...]`` runs ``python -m groupd``
in ``DIR`` (this checkout by default) on a free loopback port, opens ``--connections`` connections, each
parks a Fetch (max_wait 60 s) and writes ``--frames`` frames of ``--frame-bytes`` behind it, then reports
the broker's resident set before and at its peak. Bounded in frames and in time (``--seconds``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from pathlib import Path

from groupd.protocol import codec
from groupd.protocol.api_table import ApiKey
from tests.harness import BrokerProcess, WireClient, padded_api_versions

MIB = 1 << 20


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def fetch_request(topic: str) -> object:
    cls = codec.request_class(ApiKey.FETCH, 11)
    t, p = codec.nested(cls, "FetchTopic"), codec.nested(cls, "FetchPartition")
    return codec.make(
        cls,
        replica_id=-1,
        max_wait=60_000,
        min_bytes=1,
        max_bytes=MIB,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            t(
                topic=topic,
                partitions=(
                    p(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        log_start_offset=-1,
                        partition_max_bytes=MIB,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


async def attack(
    port: int, pid: int, connections: int, frames: int, frame_bytes: int, seconds: float
) -> tuple[float, float]:
    before = rss_mib(pid)
    frame = padded_api_versions(7, frame_bytes)
    clients = [await WireClient.connect(port) for _ in range(connections)]
    md = codec.request_class(ApiKey.METADATA, 9)
    await clients[0].call(
        ApiKey.METADATA,
        9,
        codec.make(  # auto-creates the topic to long-poll
            md,
            topics=(codec.make(codec.nested(md, "MetadataRequestTopic"), name="attack", topic_id=codec.ZERO_UUID),),
            allow_auto_topic_creation=True,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        ),
    )
    for c in clients:
        c.send(ApiKey.FETCH, 11, fetch_request("attack"))

    async def stream(c: WireClient) -> None:
        for _ in range(frames):
            c.writer.write(frame)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(c.writer.drain(), 0.5)  # a stalled drain means the broker stopped reading

    tasks = [asyncio.ensure_future(stream(c)) for c in clients]
    peak, deadline = before, time.monotonic() + seconds
    while time.monotonic() < deadline and not all(t.done() for t in tasks):
        peak = max(peak, rss_mib(pid))
        await asyncio.sleep(0.1)
    for _ in range(10):  # the broker reads what was sent last
        peak = max(peak, rss_mib(pid))
        await asyncio.sleep(0.1)
    for t in tasks:
        t.cancel()
    for c in clients:
        c.writer.transport.abort()
    return before, peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=None, help="checkout whose groupd to run (default: this one)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--frames", type=int, default=600)
    parser.add_argument("--frame-bytes", type=int, default=MIB)
    parser.add_argument("--seconds", type=float, default=40.0)
    args = parser.parse_args(argv)
    overrides = dict(item.split("=", 1) for item in args.override)
    with tempfile.TemporaryDirectory() as tmp:
        proc = BrokerProcess(Path(tmp) / "data", {"log.level": "WARN", **overrides})
        if args.root:
            import tests.harness as harness

            harness.ROOT = Path(args.root).resolve()
        proc.start()
        try:
            before, peak = asyncio.run(
                attack(proc.port, proc.proc.pid, args.connections, args.frames, args.frame_bytes, args.seconds)
            )
        finally:
            proc.kill()
    print(
        f"read-ahead attack: {args.connections} connections x {args.frames} frames of {args.frame_bytes / MIB:.2f} MiB "
        f"behind a parked Fetch: broker RSS {before:.0f} MiB before, {peak:.0f} MiB at peak (+{peak - before:.0f} MiB)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
