"""The share coordinator's rules (Kafka 4.3's ShareCoordinatorShard) with a manual clock: the spec's
scenarios 47, 48 and 50, each RPC's checks in Kafka's order, snapshots every
``share.coordinator.snapshot.update.records.per.snapshot`` updates, failed writes, pruning, and a
restart that replays the log's bytes into the very same state."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupd.coordinator import errors as E
from groupd.coordinator.share_state import records as R
from groupd.coordinator.share_state import rules
from groupd.coordinator.share_state.persister import (
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    ReadSummaryResult,
    SharePartitionKey,
    StateBatch,
)
from tests.unit.coordinator.share_state.driver import OTHER, TOPIC, Driver

KEY = SharePartitionKey("g", TOPIC, 0)


def kinds(d: Driver) -> list[int]:
    return [k.kind for k, _v in d.log.decoded()]


# ---------------------------------------------------------------- scenario 47


def test_write_before_initialize_is_invalid_request():
    d = Driver()
    a = d.write(KEY, (StateBatch(0, 4, ACKNOWLEDGED, 1),))
    assert (a.error_code, a.error_message) == (
        E.INVALID_REQUEST,
        "Write operation on uninitialized share partition not allowed.",
    )
    assert d.read(KEY).error_code == E.INVALID_REQUEST
    assert d.log.records == []


def test_a_lower_state_epoch_is_fenced():
    d = Driver()
    assert d.initialize(KEY, state_epoch=2) == rules.OK
    assert d.write(KEY, state_epoch=1).error_code == rules.FENCED_STATE_EPOCH
    assert d.write(KEY, state_epoch=2) == rules.OK
    assert d.write(KEY, state_epoch=3) == rules.OK  # higher passes
    assert d.write(KEY, state_epoch=-1) == rules.OK  # -1 skips the check
    assert d.initialize(KEY, state_epoch=1).error_code == rules.FENCED_STATE_EPOCH
    assert d.initialize(KEY, state_epoch=-1) == rules.OK


def test_read_fences_a_lower_leader_epoch_and_persists_a_higher_one():
    d = Driver()
    d.initialize(KEY)
    assert d.read(KEY, leader_epoch=0).error_code == 0
    assert len(d.log.records) == 1  # the same leader epoch: nothing written
    r = d.read(KEY, leader_epoch=5)
    assert (r.error_code, r.start_offset, r.state_epoch) == (0, -1, 0)
    [_snapshot, (key, update)] = d.log.decoded()
    assert key.kind == R.SHARE_UPDATE and update.leader_epoch == 5 and update.state_batches == ()
    assert d.read(KEY, leader_epoch=4).error_code == rules.FENCED_LEADER_EPOCH
    assert d.write(KEY, leader_epoch=4).error_code == rules.FENCED_LEADER_EPOCH
    assert d.read(KEY, leader_epoch=-1).error_code == 0  # -1 skips the check and writes nothing
    assert d.reloaded().leader_epochs[KEY] == 5  # persisted: a restart still fences epoch 4


def test_a_write_never_moves_the_stored_leader_epoch():
    """Kafka's writeState builds its record with the stored leader epoch (generateShareStateRecord with
    updateLeaderEpoch false); only Read persists a new one."""
    d = Driver()
    d.initialize(KEY)
    assert d.write(KEY, leader_epoch=7) == rules.OK
    assert d.state.leader_epochs[KEY] == 0 and d.log.decoded()[-1][1].leader_epoch == 0
    assert d.summary(KEY).leader_epoch == 0


def test_the_501st_write_after_a_snapshot_is_a_snapshot_with_the_next_epoch():
    d = Driver()
    d.initialize(KEY, start_offset=0)
    for i in range(500):
        assert d.write(KEY, (StateBatch(i, i, ACKNOWLEDGED, 1),), delivery_complete_count=i + 1) == rules.OK
    assert kinds(d) == [R.SHARE_SNAPSHOT] + [R.SHARE_UPDATE] * 500
    assert {v.snapshot_epoch for _k, v in d.log.decoded()} == {0}
    d.write(KEY, (StateBatch(500, 500, ACKNOWLEDGED, 1),), start_offset=400, delivery_complete_count=101)
    key, snap = d.log.decoded()[-1]
    assert key.kind == R.SHARE_SNAPSHOT and snap.snapshot_epoch == 1
    # the whole state, merged and pruned below the new start offset, coalesced into one batch
    assert snap.start_offset == 400 and snap.state_batches == (StateBatch(400, 500, ACKNOWLEDGED, 1),)
    assert (snap.create_timestamp, snap.write_timestamp) == (d.now, d.now)
    d.write(KEY, (StateBatch(501, 501, ARCHIVED, 2),))
    assert kinds(d)[-1] == R.SHARE_UPDATE and d.log.decoded()[-1][1].snapshot_epoch == 1  # updates again
    assert d.reloaded().offsets == d.state.offsets


def test_updates_per_snapshot_zero_snapshots_every_write():
    d = Driver(per_snapshot=0)
    d.initialize(KEY)
    d.write(KEY, (StateBatch(0, 0, ACKNOWLEDGED, 1),))
    d.write(KEY, (StateBatch(1, 1, ACKNOWLEDGED, 1),))
    assert kinds(d) == [R.SHARE_SNAPSHOT] * 3
    assert [v.snapshot_epoch for _k, v in d.log.decoded()] == [0, 1, 2]


# ---------------------------------------------------------------- scenario 48 and the summary


def test_read_summary_of_an_uninitialized_partition():
    d = Driver()
    assert d.summary(KEY) == ReadSummaryResult(0, None, 0, 0, -1, -1)


def test_read_summary_and_delivery_complete_count():
    d = Driver()
    d.initialize(KEY)
    assert d.summary(KEY).delivery_complete_count == -1  # no start offset yet: no lag either
    d.initialize(KEY, state_epoch=1, start_offset=5)
    s = d.summary(KEY)
    assert (s.start_offset, s.delivery_complete_count, s.state_epoch) == (5, 0, 1)  # from an explicit start: 0
    d.write(KEY, (StateBatch(5, 7, ACKNOWLEDGED, 1),), state_epoch=1, start_offset=5, delivery_complete_count=3)
    assert d.summary(KEY).delivery_complete_count == 3
    assert (
        d.write(KEY, state_epoch=1) == rules.OK
    )  # an update leaves the count unknown again (-1), as Kafka's merge does
    assert d.summary(KEY).delivery_complete_count == -1


# ---------------------------------------------------------------- initialize, read, delete


def test_initialize_starts_afresh_with_the_next_snapshot_epoch():
    d = Driver()
    d.initialize(KEY)
    d.write(KEY, (StateBatch(0, 9, ACKNOWLEDGED, 1),), start_offset=0)
    d.read(KEY, leader_epoch=3)
    d.initialize(KEY, state_epoch=1, start_offset=20)
    key, snap = d.log.decoded()[-1]
    assert key.kind == R.SHARE_SNAPSHOT
    assert (snap.snapshot_epoch, snap.state_epoch, snap.leader_epoch, snap.start_offset, snap.state_batches) == (
        1,
        1,
        0,
        20,
        (),
    )
    r = d.read(KEY)
    assert (r.start_offset, r.state_epoch, r.batches) == (20, 1, ())


def test_read_returns_the_merged_batches():
    d = Driver()
    d.initialize(KEY, start_offset=0)
    d.write(KEY, (StateBatch(0, 9, AVAILABLE, 1),))
    d.write(KEY, (StateBatch(0, 3, ACKNOWLEDGED, 1), StateBatch(4, 4, AVAILABLE, 2)))
    d.write(KEY, (StateBatch(4, 4, ARCHIVED, 2),), start_offset=1)
    r = d.read(KEY)
    assert r.start_offset == 1
    assert r.batches == (
        StateBatch(1, 3, ACKNOWLEDGED, 1),
        StateBatch(4, 4, ARCHIVED, 2),
        StateBatch(5, 9, AVAILABLE, 1),
    )


def test_delete_tombstones_and_an_unknown_key_writes_nothing():
    d = Driver()
    assert d.delete(KEY) == rules.OK
    assert d.log.records == []
    d.initialize(KEY, state_epoch=4)
    d.write(KEY, (StateBatch(0, 0, ACKNOWLEDGED, 1),))
    assert d.delete(KEY) == rules.OK
    key, value = d.log.decoded()[-1]
    assert (key.kind, value) == (R.SHARE_SNAPSHOT, None)
    assert d.read(KEY).error_code == E.INVALID_REQUEST
    assert d.initialize(KEY, state_epoch=0) == rules.OK  # its epochs went with it
    assert d.reloaded().offsets == d.state.offsets


def test_unknown_topics_partitions_and_negative_partitions():
    d = Driver()
    for key in (SharePartitionKey("g", OTHER, 0), SharePartitionKey("g", TOPIC, 3)):
        assert d.initialize(key).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert d.delete(key).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert d.summary(key).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert d.read(key).error_code == E.INVALID_REQUEST  # uninitialized is checked first
    negative = SharePartitionKey("g", TOPIC, -1)
    for answer in (
        d.initialize(negative),
        d.write(negative),
        d.read(negative),
        d.delete(negative),
        d.summary(negative),
    ):
        assert (answer.error_code, answer.error_message) == (
            E.INVALID_REQUEST,
            "The partition id cannot be a negative number.",
        )
    assert d.log.records == []


def test_a_deleted_topic_loses_its_states():
    d = Driver()
    keys = [SharePartitionKey(g, TOPIC, p) for g in ("a", "b") for p in (0, 1)]
    for k in keys:
        d.initialize(k)
    d.run(rules.topics_deleted, frozenset({TOPIC}))
    assert d.state.offsets == {}
    assert sum(1 for _k, v in d.log.decoded() if v is None) == 4


# ---------------------------------------------------------------- failed writes


def test_a_refused_write_leaves_the_state_as_it_was():
    d = Driver()
    d.initialize(KEY, start_offset=0)
    before = (dict(d.state.offsets), dict(d.state.update_counts), dict(d.state.leader_epochs))
    d.log.fail_with = E.KAFKA_STORAGE_ERROR
    assert d.write(KEY, (StateBatch(0, 5, ACKNOWLEDGED, 1),)).error_code == E.NOT_COORDINATOR
    assert d.read(KEY, leader_epoch=9).error_code == E.NOT_COORDINATOR
    d.log.fail_with = E.MESSAGE_TOO_LARGE
    assert d.delete(KEY).error_code == E.UNKNOWN_SERVER_ERROR
    assert (d.state.offsets, d.state.update_counts, d.state.leader_epochs) == before
    d.log.fail_with = None
    assert d.read(KEY, leader_epoch=1).error_code == 0


# ---------------------------------------------------------------- pruning


def test_records_below_every_keys_last_snapshot_are_redundant():
    d = Driver(per_snapshot=2)
    a, b = SharePartitionKey("a", TOPIC, 0), SharePartitionKey("b", TOPIC, 0)
    d.initialize(a)  # 0
    assert rules.redundant_below(d.state) is None  # offset 0: nothing below it
    d.initialize(b)  # 1
    for i in range(3):  # a: 2, 3 updates, 4 snapshot
        d.write(a, (StateBatch(i, i, ACKNOWLEDGED, 1),))
    assert kinds(d)[4] == R.SHARE_SNAPSHOT
    assert rules.redundant_below(d.state) == 1  # b's snapshot at 1 is still needed
    d.now += 300_000
    d.run(rules.snapshot_cold_partitions, None)  # both unsnapshotted for 5 minutes: 5 (a), 6 (b)
    assert kinds(d)[5:] == [R.SHARE_SNAPSHOT, R.SHARE_SNAPSHOT]
    assert rules.redundant_below(d.state) == 5
    fresh = rules.ShareShard(0)
    for off, k, v in d.log.records[5:]:  # what is left after pruning holds every state
        key = R.decode_key(k)
        assert key is not None
        rules.replay(fresh, key, R.decode_value(key.kind, v), d.cfg, off)
    assert fresh.offsets == d.state.offsets
    d.run(rules.snapshot_cold_partitions, None)  # all re-snapshotted already: nothing
    assert len(d.log.records) == 7
    d.delete(b)  # 7: a deleted key no longer holds pruning back
    assert rules.redundant_below(d.state) == 5


# ---------------------------------------------------------------- restart


ops = st.lists(
    st.tuples(
        st.sampled_from(["init", "write", "read", "delete"]),
        st.sampled_from(["g", "h"]),
        st.integers(0, 1),
        st.integers(-1, 3),
        st.integers(-1, 30),
        st.lists(
            st.tuples(st.integers(0, 30), st.integers(0, 5), st.sampled_from([0, 2, 4]), st.integers(1, 4)), max_size=3
        ),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.sampled_from([0, 1, 3, 500]))
def test_a_restart_replays_the_log_into_the_same_state(history, per_snapshot):
    d = Driver(per_snapshot=per_snapshot)
    for op, group, partition, epoch, start, batches in history:
        key = SharePartitionKey(group, TOPIC, partition)
        sbs = tuple(StateBatch(f, f + n, s, c) for f, n, s, c in batches)
        if op == "init":
            d.initialize(key, state_epoch=epoch, start_offset=start)
        elif op == "write":
            d.write(
                key, sbs, state_epoch=epoch, leader_epoch=epoch, start_offset=start, delivery_complete_count=len(sbs)
            )
        elif op == "read":
            d.read(key, leader_epoch=epoch)
        else:
            d.delete(key)
        d.now += 1
    fresh = d.reloaded()
    assert fresh.offsets == d.state.offsets
    assert fresh.leader_epochs == d.state.leader_epochs
    assert fresh.state_epochs == d.state.state_epochs
    assert fresh.update_counts == d.state.update_counts
    assert fresh.redundant_below == d.state.redundant_below
