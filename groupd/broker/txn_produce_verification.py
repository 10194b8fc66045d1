"""Which partitions of a Produce need their transaction verified by another node first (KIP-890, in a
cluster): those this node leads whose first transactional batch starts the producer's transaction there,
when the producer's transactional id is coordinated elsewhere. As Kafka's Partition does, a producer that
already has an open transaction on the partition is not verified again (its partition was verified when
the transaction began there), so one round trip is paid per partition per transaction, not per batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from groupd.coordinator.transactions.rules import TopicPartition
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import INTERNAL_TOPICS
from groupd.storage.batch import split_batches, validate_batch
from groupd.storage.errors import CorruptBatch, UnsupportedMagic

if TYPE_CHECKING:
    from groupd.broker.app import Broker

# (producer id, producer epoch) -> the partitions to verify for it; producer id -1: the coordinator is this
# node but still loading (answered without asking anyone)
Asks: TypeAlias = dict[tuple[int, int], list[TopicPartition]]
LOADING = (-1, -1)


def remote_verifications(broker: Broker, tid: str, records: list[tuple[str, int, bytes | None]]) -> Asks:
    route = broker.transactions.route(tid)
    if route == ErrorCode.none:
        return {}  # coordinated here: verified in the append itself
    asks: Asks = {}
    for topic, index, data in records:
        if topic in INTERNAL_TOPICS or not data or not broker.leads(topic, index):
            continue  # refused by the append itself
        first = _first_transactional(data)
        if first is None:
            continue
        txns = broker.partitions.txn_state((topic, index))
        if txns is not None and txns.has_open(first[0]):
            continue
        key = LOADING if route == ErrorCode.coordinator_load_in_progress else first
        asks.setdefault(key, []).append((topic, index))
    return asks


def _first_transactional(data: bytes) -> tuple[int, int] | None:
    """(producer id, epoch) of the first transactional data batch; None: none, or malformed (the append
    refuses those with their own error)."""
    try:
        for batch in split_batches(data):
            h = validate_batch(batch)
            if h.is_transactional and not h.is_control and h.producer_id >= 0:
                return h.producer_id, h.producer_epoch
    except (CorruptBatch, UnsupportedMagic):
        return None
    return None
