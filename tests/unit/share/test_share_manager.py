"""The manager's small pure helpers: Kafka's partition rotation, its mapping of the share coordinator's
errors, and the ISO-8601 durations of share.auto.offset.reset=by_duration."""

from __future__ import annotations

from groupd.broker.share.manager import duration_ms, persister_error, rotated


def test_partitions_rotate_by_session_epoch():
    assert rotated([1, 2, 3], 0) == [1, 2, 3]
    assert rotated([1, 2, 3], 1) == [2, 3, 1]
    assert rotated([1, 2, 3], 3) == [1, 2, 3]
    assert rotated([1, 2, 3], -1) == [1, 2, 3]


def test_persister_errors_as_share_partitions_answer_them():
    assert [persister_error(c) for c in (16, 15, 14)] == [15, 15, 15]
    assert [persister_error(c) for c in (69, 3)] == [69, 3]
    assert [persister_error(c) for c in (74, 124)] == [6, 6]
    assert [persister_error(c) for c in (42, 35, 58)] == [-1, -1, -1]


def test_iso_8601_durations():
    assert duration_ms("PT1H") == 3_600_000
    assert duration_ms("P1DT2H3M4.5S") == ((24 + 2) * 60 + 3) * 60_000 + 4_500
    assert duration_ms("pt30m") == 1_800_000
    assert duration_ms("P") is None and duration_ms("1H") is None and duration_ms("PT") is None
