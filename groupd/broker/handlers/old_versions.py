"""Answers of request versions Kafka 3.9 accepted (and Kafka 4 removed, KIP-896) whose meaning differs
from their successors', as Kafka 3.9 in KRaft mode gives them:

- ListOffsets v0: the ``old_style_offsets`` array of Kafka's ``legacyFetchOffsetsBefore`` (segment
  bases with their files' modification times, the log end offset with now), newest first.
- OffsetCommit v0 and OffsetFetch v0 named ZooKeeper as their store; a 3.9 broker without ZooKeeper
  (KRaft) answers them UNSUPPORTED_VERSION on every partition asked (KafkaApis' ``requireZkOrThrow``
  and the request's error response). groupd has no ZooKeeper either, so it answers the same.
- Produce v0-2 carry message sets (magic 0/1) and Fetch v0-3 read them: converted to and from the
  stored record batches v2 (storage/message_sets.py), the way out counted in a metric.

The versions that only add or drop fields need no code here: their generated schemas
(protocol/old_schemas) carry the fields and the ordinary handlers fill them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groupd.broker.dataplane.topic_configs import effective_topic_config
from groupd.broker.dispatch import RequestContext, Response
from groupd.broker.security.access import DESCRIBE, TOPIC
from groupd.clock import wall_ms
from groupd.protocol.errors import ErrorCode
from groupd.storage import codecs, message_sets
from groupd.storage.batch import parse_header
from groupd.storage.errors import CorruptBatch, InvalidRecord, UnsupportedCompression

if TYPE_CHECKING:
    from groupd.broker.app import Broker
    from groupd.storage.engine import PartitionLog

LATEST, EARLIEST = -1, -2
CONSUMER_REPLICA_ID = -1


def legacy_offsets_before(lg: PartitionLog, timestamp: int, max_num_offsets: int, now_ms: int) -> list[int]:
    """Kafka 3.9's UnifiedLog.legacyFetchOffsetsBefore: candidates are each segment's base (not below
    the log start offset) stamped with the segment file's last modification, and, when the last segment
    holds data, the log end offset stamped now. LATEST starts from the last candidate, EARLIEST from the
    first, a time from the last candidate stamped at or before it; up to ``max_num_offsets`` are taken
    walking back, answered in descending order."""
    segments = lg.segments_info()
    candidates = [(max(seg.base_offset, lg.log_start_offset), seg.modified_ms) for seg in segments]
    if segments[-1].size > 0:
        candidates.append((lg.log_end_offset, now_ms))
    if timestamp == LATEST:
        start = len(candidates) - 1
    elif timestamp == EARLIEST:
        start = 0
    else:
        start = len(candidates) - 1
        while start >= 0 and candidates[start][1] > timestamp:
            start -= 1
    count = min(max_num_offsets, start + 1)
    return sorted((candidates[start - j][0] for j in range(max(count, 0))), reverse=True)


def list_offsets_v0(broker: Broker, ctx: RequestContext, req: Any) -> Response:
    """Kafka 3.9's handleListOffsetRequestV0: a timestamp below EARLIEST (-2) is UNSUPPORTED_VERSION; an
    unknown partition UNKNOWN_TOPIC_OR_PARTITION; a consumer's (replica id -1) answer never names an
    offset past the high watermark (groupd's high watermark is its log end offset). A topic the principal
    may not DESCRIBE answers TOPIC_AUTHORIZATION_FAILED on each partition, after the allowed topics
    (partitionSeqByAuthorized, then ``responseTopics ++ unauthorizedResponseStatus``)."""
    now = wall_ms()
    rows = []
    denied = broker.access.refused_names(ctx, DESCRIBE, TOPIC, (t.name for t in req.topics))
    for t in req.topics:
        if t.name in denied:
            continue
        for p in t.partitions:
            row: dict[str, Any] = {
                "partition_index": p.partition_index,
                "error_code": ErrorCode.none,
                "old_style_offsets": (),
            }
            lg = broker.readable_log(t.name, p.partition_index)
            if p.timestamp < EARLIEST:
                row["error_code"] = ErrorCode.unsupported_version
            elif lg is None:
                row["error_code"] = ErrorCode.unknown_topic_or_partition
            else:
                offsets = legacy_offsets_before(lg, p.timestamp, p.max_num_offsets, now)
                if req.replica_id == CONSUMER_REPLICA_ID and any(o > lg.high_watermark for o in offsets):
                    offsets = [lg.high_watermark] + [o for o in offsets if o <= lg.high_watermark]
                row["old_style_offsets"] = tuple(offsets)
            rows.append((t.name, row))
    for t in req.topics:
        if t.name in denied:
            rows += [(t.name, {"partition_index": p.partition_index, "error_code": ErrorCode.topic_authorization_failed,
                               "old_style_offsets": ()}) for p in t.partitions]  # fmt: skip
    return ctx.respond(topics=ctx.by_topic("ListOffsetsTopicResponse", "ListOffsetsPartitionResponse", rows))


def offset_commit_v0(ctx: RequestContext, req: Any, unknown: list[Any]) -> Response:
    """OffsetCommit v0 in KRaft: with no known partition, the unknown ones' answers; otherwise every
    partition of the request UNSUPPORTED_VERSION (the request's error response)."""
    known = {(t.name, p.partition_index) for t in req.topics for p in t.partitions} - {
        (e.topic, e.partition) for e in unknown
    }
    if known:
        rows = (
            (t.name, {"partition_index": p.partition_index, "error_code": ErrorCode.unsupported_version})
            for t in req.topics
            for p in t.partitions
        )
    else:
        rows = ((e.topic, {"partition_index": e.partition, "error_code": e.error}) for e in unknown)
    return ctx.respond(topics=ctx.by_topic("OffsetCommitResponseTopic", "OffsetCommitResponsePartition", rows))


def offset_fetch_v0(ctx: RequestContext, req: Any) -> Response:
    """OffsetFetch v0 in KRaft: every asked partition answers offset -1, no metadata, UNSUPPORTED_VERSION."""
    rows = (
        (
            t.name,
            {"partition_index": i, "committed_offset": -1, "metadata": "", "error_code": ErrorCode.unsupported_version},
        )
        for t in req.topics
        for i in t.partition_indexes
    )
    return ctx.respond(topics=ctx.by_topic("OffsetFetchResponseTopic", "OffsetFetchResponsePartition", rows))


def topic_setting(broker: Broker, topic: str, key: str) -> str | None:
    """A topic config's value in force (the topic's, else the broker's default), None for no topic."""
    found = broker.listed_topic(topic)
    return None if found is None else effective_topic_config(broker.config, found.configs, key)[0]


def produced_records(broker: Broker, topic: str, records: bytes | None) -> tuple[bytes | None, ErrorCode]:
    """Produce v0-2's records: a message set (magic 0/1) becomes one v2 batch (LogValidator's
    conversion), compressed as the topic's compression.type says (``producer``: the set's own codec),
    counted in the conversion metric; v2 batches pass as they are, as Kafka 3.9 let them."""
    if not records or not message_sets.is_message_set(records):
        return records, ErrorCode.none
    target = codecs.BY_NAME.get(topic_setting(broker, topic, "compression.type") or "producer")
    try:
        batch = message_sets.to_record_batch(records, target)
    except UnsupportedCompression:
        return None, ErrorCode.unsupported_compression_type
    except InvalidRecord:
        return None, ErrorCode.invalid_record
    except CorruptBatch:
        return None, ErrorCode.corrupt_message
    if broker.metrics is not None:
        broker.metrics.up_converted(parse_header(batch).record_count)
    return batch, ErrorCode.none


def fetch_magic(version: int) -> int | None:
    """The message format a Fetch version reads (Kafka's FetchResponse: v0-1 magic 0, v2-3 magic 1), or
    None from v4, which reads record batches v2 as stored."""
    return None if version >= 4 else 0 if version <= 1 else 1


ZSTD_FETCH_VERSION = 10  # Fetch v10 (KIP-110) is the first a zstd topic is served to


def fetch_refusal(broker: Broker, topic: str, version: int) -> ErrorCode:
    """Kafka 3.9's KafkaApis.maybeConvertFetchedData, before any conversion: a topic whose
    compression.type is zstd answers a Fetch below v10 UNSUPPORTED_COMPRESSION_TYPE (whatever its
    batches hold), and a v0-3 fetch of a topic with message.downconversion.enable=false (or the broker's
    log.message.downconversion.enable) UNSUPPORTED_VERSION."""
    if version >= ZSTD_FETCH_VERSION:
        return ErrorCode.none
    if topic_setting(broker, topic, "compression.type") == "zstd":
        return ErrorCode.unsupported_compression_type
    if fetch_magic(version) is not None and topic_setting(broker, topic, "message.downconversion.enable") == "false":
        return ErrorCode.unsupported_version
    return ErrorCode.none


def down_converted(broker: Broker, data: bytes, magic: int, fetch_offset: int) -> tuple[bytes, ErrorCode]:
    """Stored batches for a Fetch v0-3 reader, counted in the down-conversion metric;
    UNSUPPORTED_COMPRESSION_TYPE where the first batch to convert is zstd (storage/message_sets.py)."""
    if not data:
        return data, ErrorCode.none
    try:
        converted, count = message_sets.down_convert(data, magic, fetch_offset)
    except UnsupportedCompression:
        return b"", ErrorCode.unsupported_compression_type
    if broker.metrics is not None:
        broker.metrics.down_converted(count)
    return converted, ErrorCode.none
