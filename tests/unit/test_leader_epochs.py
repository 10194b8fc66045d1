"""Leader epochs on one node: the answers Kafka's leader derives from its epoch cache, which here
always holds the single entry (epoch 0, log start offset); and the history of a cluster's partition, every
owner's lease epoch from its first offset (Kafka's LeaderEpochFileCache, its test cases' numbers)."""

import pytest

from groupd.broker.dataplane.leader_epochs import (
    LEADER_EPOCH,
    ONE_NODE,
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    EpochCache,
    current_epoch_error,
)
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch, build_control_batch, parse_header


def test_the_leader_epoch_is_zero():
    assert LEADER_EPOCH == 0 and UNDEFINED_EPOCH == -1 and UNDEFINED_OFFSET == -1


@pytest.mark.parametrize("current, expected", [
    (0, ErrorCode.none),
    (1, ErrorCode.unknown_leader_epoch),  # newer than the leader knows
    (7, ErrorCode.unknown_leader_epoch),
    (-2, ErrorCode.fenced_leader_epoch),  # older: only -1 means "no check", a caller skips it
])
def test_current_epoch_error(current, expected):
    assert current_epoch_error(current) == expected


@pytest.mark.parametrize("requested, expected", [
    (0, (0, 42)),  # the latest epoch ends at the log end offset
    (1, (-1, -1)),  # later than any epoch: undefined
    (100, (-1, -1)),
    (-1, (-1, -1)),  # UNDEFINED_EPOCH asked: undefined
    (-3, (-3, 5)),  # older than the first epoch: where the first epoch starts, named as asked
])
def test_end_offset_for(requested, expected):
    assert ONE_NODE.end_offset_for(requested, log_start=5, log_end=42) == expected


def test_end_offset_for_an_empty_log_is_its_end():
    assert ONE_NODE.end_offset_for(0, 0, 0) == (0, 0)
    assert ONE_NODE.end_offset_for(0, 9, 9) == (0, 9)  # emptied by retention: start = end


@pytest.mark.parametrize("last_fetched, fetch_offset, expected", [
    (0, 10, (ErrorCode.none, None)),  # within the epoch: read as usual
    (0, 42, (ErrorCode.none, None)),  # at the log end: nothing to read yet, no divergence
    (0, 43, (ErrorCode.none, (0, 42))),  # past the end of epoch 0: it diverges there
    (0, 1000, (ErrorCode.none, (0, 42))),
    (0, 4, (ErrorCode.offset_out_of_range, None)),  # below the log start, diverging or not
    (1, 10, (ErrorCode.offset_out_of_range, None)),  # an epoch the leader never had: no end offset
])
def test_fetch_divergence(last_fetched, fetch_offset, expected):
    assert ONE_NODE.fetch_divergence(last_fetched, fetch_offset, log_start=5, log_end=42) == expected


def test_batches_the_broker_builds_already_carry_epoch_zero():
    """The offsets store and the transaction markers build their own batches: epoch 0 at build time."""
    assert parse_header(build_batch([(b"k", b"v")], timestamp_ms=1)).partition_leader_epoch == LEADER_EPOCH
    marker = build_control_batch(7, 0, True, timestamp_ms=1)
    assert parse_header(marker).partition_leader_epoch == LEADER_EPOCH


def test_offset_for_leader_epoch_errors_are_counted_per_api():
    """groupd_request_errors{api="OffsetForLeaderEpoch"} sees the first partition error of an answer."""
    from groupd.broker.ops.metrics import response_error
    from groupd.protocol import codec

    cls = codec.response_class(23, 4)
    part, topic = codec.nested(cls, "EpochEndOffset"), codec.nested(cls, "OffsetForLeaderTopicResult")
    ok = codec.make(part, partition=0, error_code=0, leader_epoch=0, end_offset=3)
    fenced = codec.make(part, partition=1, error_code=ErrorCode.fenced_leader_epoch, leader_epoch=-1, end_offset=-1)
    resp = codec.make(cls, throttle_time=0, topics=(codec.make(topic, topic="t", partitions=(ok, fenced)),))
    assert response_error(23, resp) == ErrorCode.fenced_leader_epoch


# In a cluster the partition's leader epoch is its lease epoch, raised by every takeover (Kafka raises it at
# every election, one replica or not), and the history holds every owner's epoch from its first offset.
def cache(*entries):
    c = EpochCache()
    for epoch, start in entries:
        c.assign(epoch, start)
    return c


# Kafka's LeaderEpochFileCache.endOffsetFor: -1 asked is (-1, -1); the latest epoch ends at the log end offset;
# an epoch newer than the latest is (-1, -1); else the largest epoch <= the one asked, ending where the next
# larger one starts; one older than the earliest entry ends where that entry starts, under the number asked.
@pytest.mark.parametrize("requested, expected", [
    (4, (4, 20)),  # the latest: the log end offset
    (5, (-1, -1)),  # newer than any
    (-1, (-1, -1)),
    (3, (2, 17)),  # no entry of its own: the largest below it, ending where 4 starts
    (2, (2, 17)),
    (1, (0, 13)),
    (0, (0, 13)),
    (-2, (-2, 10)),  # below the first entry: where it starts, under the number asked (not -1: Kafka's)
])
def test_end_offset_for_with_a_history(requested, expected):
    assert cache((0, 10), (2, 13), (4, 17)).end_offset_for(requested, log_start=10, log_end=20) == expected


def test_assign_keeps_the_first_start_of_an_epoch():
    c = cache((1, 0), (1, 1), (1, 2), (2, 3), (2, 4), (3, 5))
    assert c.entries == [(1, 0), (2, 3), (3, 5)]
    assert c.end_offset_for(1, 0, 6) == (1, 3) and c.end_offset_for(2, 0, 6) == (2, 5)


def test_assign_drops_entries_it_contradicts():
    """A new entry removes the newest ones with an epoch >= its own or a start >= its own (Kafka's
    maybeTruncateNonMonotonicEntries): an epoch that wrote nothing is no longer named."""
    assert cache((2, 6), (3, 5)).entries == [(3, 5)]  # starts must increase
    assert cache((2, 6), (3, 8), (2, 9)).entries == [(2, 9)]  # so must epochs
    assert cache((2, 6), (3, 8), (4, 8)).entries == [(2, 6), (4, 8)]  # 3 wrote nothing: 4 starts where it did
    assert cache((2, 6), (2, 4)).entries == [(2, 4)]  # the same epoch from earlier: moved back


@pytest.mark.parametrize("log_start, entries", [
    (5, [(2, 6), (3, 8), (4, 11)]),
    (6, [(2, 6), (3, 8), (4, 11)]),
    (8, [(3, 8), (4, 11)]),
    (9, [(3, 9), (4, 11)]),  # the last entry below the start is kept, from the start
    (11, [(4, 11)]),
    (15, [(4, 15)]),
])
def test_the_history_starts_at_the_log_start(log_start, entries):
    """Kafka's truncateFromStart, applied by the look-ups to the log start they are given."""
    c = cache((2, 6), (3, 8), (4, 11))
    assert c.from_start(log_start) == entries
    assert c.end_offset_for(2, log_start, 20) == ((2, 8) if log_start < 8 else (2, entries[0][1]))


def test_an_empty_history_knows_no_epoch():
    assert EpochCache().end_offset_for(0, 0, 5) == (-1, -1) and EpochCache().latest_epoch == -1


def test_the_history_is_rebuilt_from_the_batches_epochs():
    """Kafka's recovery (LogSegment.recover): a batch opens an entry when its epoch is newer than the latest;
    negative epochs (never stamped) open none; then the new owner assigns its epoch at the log end."""
    stored = [(-1, 0), (3, 2), (3, 5), (5, 9), (5, 12), (8, 20)]
    c = EpochCache.of_batches(stored)
    assert c.entries == [(3, 2), (5, 9), (8, 20)] and c.latest_epoch == 8
    c.assign(11, 25)
    assert c.entries == [(3, 2), (5, 9), (8, 20), (11, 25)]
    assert [c.end_offset_for(e, 0, 30) for e in (3, 4, 5, 8, 10, 11)] == [
        (3, 9), (3, 9), (5, 20), (8, 25), (8, 25), (11, 30)
    ]
    c.assign(11, 27)  # the same epoch again, later: nothing changes
    assert c.entries[-1] == (11, 25)


@pytest.mark.parametrize("current, expected", [
    (7, ErrorCode.none),
    (6, ErrorCode.fenced_leader_epoch),  # a client still on the previous owner's epoch
    (0, ErrorCode.fenced_leader_epoch),
    (8, ErrorCode.unknown_leader_epoch),  # a newer epoch than this leader holds
])
def test_current_epoch_error_against_a_lease_epoch(current, expected):
    assert current_epoch_error(current, 7) == expected


@pytest.mark.parametrize("last_fetched, fetch_offset, expected", [
    (6, 30, (ErrorCode.none, None)),  # read up to the takeover: nothing diverges
    (6, 20, (ErrorCode.none, None)),
    (6, 31, (ErrorCode.none, (6, 30))),  # past the end of epoch 6: truncate to where 7 starts
    (7, 42, (ErrorCode.none, None)),
    (3, 12, (ErrorCode.none, None)),  # an older owner's epoch, read within it
    (3, 16, (ErrorCode.none, (3, 15))),  # past its end: truncate to where 6 starts
    (4, 15, (ErrorCode.none, (3, 15))),  # an epoch that never wrote: the largest below it, diverging
    (8, 10, (ErrorCode.offset_out_of_range, None)),
])
def test_fetch_divergence_across_takeovers(last_fetched, fetch_offset, expected):
    history = cache((3, 5), (6, 15), (7, 30))
    assert history.fetch_divergence(last_fetched, fetch_offset, 5, 42) == expected


@pytest.mark.parametrize("offset, log_start, expected", [
    (0, 0, -1),  # before the first entry: no epoch (Kafka's epochForOffset: empty)
    (2, 0, 3),  # the first entry's own start
    (8, 0, 3),
    (9, 0, 5),
    (19, 0, 5),
    (20, 0, 8),
    (500, 0, 8),  # past every start: the latest
    (12, 12, 5),  # the log start moved into epoch 5: the history starts there with 5
    (10, 12, -1),  # below the log start: none (Kafka's cache, truncated from the start, has nothing there)
])
def test_epoch_for(offset, log_start, expected):
    """The epoch ListOffsets names for a found offset (Kafka's LeaderEpochFileCache.epochForOffset): that of
    the last entry starting at or before it."""
    history = EpochCache([(3, 2), (5, 9), (8, 20)])
    assert history.epoch_for(offset, log_start) == expected


def test_one_node_names_epoch_zero_everywhere():
    assert {ONE_NODE.epoch_for(o, s) for o, s in ((0, 0), (7, 0), (7, 7), (100, 7))} == {LEADER_EPOCH}
