"""groupd/broker/ops/log_end_history.py: its record format, and that a tick appends only what moved."""

from groupd.broker.ops.log_end_history import DIRECTORY, LogEndRecorder, decode, encode
from groupd.pipeline import store
from groupd.storage.local import LocalEngine


def test_records_round_trip_and_unknown_versions_are_skipped():
    key, value = encode("orders", 3, 10, 1_234_567_890_123)
    assert decode(key, value) == ("orders", 3, 10, 1_234_567_890_123)
    assert decode(b"\x00\x01" + key[2:], value) is None  # a key version this reader does not know
    assert decode(key, b"\x00\x01" + value[2:]) is None
    assert decode(key[:-1], value) is None and decode(key, value[:-1]) is None


def test_a_tick_appends_the_partitions_that_moved(tmp_path):
    ends = {("a", 0): (0, 5), ("a", 1): (0, 0)}
    rec = LogEndRecorder(LocalEngine(tmp_path), 1000, -1, lambda: [(t, p, s, e) for (t, p), (s, e) in ends.items()])
    assert rec.tick(1_000) == 2  # the first tick records everything
    assert rec.tick(2_000) == 0  # nothing moved
    ends[("a", 1)] = (0, 7)
    assert rec.tick(3_000) == 1
    del ends[("a", 0)]  # a deleted topic's partition is forgotten, not recorded
    assert rec.tick(4_000) == 0
    rec.log.flush()
    rec.log.close()
    rows = [r for seg in store.log_end_history_segments(tmp_path) for r in store.read_log_end_history(seg)]
    assert rows == [("a", 0, 0, 5, 1_000), ("a", 1, 0, 0, 1_000), ("a", 1, 0, 7, 3_000)]
    # the directory is no topic's: the pipeline's data-partition scan and the broker's registry ignore it
    assert (tmp_path / DIRECTORY).is_dir() and store.data_partitions(tmp_path) == []
