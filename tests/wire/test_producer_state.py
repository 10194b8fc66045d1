"""An idempotent producer's sequence state outlives a restart, as Kafka's producer state does: a batch
retried after the broker came back is recognised (answered with its original offset, not written
twice), and an out-of-order one is refused."""

import pytest

from groupd.broker.app import Broker
from groupd.broker.dataplane.producers import SNAPSHOT
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.wire.test_data_plane import produce_body


def batch(pid, seq, value):
    return build_batch([(None, value)], timestamp_ms=1000, producer_id=pid, producer_epoch=0, base_sequence=seq)


async def produce(wire, b):
    p = (await wire.call(0, 9, produce_body("idem", 0, b))).responses[0].partition_responses[0]
    return p.error_code, p.base_offset


@pytest.mark.parametrize("clean", [True, False], ids=["snapshot", "rebuilt"])
async def test_a_retry_after_a_restart_is_not_written_twice(tmp_path, clean):
    config = broker_config(tmp_path)
    b = Broker(config)
    await b.start()
    wire = await WireClient.connect(b.port)
    b.create_topic("idem", 1, {})
    pid = b.producers.allocate()
    assert await produce(wire, batch(pid, 0, b"a")) == (0, 0)
    assert await produce(wire, batch(pid, 1, b"b")) == (0, 1)
    await wire.close()
    await b.stop()
    snapshot = tmp_path / "data" / "idem-0" / SNAPSHOT
    assert snapshot.exists()
    if not clean:
        snapshot.unlink()  # as after a crash: the state comes from the log's batch headers

    b = Broker(config)
    await b.start()
    wire = await WireClient.connect(b.port)
    try:
        assert await produce(wire, batch(pid, 1, b"b")) == (0, 1)  # the retry: its first offset, no new write
        assert b.partitions.get("idem", 0).log_end_offset == 2
        assert (await produce(wire, batch(pid, 5, b"gap")))[0] == ErrorCode.out_of_order_sequence_number
        assert await produce(wire, batch(pid, 2, b"c")) == (0, 2)
    finally:
        await wire.close()
        await b.stop()
