"""``spark.read.format("groupd").option("records", "commits"|"groups"|"log_ends").load(log_dirs)``.

A Spark 4 Python Data Source over groupd's offsets store: each Spark partition reads some
``__consumer_offsets-N`` directories (or, for "log_ends", segments of ``log-end-history``), at most
``splits`` (default 8) of about equal size, read in parallel by the executors with the broker's own decoders
(groupd/pipeline/store.py). Runs unchanged on a cluster when log.dirs is on a path every executor can read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from groupd.pipeline import store

COMMITS_SCHEMA = (
    "group string, topic string, partition int, offset long, leader_epoch int, metadata string, "
    "commit_timestamp long, expire_timestamp long, store_partition int, record_offset long, "
    "record_timestamp long, is_tombstone boolean"
)
GROUPS_SCHEMA = (
    "group string, generation int, protocol_type string, protocol string, leader string, state_timestamp long, "
    "member_count int, members array<struct<member_id: string, group_instance_id: string, client_id: string, "
    "client_host: string, session_timeout: int, rebalance_timeout: int, assignment_bytes: int>>, "
    "store_partition int, record_offset long, record_timestamp long, is_tombstone boolean, group_type string"
)
LOG_ENDS_SCHEMA = "topic string, partition int, log_start_offset long, log_end_offset long, sampled_ms long"
SCHEMAS = {"commits": COMMITS_SCHEMA, "groups": GROUPS_SCHEMA, "log_ends": LOG_ENDS_SCHEMA}


DEFAULT_SPLITS = 8


class _Partition(InputPartition):
    """Some directories (or history segments), read one after the other by one task: its ``value``."""

    def __init__(self, paths: list[str]) -> None:
        super().__init__(paths)


def split(paths: list[Path], n: int) -> list[list[str]]:
    """At most ``n`` groups of about equal bytes (largest first, each to the lightest group): a task per
    directory would cost more in task start-up than the reading on a store of mostly small partitions."""
    sized = sorted(((_size(p), str(p)) for p in paths), reverse=True)
    bins: list[tuple[int, list[str]]] = [(0, []) for _ in range(max(1, min(n, len(sized))))]
    for size, path in sized:
        total, members = min(bins, key=lambda b: b[0])
        bins.remove((total, members))
        bins.append((total + size, [*members, path]))
    return [sorted(members) for _, members in bins if members]


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(f.stat().st_size for f in path.glob("*.log"))


class GroupdDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "groupd"

    def _kind(self) -> str:
        kind = self.options.get("records", "commits")
        if kind not in SCHEMAS:
            raise ValueError(f"option records must be one of {sorted(SCHEMAS)}, not {kind!r}")
        return kind

    def schema(self) -> str:
        return SCHEMAS[self._kind()]

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Reader(
            self.options.get("path", "./data"), self._kind(), int(self.options.get("splits", DEFAULT_SPLITS))
        )


class _Reader(DataSourceReader):
    def __init__(self, path: str, kind: str, splits: int) -> None:
        self.path = path
        self.kind = kind
        self.splits = splits

    def partitions(self) -> list[InputPartition]:
        if self.kind == "log_ends":
            paths = store.log_end_history_segments(self.path)
        else:
            paths = store.offsets_partitions(self.path)
        return [_Partition(group) for group in split(paths, self.splits)] or [_Partition([])]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        """``partition`` is one of ``partitions()``' own, its paths its ``value`` (kept through pickling)."""
        from pathlib import Path

        from groupd.pipeline import store as reader

        paths: list[str] = partition.value
        for path in paths:
            if self.kind == "log_ends":
                yield from reader.read_log_end_history(Path(path))
            else:
                yield from reader.read_offsets_partition(Path(path), self.kind)
