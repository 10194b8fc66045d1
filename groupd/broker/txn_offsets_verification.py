"""TxnOffsetCommit's transaction verification (KIP-890), as Kafka 4.x's group coordinator makes it before it
writes a producer's offsets (CoordinatorRuntime.scheduleTransactionalWriteOperation through
CoordinatorPartitionWriter.maybeStartTransactionVerification): the group's ``__consumer_offsets`` partition
must have been added to the producer's transaction (AddOffsetsToTxn), by the producer id the transactional
id holds now, at its current epoch. The transaction coordinator answers it, on this node or another, like
a Produce's verification; its answer reaches the client as Kafka's AddPartitionsToTxnManager and the group
coordinator's CoordinatorOperationExceptionHelper pass it on (``commit_error``).

A guard (coordinator/offsets/txn_guards.py) is held while the coordinator is asked: a marker of the producer
written to the partition meanwhile makes the commit INVALID_TXN_STATE, as Kafka's VerificationGuard does.

As for a Produce, a producer whose transaction is already open in the partition (its offsets written there
and not yet ended by a marker) is not verified again: one check per partition per transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from groupd.cluster.txn_verification import coordinator_error
from groupd.coordinator.api import TxnOffsetCommit
from groupd.coordinator.service import CoordinatorError
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import OFFSETS_TOPIC

if TYPE_CHECKING:
    from groupd.broker.app import Broker

# TxnOffsetCommit up to v3 is Kafka's "defaultError" operation: TRANSACTION_ABORTABLE is not known there
LAST_DEFAULT_ERROR_TXN_OFFSET_COMMIT_VERSION = 3
# CoordinatorOperationExceptionHelper.handleOperationException: what a group coordinator's client hears
_AS_GROUP_COORDINATOR = {
    ErrorCode.network_exception: ErrorCode.coordinator_load_in_progress,  # retried without a lookup
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
}


def commit_error(code: ErrorCode, version: int) -> ErrorCode:
    """The transaction coordinator's answer to the verification as the TxnOffsetCommit answers it."""
    code = coordinator_error(code, version, LAST_DEFAULT_ERROR_TXN_OFFSET_COMMIT_VERSION)
    return _AS_GROUP_COORDINATOR.get(code, code)


def needs_verification(broker: Broker, tid: str, producer_id: int, group_id: str) -> bool:
    """Is the commit verified first: verification on, a group to commit for, the group's partition served
    and loaded here (else the commit itself answers NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS, as
    Kafka's does before verifying), and the producer's transaction not yet open there?"""
    if not tid or not group_id or not broker.config["transaction.partition.verification.enable"]:
        return False
    try:
        shard = broker.coordinator.shard_for(group_id)
    except CoordinatorError:
        return False
    return producer_id not in shard.state.offsets.pending_txn


async def verified(broker: Broker, commit: TxnOffsetCommit) -> ErrorCode:
    """The transaction coordinator's raw answer for the group's offsets partition (``commit_error``
    translates it)."""
    tid, producer_id, producer_epoch = commit.transactional_id, commit.producer_id, commit.producer_epoch
    tp = (OFFSETS_TOPIC, broker.coordinator.partition_for(commit.group_id))
    txns = broker.transactions
    route = txns.route(tid)
    if route == ErrorCode.none:
        return txns.verify_partitions(tid, producer_id, producer_epoch, (tp,))[tp]
    if route == ErrorCode.coordinator_load_in_progress or txns.verifier is None:
        return route
    return (await txns.verifier.verify(tid, producer_id, producer_epoch, (tp,)))[tp]
