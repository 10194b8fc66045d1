"""Three nodes while their PostgreSQL is stopped with ``pg_ctl stop -m immediate`` (no checkpoint, every
connection cut mid-transaction) for longer than a lease, then started again, under an idempotent
librdkafka producer (acks=all): the nodes stop serving when their leases can no longer be renewed, take
their leases again by themselves once the database is back, and nothing acknowledged is lost or stored
twice."""

from __future__ import annotations

import time

from groupd.protocol.topic_names import OFFSETS_TOPIC
from tests.cluster.test_three_nodes import (
    LEASE_MS,
    TOPIC,
    Sender,
    idempotent_producer,
    nodes,
    owners,
    read_all_of,
    wait_for,
)
from tests.harness import BrokerProcess
from tests.postgresql_server import PostgresServer
from tests.storage.conftest import outage

__all__ = ["nodes", "outage"]  # the fixtures this module's test uses


def test_a_database_stopped_immediately_then_started_loses_nothing_acknowledged(
    nodes: list[BrokerProcess], postgresql_url: str, outage: PostgresServer
) -> None:
    producer, acked, failed, report = idempotent_producer(nodes, postgresql_url)
    send = Sender(producer, report, b"d")
    send(300)
    assert producer.flush(20) == 0
    send(100)  # some of these are in flight when the database goes
    outage.stop("immediate")
    down_at = time.monotonic()
    send(100)  # queued by the client while no node can write
    time.sleep(2 * LEASE_MS / 1000 - (time.monotonic() - down_at))  # every lease and serving deadline passes
    outage.start()
    up_at = time.monotonic()
    wanted = {(TOPIC, p) for p in range(3)} | {(OFFSETS_TOPIC, p) for p in range(2)}
    wait_for(lambda: wanted <= {r for r, o in owners(postgresql_url).items() if o is not None}, 15, "owned again")
    recovered = time.monotonic() - up_at
    send(100)
    assert producer.flush(30) == 0
    assert failed == []
    assert len(acked) == send.sent == 600
    stored = read_all_of(",".join(n.bootstrap for n in nodes), 3)
    assert all(stored.get(key) == value for key, value in acked.items())  # every ack, at its offset
    assert len(stored) == len(set(stored.values())) == 600  # retried batches were not stored twice
    assert recovered < 3 * LEASE_MS / 1000 + 5, recovered
