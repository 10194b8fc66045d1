"""The transaction coordinator's producer id and epoch checks, in Kafka's order, and how a TxnOffsetCommit's
verification answer reaches its client.

Kafka facts:
- TransactionCoordinator.handleAddPartitionsToTransaction (AddOffsetsToTxn goes through it too): no
  metadata or another producer id -> INVALID_PRODUCER_ID_MAPPING; then another epoch -> PRODUCER_FENCED;
  then a pending transition or PrepareCommit/PrepareAbort -> CONCURRENT_TRANSACTIONS;
- handleVerifyPartitionsInTransaction: the same two checks first, then PrepareCommit/PrepareAbort ->
  CONCURRENT_TRANSACTIONS, then each partition NONE or TRANSACTION_ABORTABLE (not in the transaction);
- endTransaction (transactions v1, from a client): another producer id -> INVALID_PRODUCER_ID_MAPPING, an
  epoch not equal to the current one -> PRODUCER_FENCED, both before the state is looked at;
- AddPartitionsToTxnManager passes PRODUCER_FENCED on as INVALID_PRODUCER_EPOCH and TRANSACTION_ABORTABLE
  as INVALID_TXN_STATE to "defaultError" requests; CoordinatorPartitionWriter makes TxnOffsetCommit v4+
  "genericError" and older versions "defaultError";
- CoordinatorOperationExceptionHelper.handleOperationException, for the group coordinator's answer:
  NETWORK_EXCEPTION -> COORDINATOR_LOAD_IN_PROGRESS; UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS,
  REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR ->
  NOT_COORDINATOR; anything else as it is.
"""

from __future__ import annotations

import dataclasses

from groupd.broker.txn_offsets_verification import LAST_DEFAULT_ERROR_TXN_OFFSET_COMMIT_VERSION, commit_error
from groupd.coordinator.transactions import rules as T
from groupd.protocol.errors import ErrorCode

MAPPING, FENCED, CONCURRENT = (
    ErrorCode.invalid_producer_id_mapping,
    ErrorCode.producer_fenced,
    ErrorCode.concurrent_transactions,
)
PID, EPOCH, TP = 1000, 3, ("a", 0)


def _txn(state: int) -> T.Txn:
    return T.Txn("t", PID, EPOCH, 60_000, state, partitions=frozenset({TP}) if state == T.ONGOING else frozenset())


def test_the_producer_id_is_checked_before_the_epoch_and_the_state() -> None:
    for state in (T.EMPTY, T.ONGOING, T.PREPARE_COMMIT, T.PREPARE_ABORT, T.COMPLETE_COMMIT, T.COMPLETE_ABORT):
        txn = _txn(state)
        for epoch in (EPOCH, EPOCH - 1, EPOCH + 1):  # a wrong id is the answer whatever the epoch
            assert T.add_partitions(txn, PID + 1, epoch, [TP], 5) == MAPPING
            assert T.verify_partition(txn, PID + 1, epoch, TP) == MAPPING
            assert T.end_txn(txn, PID + 1, epoch, True, 5) == MAPPING
            assert T.while_pending(txn, PID + 1, epoch) == MAPPING
        for epoch in (EPOCH - 1, EPOCH + 1):  # the right id at another epoch, before the state is looked at
            assert T.add_partitions(txn, PID, epoch, [TP], 5) == FENCED
            assert T.verify_partition(txn, PID, epoch, TP) == FENCED
            assert T.end_txn(txn, PID, epoch, False, 5) == FENCED
            assert T.while_pending(txn, PID, epoch) == FENCED


def test_an_unknown_transactional_id_is_a_mapping_error() -> None:
    assert T.add_partitions(None, PID, EPOCH, [TP], 5) == MAPPING
    assert T.verify_partition(None, PID, EPOCH, TP) == MAPPING
    assert T.end_txn(None, PID, EPOCH, True, 5) == MAPPING
    assert T.while_pending(None, PID, EPOCH) == MAPPING


def test_with_the_right_producer_a_completing_transaction_is_concurrent() -> None:
    for state in (T.PREPARE_COMMIT, T.PREPARE_ABORT):
        txn = _txn(state)
        assert T.add_partitions(txn, PID, EPOCH, [TP], 5) == CONCURRENT
        assert T.verify_partition(txn, PID, EPOCH, TP) == CONCURRENT
        assert T.while_pending(txn, PID, EPOCH) == CONCURRENT
    ongoing = _txn(T.ONGOING)
    assert T.while_pending(ongoing, PID, EPOCH) == CONCURRENT  # a transition of it under way
    assert T.verify_partition(ongoing, PID, EPOCH, TP) == ErrorCode.none
    assert T.verify_partition(ongoing, PID, EPOCH, ("a", 1)) == ErrorCode.invalid_txn_state  # not added
    ended = dataclasses.replace(ongoing, state=T.COMPLETE_COMMIT)  # still listing TP: the state decides
    assert T.verify_partition(ended, PID, EPOCH, TP) == ErrorCode.invalid_txn_state


def test_txn_offset_commit_hears_the_verification_as_a_group_coordinators_client() -> None:
    assert LAST_DEFAULT_ERROR_TXN_OFFSET_COMMIT_VERSION == 3
    for version in (0, 3, 4):
        assert commit_error(ErrorCode.none, version) == ErrorCode.none
        assert commit_error(MAPPING, version) == MAPPING
        assert commit_error(FENCED, version) == ErrorCode.invalid_producer_epoch
        assert commit_error(CONCURRENT, version) == CONCURRENT
        assert commit_error(ErrorCode.network_exception, version) == ErrorCode.coordinator_load_in_progress
        assert commit_error(ErrorCode.coordinator_load_in_progress, version) == ErrorCode.coordinator_load_in_progress
        assert commit_error(ErrorCode.not_coordinator, version) == ErrorCode.not_coordinator
        assert commit_error(ErrorCode.coordinator_not_available, version) == ErrorCode.coordinator_not_available
        for moved in (
            ErrorCode.unknown_topic_or_partition,
            ErrorCode.not_enough_replicas,
            ErrorCode.request_timed_out,
        ):
            assert commit_error(moved, version) == ErrorCode.coordinator_not_available
        assert commit_error(ErrorCode.not_leader_or_follower, version) == ErrorCode.not_coordinator
        assert commit_error(ErrorCode.kafka_storage_error, version) == ErrorCode.not_coordinator
    assert commit_error(ErrorCode.transaction_abortable, 3) == ErrorCode.invalid_txn_state
    assert commit_error(ErrorCode.transaction_abortable, 4) == ErrorCode.transaction_abortable
