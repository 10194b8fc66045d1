"""The partitions of a coordinator's own topic (``__transaction_state``, ``__share_group_state``) in the
storage engine: each log opened at its first use, so an empty broker opens none, and the partitions a
previous run left found at start-up."""

from __future__ import annotations

import contextlib

from groupd.storage.engine import LogConfig, PartitionLog, StorageEngine
from groupd.storage.errors import StorageError


class InternalLogs:
    def __init__(self, storage: StorageEngine, topic: str, config: LogConfig) -> None:
        self.storage = storage
        self.topic = topic
        self.config = config
        self.logs: dict[int, PartitionLog] = {}  # the partitions opened so far

    def log_of(self, partition: int) -> PartitionLog:
        """A partition's log, opened (made, the first time) at its first use."""
        lg = self.logs.get(partition)
        if lg is None:
            lg = self.logs[partition] = self.storage.open_partition(self.topic, partition, self.config)
        return lg

    def stored(self) -> list[int]:
        """Every partition stored, those past the configured count too."""
        return [p for _topic, p in self.storage.partitions(self.topic)]

    def has_records(self) -> bool:
        return any(lg.log_end_offset for lg in self.logs.values())

    def close(self) -> None:
        """Flush (a failure was logged where it happened) and close every opened log."""
        for lg in self.logs.values():
            with contextlib.suppress(StorageError):
                lg.flush()
            lg.close()
        self.logs.clear()
