"""TxnOffsetCommit's verification guards (Kafka: the group coordinator's transactional write carries the
VerificationGuard started before the verification, and UnifiedLog refuses an append whose guard is no longer
the producer's, "Record was not part of an ongoing transaction"; a marker append clears it)."""

from __future__ import annotations

from groupd.coordinator.offsets.txn_guards import TxnOffsetGuards


def test_a_guard_is_held_until_its_verification_ends() -> None:
    guards = TxnOffsetGuards()
    guard = guards.start(3, 1000)
    assert len(guards) == 1
    assert guards.finish(3, 1000, guard)
    assert len(guards) == 0  # nothing lingers once no commit waits


def test_a_marker_of_the_producer_voids_its_guard_in_that_partition_only() -> None:
    guards = TxnOffsetGuards()
    mine, other_partition, other_producer = guards.start(3, 1000), guards.start(4, 1000), guards.start(3, 1001)
    guards.marker(3, 1000)
    assert not guards.finish(3, 1000, mine)
    assert guards.finish(4, 1000, other_partition)
    assert guards.finish(3, 1001, other_producer)
    assert len(guards) == 0


def test_commits_verified_at_once_share_a_guard_and_a_marker_voids_it_for_both() -> None:
    guards = TxnOffsetGuards()
    first, second = guards.start(3, 1000), guards.start(3, 1000)
    assert first is second
    assert guards.finish(3, 1000, first)
    assert len(guards) == 1  # the second commit still waits on it
    assert guards.finish(3, 1000, second)
    third, fourth = guards.start(3, 1000), guards.start(3, 1000)
    guards.marker(3, 1000)
    assert not guards.finish(3, 1000, third) and not guards.finish(3, 1000, fourth)
    fresh = guards.start(3, 1000)  # the next transaction's commit starts afresh
    assert fresh is not third and guards.finish(3, 1000, fresh)
