"""A Produce with acks=0 gets no answer; when it fails for any partition Kafka's KafkaApis closes the
connection instead ("Closing connection due to error during produce request ... with ack=0"), which is how
such a producer learns to refresh its metadata. groupd does the same, with one log line."""

from __future__ import annotations

import asyncio
import logging

import pytest

from groupd.storage.batch import build_batch
from tests.wire.test_data_plane import produce_body


async def test_a_failed_acks_zero_produce_closes_the_connection(broker, wire, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    broker.create_topic("z0", 1, {})
    with caplog.at_level(logging.INFO, logger="groupd.broker"):
        wire.send(0, 9, produce_body("z0", 7, build_batch([(None, b"v")], timestamp_ms=1), acks=0))  # no partition 7
        wire._pending.pop()  # no response comes for it
        assert await asyncio.wait_for(wire.reader.read(), 10) == b""  # closed by the broker
    lines = [r.getMessage() for r in caplog.records if "acks=0" in r.getMessage()]
    assert len(lines) == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in lines[0].upper()
    assert broker.partitions.get("z0", 0).log_end_offset == 0
