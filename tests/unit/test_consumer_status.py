"""Burrow's evaluation rules (linkedin/Burrow core/internal/evaluator), one case each, on a manual clock."""

from groupd.broker.ops import consumer_status as cs
from groupd.broker.ops.consumer_status import Commit, ConsumerStatus, group_status, partition_status

OK, WARN, ERR, STOP, STALL, REWIND = cs.OK, cs.WARN, cs.ERR, cs.STOP, cs.STALL, cs.REWIND


def window(*rows):
    """(offset, seconds, lag) rows as Burrow's stored commits."""
    return [Commit(o, s * 1000, lag) for o, s, lag in rows]


def test_rule_1_any_zero_lag_in_the_window_or_now_is_ok():
    assert partition_status(window((10, 0, 5), (20, 60, 0), (30, 120, 4)), 4, 130_000) == OK
    assert partition_status(window((10, 0, 5), (10, 60, 5)), 0, 1_000_000) == OK, "no lag now: OK whatever the window"
    assert partition_status([], 10, 0) == OK


def test_rule_2_an_offset_going_back_is_rewind_before_anything_else():
    assert partition_status(window((50, 0, 5), (20, 60, 40), (30, 120, 30)), 30, 10_000_000) == REWIND


def test_rule_3_silence_longer_than_the_window_spans_is_stop():
    w = window((10, 0, 5), (20, 60, 5), (30, 120, 5))
    assert partition_status(w, 5, 240_001) == STOP
    assert partition_status(w, 5, 240_000) != STOP


def test_rule_4_the_same_offset_committed_with_lag_is_stall():
    assert partition_status(window((10, 0, 5), (10, 60, 8), (10, 120, 9)), 9, 121_000) == STALL


def test_rule_5_moving_but_lag_never_decreasing_is_warn_else_ok():
    assert partition_status(window((10, 0, 5), (20, 60, 5), (30, 120, 7)), 7, 121_000) == WARN
    assert partition_status(window((10, 0, 5), (20, 60, 3), (30, 120, 7)), 7, 121_000) == OK


def test_group_is_its_worst_partition_with_stop_stall_rewind_as_err():
    assert group_status([OK, WARN]) == WARN
    assert group_status([OK, STOP]) == group_status([STALL]) == group_status([REWIND, WARN]) == ERR
    assert group_status([]) == OK


def test_windows_keep_ten_commits_and_merge_commits_within_a_second():
    s = ConsumerStatus()
    for i in range(15):
        s.committed("g", "t", 0, i * 10, i * 2000, 1000 + i * 20)  # the log grows faster than the consumer
    s.committed("g", "t", 0, 145, 28_500, 1300)  # 500 ms after the last: replaces it
    ring = s._windows["g"][("t", 0)]
    assert len(ring) == 10 and ring[0].offset == 50 and ring[-1].offset == 145 and ring[-1].lag == 1155
    status, parts = s.evaluate("g", {("t", 0): 145}, {("t", 0): 1300}, 29_000)
    assert parts == {("t", 0): (WARN, 1155)} and status == WARN
    s.forget("g")
    assert s.evaluate("g", {("t", 0): 145}, {("t", 0): 1300}, 29_000)[1] == {("t", 0): (OK, 1155)}
