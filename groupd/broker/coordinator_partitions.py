"""The partition counts of the coordinators' topics, kept from the first start on.

Kafka asks that ``offsets.topic.num.partitions``, ``transaction.state.log.num.partitions`` and
``share.coordinator.state.topic.num.partitions`` never change after deployment (a group's, a transactional
id's or a share-partition's state lives in a partition chosen by a hash modulo the count, so another count
sends most keys to a partition that does not hold them) and does not notice a change. groupd does, cheaply:
the count in use is recorded in the storage engine's metadata (shared by every node of a cluster) at the
first start, and a node started with another count refuses to start, with one line naming both numbers,
before it loads anything. A store from before the record existed is checked against the partitions it
holds (one at an index the configured count does not reach proves the count was larger), then recorded.

A single node still moves transactional ids home when ``transaction.state.log.num.partitions`` changed
(coordinator/transactions/service.py), so it only records the new count; a cluster refuses it, because its
nodes load each partition on its own and would never read the ids left under the old count.
"""

from __future__ import annotations

from dataclasses import dataclass

from groupd.broker.config import ConfigError
from groupd.protocol.topic_names import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_STATE_TOPIC
from groupd.storage.engine import StorageEngine

KEY_PREFIX = "coordinator-partitions."  # + topic: the partition count its records were written with
COUNT_KEYS = {
    OFFSETS_TOPIC: "offsets.topic.num.partitions",
    TXN_STATE_TOPIC: "transaction.state.log.num.partitions",
    SHARE_STATE_TOPIC: "share.coordinator.state.topic.num.partitions",
}


@dataclass(frozen=True, slots=True)
class Stored:
    count: int
    exact: bool  # False: only known to be at least ``count`` (from the partitions a store held)


def refused(clustered: bool) -> frozenset[str]:
    """The topics whose count may not change: every one in a cluster; a single node moves transactional ids
    home."""
    return frozenset(COUNT_KEYS) if clustered else frozenset({OFFSETS_TOPIC, SHARE_STATE_TOPIC})


def stored_count(storage: StorageEngine, topic: str) -> Stored | None:
    """The count ``topic``'s state was written with, as far as the store tells (None: nothing stored)."""
    raw = storage.metadata.get(KEY_PREFIX + topic)
    if raw is not None:
        return Stored(int(raw), True)
    held = storage.partitions(topic)
    return Stored(max(p for _, p in held) + 1, False) if held else None


def changed(topic: str, configured: int, stored: Stored | None) -> str | None:
    """Why ``configured`` cannot be used for ``topic`` (None: it can)."""
    if stored is None or stored.count == configured or (not stored.exact and stored.count < configured):
        return None
    key = COUNT_KEYS[topic]
    if stored.exact:
        was, fix = f"{stored.count} partitions", f"start with {key}={stored.count}"
    else:
        was, fix = f"at least {stored.count} (its partition {stored.count - 1} exists)", f"start with its former {key}"
    return f"{key}={configured} but {topic} was created with {was}: it must not change once deployed; {fix}"


def check(storage: StorageEngine, configured: dict[str, int], refused: frozenset[str]) -> None:
    """Raise ConfigError for the first topic of ``refused`` whose configured count differs from the stored
    one; record each configured count otherwise (``configured``: topic -> count)."""
    for topic, count in configured.items():
        stored = stored_count(storage, topic)
        if topic in refused and (why := changed(topic, count, stored)) is not None:
            raise ConfigError(why)
        if stored is None or not stored.exact or stored.count != count:
            storage.metadata.put(KEY_PREFIX + topic, str(count).encode())
