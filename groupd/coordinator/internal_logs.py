"""The partitions of a coordinator's own topic under ``log.dirs`` (``__transaction_state``,
``__share_group_state``): each log opened at its first use, so an empty broker opens none, and the
partitions a previous run left on disk found at start-up."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from groupd.storage.errors import StorageError
from groupd.storage.log import Log, LogConfig


class InternalLogs:
    def __init__(self, root: Path, topic: str, config: LogConfig) -> None:
        self.root = root
        self.topic = topic
        self.config = config
        self.logs: dict[int, Log] = {}  # the partitions opened so far
        self._dir = re.compile(rf"{re.escape(topic)}-(\d+)")

    def log_of(self, partition: int) -> Log:
        """A partition's log, opened (made, the first time) at its first use."""
        lg = self.logs.get(partition)
        if lg is None:
            try:
                lg = Log.open(self.root / f"{self.topic}-{partition}", self.config)
            except OSError as exc:
                raise StorageError(f"{self.topic}-{partition}: {exc}") from exc
            self.logs[partition] = lg
        return lg

    def stored(self) -> list[int]:
        """Every partition on disk, those past the configured count too."""
        if not self.root.is_dir():
            return []
        with os.scandir(self.root) as entries:
            return sorted(int(m[1]) for e in entries if (m := self._dir.fullmatch(e.name)) and e.is_dir())

    def has_records(self) -> bool:
        return any(lg.log_end_offset for lg in self.logs.values())

    def close(self) -> None:
        """Flush (a failure was logged where it happened) and close every opened log."""
        for lg in self.logs.values():
            with contextlib.suppress(StorageError):
                lg.flush()
            lg.close()
        self.logs.clear()
