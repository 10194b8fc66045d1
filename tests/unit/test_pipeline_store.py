"""The pipeline's reader of log.dirs, without Spark: which directories are data partitions."""

from groupd.pipeline import store


def test_internal_topics_are_not_data_partitions(tmp_path):
    for name in (
        "orders-0",
        "orders-1",
        "__consumer_offsets-7",
        "__transaction_state-0",
        "__transaction_state-31",
        "not-a-partition",
    ):
        (tmp_path / name).mkdir()
    (tmp_path / "topics-0").write_text("a file, not a partition")
    assert [(t, p) for t, p, _ in store.data_partitions(tmp_path)] == [("orders", 0), ("orders", 1)]
