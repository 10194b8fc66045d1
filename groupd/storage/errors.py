"""Storage errors; callers map them to Kafka error codes (KAFKA_STORAGE_ERROR, CORRUPT_MESSAGE, ...)."""


class StorageError(Exception):
    """A write or flush that did not happen: never acknowledge what raised this."""


class DiskFull(StorageError):
    """An append the file system had no room for (ENOSPC, EDQUOT, EFBIG, a short write): nothing of it
    stays, the log is whole and takes the next append, which succeeds once there is room again."""


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
