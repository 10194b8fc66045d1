"""Leader epochs on one node: the answers Kafka's leader derives from its epoch cache, which here
always holds the single entry (epoch 0, log start offset)."""

import pytest

from groupd.broker.dataplane.leader_epochs import (
    LEADER_EPOCH,
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    current_epoch_error,
    end_offset_for,
    fetch_divergence,
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
    assert end_offset_for(requested, log_start=5, log_end=42) == expected


def test_end_offset_for_an_empty_log_is_its_end():
    assert end_offset_for(0, 0, 0) == (0, 0)
    assert end_offset_for(0, 9, 9) == (0, 9)  # emptied by retention: start = end


@pytest.mark.parametrize("last_fetched, fetch_offset, expected", [
    (0, 10, (ErrorCode.none, None)),  # within the epoch: read as usual
    (0, 42, (ErrorCode.none, None)),  # at the log end: nothing to read yet, no divergence
    (0, 43, (ErrorCode.none, (0, 42))),  # past the end of epoch 0: it diverges there
    (0, 1000, (ErrorCode.none, (0, 42))),
    (0, 4, (ErrorCode.offset_out_of_range, None)),  # below the log start, diverging or not
    (1, 10, (ErrorCode.offset_out_of_range, None)),  # an epoch the leader never had: no end offset
])
def test_fetch_divergence(last_fetched, fetch_offset, expected):
    assert fetch_divergence(last_fetched, fetch_offset, log_start=5, log_end=42) == expected


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
# every election, one replica or not), and the holder's one cache entry starts at the log end offset it
# found when it took the lease (Kafka's makeLeader assigns (epoch, log end offset) before any append). Kafka's
# LeaderEpochFileCache.endOffsetFor: -1 asked is (-1, -1); the latest epoch ends at the log end offset; an
# epoch newer than the latest is (-1, -1); one older than the earliest entry ends where that entry starts,
# under the number asked.
@pytest.mark.parametrize("requested, expected", [
    (7, (7, 42)),  # the held epoch: the log end offset
    (8, (-1, -1)),  # newer than the leader's
    (-1, (-1, -1)),
    (6, (6, 30)),  # the epoch before the takeover ends where the held one starts
    (2, (2, 30)),  # older ones too: never below what a consumer of them could have read
    (0, (0, 30)),  # batches written before the cluster's epochs
])
def test_end_offset_for_a_lease_epoch(requested, expected):
    assert end_offset_for(requested, 5, 42, epoch=7, epoch_start=30) == expected


def test_the_held_epoch_starts_at_the_log_start_when_records_below_it_were_deleted():
    assert end_offset_for(6, 35, 42, epoch=7, epoch_start=30) == (6, 35)  # Kafka's truncateFromStart


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
    (8, 10, (ErrorCode.offset_out_of_range, None)),
])
def test_fetch_divergence_across_a_takeover(last_fetched, fetch_offset, expected):
    assert fetch_divergence(last_fetched, fetch_offset, 5, 42, epoch=7, epoch_start=30) == expected
