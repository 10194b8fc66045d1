"""The share coordinator in a running broker: ``broker.share_persister`` answers once durable, writes
``__share_group_state`` in Kafka's records, and a restart replays every state."""

from __future__ import annotations

import contextlib

from broker.app import Broker
from coordinator.share_state import records as R
from coordinator.share_state.persister import ACKNOWLEDGED, ARCHIVED, AVAILABLE, SharePartitionKey, StateBatch
from storage.batch import iter_records
from tests.conftest import broker_config


@contextlib.asynccontextmanager
async def running(tmp_path, **overrides):
    b = Broker(broker_config(tmp_path, **overrides))
    await b.start()
    try:
        yield b
    finally:
        await b.stop()


def stored_records(b, partition):
    out = []
    for _, raw in b.share_coordinator.logs[partition].batches():
        for rec in iter_records(raw):
            key = R.decode_key(bytes(rec.key))
            out.append((key, R.decode_value(key.kind, None if rec.value is None else bytes(rec.value))))
    return out


async def test_a_restart_keeps_every_state(tmp_path):
    async with running(tmp_path) as b:
        topic = b.create_topic("t", 3, {})
        p = b.share_persister
        keys = [SharePartitionKey(f"g{i}", topic.topic_id, i % 3) for i in range(6)]
        for k in keys:
            assert await p.initialize(k, 0, -1) == 0
        for i, k in enumerate(keys):
            batches = (StateBatch(i, i + 4, ACKNOWLEDGED, 1), StateBatch(i + 5, i + 6, AVAILABLE, 2))
            assert await p.write(k, 0, 0, i, 3, batches) == 0
        assert await p.write(keys[0], 0, 0, -1, 4, (StateBatch(5, 5, ARCHIVED, 2),)) == 0
        assert await p.delete(keys[5]) == 0
        before = [await p.read(k, -1) for k in keys]
        summaries = [await p.read_summary(k, -1) for k in keys]
        part = b.share_coordinator.partition_for(keys[0])
        kinds = [k.kind for k, _v in stored_records(b, part) if k.group_id == "g0"]
        assert kinds == [R.SHARE_SNAPSHOT, R.SHARE_UPDATE, R.SHARE_UPDATE]
    async with running(tmp_path) as b:
        p = b.share_persister
        after = [await p.read(k, -1) for k in keys]
        assert after == before
        assert [await p.read_summary(k, -1) for k in keys] == summaries
    assert before[0].batches == (StateBatch(0, 4, ACKNOWLEDGED, 1), StateBatch(5, 5, ARCHIVED, 2), StateBatch(6, 6, AVAILABLE, 2))
    assert before[0].start_offset == 0
    assert summaries[0].delivery_complete_count == 4
    assert before[5].error_code == 42  # deleted: never initialized as far as Read is concerned
    assert summaries[5].start_offset == -1 and summaries[5].error_code == 0


async def test_the_state_topic_is_internal_with_kafkas_configs(tmp_path):
    async with running(tmp_path, **{"share.coordinator.state.topic.num.partitions": "4"}) as b:
        topic = b.create_topic("t", 1, {})
        assert b.listed_topic("__share_group_state") is None  # until it holds a record
        assert await b.share_persister.initialize(SharePartitionKey("g", topic.topic_id, 0), 0, -1) == 0
        listed = b.listed_topic("__share_group_state")
        assert listed is not None and listed.partitions == 4
        assert listed.configs["cleanup.policy"] == "delete" and listed.configs["retention.ms"] == "-1"
