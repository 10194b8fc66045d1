"""How a partition leader answers a producer whose transaction another node verified: the translations of
Kafka's AddPartitionsToTxnManager (the coordinator's answer) and ReplicaManager (the produce answer)."""

from __future__ import annotations

from groupd.cluster.txn_verification import LAST_DEFAULT_ERROR_PRODUCE_VERSION, coordinator_error, produce_error
from groupd.protocol.errors import ErrorCode


def test_a_fenced_producer_hears_invalid_producer_epoch() -> None:
    # AddPartitionsToTxnManager: PRODUCER_FENCED from the coordinator becomes INVALID_PRODUCER_EPOCH
    assert coordinator_error(ErrorCode.producer_fenced, 12) == ErrorCode.invalid_producer_epoch
    assert coordinator_error(ErrorCode.producer_fenced, 3) == ErrorCode.invalid_producer_epoch


def test_transaction_abortable_reaches_only_producers_that_know_it() -> None:
    # Produce v11+ clients handle TRANSACTION_ABORTABLE (KIP-890); up to v10 ("defaultError") hear INVALID_TXN_STATE
    assert LAST_DEFAULT_ERROR_PRODUCE_VERSION == 10
    assert coordinator_error(ErrorCode.transaction_abortable, 10) == ErrorCode.invalid_txn_state
    assert coordinator_error(ErrorCode.transaction_abortable, 11) == ErrorCode.transaction_abortable
    assert coordinator_error(ErrorCode.invalid_txn_state, 12) == ErrorCode.invalid_txn_state


def test_a_coordinator_that_cannot_answer_now_makes_the_produce_retried() -> None:
    # ReplicaManager: these become NOT_ENOUGH_REPLICAS, retriable and without a metadata refresh
    for code in (
        ErrorCode.network_exception,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.concurrent_transactions,
    ):
        assert produce_error(code) == ErrorCode.not_enough_replicas
    for code in (ErrorCode.invalid_txn_state, ErrorCode.invalid_producer_epoch, ErrorCode.none):
        assert produce_error(code) == code
