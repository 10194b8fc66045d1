"""``__transaction_state`` spread over partitions as Kafka lays it out, and the settling of what is found
on disk (the one-partition store of earlier groupd versions, a changed partition count).

Kafka facts: TransactionStateManager.partitionFor is ``Utils.abs(transactionalId.hashCode) %
transaction.state.log.num.partitions`` (default 50), the group coordinator's formula; its
TransactionStateManagerTest, with 2 partitions, puts "one", "two" and "b" in partition 0 and "a" in 1.
"""

import pytest

from groupd.coordinator.partitioning import partition_for
from groupd.coordinator.transactions import rules as T


@pytest.mark.parametrize("tid, partition", [("one", 0), ("two", 0), ("b", 0), ("a", 1)])
def test_kafkas_test_ids_with_two_partitions(tid, partition):
    assert partition_for(tid, 2) == partition


@pytest.mark.parametrize("tid, partition", [
    ("one", 32),                  # "one".hashCode() == 110182
    ("my-group", 12),             # -1906497762: Utils.abs, not a mask (which would give 36)
    ("polygenelubricants", 0),    # Integer.MIN_VALUE: Utils.abs maps it to 0
    ("été", 42),                  # UTF-16 code units, not bytes
])
def test_partition_for_default_count(tid, partition):
    assert partition_for(tid, 50) == partition


def txn(tid, last_update=100, epoch=0):
    return T.Txn(tid, 1000 + len(tid), epoch, 60_000, T.COMPLETE_COMMIT, frozenset(), -1, last_update)


def rec(t):
    return T.encode_key(t.transactional_id), T.encode_value(t)


def found(**partitions):
    """{"p0": [Txn or ("tid", None) tombstone, ...]} -> {0: {key: value}} as a partition's latest records."""
    out = {}
    for name, items in partitions.items():
        latest = {}
        for item in items:
            if isinstance(item, tuple):
                latest[T.encode_key(item[0])] = None
            else:
                k, v = rec(item)
                latest[k] = v
        out[int(name[1:])] = latest
    return out


def test_everything_at_home_moves_nothing():
    a, b = txn("a"), txn("b")  # with 2 partitions: "a" -> 1, "b" -> 0
    layout = T.settle_layout(found(p0=[b], p1=[a]), 2)
    assert layout.txns == {"a": a, "b": b}
    assert (layout.moves, layout.clears, layout.skipped) == ({}, {}, [])


def test_the_one_partition_store_of_earlier_versions_is_spread():
    # every id in __transaction_state-0: those homed elsewhere move, then leave partition 0
    ids = [txn(tid) for tid in ("one", "two", "a", "b", "polygenelubricants", "my-group")]
    layout = T.settle_layout(found(p0=ids), 50)
    assert layout.txns == {t.transactional_id: t for t in ids}
    expected = {}
    for t in ids:
        home = partition_for(t.transactional_id, 50)
        if home != 0:
            expected.setdefault(home, []).append(rec(t))
    assert layout.moves == expected and 0 not in layout.moves
    assert layout.clears == {
        0: [T.encode_key(t.transactional_id) for t in ids if partition_for(t.transactional_id, 50) != 0]
    }


def test_a_record_at_home_outranks_one_left_elsewhere():
    # a stop between writing an id home and clearing it where it was: home holds the newer state
    old, new = txn("a", last_update=100), txn("a", last_update=50, epoch=3)
    layout = T.settle_layout(found(p0=[old], p1=[new]), 2)
    assert layout.txns == {"a": new}
    assert layout.moves == {} and layout.clears == {0: [T.encode_key("a")]}
    # a tombstone at home too: the id is gone, and stays gone
    layout = T.settle_layout(found(p0=[old], p1=[("a", None)]), 2)
    assert layout.txns == {} and layout.moves == {} and layout.clears == {0: [T.encode_key("a")]}


def test_tombstones_elsewhere_move_nothing():
    layout = T.settle_layout(found(p0=[("a", None)]), 2)
    assert (layout.txns, layout.moves, layout.clears) == ({}, {}, {})


def test_found_in_two_other_partitions_the_latest_update_wins():
    # the partition count changed twice: the later state is the one last written
    early, late = txn("a", last_update=100), txn("a", last_update=200, epoch=1)
    layout = T.settle_layout(found(p0=[late], p2=[early]), 2)
    assert layout.txns == {"a": late}
    assert layout.moves == {1: [rec(late)]}
    assert layout.clears == {0: [T.encode_key("a")], 2: [T.encode_key("a")]}


def test_unreadable_records_are_skipped_and_said():
    good = txn("b")
    layout = T.settle_layout(
        {0: {b"\x00\x07\x00\x01x": b"", rec(good)[0]: rec(good)[1], T.encode_key("a"): b"\x00\x05junk"}}, 2
    )
    assert layout.txns == {"b": good}
    assert len(layout.skipped) == 2 and layout.moves == {} and layout.clears == {}
