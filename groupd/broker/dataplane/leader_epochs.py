"""Leader epochs (KIP-101, KIP-320): a partition's epoch history and the answers a leader derives from it.

A Kafka leader keeps per partition a cache of (leader epoch, start offset) entries (its
LeaderEpochFileCache) and answers OffsetForLeaderEpoch, a fetcher's last fetched epoch and the
current-leader-epoch checks from it. Every leader election raises the epoch (with one replica too); the new
leader adds the entry (its epoch, its log end offset) when it becomes leader (Partition.makeLeader), before
it appends anything, and every appended batch whose partitionLeaderEpoch is newer than the latest entry adds
one (UnifiedLog.append); after an unclean stop the cache is rebuilt from the batches themselves
(LogSegment.recover), which is also how a groupd cluster node builds it (docs/cluster.md).

One node never changes leader, so its cache holds one entry for a partition's whole life: epoch 0 from the
log start offset (``ONE_NODE``). In a cluster the epoch is the partition's lease epoch, raised by every
takeover, and every batch carries the epoch of the owner that wrote it (fenced writes: epochs never go
down along the log), so the history of the previous owners is in the stored batches' headers
(``EpochCache.of_batches``) and the new owner adds its own entry at the log end it found.

Raising the log start (DeleteRecords, retention) moves the history's start with it, as Kafka's
``truncateFromStart`` does; the lookups here apply that at each answer, from the log start passed in, so
nothing has to follow those changes. Pure: offsets are passed in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from groupd.protocol.errors import ErrorCode

LEADER_EPOCH = 0  # one node's: Metadata, ListOffsets and appended batches all carry it
UNDEFINED_EPOCH = -1  # also "no epoch given" in requests
UNDEFINED_OFFSET = -1


@dataclass(slots=True)
class EpochCache:
    """(epoch, start offset) entries, both strictly increasing, oldest first (Kafka's LeaderEpochFileCache)."""

    entries: list[tuple[int, int]] = field(default_factory=list)

    @classmethod
    def of_batches(cls, batches: Iterable[tuple[int, int]]) -> EpochCache:
        """Rebuilt from stored batches' (partitionLeaderEpoch, base offset), in log order, as Kafka's log
        recovery does: a batch opens an entry when its epoch is newer than the latest; a negative epoch (a
        batch stored before epochs were stamped) opens none."""
        cache = cls()
        latest = UNDEFINED_EPOCH
        for epoch, base in batches:
            if epoch > latest:
                cache.entries.append((epoch, base))
                latest = epoch
        return cache

    @property
    def latest_epoch(self) -> int:
        """The newest epoch (UNDEFINED_EPOCH when empty)."""
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start: int) -> None:
        """Kafka's ``assign``: nothing when the latest entry has this epoch and starts at or before
        ``start``; else every newest entry with an epoch >= ``epoch`` or a start >= ``start`` goes (an
        epoch that wrote nothing ends where the next begins, so it is no longer named), then the entry is
        added."""
        if self.entries and self.entries[-1][0] == epoch and start >= self.entries[-1][1]:
            return
        while self.entries and (self.entries[-1][0] >= epoch or self.entries[-1][1] >= start):
            self.entries.pop()
        self.entries.append((epoch, start))

    def from_start(self, log_start: int) -> list[tuple[int, int]]:
        """The entries as Kafka's ``truncateFromStart(log_start)`` leaves them: those starting at or below
        the log start go, the last of them kept starting at the log start."""
        kept = [e for e in self.entries if e[1] > log_start]
        below = [e for e in self.entries if e[1] <= log_start]
        return [(below[-1][0], log_start), *kept] if below else kept

    def end_offset_for(self, requested: int, log_start: int, log_end: int) -> tuple[int, int]:
        """(epoch, end offset) of the requested epoch (Kafka's ``endOffsetFor``): -1 asked is undefined
        (-1, -1); the latest epoch ends at the log end offset (the leader's, not the high watermark: a
        consumer validating its position after a rebalance compares with it); an epoch newer than every
        entry is undefined; else the largest epoch <= the one asked, ending where the next larger one
        starts; below the first entry, the number asked, ending where the first entry starts."""
        entries = self.from_start(log_start)
        if requested == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested == entries[-1][0]:
            return requested, log_end
        for i, (epoch, start) in enumerate(entries):
            if epoch > requested:
                return (requested if i == 0 else entries[i - 1][0]), start
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET  # newer than every epoch

    def epoch_for(self, offset: int, log_start: int) -> int:
        """The epoch of the record at ``offset`` (Kafka's ``epochForOffset``, which ListOffsets names for a
        found offset): that of the last entry starting at or before it; UNDEFINED_EPOCH when none does."""
        found = UNDEFINED_EPOCH
        for epoch, start in self.from_start(log_start):
            if start > offset:
                break
            found = epoch
        return found

    def fetch_divergence(
        self, last_fetched_epoch: int, fetch_offset: int, log_start: int, log_end: int
    ) -> tuple[ErrorCode, tuple[int, int] | None]:
        """A Fetch (v12+) that names the epoch of the last batch it read (Kafka's Partition.readRecords,
        run for consumers too): OFFSET_OUT_OF_RANGE when that epoch has no end offset or the fetch offset
        is below the log start; the diverging (epoch, end offset) when the fetcher is past the end of its
        epoch, or its epoch is unknown here (the largest one below it is answered), so it truncates there
        instead of reading; else (NONE, None). Only for epochs >= 0."""
        found, end = self.end_offset_for(last_fetched_epoch, log_start, log_end)
        if end == UNDEFINED_OFFSET or found == UNDEFINED_EPOCH or fetch_offset < log_start:
            return ErrorCode.offset_out_of_range, None
        if found < last_fetched_epoch or end < fetch_offset:
            return ErrorCode.none, (found, end)
        return ErrorCode.none, None


ONE_NODE = EpochCache([(LEADER_EPOCH, 0)])  # one node's history: never changed (never assign to it)


def current_epoch_error(current: int, epoch: int = LEADER_EPOCH) -> ErrorCode:
    """A client's current leader epoch against the leader's ``epoch`` (Kafka's
    Partition.checkCurrentLeaderEpoch): older is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH. Which
    values mean "no check" is the caller's: -1 alone in OffsetForLeaderEpoch and ListOffsets, every
    negative one in Fetch."""
    if current == epoch:
        return ErrorCode.none
    return ErrorCode.fenced_leader_epoch if current < epoch else ErrorCode.unknown_leader_epoch
