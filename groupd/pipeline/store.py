"""Reading groupd's log.dirs without a broker: offsets-partition records and data-partition log ends.

Plain Python over the same code the broker uses (groupd/storage/batch.py for batches and CRCs,
groupd/coordinator/records.py for the __consumer_offsets formats): there is no second decoder. Spark's data
source calls these per partition directory; tests and small stores can call them directly.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

from groupd.broker.ops import log_end_history
from groupd.coordinator.consumer import records as consumer_records
from groupd.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_key,
    decode_value,
    key_version,
)
from groupd.protocol.topic_names import INTERNAL_TOPICS, OFFSETS_TOPIC
from groupd.storage.batch import (
    BATCH_OVERHEAD,
    COMMIT_MARKER,
    BatchHeader,
    control_marker,
    crc_ok,
    iter_batches,
    iter_records,
    parse_header,
)
from groupd.storage.errors import StorageError

_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")

COMMIT_FIELDS = (
    "group", "topic", "partition", "offset", "leader_epoch", "metadata", "commit_timestamp", "expire_timestamp",
    "store_partition", "record_offset", "record_timestamp", "is_tombstone",
)
GROUP_FIELDS = (
    "group", "generation", "protocol_type", "protocol", "leader", "state_timestamp", "member_count", "members",
    "store_partition", "record_offset", "record_timestamp", "is_tombstone", "group_type",
)
LOG_END_FIELDS = ("topic", "partition", "log_start_offset", "log_end_offset", "sampled_ms")

# a consumer-protocol group's members, as its member records built them: member id -> its row
Members = dict[str, dict[str, tuple]]


def offsets_partitions(log_dirs: str | Path) -> list[Path]:
    root = Path(log_dirs)
    dirs = [d for d in root.iterdir() if d.is_dir() and d.name.startswith(OFFSETS_TOPIC + "-")] if root.exists() else []
    return sorted(dirs, key=lambda d: int(d.name.rsplit("-", 1)[1]))


def data_partitions(log_dirs: str | Path) -> list[tuple[str, int, Path]]:
    out = []
    root = Path(log_dirs)
    for d in sorted(root.iterdir()) if root.exists() else []:
        m = _PARTITION_DIR.match(d.name)
        if d.is_dir() and m and m["topic"] not in INTERNAL_TOPICS:  # not the offsets store, not transaction state
            out.append((m["topic"], int(m["partition"]), d))
    return out


def _segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def batches(directory: Path, stats: dict[str, int] | None = None) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Every CRC-valid batch of a partition directory; damaged ones are counted and skipped."""
    for segment in _segments(directory):
        yield from batches_of(segment, stats)


def batches_of(segment: Path, stats: dict[str, int] | None = None) -> Iterator[tuple[BatchHeader, memoryview]]:
    data = memoryview(segment.read_bytes())
    try:
        for pos, header in iter_batches(data, 0):
            if crc_ok(data, pos, header):
                yield header, data[pos : pos + header.size]
            elif stats is not None:
                stats["corrupt_batches"] = stats.get("corrupt_batches", 0) + 1
    except StorageError:
        if stats is not None:
            stats["corrupt_batches"] = stats.get("corrupt_batches", 0) + 1


def read_offsets_partition(directory: Path, kind: str) -> Iterator[tuple]:
    """Rows of one ``__consumer_offsets-N`` directory: ``kind`` is "commits" or "groups".

    Transactional offset commits count once their producer's COMMIT marker follows (their rows come out
    there); an aborted transaction's, or one still open, are no commits at all. Group rows are classic
    generations and consumer-protocol (KIP-848) group epochs alike (``group_type`` tells them apart)."""
    store_partition = int(directory.name.rsplit("-", 1)[1])
    pending: dict[int, list[tuple]] = {}  # producer id -> rows of its open transaction
    members: Members = {}  # by consumer-protocol group
    for header, batch in batches(directory):
        if header.is_control:
            ended = pending.pop(header.producer_id, ())
            if control_marker(batch, header) == COMMIT_MARKER:
                yield from ended
            continue
        rows = _offsets_rows(store_partition, header, batch, kind, members)
        if header.is_transactional:
            pending.setdefault(header.producer_id, []).extend(rows)
        else:
            yield from rows


def _offsets_rows(
    store_partition: int, header: BatchHeader, batch: memoryview, kind: str, members: Members
) -> Iterator[tuple]:
    for rec in iter_records(batch, header):
        if rec.key is None:
            continue
        raw_key = bytes(rec.key)
        raw_value = None if rec.value is None else bytes(rec.value)
        at = (store_partition, rec.offset, rec.timestamp)
        try:
            if key_version(raw_key) > 2:
                if kind == "groups":
                    yield from _modern_rows(raw_key, raw_value, at, members)
                continue
            key = decode_key(raw_key)
            if key is None:
                continue
            value = decode_value(key, raw_value)
        except RecordFormatError:
            continue
        if kind == "commits" and isinstance(key, OffsetCommitKey):
            if value is None:
                yield (key.group, key.topic, key.partition, None, None, None, None, None, *at, True)
            else:
                assert isinstance(value, OffsetCommitValue)  # an offset key's value
                yield (
                    key.group,
                    key.topic,
                    key.partition,
                    value.offset,
                    value.leader_epoch,
                    value.metadata,
                    value.commit_timestamp,
                    value.expire_timestamp,
                    *at,
                    False,
                )
        elif kind == "groups" and isinstance(key, GroupMetadataKey):
            if value is None:
                yield (key.group, None, None, None, None, None, None, None, *at, True, "classic")
            else:
                assert isinstance(value, GroupMetadataValue)  # a group key's value
                ms = [
                    (
                        m.member_id,
                        m.group_instance_id,
                        m.client_id,
                        m.client_host,
                        m.session_timeout,
                        m.rebalance_timeout,
                        len(m.assignment),
                    )
                    for m in value.members
                ]
                yield (
                    key.group,
                    value.generation,
                    value.protocol_type,
                    value.protocol,
                    value.leader,
                    value.current_state_timestamp,
                    len(ms),
                    ms,
                    *at,
                    False,
                    "classic",
                )


def _modern_rows(raw_key: bytes, raw_value: bytes | None, at: tuple, members: Members) -> Iterator[tuple]:
    """Consumer-protocol (KIP-848) records, decoded by the coordinator's own codec: a group-epoch record
    (type 3) becomes a generation row with the member set the member records (type 5) built before it in
    this partition; every other type is skipped (Kafka's loader skips unknown ones too)."""
    key = consumer_records.decode_consumer_key(raw_key)
    if isinstance(key, consumer_records.MemberKey) and key.kind == consumer_records.MEMBER_METADATA:
        if raw_value is None:
            members.get(key.group, {}).pop(key.member_id, None)
        else:
            m = consumer_records.decode_consumer_value(key, raw_value)
            assert isinstance(m, consumer_records.MemberMetadata)  # a member-metadata key's value
            session = m.classic.session_timeout_ms if m.classic is not None else None
            members.setdefault(key.group, {})[key.member_id] = (
                key.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                session,
                m.rebalance_timeout_ms,
                None,
            )
    elif isinstance(key, consumer_records.GroupKey) and key.kind == consumer_records.GROUP_METADATA:
        if raw_value is None:
            members.pop(key.group, None)
            yield (key.group, None, None, None, None, None, None, None, *at, True, "consumer")
        else:
            group = consumer_records.decode_consumer_value(key, raw_value)
            assert isinstance(group, consumer_records.GroupMetadata)  # a group-metadata key's value
            epoch = group.epoch
            ms = list(members.get(key.group, {}).values())
            yield (key.group, epoch, "consumer", None, None, None, len(ms), ms, *at, False, "consumer")


def read_log_end_history(segment: Path) -> Iterator[tuple]:
    """Rows of one segment of ``log.dirs/log-end-history`` (groupd/broker/ops/log_end_history.py): log start and end
    offsets of each data partition as the broker knew them at ``sampled_ms``."""
    for header, batch in batches_of(segment):
        for rec in iter_records(batch, header):
            if rec.key is None or rec.value is None:
                continue
            row = log_end_history.decode(bytes(rec.key), bytes(rec.value))
            if row is not None:
                yield (*row, rec.timestamp)


def log_end_history_segments(log_dirs: str | Path) -> list[Path]:
    return sorted((Path(log_dirs) / log_end_history.DIRECTORY).glob("*.log"))


def log_end_offset(directory: Path) -> tuple[int, int]:
    """(log start offset, log end offset) of a data partition, from its segments' batch headers."""
    start = end = None
    for segment in _segments(directory):
        size = segment.stat().st_size
        with open(segment, "rb") as f:
            pos = 0
            while pos + BATCH_OVERHEAD <= size:
                f.seek(pos)
                try:
                    header = parse_header(f.read(BATCH_OVERHEAD), 0)
                except StorageError:
                    break
                if pos + header.size > size:
                    break
                start = header.base_offset if start is None else start
                end = header.last_offset + 1
                pos += header.size
    checkpoint = directory / "log-start-offset"
    if checkpoint.exists():
        with contextlib.suppress(ValueError):
            start = max(start or 0, int(checkpoint.read_text().strip() or 0))
    return (start or 0, end or 0)


def log_ends(log_dirs: str | Path) -> list[tuple[str, int, int, int]]:
    return [(t, p, *log_end_offset(d)) for t, p, d in data_partitions(log_dirs)]


def cpu_count() -> int:
    return os.cpu_count() or 2
