"""groupd-cluster: the nodes of a cluster and who owns what, over the wire (Metadata through kafka-python's
admin client, as groupd-groups talks to a broker), so it needs a bootstrap address and no database
credentials:

    groupd-cluster --bootstrap-server H:P

One line per live node (id, address, how many data partitions and ``__consumer_offsets`` partitions it
leads), then each topic's partitions by leader; ``-`` for a partition nobody holds now (a takeover under
way). Works against any Kafka broker too (there every partition has a leader of its replica set).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

from kafka import KafkaAdminClient

from groupd.protocol.topic_names import OFFSETS_TOPIC


def ownership(bootstrap: str) -> tuple[dict[int, tuple[str, int]], dict[str, dict[int, int]]]:
    """(node id -> (host, port), topic -> partition -> leader id, -1 when none)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="groupd-cluster")
    try:
        cluster = admin.describe_cluster()
        names = sorted(set(admin.list_topics()) | {OFFSETS_TOPIC})
        described = admin.describe_topics(names)
    finally:
        admin.close()
    # DescribeCluster's brokers and Metadata's topics as kafka-python gives them (Kafka's field names)
    nodes = {b.get("broker_id", b.get("node_id")): (b["host"], b["port"]) for b in cluster["brokers"]}
    leaders: dict[str, dict[int, int]] = {}
    for topic in described:
        if topic["error_code"] == 0:
            name = topic.get("name", topic.get("topic"))
            leaders[name] = {p["partition_index"]: p["leader_id"] for p in topic["partitions"]}
    return nodes, leaders


def render(nodes: dict[int, tuple[str, int]], leaders: dict[str, dict[int, int]]) -> str:
    data: dict[int, int] = defaultdict(int)
    offsets: dict[int, int] = defaultdict(int)
    for topic, parts in leaders.items():
        for leader in parts.values():
            (offsets if topic == OFFSETS_TOPIC else data)[leader] += 1
    lines = [f"{'NODE':<6} {'ADDRESS':<28} {'PARTITIONS':>10} {'OFFSETS-SHARDS':>14}"]
    for node, (host, port) in sorted(nodes.items()):
        lines.append(f"{node:<6} {host + ':' + str(port):<28} {data[node]:>10} {offsets[node]:>14}")
    unowned = data[-1] + offsets[-1]
    if unowned:
        lines.append(f"{'-':<6} {'(nobody: takeover under way)':<28} {data[-1]:>10} {offsets[-1]:>14}")
    lines.append("")
    for topic, parts in sorted(leaders.items()):
        by_leader: dict[int, list[int]] = defaultdict(list)
        for p, leader in sorted(parts.items()):
            by_leader[leader].append(p)
        owned = "  ".join(
            f"{'-' if leader < 0 else leader}:{','.join(map(str, ps))}" for leader, ps in sorted(by_leader.items())
        )
        lines.append(f"{topic}  {owned}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="groupd-cluster", description="the nodes of a cluster and who owns what")
    parser.add_argument("--bootstrap-server", required=True, help="host:port of any node")
    args = parser.parse_args(argv)
    try:
        nodes, leaders = ownership(args.bootstrap_server)
    except Exception as exc:  # noqa: BLE001 - one line for any failure to reach the cluster
        print(f"groupd-cluster: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(render(nodes, leaders))
    return 0


if __name__ == "__main__":
    sys.exit(main())
