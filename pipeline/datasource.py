"""``spark.read.format("groupd").option("records", "commits"|"groups"|"log_ends").load(log_dirs)``.

A Spark 4 Python Data Source over groupd's offsets store: one Spark partition per
``__consumer_offsets-N`` directory (or, for "log_ends", per segment of ``log-end-history``), read in parallel by the executors with the broker's own decoders
(pipeline/store.py). Runs unchanged on a cluster when log.dirs is on a path every executor can read.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from pipeline import store

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


class _Partition(InputPartition):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


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

    def reader(self, schema) -> DataSourceReader:
        return _Reader(self.options.get("path", "./data"), self._kind())


class _Reader(DataSourceReader):
    def __init__(self, path: str, kind: str) -> None:
        self.path = path
        self.kind = kind

    def partitions(self) -> list[InputPartition]:
        if self.kind == "log_ends":
            paths = store.log_end_history_segments(self.path)
        else:
            paths = store.offsets_partitions(self.path)
        return [_Partition(str(d)) for d in paths] or [_Partition("")]

    def read(self, partition: _Partition):
        from pathlib import Path

        from pipeline import store as reader

        if not partition.path:
            return iter(())
        if self.kind == "log_ends":
            return reader.read_log_end_history(Path(partition.path))
        return reader.read_offsets_partition(Path(partition.path), self.kind)
