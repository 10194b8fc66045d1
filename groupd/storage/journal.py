"""The offsets store's write-ahead journal: one file made durable per flush round, not fifty.

A flush round used to syncfs the whole filesystem, since a round's commits land in up to 50 offsets
partitions (one file each): with about 30 dirty files a syncfs took 0.5 ms, with one 0.2 ms, and an
fdatasync of one file 0.1-0.2 ms (measured on this machine's ext4). With the journal, a round appends
each batch it covers to one file, tagged with its partition, and the syncfs helper fdatasyncs that
file; the partitions' own files are written later, in runs, and made durable by a *checkpoint*: every
``checkpoint_bytes`` of journal, all of them are written out and one syncfs runs in a thread while
rounds go on. After it every batch journaled before it is in its partition's durable file. A segment
roll fsyncs the segment it leaves (storage/log.py ``_seal``): after a power loss the journal can only
add batches at a partition's end.

Two files take turns. A checkpoint switches rounds to the other file, written over from its start,
and the file it leaves holds only batches that its syncfs makes durable in their partitions; no
checkpoint starts before the last one ended, so a file is never written over while it holds the
only durable copy of a batch. At start-up both files are read and every batch a partition lacks is
appended to it again: a batch whose base offset is below the partition's end is already there,
which makes replaying idempotent (an entry left from an earlier turn of a file, after the entries
of its latest turn, is such a batch). Then one syncfs, and both files are emptied and filled with
zeros to the checkpoint size, so that rounds overwrite blocks that exist (see ``reset``).

An entry: length (i32, of the batch), partition (i32), CRC-32C (u32) of those two and the batch,
then the batch (Kafka's record batch v2, its base offset set). Reading a file stops at its first
invalid entry: a torn write is the tail of a round that was never acknowledged.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

from crc32c import crc32c

from groupd.protocol.topic_names import OFFSETS_TOPIC
from groupd.storage.batch import parse_header
from groupd.storage.errors import DiskFull, StorageError
from groupd.storage.journal_scan import Scan, judge, scan
from groupd.storage.log import Log, fsync_directory, no_room, no_room_line
from groupd.storage.logdirfailure import channel as log_dir_failures

log = logging.getLogger("groupd.storage")

JOURNAL_NAME = f"{OFFSETS_TOPIC}.journal"
_LENGTH_PARTITION = struct.Struct(">ii")
_CRC = struct.Struct(">I")
CHECKPOINT_BYTES = 8 << 20


def journal_paths(directory: Path) -> tuple[Path, Path]:
    return directory / f"{JOURNAL_NAME}.0", directory / f"{JOURNAL_NAME}.1"


def entry(partition: int, batch: bytes | bytearray) -> bytes:
    head = _LENGTH_PARTITION.pack(len(batch), partition)
    return head + _CRC.pack(crc32c(batch, crc32c(head))) + batch


def read_entries(data: bytes | memoryview) -> Iterator[tuple[int, memoryview]]:
    """(partition, batch) of every valid entry from the start, up to the first invalid one."""
    yield from scan(data).valid_prefix()


class Journal:
    """The two journal files of one log directory, and which one rounds append to."""

    def __init__(self, directory: Path, checkpoint_bytes: int = CHECKPOINT_BYTES) -> None:
        self.directory = Path(directory)
        self.paths = journal_paths(self.directory)
        self.checkpoint_bytes = checkpoint_bytes
        self.fds = [os.open(p, os.O_RDWR | os.O_CREAT, 0o644) for p in self.paths]
        self.current = 0
        self.position = 0
        self.failed: BaseException | None = None
        self.checkpoints = 0
        self.damaged = False  # recover() found acknowledged batches lost (a cut, or damage where synced)
        self.unfilled = False  # reset() found no room to fill the files: fill() once a round has room

    # ------------------------------------------------------------ start-up

    def recover(self, logs: dict[int, Log]) -> int:
        """Append to each partition the journaled batches it lacks; returns how many. The caller then
        makes the partitions durable and calls ``reset``. Damage where the journal had been synced
        is logged as an ERROR with numbers and sets ``damaged`` (storage/journal_scan.py)."""
        scans: list[tuple[Path, int, Scan]] = []
        found: dict[int, list[tuple[int, memoryview]]] = {}
        for path in self.paths:
            data = path.read_bytes()
            scans.append((path, len(data), got := scan(data)))
            for _pos, partition, batch in got.entries:
                found.setdefault(partition, []).append((parse_header(batch).base_offset, batch))
        ends_before = {p: lg.log_end_offset for p, lg in logs.items()}
        restored = 0
        for partition, batches in sorted(found.items()):
            target = logs.get(partition)
            if target is None:
                log.warning(
                    "%s: %d batches for partition %d, which is not here: left out",
                    JOURNAL_NAME,
                    len(batches),
                    partition,
                )
                continue
            restored += _restore(target, partition, batches)
        ends_after = {p: lg.log_end_offset for p, lg in logs.items()}
        for path, size, got in scans:
            self.damaged |= judge(path.name, size, self.prefill_bytes, got, ends_before, ends_after)
        return restored

    def reset(self, *, prefill: bool = True) -> None:
        """Empty both files, durably, with their directory entries: everything journaled is durable
        in its partition (start-up and a clean stop only). With ``prefill`` each file is then zeros
        up to the checkpoint size: a round overwrites blocks that exist, so its fdatasync writes
        data only, with no commit of the filesystem's own journal (which would also wait for the
        data of every other file written meanwhile)."""
        for path, fd in zip(self.paths, self.fds, strict=True):
            try:
                os.ftruncate(fd, 0)
                os.fsync(fd)
            except OSError as exc:  # say which file, without a traceback
                raise StorageError(f"preparing {path} failed: {exc}") from exc
        fsync_directory(self.directory)
        self.current, self.position = 0, 0
        if prefill and not self.fill():
            # a start on a full disk: rounds append to empty files, each refused while there is no room
            # (commits answer NOT_COORDINATOR), and the files are filled once a round finds room
            log.warning(
                "no room to prepare %s (%d bytes each): offset commits are refused until there is room",
                JOURNAL_NAME, self.prefill_bytes,
            )

    def fill(self) -> bool:
        """Zeros from each file's end up to ``prefill_bytes`` (see ``reset``); False, with the files as
        long as they got, when the disk has no room for them. Zeros after a file's entries are what a
        start-up reading expects there."""
        self.unfilled = True
        zeros = bytes(1 << 20)
        for path, fd in zip(self.paths, self.fds, strict=True):
            try:
                start = os.fstat(fd).st_size
                for pos in range(start, self.prefill_bytes, len(zeros)):
                    want = min(len(zeros), self.prefill_bytes - pos)
                    written = os.pwrite(fd, zeros[:want], pos)
                    if written != want:
                        raise OSError(errno.ENOSPC, f"short write: {written} of {want} bytes")
                os.fsync(fd)
            except OSError as exc:
                if no_room(exc):
                    return False
                raise StorageError(f"preparing {path} failed: {exc}") from exc
        self.unfilled = False
        return True

    @property
    def prefill_bytes(self) -> int:
        """The size ``reset`` makes each file: while the broker runs no file is shorter."""
        step = 1 << 20
        return -(-(self.checkpoint_bytes + step) // step) * step

    # ------------------------------------------------------------ rounds

    @property
    def due(self) -> bool:
        """The next round should be a checkpoint."""
        return self.position >= self.checkpoint_bytes

    def append(self, entries: Iterable[tuple[int, bytes | bytearray]]) -> int:
        """Write the entries at the current file's end (not yet durable); returns the bytes written."""
        if self.failed is not None:
            raise StorageError(f"the offsets journal is offline after a failed write or sync: {self.failed}")
        data = b"".join([entry(p, b) for p, b in entries])
        if not data:
            return 0
        fd = self.fds[self.current]
        try:
            written = os.pwrite(fd, data, self.position)
            if written != len(data):  # a regular file's write comes up short only when space runs out
                self._unmake(fd)
                raise OSError(errno.ENOSPC, f"short write: {written} of {len(data)} bytes")
        except OSError as exc:
            if no_room(exc):
                # nothing of it counts (see _unmake) and the file is as before: the round is refused,
                # the journal stays usable, and the next round tries again
                no_room_line("write to %s refused, no room: %s", self.paths[self.current], exc)
                raise DiskFull(f"write to the offsets journal refused: {exc}") from exc
            self.failed = exc
            log.error("write to %s failed; the offsets journal is offline: %s", self.paths[self.current], exc)
            log_dir_failures.report(f"write to {self.paths[self.current]}", exc)
            raise StorageError(f"write to the offsets journal failed: {exc}") from exc
        self.position += len(data)
        if self.unfilled:
            self.fill()  # room again, it seems: the files take their size, or wait for the next round
        return len(data)

    def _unmake(self, fd: int) -> None:
        """A short write may hold whole entries of a refused round: their first head goes back to zeros
        (the blocks were just written, so this needs no room), so a start-up's reading stops there, as
        at the zeros of a prefilled file; failing that the file ends there."""
        try:
            if os.pwrite(fd, bytes(_LENGTH_PARTITION.size + _CRC.size), self.position) == 12:
                return
        except OSError:
            pass
        with contextlib.suppress(OSError):
            os.ftruncate(fd, self.position)

    def switch(self) -> None:
        """Start over in the other file, at a checkpoint's start. The other file is written over from
        its start, not emptied: whatever of it is left further on holds batches of an earlier
        checkpoint, durable in their partitions, which a start-up reading skips."""
        self.current, self.position = 1 - self.current, 0
        self.checkpoints += 1

    def sync_failed(self, exc: BaseException) -> None:
        """Kafka takes a log dir offline after a failed fsync: so does the journal."""
        self.failed = exc
        log_dir_failures.report(f"sync of {self.paths[self.current]}", exc)

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []


def _restore(target: Log, partition: int, batches: list[tuple[int, memoryview]]) -> int:
    restored = 0
    for base, batch in sorted(batches, key=lambda b: b[0]):
        end = target.log_end_offset
        if base < end:
            continue  # already in the partition (or older than its start)
        if base > end:
            log.error(
                "%s: partition %d ends at offset %d but its next journaled batch starts at %d: "
                "the rest of its journal is left out",
                JOURNAL_NAME,
                partition,
                end,
                base,
            )
            break
        target.append(bytearray(batch))
        restored += 1
    if restored:
        log.warning("%s: restored %d batches of partition %d from the journal", JOURNAL_NAME, restored, partition)
    return restored
