"""The three-node compose profile (docker/docker-compose.cluster.yml) from inside the compose network, in two
phases around ``docker kill`` of node 2 (scripts/compose-cluster-test.sh):

- ``before``: every node, asked alone, lists the three nodes and the same leader for each of ``cl``'s six
  partitions, and every node leads some; 60 records are produced with acks=all (10 a partition, so through
  every node); group ``cl-g`` reads them all and commits, and every node names the same coordinator for it;
- ``across``: an idempotent acks=all producer bootstrapped at all three sends round after round while the
  script kills node 2, its retries carrying it over the leases node 2 held; the group then resumes from
  its commit and reads exactly the acknowledged records, each partition's in order; the survivors list
  two nodes and lead every partition.

Run as ``python -m tests.compose.cluster before|across`` in the integration image."""

from __future__ import annotations

import asyncio
import sys
import time
from collections import defaultdict

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from groupd.protocol import codec
from tests.compose.drive import connect_admin, log
from tests.harness import WireClient

NODES = {1: "groupd:19092", 2: "groupd-2:19092", 3: "groupd-3:19092"}
TOPIC, GROUP, PARTITIONS, PER_PARTITION = "cl", "cl-g", 6, 10
KILLED = 2
ACROSS_S = 15  # the kill comes about 3 s in; the lease of the compose test is 3 s


async def _metadata(address: str) -> tuple[set[int], dict[int, int]]:
    host, port = address.rsplit(":", 1)
    client = await WireClient.connect(int(port), host)
    try:
        cls = codec.request_class(3, 12)
        body = codec.make(
            cls,
            topics=(codec.nested(cls, "MetadataRequestTopic")(name=TOPIC, topic_id=codec.ZERO_UUID),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        answer = await client.call(3, 12, body)
    finally:
        await client.close()
    return {b.node_id for b in answer.brokers}, {p.partition_index: p.leader_id for p in answer.topics[0].partitions}


def leaders(bootstrap: str, deadline: float) -> tuple[set[int], dict[int, int]]:
    """(the nodes Metadata lists, each partition's leader) as the node at ``bootstrap`` itself answers (a raw
    Metadata request: a client library would ask whichever node it likes), once every partition has a live
    leader (a killed node's leases move after the lease)."""
    while True:
        nodes, lead = asyncio.run(_metadata(bootstrap))
        if len(lead) == PARTITIONS and all(leader in nodes for leader in lead.values()):
            return nodes, lead
        if time.monotonic() > deadline:
            raise AssertionError(f"{bootstrap}: partitions without a live leader: {lead} (nodes {nodes})")
        time.sleep(1)


def produce(bootstrap: list[str], start: int) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", retries=30, retry_backoff_ms=500, request_timeout_ms=10_000
    )
    futures = [
        producer.send(TOPIC, value=b"%d-%d" % (p, i), partition=p)
        for i in range(start, start + PER_PARTITION)
        for p in range(PARTITIONS)
    ]
    for future in futures:
        future.get(timeout=90)
    producer.close()


def consume(bootstrap: list[str], expected: int) -> dict[int, list[bytes]]:
    """Group ``cl-g``'s next ``expected`` records (from its committed offsets), then commit."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=GROUP, auto_offset_reset="earliest", enable_auto_commit=False
    )
    consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    got: dict[int, list[bytes]] = defaultdict(list)
    deadline = time.monotonic() + 90
    while sum(map(len, got.values())) < expected and time.monotonic() < deadline:
        for tp, records in consumer.poll(timeout_ms=1000).items():
            got[tp.partition].extend(r.value for r in records)
    consumer.commit()
    consumer.close()
    return got


def expected_values(first: int) -> dict[int, list[bytes]]:
    return {p: [b"%d-%d" % (p, i) for i in range(first, first + PER_PARTITION)] for p in range(PARTITIONS)}


def committed(nodes: dict[int, str]) -> set[tuple[tuple[int, int], ...]]:
    """The group's committed offsets as a consumer bootstrapped at each node reads them (routed by
    FindCoordinator to the group's coordinator): one answer when every node routes alike."""
    found = set()
    for bootstrap in nodes.values():
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False)
        try:
            found.add(tuple((p, consumer.committed(TopicPartition(TOPIC, p))) for p in range(PARTITIONS)))
        finally:
            consumer.close()
    return found


def before() -> bool:
    admin = connect_admin(NODES[1])
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    admin.close()
    deadline = time.monotonic() + 60
    views = {node: leaders(bootstrap, deadline) for node, bootstrap in NODES.items()}
    log(f"cluster profile: leaders of {TOPIC} as each node answers: {views}")
    first = views[1]
    if any(view[0] != set(NODES) for view in views.values()) or len(set(first[1].values())) != len(NODES):
        log("FAILED: not every node lists three nodes, or not every node leads a partition")
        return False
    if any(view[1] != first[1] for view in views.values()):
        log("FAILED: the nodes name different leaders")  # a heartbeat may lag: asked again once
        time.sleep(3)
        views = {node: leaders(bootstrap, deadline) for node, bootstrap in NODES.items()}
        if any(view[1] != views[1][1] for view in views.values()):
            return False
    produce(list(NODES.values()), 0)
    got = consume(list(NODES.values()), PARTITIONS * PER_PARTITION)
    found = committed(NODES)
    log(f"cluster profile: read {sum(map(len, got.values()))} records; committed, as read from each node: {found}")
    return dict(got) == expected_values(0) and found == {tuple((p, PER_PARTITION) for p in range(PARTITIONS))}


def across() -> bool:
    """Produce for ``ACROSS_S`` seconds while the script kills node 2 (it waits for the first line below):
    round after round, one record a partition, each acknowledged before the next round. Then the group
    resumes from its commit: it must read exactly what was acknowledged, each partition's in order."""
    survivors = {n: b for n, b in NODES.items() if n != KILLED}
    producer = KafkaProducer(
        bootstrap_servers=list(NODES.values()),
        acks="all",
        enable_idempotence=True,
        retries=100,
        retry_backoff_ms=200,
        request_timeout_ms=5_000,
    )
    acknowledged: dict[int, list[bytes]] = defaultdict(list)
    log("cluster profile: producing across the kill")
    began = time.monotonic()
    slowest, rounds = 0.0, 0
    while time.monotonic() - began < ACROSS_S:
        sent = time.monotonic()
        futures = {p: producer.send(TOPIC, value=b"%d-x%d" % (p, rounds), partition=p) for p in range(PARTITIONS)}
        for p, future in futures.items():
            future.get(timeout=60)
            acknowledged[p].append(b"%d-x%d" % (p, rounds))
        slowest = max(slowest, time.monotonic() - sent)
        rounds += 1
        time.sleep(0.05)
    producer.close()
    got = consume(list(survivors.values()), rounds * PARTITIONS)
    views = {node: leaders(bootstrap, time.monotonic() + 30) for node, bootstrap in survivors.items()}
    log(
        f"cluster profile, node {KILLED} killed: {rounds} rounds of {PARTITIONS} records acknowledged, the slowest "
        f"round {slowest:.1f} s; read {sum(map(len, got.values()))} from the committed offsets; leaders now {views}"
    )
    live = all(view[0] == set(survivors) and set(view[1].values()) <= set(survivors) for view in views.values())
    ends = {tuple((p, PER_PARTITION + rounds) for p in range(PARTITIONS))}
    return dict(got) == dict(acknowledged) and live and committed(survivors) == ends


def main(phase: str) -> int:
    ok = before() if phase == "before" else across()
    if not ok:
        log(f"FAILED: the cluster profile's {phase} phase")
        return 1
    log(f"cluster profile: {phase} passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
