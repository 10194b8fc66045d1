"""TxnOffsetCommit, transaction markers and OffsetFetch require_stable in the pure core.

Kafka facts, from Kafka 4.x's group-coordinator OffsetMetadataManager.java (commitTransactionalOffset,
validateTransactionalOffsetCommit, replay, replayEndTransactionMarker, fetchOffsets, fetchAllOffsets,
deleteOffsets, deleteAllOffsets, cleanupExpiredOffsets, onPartitionsDeleted) and classic/ClassicGroup.java
(validateOffsetCommit with isTransactional)."""

from __future__ import annotations

from groupd.coordinator import shard
from groupd.coordinator.api import OffsetDelete, OffsetDeleteResponse, Protocol
from groupd.coordinator.offsets.transactional import pending_offsets
from groupd.coordinator.records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue

from .harness import Core, subscription

UNSTABLE = 88


def errors(resp) -> list[int]:
    return [p.error for p in resp.partitions]


def offsets(c: Core, group: str = "g", **kw) -> list[tuple[int, int]]:
    f = c.fetch(group=group, topics={"t": (0, 1)}, **kw)
    return [(p.offset, p.error) for p in f.partitions]


def test_txn_commit_writes_offset_commit_records_as_the_producers_batch():
    c = Core()
    c.now = 5_000
    assert errors(c.txn_commit(("t", 0, 42, "m"), producer=7, epoch=3)) == [0]
    r = c.results[-1]
    assert r.producer == (7, 3) and r.replay is True
    # the very records an OffsetCommit writes; commit timestamp now, never an expire timestamp
    assert r.records == ((OffsetCommitKey("g", "t", 0), OffsetCommitValue(42, "m", 5_000, -1, -1)),)
    assert r.timers == ()  # a transactional commit does not keep a member's session alive


def test_pending_until_commit_marker_then_visible():
    c = Core()
    c.commit(("t", 0, 5))
    c.txn_commit(("t", 0, 42), ("t", 1, 43))
    assert offsets(c) == [(5, 0), (-1, 0)]
    assert c.end_txn(commit=True) is None
    assert c.log[-1] == ("marker", (1000, 0, True))
    assert offsets(c) == [(42, 0), (43, 0)]
    assert shard.has_pending(c.state, "g", "t", 0) is False and not c.state.offsets.open_txns


def test_abort_marker_drops_pending_offsets():
    c = Core()
    c.commit(("t", 0, 5))
    c.txn_commit(("t", 0, 42), ("t", 1, 43))
    c.end_txn(commit=False)
    assert offsets(c) == [(5, 0), (-1, 0)]
    assert not c.state.offsets.pending_txn and not c.state.offsets.open_txns


def test_a_marker_with_nothing_pending_changes_nothing():
    c = Core()
    c.commit(("t", 0, 5))
    assert c.end_txn(producer=99, commit=True) is None
    assert offsets(c) == [(5, 0), (-1, 0)]


def test_plain_commit_written_after_the_transactional_one_wins():
    # Kafka keeps the offset with the higher record offset when transactional and plain commits mix
    c = Core()
    c.txn_commit(("t", 0, 42))
    c.commit(("t", 0, 50))
    assert shard.has_pending(c.state, "g", "t", 0)  # still pending (and unstable) until the marker
    c.end_txn(commit=True)
    assert offsets(c)[0] == (50, 0)


def test_plain_commit_written_before_the_transactional_one_loses():
    c = Core()
    c.commit(("t", 0, 50))
    c.txn_commit(("t", 0, 42))
    c.end_txn(commit=True)
    assert offsets(c)[0] == (42, 0)


def test_between_two_transactions_the_later_write_wins_whatever_the_commit_order():
    c = Core()
    c.txn_commit(("t", 0, 10), producer=1)
    c.txn_commit(("t", 0, 20), producer=2)
    c.end_txn(producer=2)
    c.end_txn(producer=1)  # written earlier: loses to producer 2's committed offset
    assert offsets(c)[0] == (20, 0)
    c2 = Core()
    c2.txn_commit(("t", 0, 10), producer=1)
    c2.txn_commit(("t", 0, 20), producer=2)
    c2.end_txn(producer=1)
    c2.end_txn(producer=2)
    assert offsets(c2)[0] == (20, 0)


def test_a_later_write_of_the_same_transaction_replaces_the_earlier():
    c = Core()
    c.txn_commit(("t", 0, 10))
    c.commit(("t", 0, 15))
    c.txn_commit(("t", 0, 20))  # after the plain commit: wins again
    c.end_txn()
    assert offsets(c)[0] == (20, 0)


def test_the_marker_ends_the_producers_offsets_of_every_group_in_the_partition():
    c = Core()
    c.txn_commit(("t", 0, 1), group="a")
    c.txn_commit(("t", 0, 2), group="b")
    c.end_txn()
    assert offsets(c, "a")[0] == (1, 0) and offsets(c, "b")[0] == (2, 0)


def test_require_stable_answers_unstable_for_partitions_an_open_transaction_holds():
    c = Core()
    c.commit(("t", 0, 5), ("t", 1, 6))
    c.txn_commit(("t", 0, 42))
    f = c.fetch(topics={"t": (0, 1)}, version=7, require_stable=True)
    assert [(p.offset, p.leader_epoch, p.metadata, p.error) for p in f.partitions] == [
        (-1, -1, "", UNSTABLE),
        (6, -1, "", 0),
    ]
    assert offsets(c) == [(5, 0), (6, 0)]  # without require_stable: the committed offsets
    every = c.fetch(topics=None, version=7, require_stable=True)  # all committed partitions
    assert [(p.partition, p.offset, p.error) for p in every.partitions] == [(0, -1, UNSTABLE), (1, 6, 0)]
    c.end_txn(commit=False)
    assert offsets(c, require_stable=True) == [(5, 0), (6, 0)]


def test_require_stable_counts_only_transactional_offsets_and_a_superseded_one_still_counts():
    c = Core()
    c.commit(("t", 0, 5))
    assert offsets(c, require_stable=True) == [(5, 0), (-1, 0)]
    c.txn_commit(("t", 1, 42))
    c.commit(("t", 1, 50))
    assert offsets(c, require_stable=True) == [(5, 0), (-1, UNSTABLE)]


def test_unknown_group_generation_rules_and_simple_group():
    c = Core()
    # generation -1 creates a simple group; a generation on an unknown group is ILLEGAL_GENERATION,
    # whatever the version (no GROUP_ID_NOT_FOUND as OffsetCommit v9 has)
    assert errors(c.txn_commit(("t", 0, 1), group="x", generation=3, member_id="m", version=4)) == [22]
    assert "x" not in c.state.groups
    assert errors(c.txn_commit(("t", 0, 1), group="y", version=0)) == [0]
    assert c.state.groups["y"].state == "Empty" and c.state.groups["y"].protocol_type is None


def test_empty_group_id_is_invalid():
    c = Core()
    assert errors(c.txn_commit(("t", 0, 1), group="")) == [24]


def test_member_checks_without_empty_only_and_completing_rules():
    c = Core()
    a, b = c.stable_group(2)
    gen = c.group().generation
    # v0-2 producers send no member: accepted even though the group is not Empty
    assert errors(c.txn_commit(("t", 0, 1), version=2)) == [0]
    assert errors(c.txn_commit(("t", 0, 1), member_id="nobody", generation=gen)) == [25]
    assert errors(c.txn_commit(("t", 0, 1), member_id=a, generation=gen + 1)) == [22]
    assert errors(c.txn_commit(("t", 0, 1), member_id=a, generation=gen)) == [0]
    # CompletingRebalance: OffsetCommit answers 27, TxnOffsetCommit is accepted
    c.join(member_id=a)
    c.join(member_id=b)
    c.finish_join()
    assert c.group().state == "CompletingRebalance"
    gen = c.group().generation
    assert errors(c.commit(("t", 0, 1), member_id=a, generation=gen)) == [27]
    assert errors(c.txn_commit(("t", 0, 1), member_id=a, generation=gen)) == [0]


def test_static_member_fenced():
    c = Core()
    tok = c.join(instance="i1", version=9)
    c.finish_join()
    mid = c.answers[tok].member_id
    c.sync(mid, c.group().generation, {mid: b""}, instance="i1")
    gen = c.group().generation
    assert errors(c.txn_commit(("t", 0, 1), member_id="other", instance="i1", generation=gen)) == [82]
    assert errors(c.txn_commit(("t", 0, 1), member_id=mid, instance="i1", generation=gen)) == [0]


def test_dead_group_answers_coordinator_not_available():
    c = Core()
    c.commit(("t", 0, 1))
    g = c.group()
    g.state = "Dead"
    assert errors(c.txn_commit(("t", 0, 2))) == [15]


def test_metadata_too_large_per_partition_and_nothing_written_when_none_is_valid():
    c = Core(offset_metadata_max_bytes=10)
    resp = c.txn_commit(("t", 0, 1, "x" * 11), ("t", 1, 2, "ok"))
    assert errors(resp) == [12, 0]
    assert [k.partition for k, _ in c.results[-1].records] == [1]
    n = len(c.log)
    assert errors(c.txn_commit(("t", 0, 1, "x" * 11))) == [12]
    assert len(c.log) == n and c.results[-1].producer is None


def test_failed_write_leaves_nothing_pending_and_maps_the_error():
    c = Core()
    c.fail_next_write = 56  # KAFKA_STORAGE_ERROR -> NOT_COORDINATOR
    assert errors(c.txn_commit(("t", 0, 1))) == [16]
    # nothing pending, no group left behind
    assert not c.state.offsets.pending_txn and c.state.offsets.writing("g") == 0 and "g" not in c.state.groups


def test_offset_delete_tombstones_pending_partitions_and_removes_pending():
    c = Core()
    c.commit(("t", 0, 5))
    c.txn_commit(("t", 0, 42), ("t", 1, 43))
    tok = c.token()
    c.apply(shard.offset_delete(c.state, OffsetDelete("g", (("t", 0), ("t", 1))), tok, c.now))
    assert c.answers[tok] == OffsetDeleteResponse(0, c.answers[tok].partitions)
    assert c.log[-2:] == [(OffsetCommitKey("g", "t", 0), None), (OffsetCommitKey("g", "t", 1), None)]
    assert not shard.has_pending(c.state, "g", "t", 0) and not shard.has_pending(c.state, "g", "t", 1)
    c.end_txn(commit=True)  # nothing left to apply
    assert offsets(c) == [(-1, 0), (-1, 0)]


def test_delete_group_tombstones_pending_only_partitions_once():
    c = Core()
    c.commit(("t", 0, 5))
    c.txn_commit(("t", 0, 42), ("t", 1, 43))
    tok = c.token()
    c.apply(shard.delete_group(c.state, "g", tok, c.now))
    assert c.answers[tok].error == 0
    assert c.results[-1].records == (
        (OffsetCommitKey("g", "t", 0), None),
        (OffsetCommitKey("g", "t", 1), None),
        (GroupMetadataKey("g"), None),
    )
    assert pending_offsets(c.state, "g") == {1000: {}}  # the transaction stays open, holding nothing


def test_expiry_spares_pending_partitions_and_groups_with_offsets_in_a_transaction():
    c = Core(offsets_retention_ms=1_000)
    c.commit(("t", 0, 5), ("t", 1, 6))
    c.txn_commit(("t", 0, 42))
    c.now = 10_000
    c.expire()
    # partition 1 expires; partition 0 has a pending transactional offset; the group stays
    assert c.results[-1].records == ((OffsetCommitKey("g", "t", 1), None),)
    assert "g" in c.state.groups
    c.end_txn(commit=False)
    c.expire()
    assert c.results[-1].records == ((OffsetCommitKey("g", "t", 0), None), (GroupMetadataKey("g"), None))


def test_expiry_deletes_a_group_without_committed_offsets_even_in_a_transaction():
    # Kafka 4.x's cleanupExpiredOffsets returns true at once for a group with no committed offsets
    c = Core()
    c.txn_commit(("t", 0, 42))
    c.expire()
    assert c.results[-1].records == ((GroupMetadataKey("g"), None),)


def test_deleted_topic_takes_pending_offsets_along():
    c = Core()
    c.txn_commit(("t", 0, 42), ("u", 0, 1))
    c.apply(shard.remove_topic_offsets(c.state, {"t"}))
    assert c.results[-1].records == ((OffsetCommitKey("g", "t", 0), None),)
    c.end_txn()
    f = c.fetch(topics={"t": (0,), "u": (0,)})
    assert [p.offset for p in f.partitions] == [-1, 1]


def test_group_metadata_tombstone_leaves_pending_offsets_alone():
    c = Core()
    c.stable_group(1, protocols=(Protocol("range", subscription("t")),))
    c.txn_commit(("t", 0, 42))
    shard.replay(c.state, GroupMetadataKey("g"), None, c.now)
    c.end_txn()
    assert offsets(c)[0] == (42, 0)


def test_an_older_producer_epoch_is_fenced():
    # Kafka's log refuses a batch or marker below the producer's last epoch there (ProducerAppendInfo
    # .checkProducerEpoch -> INVALID_PRODUCER_EPOCH, 47); the group checks come first
    c = Core()
    assert errors(c.txn_commit(("t", 0, 1), producer=5, epoch=3)) == [0]
    n = len(c.log)
    assert errors(c.txn_commit(("t", 0, 2), ("t", 1, 3, "x" * 5000), producer=5, epoch=2, group="new")) == [47, 47]
    assert "new" not in c.state.groups and len(c.log) == n
    assert errors(c.txn_commit(("t", 0, 2), producer=5, epoch=2, group="x", generation=1, member_id="m")) == [22]
    assert c.end_txn(producer=5, epoch=2) == 47 and len(c.log) == n
    assert c.end_txn(producer=5, epoch=4) is None  # a bumped epoch (the coordinator's abort on timeout)
    assert errors(c.txn_commit(("t", 0, 2), producer=5, epoch=3)) == [47]
    assert errors(c.txn_commit(("t", 0, 2), producer=5, epoch=4)) == [0]
    assert errors(c.txn_commit(("t", 0, 2), producer=6, epoch=0)) == [0]  # epochs are per producer


def test_unload_drops_pending_offsets_with_the_groups():
    c = Core()
    c.txn_commit(("t", 0, 1))
    c.apply(shard.unload(c.state))
    assert not c.state.offsets.pending_txn and not c.state.offsets.open_txns and not c.state.producer_epochs
