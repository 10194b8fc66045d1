"""The transaction coordinator's core, as Kafka's TransactionCoordinator / TransactionMetadata define it
(transactions v1). Each fact's source: core/src/main/scala/kafka/coordinator/transaction/."""

import itertools

from groupd.coordinator.transactions import rules as T
from groupd.protocol.errors import ErrorCode

MAX = 900_000


def ids(start=1000):
    counter = itertools.count(start)
    return lambda: next(counter)


def init(txn, expected=None, now=0, allocate=None, timeout=60_000, tid="t"):
    return T.init_producer_id(txn, tid, timeout, expected, now, allocate or ids(), MAX)


def ongoing(now=10, tp=("a", 0)):
    txn = init(None).txn
    return T.add_partitions(txn, txn.producer_id, txn.producer_epoch, [tp], now).txn


def test_a_new_transactional_id_gets_a_fresh_producer_id_at_epoch_0():
    out = init(None, now=5)
    assert isinstance(out, T.Next) and not out.fence
    assert (out.txn.producer_id, out.txn.producer_epoch, out.txn.state, out.txn.timeout_ms) == (
        1000,
        0,
        T.EMPTY,
        60_000,
    )


def test_empty_id_is_invalid_request_and_timeout_is_bounded_by_the_broker_maximum():
    assert init(None, tid="") == ErrorCode.invalid_request
    assert init(None, timeout=MAX + 1) == ErrorCode.invalid_transaction_timeout
    assert init(None, timeout=0) == ErrorCode.invalid_transaction_timeout


def test_reinitialising_bumps_the_epoch_and_fences_the_old_producer():
    first = init(None).txn
    second = init(first).txn
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)
    # the first producer, still at epoch 0, is fenced everywhere
    assert T.add_partitions(second, first.producer_id, 0, [("a", 0)], 1) == ErrorCode.producer_fenced
    assert T.end_txn(second, first.producer_id, 0, True, 1) == ErrorCode.producer_fenced


def test_init_while_a_transaction_is_open_aborts_it_under_a_bumped_epoch():
    txn = ongoing()
    out = init(txn)
    assert out.fence and out.txn.state == T.PREPARE_ABORT and out.txn.producer_epoch == txn.producer_epoch + 1
    assert out.txn.partitions == txn.partitions  # the markers go where the data went


def test_init_while_completing_is_concurrent_transactions():
    txn = T.end_txn(ongoing(), 1000, 0, True, 20).txn
    assert txn.state == T.PREPARE_COMMIT
    assert init(txn) == ErrorCode.concurrent_transactions


def test_kip_360_expected_epoch_rules():
    txn = init(None).txn  # epoch 0, last epoch -1
    assert init(txn, expected=(999, 0)) == ErrorCode.producer_fenced  # another producer id
    bumped = init(txn, expected=(1000, 0)).txn
    assert (bumped.producer_epoch, bumped.last_producer_epoch) == (1, 0)
    retry = init(bumped, expected=(1000, 0)).txn  # a retry of the call that succeeded: same epoch again
    assert (retry.producer_epoch, retry.last_producer_epoch) == (1, 0)
    assert init(bumped, expected=(1000, 5)) == ErrorCode.producer_fenced


def test_an_exhausted_epoch_rotates_to_a_new_producer_id():
    txn = T.Txn("t", 7, T.EPOCH_MAX - 1, 60_000, T.COMPLETE_COMMIT)
    out = init(txn, allocate=ids(50)).txn
    assert (out.producer_id, out.producer_epoch, out.state) == (50, 0, T.EMPTY)


def test_add_partitions_opens_the_transaction_and_remembers_its_start():
    txn = init(None).txn
    out = T.add_partitions(txn, 1000, 0, [("a", 0), ("b", 1)], 42).txn
    assert (out.state, out.start_ms, out.partitions) == (T.ONGOING, 42, frozenset({("a", 0), ("b", 1)}))
    assert T.add_partitions(out, 1000, 0, [("a", 0)], 50) == ErrorCode.none  # already in: nothing to write
    more = T.add_partitions(out, 1000, 0, [("c", 0)], 60).txn
    assert more.start_ms == 42 and ("c", 0) in more.partitions


def test_add_partitions_errors():
    txn = init(None).txn
    assert T.add_partitions(None, 1000, 0, [("a", 0)], 1) == ErrorCode.invalid_producer_id_mapping
    assert T.add_partitions(txn, 1001, 0, [("a", 0)], 1) == ErrorCode.invalid_producer_id_mapping
    assert T.add_partitions(txn, 1000, 3, [("a", 0)], 1) == ErrorCode.producer_fenced
    preparing = T.end_txn(ongoing(), 1000, 0, False, 2).txn
    assert T.add_partitions(preparing, 1000, 0, [("a", 0)], 3) == ErrorCode.concurrent_transactions


def test_end_txn_transitions_and_retries():
    txn = ongoing()
    commit = T.end_txn(txn, 1000, 0, True, 20).txn
    assert commit.state == T.PREPARE_COMMIT
    assert T.end_txn(commit, 1000, 0, True, 21) == ErrorCode.concurrent_transactions
    assert T.end_txn(commit, 1000, 0, False, 21) == ErrorCode.invalid_txn_state
    done = T.complete(commit, 30)
    assert (done.state, done.partitions) == (T.COMPLETE_COMMIT, frozenset())
    assert T.end_txn(done, 1000, 0, True, 31) == ErrorCode.none  # a retry of a finished commit
    assert T.end_txn(done, 1000, 0, False, 31) == ErrorCode.invalid_txn_state
    aborted = T.complete(T.end_txn(ongoing(), 1000, 0, False, 20).txn, 30)
    assert aborted.state == T.COMPLETE_ABORT
    assert T.end_txn(aborted, 1000, 0, False, 31) == ErrorCode.none
    assert T.end_txn(aborted, 1000, 0, True, 31) == ErrorCode.invalid_txn_state


def test_end_txn_with_nothing_open_is_invalid_txn_state():
    assert T.end_txn(init(None).txn, 1000, 0, True, 1) == ErrorCode.invalid_txn_state
    assert T.end_txn(None, 1000, 0, True, 1) == ErrorCode.invalid_producer_id_mapping


def test_a_new_transaction_after_a_completed_one_starts_afresh():
    done = T.complete(T.end_txn(ongoing(now=10), 1000, 0, True, 20).txn, 30)
    again = T.add_partitions(done, 1000, 0, [("z", 0)], 100).txn
    assert (again.state, again.start_ms, again.partitions) == (T.ONGOING, 100, frozenset({("z", 0)}))


def test_produce_verification():
    txn = ongoing(tp=("a", 0))
    assert T.verify_partition(txn, 1000, 0, ("a", 0)) == ErrorCode.none
    assert T.verify_partition(txn, 1000, 0, ("a", 1)) == ErrorCode.invalid_txn_state  # not added
    assert T.verify_partition(txn, 1000, 1, ("a", 0)) == ErrorCode.producer_fenced
    assert T.verify_partition(None, 1000, 0, ("a", 0)) == ErrorCode.invalid_producer_id_mapping


def test_timeouts_abort_open_transactions_with_a_bumped_epoch():
    txn = ongoing(now=10)  # timeout 60 s
    assert T.timed_out([txn], 60_010) == []
    (late,) = T.timed_out([txn], 60_011)
    fenced = T.fence_epoch(late)
    assert (fenced.state, fenced.producer_epoch) == (T.PREPARE_ABORT, 1)
    done = T.complete(fenced, 60_020)
    # the producer that let it time out is fenced from now on
    assert T.end_txn(done, 1000, 0, True, 60_030) == ErrorCode.producer_fenced


def test_idle_ids_expire_only_with_nothing_open():
    idle = init(None, now=0).txn
    assert T.expired([idle, ongoing(now=0)], 1000, 1000) == [idle]


def test_transaction_log_records_round_trip_in_kafkas_v0_format():
    txn = T.Txn("tx-é", 123456789, 7, 60_000, T.ONGOING, frozenset({("b", 2), ("a", 0), ("a", 1)}), 1000, 2000)
    key = T.encode_key(txn.transactional_id)
    assert key[:2] == b"\x00\x00"  # key version 0, then a Kafka string
    value = T.encode_value(txn)
    assert value[:2] == b"\x00\x00" and value[2:10] == (123456789).to_bytes(8, "big")
    back = T.decode_value(T.decode_key(key), value)
    assert (
        back.transactional_id,
        back.producer_id,
        back.producer_epoch,
        back.timeout_ms,
        back.state,
        back.partitions,
        back.start_ms,
        back.last_update_ms,
    ) == (
        txn.transactional_id,
        txn.producer_id,
        txn.producer_epoch,
        txn.timeout_ms,
        txn.state,
        txn.partitions,
        txn.start_ms,
        txn.last_update_ms,
    )


def test_a_pending_transition_is_checked_after_the_producer_id_and_epoch():
    """Kafka's endTransaction and addPartitionsToTransaction: INVALID_PRODUCER_ID_MAPPING, then
    PRODUCER_FENCED, then CONCURRENT_TRANSACTIONS for a transition under way."""
    fenced = T.fence_epoch(ongoing())  # a timeout's abort, persisted, its markers being written
    pid, old_epoch = fenced.producer_id, fenced.producer_epoch - 1
    assert T.while_pending(fenced, pid, old_epoch) == ErrorCode.producer_fenced
    assert T.while_pending(fenced, pid + 1, fenced.producer_epoch) == ErrorCode.invalid_producer_id_mapping
    assert T.while_pending(None, pid, 0) == ErrorCode.invalid_producer_id_mapping
    assert T.while_pending(fenced, pid, fenced.producer_epoch) == ErrorCode.concurrent_transactions
    assert T.while_pending(ongoing(), pid, 0) == ErrorCode.concurrent_transactions
