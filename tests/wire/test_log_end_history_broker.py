"""A running broker records its partitions' log ends into log.dirs/log-end-history, and the pipeline reads
them from the store alone after the broker has stopped."""

from kafka import KafkaProducer

from groupd.pipeline import store
from tests.harness import BrokerProcess


def test_broker_records_log_ends_the_pipeline_reads(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    with BrokerProcess(data, {"log.end.history.interval.ms": 100, "num.partitions": 1}) as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
        for i in range(25):
            producer.send("events", b"x%d" % i)
        producer.flush(10)
        producer.close(5)
    # stopping takes a last sample, so the newest row holds the final log end
    rows = [r for seg in store.log_end_history_segments(data) for r in store.read_log_end_history(seg)]
    events = [r for r in rows if r[0] == "events"]
    assert events and events[-1][:4] == ("events", 0, 0, 25)
    assert [r[3] for r in events] == sorted(r[3] for r in events), "log ends only grow here"
    assert [r[:2] for r in store.data_partitions(data)] == [("events", 0)]
