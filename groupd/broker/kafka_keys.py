"""Kafka's broker keys as a Kafka user writes them: unit variants read with Kafka's precedence, and the
keys of Kafka's stock ``server.properties`` that a single groupd node has no use for, each with why.

Unit variants (Kafka's ``KafkaConfig.logRetentionTimeMillis`` and ``logRollTimeMillis``):

- retention: ``log.retention.ms`` if set, else ``log.retention.minutes`` x 60,000, else
  ``log.retention.hours`` x 3,600,000 (default 168); any negative result means unlimited (-1);
- segment roll: ``log.roll.ms`` if set, else ``log.roll.hours`` x 3,600,000 (default 168);
- ``broker.id`` (ZooKeeper-era name) gives ``node.id`` when ``node.id`` itself is not set.

So a Kafka ``server.properties`` (``log.retention.hours=168``) starts groupd with the same meaning, and
a key groupd ignores is said once at start-up with the reason, never warned about as unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

HOUR_MS = 3_600_000
MINUTE_MS = 60_000

# every key of Kafka's stock config/server.properties (KRaft combined mode, and the ZooKeeper-era file)
# that groupd accepts without acting on it, and why
IGNORED: dict[str, str] = {
    "process.roles": "groupd is always one combined node; there is no separate controller role",
    "controller.quorum.voters": "no KRaft controller quorum: cluster metadata lives on the node itself",
    "controller.quorum.bootstrap.servers": "no KRaft controller quorum: cluster metadata lives on the node itself",
    "controller.listener.names": "no controller listener: clients and the node's own metadata share the listeners",
    "num.network.threads": "one asyncio event loop serves every connection: no network thread pool to size",
    "num.io.threads": "requests are handled on the event loop: no request-handler thread pool to size",
    "socket.send.buffer.bytes": "the operating system's socket buffer sizes are used",
    "socket.receive.buffer.bytes": "the operating system's socket buffer sizes are used",
    "offsets.topic.replication.factor": "one node keeps one copy of __consumer_offsets (replication factor 1)",
    "transaction.state.log.replication.factor": "one node keeps one copy of __transaction_state (replication factor 1)",
    "transaction.state.log.min.isr": "one copy: the in-sync replica set is the node itself",
    "share.coordinator.state.topic.replication.factor": "share groups (KIP-932) are not served",
    "share.coordinator.state.topic.min.isr": "share groups (KIP-932) are not served",
    "zookeeper.connect": "no ZooKeeper (Kafka 4 has none either)",
    "zookeeper.connection.timeout.ms": "no ZooKeeper (Kafka 4 has none either)",
}


def resolve_units(raw: Mapping[str, str], values: dict[str, Any]) -> None:
    """Fill ``log.retention.ms``, ``log.roll.ms`` and ``node.id`` from their variants, as Kafka does
    (``values`` holds the parsed keys; the variants were parsed as keys of their own)."""
    if "log.retention.ms" not in raw:
        minutes = values.get("log.retention.minutes")
        millis = minutes * MINUTE_MS if minutes is not None else values["log.retention.hours"] * HOUR_MS
        values["log.retention.ms"] = -1 if millis < 0 else millis
    elif values["log.retention.ms"] < 0:
        values["log.retention.ms"] = -1
    if "log.roll.ms" not in raw:
        values["log.roll.ms"] = values["log.roll.hours"] * HOUR_MS
    if "node.id" not in raw and values.get("broker.id") is not None:
        values["node.id"] = values["broker.id"]
