"""WriteTxnMarkers through a real socket, as another node's transaction coordinator sends it (docs/cluster.md):
the marker ends the producer's transaction in the partition (a READ_COMMITTED reader sees its records, or
the aborted transaction named), an unknown partition is answered UNKNOWN_TOPIC_OR_PARTITION, an offsets
partition's marker applies the producer's pending offsets."""

import pytest

from groupd.protocol import codec
from groupd.protocol.api_table import ApiKey
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import OFFSETS_TOPIC
from groupd.storage.batch import COMMIT_MARKER, control_marker, iter_batches
from tests.wire.test_transactions import begin, committed_fetch, produce, txn_batch


def markers_body(pid, epoch, commit, topics, coordinator_epoch=3):
    cls = codec.request_class(ApiKey.WRITE_TXN_MARKERS, 1)
    topic = codec.nested(cls, "WritableTxnMarkerTopic")
    marker = codec.nested(cls, "WritableTxnMarker")
    return codec.make(
        cls,
        markers=(
            marker(
                producer_id=pid,
                producer_epoch=epoch,
                transaction_result=commit,
                topics=tuple(topic(name=name, partition_indexes=tuple(ps)) for name, ps in topics.items()),
                coordinator_epoch=coordinator_epoch,
            ),
        ),
    )


def errors(resp):
    return {(t.name, p.partition_index): p.error_code for m in resp.markers for t in m.topics for p in t.partitions}


@pytest.mark.engines
async def test_a_commit_marker_ends_the_transaction_in_the_partition(broker, wire):
    broker.create_topic("wm", 1, {})
    pid, epoch = await begin(wire, "w1", {"wm": [0]})
    assert await produce(wire, "wm", 0, txn_batch(pid, epoch, 0, [b"a", b"b"])) == (0, 0)
    p = (await wire.call(1, 11, committed_fetch("wm", 0, 0))).responses[0].partitions[0]
    assert p.last_stable_offset == 0  # open: a READ_COMMITTED reader stops before it
    resp = await wire.call(ApiKey.WRITE_TXN_MARKERS, 1, markers_body(pid, epoch, True, {"wm": [0], "nope": [0]}))
    assert errors(resp) == {("wm", 0): ErrorCode.none, ("nope", 0): ErrorCode.unknown_topic_or_partition}
    p = (await wire.call(1, 11, committed_fetch("wm", 0, 0))).responses[0].partitions[0]
    assert (p.last_stable_offset, p.high_watermark, list(p.aborted_transactions)) == (3, 3, [])
    batches = list(iter_batches(bytes(p.records)))
    assert [h.base_offset for _, h in batches] == [0, 2]
    assert control_marker(bytes(p.records)[batches[1][0] :]) == COMMIT_MARKER


@pytest.mark.engines
async def test_an_abort_marker_names_the_aborted_transaction_to_readers(broker, wire):
    broker.create_topic("wa", 1, {})
    pid, epoch = await begin(wire, "w2", {"wa": [0]})
    assert await produce(wire, "wa", 0, txn_batch(pid, epoch, 0, [b"x"])) == (0, 0)
    resp = await wire.call(ApiKey.WRITE_TXN_MARKERS, 1, markers_body(pid, epoch, False, {"wa": [0]}))
    assert errors(resp) == {("wa", 0): ErrorCode.none}
    p = (await wire.call(1, 11, committed_fetch("wa", 0, 0))).responses[0].partitions[0]
    assert p.last_stable_offset == 2
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]


async def test_an_offsets_partition_without_pending_offsets_of_the_producer_writes_nothing(broker, wire):
    broker.internal_topics[OFFSETS_TOPIC].exists(create=True)
    resp = await wire.call(ApiKey.WRITE_TXN_MARKERS, 1, markers_body(77, 0, True, {OFFSETS_TOPIC: [0]}))
    assert errors(resp) == {(OFFSETS_TOPIC, 0): ErrorCode.none}
