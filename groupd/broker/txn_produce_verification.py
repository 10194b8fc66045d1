"""Which partitions of a Produce need their transaction verified by another node first (KIP-890, in a
cluster): those this node leads whose first transactional batch starts the producer's transaction there,
when the producer's transactional id is coordinated elsewhere. As Kafka's Partition does, a producer that
already has an open transaction on the partition is not verified again (its partition was verified when
the transaction began there), so one round trip is paid per partition per transaction, not per batch.

Before asking, each such partition starts a verification guard (dataplane/verification_guards.py, Kafka's
UnifiedLog.maybeStartTransactionVerification); at the append after the answer a transactional batch goes
in only if its producer's transaction is open on the partition or the guard is still held there
(``RemoteVerification.admits``, Kafka's UnifiedLog check before an append): a marker that ended the
transaction meanwhile voids the guard, and the batch is refused INVALID_TXN_STATE instead of opening a
transaction its coordinator has already closed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

from groupd.broker.dataplane.verification_guards import VerificationGuard
from groupd.clock import wall_ms
from groupd.cluster.txn_verification import coordinator_error, produce_error
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


@dataclass
class RemoteVerification:
    """A Produce whose producer's transactional id another node coordinates: per partition asked, the
    answer as the producer hears it (set once the coordinator answered) and the guard started before
    asking."""

    errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
    guards: dict[TopicPartition, VerificationGuard] = field(default_factory=dict)

    def admits(self, broker: Broker, tp: TopicPartition, producer_id: int, producer_epoch: int) -> ErrorCode:
        """May a transactional batch of the producer be appended to ``tp`` now (Kafka's UnifiedLog: its
        transaction is open there, or its verification guard still is)?"""
        error = self.errors.get(tp, ErrorCode.none)
        if error != ErrorCode.none:
            return error
        partitions = broker.partitions
        txns = partitions.txn_state(tp)
        if txns is not None and txns.has_open(producer_id):
            return ErrorCode.none
        if partitions.guards.holds(tp, producer_id, self.guards.get(tp)):
            return ErrorCode.none
        return ErrorCode.invalid_txn_state  # the transaction ended while it was verified


@dataclass(frozen=True, slots=True)
class LocalVerification:
    """A Produce whose transactional id this node coordinates (or that names none): each transactional batch
    is checked with the coordinator here at its append, and the answer translated as a remote coordinator's
    is (``coordinator_error`` then ``produce_error``), so a producer hears the same from one node or many."""

    tid: str | None
    produce_version: int

    def admits(self, broker: Broker, tp: TopicPartition, producer_id: int, producer_epoch: int) -> ErrorCode:
        answer = broker.transactions.verify_produce(self.tid, producer_id, producer_epoch, tp)
        return produce_error(coordinator_error(answer, self.produce_version))


Verification: TypeAlias = RemoteVerification | LocalVerification


def remote_verifications(
    broker: Broker, tid: str, records: list[tuple[str, int, bytes | None]]
) -> tuple[Asks, RemoteVerification] | None:
    """What to ask the coordinator node of ``tid`` about, with the guards started for it; None: ``tid`` is
    coordinated here, verified in the append itself."""
    route = broker.transactions.route(tid)
    if route == ErrorCode.none:
        return None
    asks: Asks = {}
    verification = RemoteVerification()
    for topic, index, data in records:
        if topic in INTERNAL_TOPICS or not data or not broker.leads(topic, index):
            continue  # refused by the append itself
        first = _first_transactional(data)
        if first is None:
            continue
        producer_id, epoch, sequence = first
        txns = broker.partitions.txn_state((topic, index))
        if txns is not None and txns.has_open(producer_id):
            continue
        if route == ErrorCode.coordinator_load_in_progress:
            asks.setdefault(LOADING, []).append((topic, index))
            continue
        guard = broker.partitions.guards.start((topic, index), producer_id, sequence, epoch, wall_ms())
        verification.guards[(topic, index)] = guard
        asks.setdefault((producer_id, epoch), []).append((topic, index))
    return asks, verification


def _first_transactional(data: bytes) -> tuple[int, int, int] | None:
    """(producer id, epoch, first sequence) of the first transactional data batch; None: none, or malformed
    (the append refuses those with their own error)."""
    try:
        for batch in split_batches(data):
            h = validate_batch(batch)
            if h.is_transactional and not h.is_control and h.producer_id >= 0:
                return h.producer_id, h.producer_epoch, h.base_sequence
    except (CorruptBatch, UnsupportedMagic):
        return None
    return None
