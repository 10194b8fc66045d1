"""What the authorizer costs a request: OffsetCommit and Fetch from a SASL PLAIN client, against a broker
without an authorizer and one with 1,000 ACLs (alice's among them), the same run; the broker process's
CPU seconds per request from /proc (its user + system time), so the client's own work is not counted.

    python -m bench.acl_cost [--requests 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from groupd.protocol import codec
from groupd.protocol.api_table import ApiKey
from tests.harness import BrokerProcess, WireClient, free_port
from tests.wire.test_acls import JAAS, creation
from tests.wire.test_data_plane import fetch_body, produce_body
from tests.wire.test_groups import commit_body
from tests.wire.test_sasl import login

TICKS = os.sysconf("SC_CLK_TCK")
GROUP, TOPIC = 3, 2
PREFIXED, READ, WRITE = 4, 3, 4


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


async def client(port: int, user: str) -> WireClient:
    c = await WireClient.connect(port)
    assert (await login(c, user, f"{user}-secret")).error_code == 0
    return c


async def measure(data: Path, acls: bool, requests: int) -> dict[str, float]:
    port = free_port()
    proc = BrokerProcess(data)
    settings = {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port},PLAINTEXT://127.0.0.1:{proc.port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "super.users": "User:admin",
    }
    if acls:
        settings["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    proc.overrides.update(settings)
    proc.start()
    try:
        admin = await client(port, "admin")
        await admin.call(
            ApiKey.CREATE_TOPICS,
            5,
            {
                "topics": (
                    codec.make(
                        codec.nested(codec.request_class(ApiKey.CREATE_TOPICS, 5), "CreatableTopic"),
                        name="bench",
                        num_partitions=1,
                        replication_factor=1,
                        assignments=(),
                        configs=(),
                    ),
                ),
                "timeout": 5000,
                "validate_only": False,
            },
        )
        await admin.call(ApiKey.PRODUCE, 9, produce_body("bench", 0, _batch()))
        if acls:  # 1,000 ACLs of other principals and prefixes, then alice's
            others = [
                creation(
                    rtype=TOPIC if i % 2 else GROUP,
                    name=f"r{i}",
                    pattern=PREFIXED if i % 3 else 3,
                    principal=f"User:u{i % 97}",
                    op=READ,
                )
                for i in range(998)
            ]
            mine = [creation(name="bench", op=READ), creation(rtype=GROUP, name="g", op=READ)]
            for start in range(0, len(others), 100):
                await admin.call(ApiKey.CREATE_ACLS, 3, {"creations": tuple(others[start : start + 100])})
            await admin.call(ApiKey.CREATE_ACLS, 3, {"creations": tuple(mine)})
        alice = await client(port, "alice")
        out = {}
        for name, body, key, version in (
            ("OffsetCommit", commit_body("g", "bench", 0, 1, ""), ApiKey.OFFSET_COMMIT, 8),
            ("Fetch", fetch_body("bench", 0, 0), ApiKey.FETCH, 11),
        ):
            for _ in range(200):  # warm up
                await alice.call(key, version, body)
            before, began = cpu_seconds(proc.proc.pid), time.perf_counter()
            for _ in range(requests):
                resp = await alice.call(key, version, body)
            out[name] = (cpu_seconds(proc.proc.pid) - before) / requests * 1e6
            out[name + " wall"] = (time.perf_counter() - began) / requests * 1e6
            assert resp is not None
        await alice.close()
        await admin.close()
        return out
    finally:
        proc.kill()


def _batch() -> bytes:
    from groupd.storage.batch import build_batch

    return build_batch([(b"k", b"v" * 100)], timestamp_ms=1000)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    rows: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):  # interleaved, so drift on a shared machine hits both alike
            for acls in (False, True):
                row = await measure(Path(tmp) / f"{r}-{acls}", acls, args.requests)
                rows[acls].append(row)
                print("with 1,000 ACLs" if acls else "no authorizer  ", {k: round(v, 1) for k, v in row.items()})
    for name in ("OffsetCommit", "Fetch"):
        plain = min(row[name] for row in rows[False])
        checked = min(row[name] for row in rows[True])
        print(
            f"{name}: {plain:.1f} us CPU/request without an authorizer, {checked:.1f} us with 1,000 ACLs "
            f"({(checked / plain - 1) * 100:+.1f} %)"
        )


if __name__ == "__main__":
    asyncio.run(main())
