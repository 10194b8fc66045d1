"""What the authorizer costs a request, counted in executed Python bytecodes (deterministic, unlike wall clock
or CPU time on a shared machine): the broker runs in a thread of its own, traced (``sys.settrace`` opcode
events), the client in the main thread, untraced. Per request of each hot path (Produce, Fetch, OffsetCommit,
Heartbeat), three brokers: no authorizer, StandardAuthorizer with the client's ACLs only, and with ``--acls``
more ACLs of other principals and resources (literal and prefixed) besides. Printed per request: every
bytecode the broker ran, and those run in groupd/broker/security/ (the access door and the authorizer).

    python -m bench.acl_bytecodes [--requests 200] [--acls 300]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from groupd.broker.app import Broker
from groupd.broker.security.acl import AclBinding
from groupd.protocol.api_table import ApiKey
from groupd.storage.batch import build_batch
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.wire.test_data_plane import fetch_body, produce_body
from tests.wire.test_groups import commit_body, join_body, sync_body, wait_loaded

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ME = "User:ANONYMOUS"  # the PLAINTEXT listener's principal
TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL, PREFIXED = 3, 4
READ, WRITE, ALLOW = 3, 4, 3
SECURITY = "groupd/broker/security/"
HANDLERS = "groupd/broker/handlers/"


def mine() -> list[AclBinding]:
    """What the client needs: WRITE and READ on the topic, READ on the group."""
    return [
        AclBinding.of_wire(TOPIC, "bench", LITERAL, ME, "*", WRITE, ALLOW),
        AclBinding.of_wire(TOPIC, "bench", LITERAL, ME, "*", READ, ALLOW),
        AclBinding.of_wire(GROUP, "g", LITERAL, ME, "*", READ, ALLOW),
    ]


def others(n: int) -> list[AclBinding]:
    """ACLs of other principals on other topics and groups, a third literal, the rest prefixed."""
    return [
        AclBinding.of_wire(
            TOPIC if i % 2 else GROUP, f"r{i}", LITERAL if i % 3 == 0 else PREFIXED, f"User:u{i % 97}", "*", READ, ALLOW
        )
        for i in range(n)
    ]


class Counter:
    """Opcodes executed in the traced thread while ``on``, by file."""

    def __init__(self) -> None:
        self.on = False
        self.by_file: collections.Counter[str] = collections.Counter()

    def tracer(self, frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        name = frame.f_code.co_filename
        by_file = self.by_file

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "opcode" and self.on:
                by_file[name] += 1
            return local

        return local

    def take(self) -> collections.Counter[str]:
        out, self.by_file = self.by_file, collections.Counter()
        return out


def serve(data: Path, authorizer: bool, bindings: list[AclBinding], counter: Counter, ready: Any, stop: Any) -> None:
    """The broker's thread: start, make the topic and ACLs, then serve (traced) until told to stop."""

    async def main() -> None:
        settings = {"authorizer.class.name": AUTHORIZER} if authorizer else {}
        b = Broker(broker_config(data, **settings, **{"group.initial.rebalance.delay.ms": 0}))
        await b.start()
        await wait_loaded(b)
        b.create_topic("bench", 1, {})
        if authorizer:
            b.access.create(bindings)
        done = asyncio.Event()
        stop.append(lambda: loop.call_soon_threadsafe(done.set))
        ready.append(b.port)
        sys.settrace(counter.tracer)
        try:
            await done.wait()
        finally:
            sys.settrace(None)
            await b.stop()

    loop = asyncio.new_event_loop()
    loop.run_until_complete(main())
    loop.close()


async def per_request(counter: Counter, port: int, requests: int) -> dict[str, tuple[float, float, float]]:
    """Per API, bytecodes per request: (all, in security/, in handlers/)."""
    c = await WireClient.connect(port)
    batch = build_batch([(b"k", b"v" * 100)], timestamp_ms=1000)
    first = await c.call(ApiKey.JOIN_GROUP, 5, join_body(5))
    member = first.member_id
    joined = await c.call(ApiKey.JOIN_GROUP, 5, join_body(5, member_id=member))
    await c.call(ApiKey.SYNC_GROUP, 3, sync_body(3, member, joined.generation_id, ((member, b""),)))
    heartbeat = {"group_id": "g", "generation_id": joined.generation_id, "member_id": member, "group_instance_id": None}
    cases = (  # the heartbeats first, while the member's session (10 s) is young
        ("Heartbeat", ApiKey.HEARTBEAT, 4, heartbeat),
        ("Produce", ApiKey.PRODUCE, 9, produce_body("bench", 0, batch)),
        ("Fetch", ApiKey.FETCH, 11, fetch_body("bench", 0, 0)),
        ("OffsetCommit", ApiKey.OFFSET_COMMIT, 8, commit_body("g", "bench", 0, 1, "")),
    )
    out = {}
    for name, key, version, body in cases:
        for _ in range(20):  # warm: caches, first-time paths
            resp = await c.call(key, version, body)
        counter.take()
        counter.on = True
        for _ in range(requests):
            resp = await c.call(key, version, body)
        counter.on = False
        counts = counter.take()
        security = sum(n for f, n in counts.items() if SECURITY in f)
        handlers = sum(n for f, n in counts.items() if HANDLERS in f)
        out[name] = (sum(counts.values()) / requests, security / requests, handlers / requests)
        assert name != "Heartbeat" or resp.error_code == 0, resp
    await c.close()
    return out


async def measure(data: Path, authorizer: bool, bindings: list[AclBinding], requests: int) -> dict:
    counter, ready, stop = Counter(), [], []
    thread = threading.Thread(target=serve, args=(data, authorizer, bindings, counter, ready, stop))
    thread.start()
    while not ready:
        await asyncio.sleep(0.01)
    try:
        return await per_request(counter, ready[0], requests)
    finally:
        stop[0]()
        thread.join()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--acls", type=int, default=300)
    args = parser.parse_args()
    configs = (
        ("no authorizer", False, []),
        ("authorizer, the client's 3 ACLs", True, mine()),
        (f"authorizer, {args.acls + 3} ACLs", True, others(args.acls) + mine()),
    )
    with tempfile.TemporaryDirectory() as tmp:
        rows = {label: await measure(Path(tmp) / str(i), on, acls, args.requests)
                for i, (label, on, acls) in enumerate(configs)}  # fmt: skip
    base = rows["no authorizer"]
    print(f"bytecodes per request ({args.requests} requests each, the broker's thread): all (change against no")
    print("authorizer; the rest of the process varies by a few hundred) [in security/, in handlers/]")
    for label, row in rows.items():
        cells = []
        for name, (total, security, handlers) in row.items():
            delta = (total / base[name][0] - 1) * 100
            cells.append(f"{name} {total:,.0f} ({delta:+.1f} %) [{security:,.0f}, {handlers:,.0f}]")
        print(f"  {label:34} " + "; ".join(cells))


if __name__ == "__main__":
    asyncio.run(main())
