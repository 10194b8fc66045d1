"""The local engine's partition sets (storage/engine.py PartitionSet): the offsets partitions, whose
every append is followed by a flush round, are written behind (the flush thread writes too) and, under
the fsync-per-message policy, made durable through one shared journal (storage/journal.py); their own
files are written out in slices within a second, so offline readers (groupd/pipeline) find them current.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

from groupd.storage.committer import GroupCommitter
from groupd.storage.engine import LogConfig, PartitionLog
from groupd.storage.errors import DiskFull, StorageError
from groupd.storage.journal import Journal
from groupd.storage.log import Log, syncfs_errno
from groupd.storage.open_files import UNBOUNDED, OpenFiles

log = logging.getLogger("groupd.coordinator")

# The once-a-second write-out runs in slices: every 1/_WRITE_OUT_SLICES s, the partitions whose number
# is that slice's modulo. All of them at once, under load, held the event loop 4-8 ms (44 pwritevs).
_WRITE_OUT_SLICES = 10


def open_journal(log_dir: Path, logs: Mapping[int, Log], committer: GroupCommitter) -> None:
    """Restore what the journal holds and the partitions lack, make it durable in them, and start the
    journal over; the committer's rounds use it only under the fsync-per-message policy."""
    journal = Journal(log_dir)
    if any(path.stat().st_size for path in journal.paths):
        restored = journal.recover(dict(logs))
        for lg in logs.values():
            lg.write_pending()
        err = syncfs_errno(log_dir)
        if err:
            journal.close()
            raise StorageError(f"syncfs of {log_dir} failed after reading the offsets journal: {os.strerror(err)}")
        if journal.damaged:  # the lines above say what and how much; start-up goes on (docs/operations.md)
            log.error("offsets journal read: %d batches restored, but it was damaged where it had been synced: "
                      "acknowledged commits are lost, and their groups go back to older offsets", restored)
        else:
            log.info("offsets journal read: %d batches restored", restored)
    journal.reset(prefill=committer.synchronous)
    if not committer.synchronous:
        journal.close()
        return
    for p, lg in logs.items():
        lg.journal_partition = p
    committer.journal = journal


class _Written(Protocol):
    """A log as the write-out sees it (tests give fakes)."""

    @property
    def unwritten_batches(self) -> int: ...

    def write_pending(self) -> None: ...


def write_out_slice(logs: Mapping[int, _Written], tick: int, topic: str) -> None:
    """Write out what waits in this tick's slice of the journaled partitions: each partition's file is
    current within a second, and no loop turn writes more than a tenth of them."""
    turn = tick % _WRITE_OUT_SLICES
    for partition, lg in logs.items():
        if partition % _WRITE_OUT_SLICES == turn and lg.unwritten_batches:
            try:
                lg.write_pending()
            except DiskFull:
                pass  # said once per 10 s where it was refused; the journal holds them, tried again next tick
            except StorageError as exc:
                log.error("writing %s-%d out failed: %s", topic, partition, exc)


class LocalPartitionSet:
    def __init__(
        self, root: Path, topic: str, partitions: Iterable[int], config: LogConfig, committer: GroupCommitter,
        files: OpenFiles = UNBOUNDED,
    ) -> None:
        self.topic = topic
        self.committer = committer
        self._logs: dict[int, Log] = {}
        for p in sorted(partitions):
            try:
                lg = self._logs[p] = Log.open(root / f"{topic}-{p}", config, files=files)
            except OSError as exc:
                raise StorageError(f"{topic}-{p}: {exc}") from exc
            # every append is followed by a flush: let the flush thread do the write too
            lg.write_behind = committer.synchronous
        open_journal(root, self._logs, committer)
        self.logs: Mapping[int, PartitionLog] = self._logs

    @property
    def maintenance_interval(self) -> float | None:
        return 1 / _WRITE_OUT_SLICES if self.committer.journal is not None else None

    def maintain(self, tick: int) -> None:
        write_out_slice(self._logs, tick, self.topic)

    def close(self) -> None:
        flushed = True
        for lg in self._logs.values():
            try:
                lg.flush()
            except StorageError:
                flushed = False
            lg.close()
        journal, self.committer.journal = self.committer.journal, None
        if journal is not None:
            if flushed:
                journal.reset(prefill=False)  # every partition is durable on its own: nothing to restore next time
            journal.close()
