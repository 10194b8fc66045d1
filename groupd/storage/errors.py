"""Storage errors; callers map them to Kafka error codes (KAFKA_STORAGE_ERROR, CORRUPT_MESSAGE, ...)."""


class StorageError(Exception):
    """A write or flush that did not happen: never acknowledge what raised this."""


class CorruptBatch(StorageError):
    pass


class UnsupportedMagic(StorageError):
    pass


class UnsupportedCompression(StorageError):
    pass


class OffsetOutOfRange(StorageError):
    pass


class RecordTooLarge(StorageError):
    pass


class InvalidRecord(StorageError):
    """A produced record Kafka's LogValidator refuses (INVALID_RECORD), though intact."""


class UnknownPartition(StorageError):
    """The engine holds no such partition (never created, or deleted)."""
