"""Leader epochs (KIP-101, KIP-320) on one node that is every partition's leader for good.

A Kafka leader keeps per partition a cache of (leader epoch, start offset) entries and answers
OffsetForLeaderEpoch, a fetcher's last fetched epoch and the current-leader-epoch checks from it.
groupd never changes leader, so its cache would hold one entry for a partition's whole life: epoch 0,
starting at the log start offset (a new partition's leader takes epoch 0 at offset 0, and raising the
log start moves the first entry's start with it, as Kafka's truncateFromStart does). Nothing is
stored; every answer is derived from that entry. Pure: offsets are passed in.
"""

from __future__ import annotations

from groupd.protocol.errors import ErrorCode

LEADER_EPOCH = 0  # Metadata, ListOffsets and appended batches all carry it
UNDEFINED_EPOCH = -1  # also "no epoch given" in requests
UNDEFINED_OFFSET = -1


def current_epoch_error(current: int) -> ErrorCode:
    """A client's current leader epoch against the leader's (Kafka's Partition.checkCurrentLeaderEpoch):
    older is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH. Which values mean "no check" is the
    caller's: -1 alone in OffsetForLeaderEpoch and ListOffsets, every negative one in Fetch."""
    if current == LEADER_EPOCH:
        return ErrorCode.none
    return ErrorCode.fenced_leader_epoch if current < LEADER_EPOCH else ErrorCode.unknown_leader_epoch


def end_offset_for(requested: int, log_start: int, log_end: int) -> tuple[int, int]:
    """(epoch, end offset) of the requested epoch, as Kafka's LeaderEpochFileCache.endOffsetFor with
    the one entry: the latest epoch ends at the log end offset (the leader's, not the high watermark:
    a consumer validating its position after a rebalance compares with it); an epoch newer than any, or
    -1, is undefined (-1, -1); one older than the first (below -1 here) ends where the first starts,
    under the requested number."""
    if requested == LEADER_EPOCH:
        return LEADER_EPOCH, log_end
    if requested > LEADER_EPOCH or requested == UNDEFINED_EPOCH:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    return requested, log_start


def fetch_divergence(
    last_fetched_epoch: int, fetch_offset: int, log_start: int, log_end: int
) -> tuple[ErrorCode, tuple[int, int] | None]:
    """A Fetch (v12+) that names the epoch of the last batch it read (Kafka's Partition.readRecords,
    run for consumers too): OFFSET_OUT_OF_RANGE when that epoch has no end offset or the fetch offset
    is below the log start; the diverging (epoch, end offset) when the fetcher is past the end of its
    epoch, so it truncates there instead of reading; else (NONE, None). Only for epochs >= 0."""
    epoch, end = end_offset_for(last_fetched_epoch, log_start, log_end)
    if end == UNDEFINED_OFFSET or epoch == UNDEFINED_EPOCH or fetch_offset < log_start:
        return ErrorCode.offset_out_of_range, None
    if epoch < last_fetched_epoch or end < fetch_offset:
        return ErrorCode.none, (epoch, end)
    return ErrorCode.none, None
