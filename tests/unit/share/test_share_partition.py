"""The in-flight state machine of one share-partition (Kafka 4.3's SharePartition), with a manual clock:
scenarios 39-46 of the spec and the facts of SP/IFS they rest on."""

from __future__ import annotations

import pytest

from groupd.broker.share.partition import (
    ACCEPT,
    GAP,
    INVALID_RECORD_STATE,
    INVALID_REQUEST,
    REJECT,
    RELEASE,
    RENEW,
    AckBatch,
    AcquiredRecords,
    Limits,
    LogBatch,
    ShareError,
    SharePartition,
    aborted_batches,
)
from groupd.coordinator.share_state.persister import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, StateBatch

LOCK = 30_000


def batches(*ranges: tuple[int, int]) -> list[LogBatch]:
    return [LogBatch(lo, hi) for lo, hi in ranges]


def fresh(limits: Limits | None = None, start: int = 0) -> SharePartition:
    sp = SharePartition(limits)
    sp.load(-1, 0, (), start)
    return sp


def acquire(sp: SharePartition, member: str, log: list[LogBatch], now: int = 0, max_records: int = 500,
            batch_size: int = 500, **kw) -> list[AcquiredRecords]:
    got, _n = sp.acquire(member, log, sp.next_fetch_offset(), max_records, batch_size, now, **kw)
    return got


def ack(sp: SharePartition, member: str, first: int, last: int, *types: int, now: int = 0, ok: bool = True):
    update = sp.acknowledge(member, [AckBatch(first, last, tuple(types))], now)
    sp.complete(update, ok, now)
    return update


# ---------------------------------------------------------------- scenario 39: first acquisition


def test_latest_reset_on_empty_log_then_ten_records_acquired_with_count_1():
    sp = fresh(start=0)
    assert sp.next_fetch_offset() == 0
    got = acquire(sp, "A", batches((0, 9)))
    assert got == [AcquiredRecords(0, 9, 1)]
    assert sp.record_state(5) == (ACQUIRED, 1, "A")
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (0, 9, 10)


def test_reset_offset_applies_only_when_the_persisted_start_is_unset():
    sp = SharePartition()
    sp.load(-1, 3, (), 42)
    assert (sp.start_offset, sp.end_offset, sp.state_epoch) == (42, 42, 3)
    sp.load(7, 3, (), 42)
    assert sp.start_offset == 7


# ---------------------------------------------------------------- scenario 40: accept moves SPSO


def test_accept_all_moves_spso_past_them_and_empties_the_cache():
    sp = fresh()
    acquire(sp, "A", batches((0, 9)))
    update = sp.acknowledge("A", [AckBatch(0, 9, (ACCEPT,))], 1)
    assert update.batches == (StateBatch(0, 9, ACKNOWLEDGED, 1),)
    assert update.start_offset == 0  # Kafka writes the start offset of the moment; it moves after the write
    assert update.delivery_complete_count == 10
    assert sp.complete(update, True, 1)
    assert (sp.start_offset, sp.end_offset, sp.cached_offsets()) == (10, 10, [])
    again = sp.acknowledge("A", [AckBatch(0, 9, (ACCEPT,))], 2)  # wholly below SPSO: ignored
    assert again.batches == ()


# ---------------------------------------------------------------- scenario 41: release and re-acquire


def test_release_part_of_a_batch_is_reacquired_with_count_2():
    sp = fresh()
    acquire(sp, "A", batches((0, 9)))
    update = ack(sp, "A", 0, 4, RELEASE)
    assert update.batches == tuple(StateBatch(o, o, AVAILABLE, 1) for o in range(5))
    assert sp.next_fetch_offset() == 0
    got = acquire(sp, "B", batches((0, 9)))
    assert got == [AcquiredRecords(0, 4, 2)]
    assert sp.record_state(7) == (ACQUIRED, 1, "A")
    assert sp.record_state(2) == (ACQUIRED, 2, "B")


# ---------------------------------------------------------------- scenario 42: lock expiry, delivery limit


def test_lock_expiry_makes_records_available_at_the_deadline_not_before():
    sp = fresh()
    acquire(sp, "A", batches((0, 9)), now=1000)
    assert sp.next_deadline() == 1000 + LOCK
    assert sp.expire_locks(1000 + LOCK - 1) is None
    update = sp.expire_locks(1000 + LOCK)
    assert update is not None and update.batches == (StateBatch(0, 9, AVAILABLE, 1),)
    assert update.transitions == []  # expiry changes the state outright
    sp.complete(update, True, 1000 + LOCK)
    assert sp.record_state(0) == (AVAILABLE, 1, "")
    assert acquire(sp, "B", batches((0, 9))) == [AcquiredRecords(0, 9, 2)]


def test_at_the_delivery_limit_expiry_archives_and_spso_moves():
    sp = fresh(Limits(delivery_count_limit=2))
    now = 0
    for count in (1, 2):
        assert acquire(sp, "A", batches((0, 9)), now=now) == [AcquiredRecords(0, 9, count)]
        now += LOCK
        update = sp.expire_locks(now)
        assert update is not None
        sp.complete(update, True, now)
    assert update.batches == (StateBatch(0, 9, ARCHIVED, 2),)
    assert (sp.start_offset, sp.cached_offsets()) == (10, [])


def test_release_at_the_limit_archives():
    sp = fresh(Limits(delivery_count_limit=2))
    acquire(sp, "A", batches((0, 0)))
    ack(sp, "A", 0, 0, RELEASE)
    acquire(sp, "A", batches((0, 0)))
    update = ack(sp, "A", 0, 0, RELEASE)
    assert update.batches == (StateBatch(0, 0, ARCHIVED, 2),)
    assert sp.start_offset == 1


def test_only_acquisition_increments_the_delivery_count():
    sp = fresh()
    acquire(sp, "A", batches((0, 4)))
    ack(sp, "A", 0, 4, RELEASE)
    assert sp.record_state(0) == (AVAILABLE, 1, "")


# ---------------------------------------------------------------- throttling near the limit


def test_record_on_its_last_attempt_is_delivered_alone():
    sp = fresh(Limits(delivery_count_limit=3))
    now = 0
    for _ in range(2):
        acquire(sp, "A", batches((0, 3)), now=now)
        now += LOCK
        sp.complete(sp.expire_locks(now), True, now)
    # count 2 = limit - 1 for every record: each on its last attempt comes alone
    got = acquire(sp, "A", batches((0, 3)), now=now)
    assert got == [AcquiredRecords(0, 0, 3)]
    got = acquire(sp, "B", batches((0, 3)), now=now)
    assert got == [AcquiredRecords(1, 1, 3)]


def test_throttled_records_come_in_shrinking_chunks():
    # limit 6: threshold max(2, 3) = 3; a batch of 8 at count 3 comes 8 >> 1 = 4 at a time
    sp = fresh(Limits(delivery_count_limit=6))
    now = 0
    for _ in range(3):
        acquire(sp, "A", batches((0, 7)), now=now)
        now += LOCK
        sp.complete(sp.expire_locks(now), True, now)
    got = acquire(sp, "A", batches((0, 7)), now=now)
    assert got == [AcquiredRecords(0, 3, 4)]


# ---------------------------------------------------------------- scenario 44: bad acknowledgements


def test_acking_another_members_records_is_invalid_record_state():
    sp = fresh()
    acquire(sp, "A", batches((0, 9)))
    with pytest.raises(ShareError) as e:
        ack(sp, "B", 0, 9, ACCEPT)
    assert e.value.code == INVALID_RECORD_STATE
    assert sp.record_state(0) == (ACQUIRED, 1, "A")


def test_acking_available_records_is_invalid_record_state():
    sp = fresh()
    acquire(sp, "A", batches((0, 9)))
    ack(sp, "A", 0, 9, RELEASE)
    with pytest.raises(ShareError) as e:
        ack(sp, "A", 0, 9, ACCEPT)
    assert e.value.code == INVALID_RECORD_STATE


def test_acking_past_the_last_cached_batch_is_invalid_request():
    sp = fresh()
    acquire(sp, "A", batches((0, 9)))
    with pytest.raises(ShareError) as e:
        ack(sp, "A", 5, 12, ACCEPT)
    assert e.value.code == INVALID_REQUEST
    with pytest.raises(ShareError) as e:
        ack(sp, "A", 11, 12, ACCEPT)
    assert e.value.code == INVALID_REQUEST


def test_acking_with_nothing_cached_at_or_below_is_invalid_record_state():
    sp = fresh(start=10)
    with pytest.raises(ShareError) as e:
        ack(sp, "A", 10, 12, ACCEPT)
    assert e.value.code == INVALID_RECORD_STATE
    assert ack(sp, "A", 3, 4, ACCEPT).batches == ()  # wholly below SPSO: ignored, no error


def test_failed_batch_rolls_back_the_earlier_batches_of_the_request():
    sp = fresh()
    acquire(sp, "A", batches((0, 4)))
    acquire(sp, "B", batches((5, 9)))
    with pytest.raises(ShareError):
        sp.acknowledge("A", [AckBatch(0, 4, (ACCEPT,)), AckBatch(5, 9, (ACCEPT,))], 0)
    assert sp.record_state(0) == (ACQUIRED, 1, "A")


# ---------------------------------------------------------------- per-offset types, gaps, reject


def test_per_offset_types_and_gap_and_reject():
    sp = fresh()
    acquire(sp, "A", batches((0, 3)))
    update = ack(sp, "A", 0, 3, ACCEPT, GAP, REJECT, RELEASE)
    assert update.batches == (
        StateBatch(0, 0, ACKNOWLEDGED, 1), StateBatch(1, 1, ARCHIVED, 1),
        StateBatch(2, 2, ARCHIVED, 1), StateBatch(3, 3, AVAILABLE, 1),
    )
    assert sp.start_offset == 3 and sp.next_fetch_offset() == 3


def test_reject_archives_and_is_never_redelivered():
    sp = fresh()
    acquire(sp, "A", batches((0, 0)))
    ack(sp, "A", 0, 0, REJECT)
    assert sp.start_offset == 1
    assert acquire(sp, "A", batches((0, 0))) == []


def test_unknown_ack_type_is_invalid_request():
    sp = fresh()
    acquire(sp, "A", batches((0, 0)))
    with pytest.raises(ShareError) as e:
        ack(sp, "A", 0, 0, 5)
    assert e.value.code == INVALID_REQUEST


# ---------------------------------------------------------------- scenario 45: RENEW


def test_renew_restarts_the_lock_and_keeps_the_state_without_a_write():
    sp = fresh()
    acquire(sp, "A", batches((0, 9)), now=0)
    update = sp.acknowledge("A", [AckBatch(0, 9, (RENEW,))], 20_000)
    assert update.batches == ()
    sp.complete(update, True, 20_000)
    assert sp.expire_locks(LOCK) is None
    assert sp.next_deadline() == 20_000 + LOCK
    assert sp.record_state(0) == (ACQUIRED, 1, "A")


def test_renew_disabled_is_invalid_record_state():
    sp = fresh(Limits(renew_enabled=False))
    acquire(sp, "A", batches((0, 9)))
    with pytest.raises(ShareError) as e:
        ack(sp, "A", 0, 9, RENEW)
    assert e.value.code == INVALID_RECORD_STATE


# ---------------------------------------------------------------- writes that fail


def test_failed_write_rolls_back_to_acquired():
    sp = fresh()
    acquire(sp, "A", batches((0, 9)), now=0)
    update = sp.acknowledge("A", [AckBatch(0, 9, (ACCEPT,))], 1)
    assert sp.record_state(0) == (ACKNOWLEDGED, 1, "")
    # while the write is under way the records are neither acquirable nor acknowledgeable
    with pytest.raises(ShareError):
        sp.acknowledge("A", [AckBatch(0, 9, (ACCEPT,))], 1)
    sp.complete(update, False, 2)
    assert sp.record_state(0) == (ACQUIRED, 1, "A")
    assert sp.start_offset == 0


def test_failed_write_after_the_lock_ran_out_makes_them_available():
    sp = fresh()
    acquire(sp, "A", batches((0, 9)), now=0)
    update = sp.acknowledge("A", [AckBatch(0, 9, (ACCEPT,))], 1)
    assert sp.expire_locks(LOCK) is None  # moving: the expiry skips them
    sp.complete(update, False, LOCK + 1)
    assert sp.record_state(0) == (AVAILABLE, 1, "")


# ---------------------------------------------------------------- scenario 46: release on session close


def test_release_member_returns_only_its_acquired_records():
    sp = fresh()
    acquire(sp, "A", batches((0, 4)))
    acquire(sp, "B", batches((5, 9)))
    update = sp.release("A")
    assert update.batches == (StateBatch(0, 4, AVAILABLE, 1),)
    sp.complete(update, True, 0)
    assert sp.record_state(0) == (AVAILABLE, 1, "")
    assert sp.record_state(5) == (ACQUIRED, 1, "B")
    assert sp.next_fetch_offset() == 0


# ---------------------------------------------------------------- MaxRecords, BatchSize, in-flight cap


def test_max_records_is_soft_at_log_batch_boundaries():
    sp = fresh()
    got, n = sp.acquire("A", batches((0, 4), (5, 9), (10, 14)), 0, 7, 500, 0)
    assert got == [AcquiredRecords(0, 9, 1)] and n == 10


def test_record_limit_mode_is_hard_and_keeps_the_log_batch_cached():
    sp = fresh()
    got, n = sp.acquire("A", batches((0, 9)), 0, 3, 500, 0, record_limit=True)
    assert got == [AcquiredRecords(0, 2, 1)] and n == 3
    assert sp.record_state(3) == (AVAILABLE, 0, "")
    assert sp.next_fetch_offset() == 3
    got, n = sp.acquire("B", batches((0, 9)), 3, 3, 500, 0, record_limit=True)
    assert got == [AcquiredRecords(3, 5, 1)]


def test_batch_size_splits_at_log_batch_boundaries():
    sp = fresh()
    got = acquire(sp, "A", batches((0, 2), (3, 5), (6, 8), (9, 11)), batch_size=4)
    assert got == [AcquiredRecords(0, 5, 1), AcquiredRecords(6, 11, 1)]


def test_in_flight_cap_stops_new_acquisition():
    sp = fresh(Limits(max_in_flight=10))
    assert acquire(sp, "A", batches((0, 9))) == [AcquiredRecords(0, 9, 1)]
    assert not sp.can_acquire()
    assert acquire(sp, "B", batches((10, 19))) == []
    ack(sp, "A", 0, 4, ACCEPT)  # SPSO 5: room for 5 more, a whole log batch of 10 comes
    assert sp.can_acquire()
    assert acquire(sp, "B", batches((10, 19))) == [AcquiredRecords(10, 19, 1)]


def test_two_members_never_hold_the_same_record():
    sp = fresh()
    a = acquire(sp, "A", batches((0, 9)))
    b = acquire(sp, "B", batches((0, 9)))
    assert a == [AcquiredRecords(0, 9, 1)] and b == []


# ---------------------------------------------------------------- load from the persister


def test_load_holes_are_delivered_again_and_terminal_runs_move_spso():
    sp = SharePartition()
    sp.load(0, 1, (StateBatch(0, 4, ACKNOWLEDGED, 1), StateBatch(10, 14, ACKNOWLEDGED, 1),
                   StateBatch(15, 19, AVAILABLE, 2)), 99)
    assert sp.start_offset == 5  # 0-4 done
    assert sp.next_fetch_offset() == 5
    got = acquire(sp, "A", batches((5, 9), (10, 14), (15, 19)))
    assert got == [AcquiredRecords(5, 9, 1), AcquiredRecords(15, 19, 3)]


def test_load_all_terminal_empties_the_cache():
    sp = SharePartition()
    sp.load(0, 1, (StateBatch(0, 9, ARCHIVED, 5),), 0)
    assert (sp.start_offset, sp.end_offset, sp.cached_offsets()) == (10, 10, [])


def test_persisted_acquired_state_loads_available():
    sp = SharePartition()
    sp.load(0, 1, (StateBatch(0, 9, ACQUIRED, 1),), 0)
    assert sp.record_state(0) == (AVAILABLE, 1, "")


# ---------------------------------------------------------------- log start, aborted, stale


def test_log_start_passing_spso_archives_available_records():
    sp = fresh()
    acquire(sp, "A", batches((0, 9)))
    ack(sp, "A", 0, 9, RELEASE)
    sp.log_start_moved(5)
    assert sp.start_offset == 5
    assert sp.record_state(4) == (ARCHIVED, 1, "")
    assert sp.next_fetch_offset() == 5
    sp2 = fresh()
    sp2.log_start_moved(20)
    assert (sp2.start_offset, sp2.end_offset) == (20, 20)


def test_read_committed_archives_aborted_batches():
    sp = fresh()
    log = [LogBatch(0, 2, 7, True), LogBatch(3, 3, 7, False, abort_marker=True), LogBatch(4, 6, 8, False)]
    assert aborted_batches(log, [(7, 0)]) == [(0, 2)]
    got, _n = sp.acquire("A", log, 0, 500, 500, 0, aborted=[(7, 0)])
    assert got == [AcquiredRecords(3, 6, 1)]
    assert sp.record_state(1) == (ARCHIVED, 1, "")


def test_stale_available_batches_missing_from_the_log_are_archived():
    sp = fresh()
    acquire(sp, "A", batches((0, 4), (5, 9)))
    ack(sp, "A", 0, 9, RELEASE)
    got, _ = sp.acquire("A", batches((5, 9)), 0, 500, 500, 0)  # 0-4 compacted away
    assert sp.record_state(0) == (ARCHIVED, 1, "")
    assert got == [AcquiredRecords(5, 9, 2)]


# ---------------------------------------------------------------- Kafka's own SharePartitionTest cases


def test_kafka_batch_size_with_multiple_batches_and_a_leading_gap():
    # testAcquireWithBatchSizeAndMultipleBatches: batches 2-6, 10-14, 15-21, 22-27, BatchSize 5
    sp = fresh()
    got, n = sp.acquire("A", batches((2, 6), (10, 14), (15, 21), (22, 27)), 0, 100, 5, 0)
    assert got == [
        AcquiredRecords(2, 9, 1), AcquiredRecords(10, 14, 1), AcquiredRecords(15, 21, 1), AcquiredRecords(22, 27, 1)
    ]
    assert n == 26 and sp.next_fetch_offset() == 28


def test_kafka_batch_size_with_max_fetch_records():
    # testAcquireWithBatchSizeAndMaxFetchRecords: 0-4, 5-19, 20-34, BatchSize 2, MaxRecords 10 -> two batches
    sp = fresh()
    got, n = sp.acquire("A", batches((0, 4), (5, 19), (20, 34)), 0, 10, 2, 0)
    assert got == [AcquiredRecords(0, 4, 1), AcquiredRecords(5, 19, 1)]
    assert n == 20 and sp.next_fetch_offset() == 20


def test_kafka_acquisition_starts_at_the_end_offset_after_the_log_start_moved():
    # testAcquireSingleBatchWithBatchSizeAndEndOffsetLargerThanBatchFirstOffset
    sp = fresh()
    sp.log_start_moved(8)
    got, n = sp.acquire("A", batches((5, 14)), 0, 100, 5, 0)
    assert got == [AcquiredRecords(8, 14, 1)] and n == 7 and sp.next_fetch_offset() == 15


def test_kafka_halving_until_single_records_on_the_last_attempt():
    # testAcquireRecordsHalvesBatchSizeOnEachFailureUntilSingleRecordOnLastAttempt: limit 7, 15-34 at count 4
    sp = SharePartition(Limits(delivery_count_limit=7))
    sp.load(5, 3, (StateBatch(15, 34, AVAILABLE, 4),), 0)
    assert (sp.start_offset, sp.end_offset, sp.next_fetch_offset()) == (5, 34, 5)
    log = batches((15, 34))
    now = 0

    def take() -> list[AcquiredRecords]:
        return sp.acquire("A", log, 5, 500, 500, now)[0]

    def expire() -> None:
        nonlocal now
        now += LOCK
        sp.complete(sp.expire_locks(now), True, now)

    assert take() == [AcquiredRecords(15, 24, 5)]
    expire()
    assert take() == [AcquiredRecords(15, 19, 6)]
    expire()
    for i in range(5):
        assert take() == [AcquiredRecords(15 + i, 15 + i, 7)]
    assert take() == [AcquiredRecords(20, 24, 6)]
    assert take() == [AcquiredRecords(25, 34, 5)]


def test_kafka_acknowledge_multiple_batches_with_gap_offsets():
    # testAcknowledgeMultipleRecordBatchWithGapOffsets: 5-6, then a batch 10-18 with holes; 7-9 never cached
    sp = fresh()
    assert sp.acquire("A", batches((5, 6)), 0, 500, 500, 0)[0] == [AcquiredRecords(5, 6, 1)]
    assert sp.next_fetch_offset() == 7
    assert sp.acquire("A", batches((10, 18)), 0, 500, 500, 0)[0] == [AcquiredRecords(10, 18, 1)]
    assert sp.next_fetch_offset() == 19
    update = sp.acknowledge(
        "A", [AckBatch(5, 6, (RELEASE,)), AckBatch(10, 18, (RELEASE,) * 5 + (GAP,) * 3 + (ACCEPT,))], 0
    )
    sp.complete(update, True, 0)
    assert sp.next_fetch_offset() == 5
    assert [sp.record_state(o)[0] for o in range(10, 19)] == [AVAILABLE] * 5 + [ARCHIVED] * 3 + [ACKNOWLEDGED]
    assert sp.delivery_complete_count() == 4


def test_kafka_acknowledge_subsets_of_two_batches_with_gaps():
    # testAcknowledgeMultipleSubsetRecordBatchWithGapOffsets
    sp = fresh()
    sp.acquire("A", batches((5, 6)), 0, 500, 500, 0)
    sp.acquire("A", batches((10, 20)), 0, 500, 500, 0)
    types = (ACCEPT,) * 6 + (GAP, GAP, ACCEPT, GAP, ACCEPT, GAP, ACCEPT)
    sp.complete(sp.acknowledge("A", [AckBatch(6, 18, types)], 0), True, 0)
    assert sp.next_fetch_offset() == 21
    assert sp.record_state(5) == (ACQUIRED, 1, "A") and sp.record_state(6) == (ACKNOWLEDGED, 1, "")
    assert [sp.record_state(o)[0] for o in range(10, 21)] == [
        ACKNOWLEDGED,
        ACKNOWLEDGED,
        ARCHIVED,
        ARCHIVED,
        ACKNOWLEDGED,
        ARCHIVED,
        ACKNOWLEDGED,
        ARCHIVED,
        ACKNOWLEDGED,
        ACQUIRED,
        ACQUIRED,
    ]
    assert sp.delivery_complete_count() == 10


def test_kafka_acknowledge_out_of_range_cached_data():
    # testAcknowledgeOutOfRangeCachedData: empty cache -> 121; past the cached 5-9 -> 42
    sp = fresh()
    with pytest.raises(ShareError) as e:
        sp.acknowledge("A", [AckBatch(0, 15, (REJECT,))], 0)
    assert e.value.code == INVALID_RECORD_STATE
    sp.acquire("A", batches((5, 9)), 0, 500, 500, 0)
    with pytest.raises(ShareError) as e:
        sp.acknowledge("A", [AckBatch(20, 25, (REJECT,))], 0)
    assert e.value.code == INVALID_REQUEST
    assert sp.delivery_complete_count() == 0


def test_kafka_release_acquired_records_of_one_member_only():
    # testReleaseAcquiredRecordsWithAnotherMember
    sp = fresh()
    sp.acquire("member-2", batches((5, 5)), 5, 500, 500, 0)
    sp.acquire("member-1", batches((10, 20)), 10, 500, 500, 0)
    types = (ACCEPT, ACCEPT, GAP, GAP, ACCEPT, GAP, ACCEPT, GAP, ACCEPT)
    sp.complete(sp.acknowledge("member-1", [AckBatch(10, 18, types)], 0), True, 0)
    assert sp.delivery_complete_count() == 9
    sp.complete(sp.release("member-1"), True, 0)
    assert sp.next_fetch_offset() == 19
    assert sp.record_state(5) == (ACQUIRED, 1, "member-2")
    assert [sp.record_state(o) for o in (19, 20)] == [(AVAILABLE, 1, "")] * 2
    sp.complete(sp.release("member-2"), True, 0)
    assert sp.next_fetch_offset() == 5
    assert sp.record_state(5) == (AVAILABLE, 1, "")
    assert sp.delivery_complete_count() == 9


def test_kafka_release_at_the_delivery_limit_archives():
    # testMaxDeliveryCountLimitNotExceededForRecordsSubsetAfterReleaseAcquiredRecords: limit 2
    sp = fresh(Limits(delivery_count_limit=2))
    sp.acquire("A", batches((0, 9)), 0, 500, 500, 0)
    sp.acquire("A", batches((10, 14)), 10, 500, 500, 0)
    sp.complete(sp.acknowledge("A", [AckBatch(10, 14, (RELEASE,))], 0), True, 0)
    assert sp.delivery_complete_count() == 0
    sp.acquire("A", batches((10, 14)), 10, 500, 500, 0)
    sp.complete(sp.release("A"), True, 0)
    assert sp.next_fetch_offset() == 0
    assert sp.record_state(10) == (ARCHIVED, 2, "")
    assert sp.delivery_complete_count() == 5
