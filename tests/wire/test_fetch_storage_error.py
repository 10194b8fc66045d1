"""A Fetch whose log cannot be read (the storage failed: PostgreSQL unreachable, a disk error) answers that
partition KAFKA_STORAGE_ERROR, as Kafka's ReplicaManager answers a read of a log it cannot read, and the
connection goes on serving: the client retries (the error is retriable), nothing is closed, no traceback."""

from __future__ import annotations

import logging

import pytest

from groupd.broker.app import Broker
from groupd.protocol.errors import ErrorCode
from groupd.storage.errors import StorageError
from tests.harness import WireClient
from tests.wire.test_data_plane import fetch_body, produce_body
from tests.wire.test_leader_epochs import producer_batch


async def test_a_log_that_cannot_be_read_answers_kafka_storage_error(
    broker: Broker, wire: WireClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    b, client = broker, wire
    b.create_topic("t", 1, {})
    produced = await client.call(0, 9, produce_body("t", 0, producer_batch(3)))
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none
    lg = b.readable_log("t", 0)
    assert lg is not None

    def refused(*_args: object, **_kwargs: object) -> bytes:
        raise StorageError("reading t-0 failed: refused by the test")

    monkeypatch.setattr(lg, "read", refused)
    with caplog.at_level(logging.INFO):
        failed = await client.call(1, 11, fetch_body("t", 0, 0))
    row = failed.responses[0].partitions[0]
    assert row.error_code == ErrorCode.kafka_storage_error
    assert row.records in (b"", None) or len(row.records) == 0
    assert "Traceback" not in caplog.text
    assert caplog.text.count("could not be read") == 1  # one line, naming the partition
    monkeypatch.undo()
    again = await client.call(1, 11, fetch_body("t", 0, 0))  # the same connection, served again
    row = again.responses[0].partitions[0]
    assert row.error_code == ErrorCode.none and row.high_watermark == 3 and len(row.records) > 0
