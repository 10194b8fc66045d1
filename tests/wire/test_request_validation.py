"""Requests Kafka refuses by their values, answered with Kafka's error codes (found by test_fuzz_requests)."""

from __future__ import annotations

import uuid

from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch
from tests.wire.test_data_plane import produce_body


async def test_produce_with_acks_other_than_minus_one_zero_or_one_appends_nothing(broker, wire):
    broker.create_topic("acks", 1, {})
    resp = await wire.call(0, 9, produce_body("acks", 0, build_batch([(None, b"v")], timestamp_ms=1000), acks=2))
    p = resp.responses[0].partition_responses[0]
    assert (p.error_code, p.base_offset) == (ErrorCode.invalid_required_acks, -1)
    assert broker.partitions.get("acks", 0).log_end_offset == 0


async def test_metadata_v10_v11_refuse_topic_ids_and_null_names(broker, wire):
    broker.create_topic("named", 1, {})
    cls = codec.request_class(3, 11)
    topic = codec.nested(cls, "MetadataRequestTopic")
    for wanted in (topic(topic_id=uuid.uuid4(), name=None), topic(topic_id=uuid.uuid4(), name="named")):
        body = codec.make(
            cls,
            topics=(wanted, topic(topic_id=codec.ZERO_UUID, name="named")),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        resp = await wire.call(3, 11, body)
        assert [(t.name, t.error_code, t.partitions) for t in resp.topics] == [
            (wanted.name or "", ErrorCode.invalid_request, ()),
            ("named", ErrorCode.invalid_request, ()),
        ]
        assert (resp.brokers, resp.controller_id) == ((), -1)
