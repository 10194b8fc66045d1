"""The PostgreSQL engine's coordinator partition sets and start-up replay (storage/engine.py PartitionSet,
ReplayReader): nothing to share among the partitions beyond the durability's rounds, which already put
every partition's writes of a round in one transaction; the replay walks each log's range scans."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from groupd.storage.batch import TxnWalk
from groupd.storage.engine import LatestValues, PartitionLog
from groupd.storage.errors import StorageError
from groupd.storage.local_replay import walk

log = logging.getLogger("groupd.storage")


class PgPartitionSet:
    def __init__(self, logs: Mapping[int, PartitionLog]) -> None:
        self.logs = logs

    @property
    def maintenance_interval(self) -> float | None:
        return None

    def maintain(self, tick: int) -> None:
        return None

    def close(self) -> None:
        for p, lg in self.logs.items():
            try:
                lg.close()
            except StorageError as exc:
                log.error("closing partition %d of a coordinator's set failed: %s", p, exc)


class PgReplayReader:
    async def collect(self, topic: str, partition: int, log: PartitionLog, latest: LatestValues, txn: TxnWalk) -> int:
        return await walk(log.chunks(), latest, txn)

    async def close(self) -> None:
        return None
