"""``__share_group_state`` records byte for byte, against bytes written out by hand from Kafka 4.3's
share-coordinator/src/main/resources/common/message/Share{Snapshot,Update}{Key,Value}.json."""

from __future__ import annotations

import uuid

import pytest

from groupd.coordinator.record_codec import RecordFormatError
from groupd.coordinator.share_state import records as R
from groupd.coordinator.share_state.persister import StateBatch

TOPIC = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
TOPIC_BYTES = bytes.fromhex("00112233445566778899aabbccddeeff")


def test_keys_are_non_flexible_and_versioned_by_record_type():
    # int16 record type (0 snapshot, 1 update), int16-length GroupId, 16-byte TopicId, int32 Partition
    body = b"\x00\x02gg" + TOPIC_BYTES + b"\x00\x00\x00\x07"
    assert R.encode_key(R.ShareStateKey(0, "gg", TOPIC, 7)) == b"\x00\x00" + body
    assert R.encode_key(R.ShareStateKey(1, "gg", TOPIC, 7)) == b"\x00\x01" + body
    assert R.decode_key(b"\x00\x01" + body) == R.ShareStateKey(1, "gg", TOPIC, 7)
    assert R.decode_key(b"\x00\x03" + body) is None  # not a share-state record: ignored on replay


def test_snapshot_value_layout():
    v = R.ShareSnapshotValue(
        snapshot_epoch=1, state_epoch=2, leader_epoch=3, start_offset=100, delivery_complete_count=-1,
        create_timestamp=0x10, write_timestamp=0x20, state_batches=(StateBatch(100, 104, 2, 1),),
    )
    expected = (
        b"\x00\x00"  # value version 0
        + b"\x00\x00\x00\x01"  # SnapshotEpoch
        + b"\x00\x00\x00\x02"  # StateEpoch
        + b"\x00\x00\x00\x03"  # LeaderEpoch
        + (100).to_bytes(8, "big")  # StartOffset
        + (0x10).to_bytes(8, "big")  # CreateTimestamp (DeliveryCompleteCount is tagged: at the end)
        + (0x20).to_bytes(8, "big")  # WriteTimestamp
        + b"\x02"  # compact array of 1
        + (100).to_bytes(8, "big") + (104).to_bytes(8, "big") + b"\x02" + b"\x00\x01" + b"\x00"  # batch + its tags
        + b"\x00"  # no tagged field: DeliveryCompleteCount is its default, -1
    )
    assert R.encode_value(v) == expected
    assert R.decode_value(R.SHARE_SNAPSHOT, expected) == v


def test_delivery_complete_count_is_tag_0_when_not_default():
    v = R.ShareUpdateValue(
        snapshot_epoch=4, leader_epoch=-1, start_offset=-1, delivery_complete_count=5, state_batches=()
    )
    expected = (
        b"\x00\x00"
        + b"\x00\x00\x00\x04"  # SnapshotEpoch
        + b"\xff\xff\xff\xff"  # LeaderEpoch
        + b"\xff" * 8  # StartOffset -1: unchanged
        + b"\x01"  # empty compact array
        + b"\x01"
        + b"\x00"
        + b"\x04"
        + b"\x00\x00\x00\x05"  # one tagged field: tag 0, 4 bytes, 5
    )
    assert R.encode_value(v) == expected
    assert R.decode_value(R.SHARE_UPDATE, expected) == v


def test_a_snapshot_tombstone_is_a_null_value():
    assert R.encode_value(None) is None
    assert R.decode_value(R.SHARE_SNAPSHOT, None) is None


def test_unknown_tags_are_skipped_and_damage_is_refused():
    v = R.ShareUpdateValue(1, 0, 5, -1, (StateBatch(5, 9, 0, 2),))
    data = R.encode_value(v)
    assert data is not None
    with_unknown_tag = data[:-1] + b"\x01\x07\x02\xab\xcd"  # tag 7, 2 bytes: a later Kafka's field
    assert R.decode_value(R.SHARE_UPDATE, with_unknown_tag) == v
    with pytest.raises(RecordFormatError):
        R.decode_value(R.SHARE_UPDATE, data[:-3])
    with pytest.raises(RecordFormatError):
        R.decode_value(R.SHARE_UPDATE, b"\x00\x01" + data[2:])  # value version 1 does not exist
