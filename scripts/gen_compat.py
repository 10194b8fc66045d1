"""Render COMPATIBILITY.md from build/compat-results.json (written by the client tests' conftest).

    .venv/bin/python -m pytest -n 2 tests/clients && .venv/bin/python scripts/gen_compat.py

A cell is what the run saw: pass / FAIL, "n/a" with the reason where a client cannot do a scenario, and
"not covered" where no test exists yet, so the matrix never claims more than CI proved.
"""

from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "build" / "compat-results.json"
OUT = ROOT / "COMPATIBILITY.md"

SCENARIOS = {
    1: "connect, list topics",
    2: "create a topic with 6 partitions",
    3: "3 consumers: disjoint assignments covering every partition",
    4: "one closes: the rest take over",
    5: "one is killed: the rest take over after its session timeout",
    6: "consume, commit, close, resume at the committed offsets",
    7: "static membership: restart keeps partitions, no rebalance",
    8: "cooperative-sticky incremental rebalance",
    9: "admin: list/describe groups, group offsets, reset, delete (NON_EMPTY_GROUP)",
    10: "mixed clients in one group",
    11: "transactions: abort and commit, read back READ_COMMITTED, group offsets sent in the transaction",
    12: "quotas: a producer and a consumer over their byte rates are throttled and lose nothing",
    13: "SASL: a group over SASL_PLAINTEXT with PLAIN, and SCRAM logins with users an admin created",
    14: "TLS: SSL with client certificates, and SASL_SSL",
    15: "leader epochs: positions validated (OffsetForLeaderEpoch), truncation detected",
}
# "(consumer protocol)": the same client with group.protocol=consumer (KIP-848, tests/clients/test_consumer_protocol.py)
CONSUMER_PROTOCOL = "confluent-kafka (consumer protocol)"
CLIENTS = ["kafka-python", "aiokafka", "confluent-kafka", CONSUMER_PROTOCOL, "kafkajs", "groupd-groups"]
NOT_APPLICABLE = {
    ("aiokafka", 8): "aiokafka implements only the eager rebalance protocol (no cooperative-sticky)",
    ("kafkajs", 7): "kafkajs has no group.instance.id (static membership)",
    ("kafkajs", 8): "kafkajs implements only the eager rebalance protocol",
    ("kafkajs", 10): "scenario 10 is the kafka-python + confluent-kafka + aiokafka trio (range assignor)",
    **{("groupd-groups", n): "an admin tool, not a consumer" for n in (3, 4, 5, 6, 7, 8, 10)},
    **{("groupd-groups", n): "an admin tool, not a producer" for n in (11, 12)},
    ("groupd-groups", 15): "an admin tool, not a consumer",
    ("aiokafka", 15): "aiokafka does not validate positions (it sends no OffsetForLeaderEpoch)",
    ("kafkajs", 15): "kafkajs does not validate positions (OffsetForLeaderEpoch is not implemented)",
    **{("groupd-groups", n): "manages groups, not topics" for n in (1, 2)},
    (CONSUMER_PROTOCOL, 8): "the broker assigns, incrementally, for every consumer-protocol group (no client assignor)",
}


# Clients that choose request versions from a configured Kafka release, not from ApiVersions (issue 32):
# Kafka 3.9 serves them, Kafka 4 closes their connections. One row each; the cell is scenario 16 of the
# run (tests/clients/test_old_clients.py). Debian packages give the versions of the Go ones.
OLD_VERSIONS_SCENARIO = 16
OLD_CLIENTS = {
    "sarama": (
        "golang-github-shopify-sarama-dev",
        "defaults (Version 0.10.2, the least its groups take): Produce v2 gzip message sets (snappy and lz4 too), "
        "Fetch v3, OffsetCommit v1, Metadata v1; a group of three, a broker restart, resumed exactly",
    ),
    "kafka-go": (
        "golang-github-segmentio-kafka-go-dev",
        "0.2 writer (Produce v2; uncompressed, snappy, lz4) and group reader (Fetch v2, OffsetCommit v2), resumed "
        "exactly",
    ),
    "burrow": (
        "burrow",
        "reads __consumer_offsets (Fetch v3, down-converted), log end offsets by ListOffsets v0: the group's lag",
    ),
    "kafka-python api_version=(0, 10)": (
        None,
        "magic 1 gzip, snappy and lz4 message sets (and 0.9's magic 0), Fetch v2-3 (0.9: v1), JoinGroup v0-1, "
        "OffsetCommit v2; resumed at the commit",
    ),
}


# Share groups (KIP-932, issue 29): confluent-kafka's ShareConsumer (librdkafka's share consumer), one row a
# scenario (tests/clients/test_share_consumer.py, test_share_group_client.py).
SHARE_CLIENT = "confluent-kafka ShareConsumer"
SHARE_SCENARIOS = {
    31: "joins a share group, is assigned its partitions, leaves on close",
    32: "3 members share one 1-partition topic: each gets records, each record goes to one member",
    33: "RELEASE redelivers with a higher delivery count; REJECT archives",
    34: "a member holding records stops (its lock runs out) or is killed (its session ends): the others get them",
    35: "a broker restart keeps acknowledged state: nothing acknowledged comes back, nothing else is lost",
    36: "share.auto.offset.reset=earliest set as a GROUP config (IncrementalAlterConfigs)",
}


def debian_version(package: str) -> str:
    import subprocess

    try:
        done = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True, timeout=10
        )
    except OSError:
        return "not installed"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "not installed"


def version(client: str) -> str:
    if client == "kafkajs":
        lock = ROOT / "tests" / "clients" / "js" / "package-lock.json"
        try:
            return json.loads(lock.read_text())["packages"]["node_modules/kafkajs"]["version"]
        except (OSError, KeyError, ValueError):
            return "?"
    if client == "groupd-groups":
        return "this repository"
    if client == CONSUMER_PROTOCOL:
        client = "confluent-kafka"
    try:
        return metadata.version(client)
    except metadata.PackageNotFoundError:
        return "not installed"


def render(results: dict[str, dict[str, str]]) -> str:
    lines = [
        "# Client compatibility",
        "",
        "Generated by `scripts/gen_compat.py` from the client tests' results (`build/compat-results.json`):",
        'every cell is what the test run saw against groupd. "not covered" means no test proves it yet.',
        "",
        "| scenario | " + " | ".join(f"{c} {version(c)}" for c in CLIENTS) + " |",
        "| --- | " + " | ".join("---" for _ in CLIENTS) + " |",
    ]
    for n, title in SCENARIOS.items():
        cells = []
        for c in CLIENTS:
            outcome = results.get(c, {}).get(str(n))
            if outcome == "pass":
                cells.append("pass")
            elif outcome:
                cells.append(f"**{outcome.upper()}**")
            elif (c, n) in NOT_APPLICABLE:
                cells.append(f"n/a: {NOT_APPLICABLE[(c, n)]}")
            else:
                cells.append("not covered")
        lines.append(f"| {n}. {title} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Clients that pick request versions from a configured Kafka release",
        "",
        "They send the versions Kafka 3.9 accepts and Kafka 4 removed (KIP-896); groupd serves both (issue 32).",
        "",
        "| client | version | what the test does | result |",
        "| --- | --- | --- | --- |",
    ]
    for client, (package, what) in OLD_CLIENTS.items():
        ver = f"{debian_version(package)} (Debian)" if package else version("kafka-python")
        outcome = results.get(client, {}).get(str(OLD_VERSIONS_SCENARIO))
        cell = "pass" if outcome == "pass" else f"**{outcome.upper()}**" if outcome else "not covered"
        lines.append(f"| {client} | {ver} | {what} | {cell} |")
    lines += [
        "",
        "## Share groups (KIP-932)",
        "",
        f"{SHARE_CLIENT} {version('confluent-kafka')}, against groupd's share groups (docs/share-groups.md).",
        "",
        "| scenario | result |",
        "| --- | --- |",
    ]
    for n, title in SHARE_SCENARIOS.items():
        outcome = results.get(SHARE_CLIENT, {}).get(str(n))
        cell = "pass" if outcome == "pass" else f"**{outcome.upper()}**" if outcome else "not covered"
        lines.append(f"| {title} | {cell} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    if not RESULTS.exists():
        print(f"{RESULTS} is missing: run the client tests first", file=sys.stderr)
        return 1
    OUT.write_text(render(json.loads(RESULTS.read_text())))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
