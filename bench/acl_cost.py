"""What the authorizer costs a request: OffsetCommit and Fetch from a SASL PLAIN client, against a broker
without an authorizer and brokers with 1,000 ACLs (alice's among them, LITERAL or PREFIXED), the same run.

Two measures of the broker process alone (the client's work is never counted):

- ``--callgrind`` (the one to trust on a shared machine): the broker runs under ``valgrind --tool=callgrind
  --instr-atstart=no``; after a warm-up the client switches instrumentation on, sends N requests, has the
  counters dumped, sends 3N more, dumps again. Instructions per request = (second dump - first) / 2N, so
  what a dump or a toggle costs cancels, and start-up is never counted. Deterministic up to the broker's
  timers; repeated runs agree within a few hundred instructions per request.
- otherwise the broker's CPU seconds per request from /proc (user + system): on this shared machine its
  rounds disagree by more than the difference it looks for.

    python -m bench.acl_cost --callgrind [--requests 150]
    python -m bench.acl_cost [--requests 3000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
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
LITERAL, PREFIXED, READ, WRITE = 3, 4, 3, 4
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CASES = (  # name, request body, api key, version
    ("OffsetCommit", commit_body("g", "bench", 0, 1, ""), ApiKey.OFFSET_COMMIT, 8),
    ("Fetch", fetch_body("bench", 0, 0), ApiKey.FETCH, 11),
)
# the brokers compared: no authorizer; 1,000 ACLs, alice allowed by LITERAL ACLs; by PREFIXED ones
CONFIGS = ("none", LITERAL, PREFIXED)
LABELS = {"none": "no authorizer", LITERAL: "1,000 ACLs, alice's LITERAL", PREFIXED: "1,000 ACLs, alice's PREFIXED"}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


class CallgrindBroker(BrokerProcess):
    """The broker under callgrind, instrumentation off until the client turns it on."""

    def __init__(self, log_dir: Path, out: Path) -> None:
        super().__init__(log_dir)
        self.out = out

    def command(self) -> list[str]:
        valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={self.out}"]
        return ["env", "PYTHONHASHSEED=0", *valgrind, *super().command()]  # the same dict layouts every run

    def control(self, *args: str) -> None:
        assert self.proc is not None
        subprocess.run(["callgrind_control", *args, str(self.proc.pid)], check=True, capture_output=True)

    def dumps(self) -> list[int]:
        """The instructions of each dump so far, in order (callgrind names them out.1, out.2, ...)."""
        counts = []
        for n in range(1, 100):
            part = Path(f"{self.out}.{n}")
            if not part.exists():
                break
            totals = [line for line in part.read_text().splitlines() if line.startswith(("summary:", "totals:"))]
            counts.append(int(totals[-1].split()[1]))
        return counts


async def client(port: int, user: str) -> WireClient:
    c = await WireClient.connect(port)
    assert (await login(c, user, f"{user}-secret")).error_code == 0
    return c


def acls(pattern: int) -> list:
    """998 ACLs of other principals on other topics and groups (a third literal, the rest prefixed), then
    alice's READ on the topic ``bench`` and the group ``g``, named literally or by a prefix."""
    others = [
        creation(
            rtype=TOPIC if i % 2 else GROUP,
            name=f"r{i}",
            pattern=PREFIXED if i % 3 else LITERAL,
            principal=f"User:u{i % 97}",
            op=READ,
        )
        for i in range(998)
    ]
    topic, group = ("bench", "g") if pattern == LITERAL else ("ben", "g")
    return others + [
        creation(name=topic, pattern=pattern, op=READ),
        creation(rtype=GROUP, name=group, pattern=pattern, op=READ),
    ]


async def measure(data: Path, config: object, requests: int, callgrind: bool) -> dict[str, float]:
    """Per case, the broker's instructions (callgrind) or CPU microseconds per request."""
    data.mkdir(parents=True)
    port = free_port()
    proc = CallgrindBroker(data / "log", data / "callgrind.out") if callgrind else BrokerProcess(data / "log")
    settings = {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port},PLAINTEXT://127.0.0.1:{proc.port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "super.users": "User:admin",
        "log.level": "WARNING",
    }
    if config != "none":
        settings["authorizer.class.name"] = AUTHORIZER
    proc.overrides.update(settings)
    await asyncio.to_thread(proc.start, 600.0 if callgrind else 20.0)
    try:
        admin = await client(port, "admin")
        topic = codec.make(
            codec.nested(codec.request_class(ApiKey.CREATE_TOPICS, 5), "CreatableTopic"),
            name="bench", num_partitions=1, replication_factor=1, assignments=(), configs=(),
        )  # fmt: skip
        await admin.call(ApiKey.CREATE_TOPICS, 5, {"topics": (topic,), "timeout": 5000, "validate_only": False})
        await admin.call(ApiKey.PRODUCE, 9, produce_body("bench", 0, _batch()))
        if config != "none":
            creations = acls(int(config))  # type: ignore[call-overload]
            for start in range(0, len(creations), 100):
                resp = await admin.call(ApiKey.CREATE_ACLS, 3, {"creations": tuple(creations[start : start + 100])})
                assert all(r.error_code == 0 for r in resp.results), resp
        alice = await client(port, "alice")
        out: dict[str, float] = {}
        phases: dict[str, tuple[int, float]] = {}
        for name, body, key, version in CASES:
            for _ in range(50 if callgrind else 200):  # warm up
                resp = await alice.call(key, version, body)
            assert _ok(resp), resp
            if callgrind:
                phases[name] = await _phases(proc, alice, key, version, body, requests)  # type: ignore[arg-type]
                continue
            before, began = cpu_seconds(proc.proc.pid), time.perf_counter()
            for _ in range(requests):
                resp = await alice.call(key, version, body)
            out[name] = (cpu_seconds(proc.proc.pid) - before) / requests * 1e6
            out[name + " wall"] = (time.perf_counter() - began) / requests * 1e6
        if callgrind:  # the broker's timers run by the wall clock: their instructions per second, while idle
            idle, idle_s = await _phases(proc, alice, ApiKey.API_VERSIONS, 3, {}, 0)
            out["idle per s"] = idle / idle_s
            for name, (instructions, seconds) in phases.items():
                out[name + " raw"] = instructions / (2 * requests)
                out[name] = (instructions - out["idle per s"] * seconds) / (2 * requests)
        await alice.close()
        await admin.close()
        return out
    finally:
        proc.kill()


async def _phases(
    proc: CallgrindBroker, c: WireClient, key: ApiKey, version: int, body: dict, n: int
) -> tuple[int, float]:
    """N requests, then 3N, each phase's instructions dumped: the second phase's instructions less the
    first's, and its wall-clock seconds less the first's (the 2N requests' share of the timers' work). With
    no requests (n=0) the phases are 5 s and 15 s of idleness."""
    await asyncio.to_thread(proc.control, "-i", "on")
    walls = []
    for size in (n, 3 * n) if n else (0, 0):
        began = time.perf_counter()
        for _ in range(size):
            await c.call(key, version, body)
        if not n:
            await asyncio.sleep(15 if walls else 5)
        await asyncio.to_thread(proc.control, "-d")
        walls.append(time.perf_counter() - began)
    await asyncio.to_thread(proc.control, "-i", "off")
    first, second = proc.dumps()[-2:]
    return second - first, walls[1] - walls[0]


def _ok(resp: object) -> bool:
    """Every partition answered without an error (a refused request would measure a refusal)."""
    topics = getattr(resp, "topics", None) or getattr(resp, "responses", ())
    return all(p.error_code == 0 for t in topics for p in t.partitions)


def _batch() -> bytes:
    from groupd.storage.batch import build_batch

    return build_batch([(b"k", b"v" * 100)], timestamp_ms=1000)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--callgrind", action="store_true", help="count instructions under callgrind")
    parser.add_argument("--requests", type=int, default=None, help="per round (callgrind: N, then 3N)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--keep", default=None, help="keep the brokers' data and callgrind dumps in this directory")
    args = parser.parse_args()
    requests = args.requests or (150 if args.callgrind else 3000)
    rounds = args.rounds or (1 if args.callgrind else 2)
    unit = "instructions" if args.callgrind else "us CPU"
    rows: dict[object, list[dict[str, float]]] = {config: [] for config in CONFIGS}
    with tempfile.TemporaryDirectory() if args.keep is None else contextlib.nullcontext(args.keep) as tmp:
        for r in range(rounds):  # the brokers of a round side by side, so drift on a shared machine hits all
            got = await asyncio.gather(*(measure(Path(tmp) / f"{r}-{c}", c, requests, args.callgrind) for c in CONFIGS))
            for config, row in zip(CONFIGS, got, strict=True):
                rows[config].append(row)
                print(f"{LABELS[config]:30}", {k: round(v, 1) for k, v in row.items()}, flush=True)
    for name, *_ in CASES:
        plain = min(row[name] for row in rows["none"])
        cells = [f"{name}: {plain:,.0f} {unit}/request without an authorizer"]
        for config in CONFIGS[1:]:
            checked = min(row[name] for row in rows[config])
            cells.append(f"{checked:,.0f} with {LABELS[config]} ({(checked / plain - 1) * 100:+.2f} %)")
        print("; ".join(cells))


if __name__ == "__main__":
    asyncio.run(main())
