"""The in-flight state machine of one share-partition (Kafka 4.3's SharePartition), with a manual clock:
scenarios 39-46 of the spec and the facts of SP/IFS they rest on."""

from __future__ import annotations

import pytest

from broker.share.partition import (
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
from coordinator.share_state.persister import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, StateBatch

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
