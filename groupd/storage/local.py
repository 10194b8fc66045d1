"""The local engine: the storage seam (storage/engine.py) over files under ``log.dirs``.

Adapters, not a second implementation: a partition is a directory ``<topic>-<partition>`` of Kafka's
segment files (storage/log.py), durability is the group committer's fsync rounds
(storage/committer.py), and metadata is one file per key, rewritten atomically (storage/files.py) under
the same names as before the seam existed, so a data directory written by an older groupd opens as it is.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from groupd.storage import segment_index
from groupd.storage.committer import GroupCommitter
from groupd.storage.engine import LogConfig, check_key
from groupd.storage.errors import StorageError, UnknownPartition
from groupd.storage.files import write_atomically
from groupd.storage.local_replay import LocalReplayReader
from groupd.storage.local_sets import LocalPartitionSet
from groupd.storage.log import Log, fsync_directory
from groupd.storage.open_files import OpenFiles

if TYPE_CHECKING:
    from groupd.storage.engine import Durability, MetadataStore, PartitionLog, PartitionSet, ReplayReader

_PARTITION_DIR = re.compile(r"(.+)-(\d+)")


class LocalMetadata:
    """Each key a file directly under the data directory (``__scram_credentials.json``, ...)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def get(self, key: str) -> bytes | None:
        try:
            return (self.root / check_key(key)).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"reading {key} failed: {exc}") from exc

    def put(self, key: str, value: bytes) -> None:
        try:
            write_atomically(self.root / check_key(key), value)
        except OSError as exc:
            raise StorageError(f"writing {key} failed: {exc}") from exc

    def delete(self, key: str) -> None:
        path = self.root / check_key(key)
        try:
            path.unlink()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StorageError(f"deleting {key} failed: {exc}") from exc
        fsync_directory(self.root)


class LocalEngine:
    """Every partition a directory of segment files under ``root``; see the module's text."""

    def __init__(
        self, root: str | Path, max_open_files: int | None = None, index_cache_blocks: int | None = None
    ) -> None:
        self.root = Path(root)
        self.metadata: MetadataStore = LocalMetadata(self.root)
        # segment files open at once (storage/open_files.py); None: unbounded; 0: half of ulimit -n
        self.max_open_files = max_open_files
        self.files = OpenFiles()
        # decoded index blocks kept, for the whole process (storage/segment_index.py); None: as it is
        self.index_cache_blocks = index_cache_blocks

    def open(self) -> None:
        """Called on the broker's event loop: that thread closes idle segment files from now on."""
        if self.max_open_files is not None:
            self.files.configure(self.max_open_files)
        if self.index_cache_blocks is not None:
            segment_index.CACHE.resize(self.index_cache_blocks)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"log.dirs {self.root}: {exc}") from exc

    def directory_of(self, topic: str, partition: int) -> Path:
        return self.root / f"{topic}-{partition}"

    def open_partition(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        try:
            return Log.open(self.directory_of(topic, partition), config, files=self.files)
        except OSError as exc:
            raise StorageError(f"{topic}-{partition}: {exc}") from exc

    def open_broker_log(self, name: str, config: LogConfig | None = None) -> PartitionLog:
        try:
            return Log.open(self.root / check_key(name), config, files=self.files)
        except OSError as exc:
            raise StorageError(f"{name}: {exc}") from exc

    def partitions(self, topic: str | None = None) -> list[tuple[str, int]]:
        if not self.root.is_dir():
            return []
        found = []
        with os.scandir(self.root) as entries:
            for e in entries:
                m = _PARTITION_DIR.fullmatch(e.name)
                if m and (topic is None or m[1] == topic) and e.is_dir():
                    found.append((m[1], int(m[2])))
        return sorted(found)

    def stored_bytes(self, topic: str, partitions: Iterable[int]) -> int:
        total = 0
        for p in partitions:
            with contextlib.suppress(OSError):
                total += sum(f.stat().st_size for f in self.directory_of(topic, p).glob("*.log"))
        return total

    def delete_partition(self, topic: str, partition: int) -> None:
        directory = self.directory_of(topic, partition)
        if not directory.is_dir():
            raise UnknownPartition(f"no partition {topic}-{partition}")
        shutil.rmtree(directory, ignore_errors=True)

    def open_partition_set(
        self, topic: str, partitions: Iterable[int], config: LogConfig, durability: Durability
    ) -> PartitionSet:
        if not isinstance(durability, GroupCommitter):
            raise TypeError("the local engine's partition sets are written through its own durability")
        return LocalPartitionSet(self.root, topic, partitions, config, durability, self.files)

    def replay_reader(self, helpers: int, stored_bytes: int) -> ReplayReader:
        return LocalReplayReader(helpers, stored_bytes)

    def durability(
        self, *, flush_interval_messages: int = 1, flush_interval_ms: int = 0, shared: bool = False
    ) -> Durability:
        committer = GroupCommitter(
            flush_interval_messages=flush_interval_messages,
            flush_interval_ms=flush_interval_ms,
            shared=shared,
            directory=self.root,
        )
        # its rounds take this engine's own logs (Log, which open_partition hands out): typed on Log, so
        # the hot path pays no conversion
        return cast("Durability", committer)
