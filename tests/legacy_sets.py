"""Old-format message sets (magic 0/1) made and read by kafka-python's own legacy-format code: an
independent writer and reader of what producers and consumers before Kafka 0.11 sent and read."""

from __future__ import annotations

from kafka.record import MemoryRecords
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from groupd.storage import codecs


class _Digest:
    def __init__(self, value: int) -> None:
        self.value = value

    def digest(self) -> bytes:
        return self.value.to_bytes(4, "big")


class XxhashShim:
    """kafka-python's magic-0 LZ4 code asks the xxhash package (not installed) for Kafka's broken header
    checksum; this answers with groupd.storage.codecs.xxh32, which tests/unit/test_codecs.py checks against
    published values and lz4's own block checksums. Install with monkeypatch on ``kafka.codec.xxhash``."""

    def xxh32(self, data: bytes) -> _Digest:
        return _Digest(codecs.xxh32(bytes(data)))


def legacy_set(magic: int, codec: int, rows: list[tuple[bytes | None, bytes | None, int]]) -> bytes:
    """``rows`` (key, value, timestamp) as kafka-python's message set: offsets 0.., magic 0 untimed."""
    builder = LegacyRecordBatchBuilder(magic, codec, 1 << 20)
    for i, (k, v, ts) in enumerate(rows):
        builder.append(i, ts if magic else None, k, v)
    return bytes(builder.build())


def read_legacy(data: bytes) -> list[tuple[int, int | None, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of every message kafka-python reads from a set."""
    records, out = MemoryRecords(bytes(data)), []
    while records.has_next():
        out += [(r.offset, r.timestamp, r.key, r.value) for r in records.next_batch()]
    return out
