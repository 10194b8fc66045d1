"""Leader epochs (KIP-101, KIP-320): the answers a leader derives from its epoch cache.

A Kafka leader keeps per partition a cache of (leader epoch, start offset) entries and answers
OffsetForLeaderEpoch, a fetcher's last fetched epoch and the current-leader-epoch checks from it; every
leader election raises the epoch (with one replica too: the same broker elected again after a restart
takes the next one), and the new leader adds the entry (its epoch, its log end offset) when it becomes
leader (Partition.makeLeader), before it appends anything.

One node never changes leader, so its cache holds one entry for a partition's whole life: epoch 0,
starting at the log start offset (a new partition's leader takes epoch 0 at offset 0, and raising the log
start moves the first entry's start with it, as Kafka's truncateFromStart does). In a cluster
(docs/cluster.md) the epoch is the partition's lease epoch, raised by every takeover, and the node holding
the lease keeps one entry: its epoch, from the log end offset it found when it took the lease. That is a
Kafka cache whose older entries are gone: an older epoch asked ends where the held one starts (Kafka's
"requested epoch smaller than any known"), which is exact for the epoch written just before the takeover
(what a consumer validating its position after it asks) and never below a consumer's position for older
ones. Nothing is stored; every answer is derived from that entry. Pure: offsets are passed in.
"""

from __future__ import annotations

from groupd.protocol.errors import ErrorCode

LEADER_EPOCH = 0  # Metadata, ListOffsets and appended batches all carry it
UNDEFINED_EPOCH = -1  # also "no epoch given" in requests
UNDEFINED_OFFSET = -1


def current_epoch_error(current: int, epoch: int = LEADER_EPOCH) -> ErrorCode:
    """A client's current leader epoch against the leader's ``epoch`` (Kafka's
    Partition.checkCurrentLeaderEpoch): older is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH. Which
    values mean "no check" is the caller's: -1 alone in OffsetForLeaderEpoch and ListOffsets, every
    negative one in Fetch."""
    if current == epoch:
        return ErrorCode.none
    return ErrorCode.fenced_leader_epoch if current < epoch else ErrorCode.unknown_leader_epoch


def end_offset_for(
    requested: int, log_start: int, log_end: int, epoch: int = LEADER_EPOCH, epoch_start: int | None = None
) -> tuple[int, int]:
    """(epoch, end offset) of the requested epoch, as Kafka's LeaderEpochFileCache.endOffsetFor with
    the one entry (``epoch`` from ``epoch_start``, the log start when not given or below it): the latest
    epoch ends at the log end offset (the leader's, not the high watermark: a consumer validating its
    position after a rebalance compares with it); an epoch newer than any, or -1, is undefined (-1, -1);
    one older than the entry's ends where the entry starts, under the requested number."""
    if requested == epoch:
        return epoch, log_end
    if requested > epoch or requested == UNDEFINED_EPOCH:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    return requested, log_start if epoch_start is None else max(epoch_start, log_start)


def fetch_divergence(
    last_fetched_epoch: int,
    fetch_offset: int,
    log_start: int,
    log_end: int,
    epoch: int = LEADER_EPOCH,
    epoch_start: int | None = None,
) -> tuple[ErrorCode, tuple[int, int] | None]:
    """A Fetch (v12+) that names the epoch of the last batch it read (Kafka's Partition.readRecords,
    run for consumers too): OFFSET_OUT_OF_RANGE when that epoch has no end offset or the fetch offset
    is below the log start; the diverging (epoch, end offset) when the fetcher is past the end of its
    epoch, so it truncates there instead of reading; else (NONE, None). Only for epochs >= 0."""
    found, end = end_offset_for(last_fetched_epoch, log_start, log_end, epoch, epoch_start)
    if end == UNDEFINED_OFFSET or found == UNDEFINED_EPOCH or fetch_offset < log_start:
        return ErrorCode.offset_out_of_range, None
    if found < last_fetched_epoch or end < fetch_offset:
        return ErrorCode.none, (found, end)
    return ErrorCode.none, None
