"""Per-partition transaction bookkeeping: the last stable offset and aborted transactions, as Kafka's
ProducerStateManager and transaction index give them to a READ_COMMITTED fetch."""

from groupd.broker.dataplane.txn_index import PartitionTxns, is_transactional, mark_transactional
from groupd.storage.batch import build_batch, build_control_batch, validate_batch
from groupd.storage.log import Log


def test_lso_is_the_first_offset_of_the_oldest_open_transaction():
    t = PartitionTxns()
    assert t.last_stable_offset(10) == 10
    t.data(7, 3)
    t.data(7, 5)  # the same transaction continues: its first offset stays 3
    t.data(8, 4)
    assert t.last_stable_offset(10) == 3
    t.marker(7, True, 6)
    assert t.last_stable_offset(10) == 4
    t.marker(8, False, 7)
    assert t.last_stable_offset(10) == 10 and t.aborted == [(8, 4, 7)]


def test_aborted_between_names_transactions_overlapping_the_fetched_range():
    t = PartitionTxns()
    for pid, first, last in ((1, 0, 2), (2, 3, 9), (3, 10, 12)):
        t.data(pid, first)
        t.marker(pid, False, last)
    assert t.aborted_between(0, 100) == [(1, 0), (2, 3), (3, 10)]
    assert t.aborted_between(3, 10) == [(2, 3)]  # ended before 3: no; starts at 10: past the range
    assert t.aborted_between(13, 20) == []
    t.forget_before(10)
    assert t.aborted == [(3, 10, 12)]


def test_a_marker_without_data_changes_nothing():
    t = PartitionTxns()
    t.marker(5, False, 0)
    assert t.aborted == [] and t.last_stable_offset(1) == 1


def test_rebuilt_from_the_batches_of_a_log(tmp_path):
    def at(batch, offset):
        b = bytearray(batch)
        b[0:8] = offset.to_bytes(8, "big")
        return validate_batch(bytes(b)), memoryview(bytes(b))

    batches = [
        at(
            build_batch(
                [(None, b"x")], timestamp_ms=1, producer_id=1, producer_epoch=0, base_sequence=0, attributes=0x10
            ),
            0,
        ),
        at(build_batch([(None, b"plain")], timestamp_ms=1), 1),
        at(build_control_batch(1, 0, False, timestamp_ms=1), 2),
        at(
            build_batch(
                [(None, b"y")], timestamp_ms=1, producer_id=2, producer_epoch=0, base_sequence=0, attributes=0x10
            ),
            3,
        ),
    ]
    t = PartitionTxns.rebuild(batches)
    assert t.aborted == [(1, 0, 2)] and t.ongoing == {2: 3} and t.last_stable_offset(4) == 3
    lg = Log.open(tmp_path)
    assert not is_transactional(lg)
    mark_transactional(lg)
    mark_transactional(lg)
    assert is_transactional(lg)
    lg.close()
    assert is_transactional(Log.open(tmp_path))
