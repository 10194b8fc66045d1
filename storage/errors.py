"""Storage errors. Callers map every ``StorageError`` to KAFKA_STORAGE_ERROR (or a more specific code)."""

from __future__ import annotations


class StorageError(Exception):
    """Base class: the log could not do what was asked; nothing is acknowledged."""


class CorruptBatch(StorageError):
    """A batch is short, has an impossible length or a CRC mismatch (Kafka's CORRUPT_MESSAGE)."""


class UnsupportedMagic(StorageError):
    """A batch is not record batch v2 (magic 2): groupd stores v2 only."""


class UnsupportedCompression(StorageError):
    """Records compressed with a codec the stdlib cannot decode (snappy, lz4, zstd)."""


class OffsetOutOfRange(StorageError):
    """A read below the log start offset or above the log end offset (OFFSET_OUT_OF_RANGE)."""


class RecordTooLarge(StorageError):
    """A batch larger than max.message.bytes or than a segment (MESSAGE_TOO_LARGE)."""
