"""A partition's leader epoch history across two takeovers (docs/cluster.md "Leader epochs"), through a real
socket: Kafka's leader keeps every (epoch, start offset) of a partition (LeaderEpochFileCache) and answers
OffsetForLeaderEpoch and a Fetch's diverging epoch from it; here every owner stamps its lease epoch on the
batches it writes, and a new owner rebuilds the history from the stored batches' headers, then adds its own
epoch from the log end it found (Kafka's makeLeader).

Node L leads a partition at epoch e1 (3 records), stops; node O takes it at e2 (2 records), then L starts
again and O stops: L takes it at e3 (1 record). L was not there while e2 was written: it still answers
every epoch's end exactly, and ListOffsets names each found offset with its record's epoch."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any
from unittest import mock

import psycopg
import pytest

from groupd.broker import clustering
from groupd.broker.app import Broker
from groupd.broker.dataplane.leader_epochs import EpochCache
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import build_batch
from groupd.storage.errors import StorageError
from tests.cluster.stepped import LONG_LEASE_MS, STATE_SHARDS, TwoNodes, settled, step, stepped, two_started
from tests.cluster.test_broker_nodes import node_config
from tests.cluster.test_leader_epochs_across_nodes import epochs_in_metadata, fetch_error
from tests.harness import WireClient
from tests.wire.test_data_plane import produce_body
from tests.wire.test_leader_epochs import answers, list_offsets_request, ofle_body, producer_batch

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


async def produced(client: WireClient, topic: str, partition: int, n: int, timestamp_ms: int | None = None) -> None:
    """``n`` records in one batch as a producer sends it (at ``timestamp_ms``, else producer_batch's)."""
    batch = producer_batch(n)
    if timestamp_ms is not None:
        batch = bytes(build_batch([(None, b"v%d" % i) for i in range(n)], timestamp_ms=timestamp_ms))
    resp = await client.call(0, 9, produce_body(topic, partition, batch))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none


async def three_written(both: TwoNodes) -> tuple[int, int, int]:
    """Both nodes settled on topic "t"; 3 records produced to its partition 0 at its leader: (leader, the
    leader's epoch, the other node)."""
    await settled(both, "t")
    leader, e1 = (await epochs_in_metadata(both.clients[1], "t"))[0]
    await produced(both.clients[leader], "t", 0, 3)  # offsets 0-2 at e1
    return leader, e1, 3 - leader


def test_offset_for_leader_epoch_after_two_takeovers(tmp_path: Path, postgresql_url: str) -> None:
    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            nodes, clients = both.nodes, both.clients
            p = 0
            leader, e1, other = await three_written(both)
            await both.stop(leader)
            await step(nodes[other])
            owner, e2 = (await epochs_in_metadata(clients[other], "t"))[p]
            assert owner == other and e2 > e1
            await produced(clients[other], "t", p, 2, timestamp_ms=2000)  # offsets 3-4 at e2
            more = {"num.partitions": "4", "share.coordinator.state.topic.num.partitions": str(STATE_SHARDS)}
            again: Broker = stepped(node_config(tmp_path, postgresql_url, leader, LONG_LEASE_MS, **more))
            await again.start()
            back = await WireClient.connect(again.port)
            rebuilt: list[int] = []
            of_batches = EpochCache.of_batches.__func__  # type: ignore[attr-defined]

            def counted(cls: type[EpochCache], batches: Any) -> EpochCache:
                rebuilt.append(1)
                return of_batches(cls, batches)

            try:
                await step(again, nodes[other])
                await both.stop(other)  # hands its leases over
                with mock.patch.object(EpochCache, "of_batches", classmethod(counted)):
                    await step(again)
                    while again.cluster is not None and again.cluster.reopening_any():
                        await asyncio.sleep(0.01)
                # the history O saved when it took the partition, not the batches' headers: a takeover pays the
                # read of every header once per partition, not each time
                assert rebuilt == []
                owner, e3 = (await epochs_in_metadata(back, "t"))[p]
                assert owner == leader and e3 > e2
                await produced(back, "t", p, 1, timestamp_ms=3000)  # offset 5 at e3
                asked = [e1 - 1, e1, e1 + 1, e2 - 1, e2, e2 + 1, e3 - 1, e3, e3 + 1]
                ofle = await back.call(23, 4, ofle_body([("t", [(p, e3, e) for e in asked])]))
                ends = {e: (epoch, end) for e, (_t, _p, error, epoch, end) in zip(asked, answers(ofle), strict=True)}
                assert {answer[2] for answer in answers(ofle)} == {ErrorCode.none}
                assert ends[e1] == (e1, 3)  # ends where e2 starts, though this node never held e2
                assert ends[e2] == (e2, 5)  # ends where e3 starts
                assert ends[e3] == (e3, 6)  # the held epoch: the log end offset
                assert ends[e3 + 1] == (-1, -1)  # newer than any
                assert ends[e1 - 1] == (e1 - 1, 0)  # older than the first: where the first starts
                if e2 - 1 > e1:  # an epoch nobody wrote in: the largest below it
                    assert ends[e2 - 1] == (e1, 3)
                if e3 - 1 > e2:
                    assert ends[e3 - 1] == (e2, 5)
                # ListOffsets names a found offset with its record's epoch (Kafka's epochForOffset), the latest
                # offset with the held epoch
                listed = {}
                for stamp in (EARLIEST, 1003, 1500, 2500, MAX_TIMESTAMP, LATEST):
                    row = (await back.call(2, 7, list_offsets_request("t", p, stamp, e3))).topics[0].partitions[0]
                    listed[stamp] = (row.error_code, row.offset, row.leader_epoch)
                assert listed == {
                    EARLIEST: (ErrorCode.none, 0, e1),
                    1003: (ErrorCode.none, 0, e1),
                    1500: (ErrorCode.none, 3, e2),
                    2500: (ErrorCode.none, 5, e3),
                    MAX_TIMESTAMP: (ErrorCode.none, 5, e3),
                    LATEST: (ErrorCode.none, 6, e3),
                }
                # a consumer that read e2's records up to 5 is consistent; one past e1's end diverges there
                resumed = await fetch_error(back, "t", p, 5, current=e3, last=e2)
                assert (resumed.error_code, resumed.diverging_epoch.epoch) == (ErrorCode.none, -1)
                diverged = await fetch_error(back, "t", p, 4, current=e3, last=e1)
                assert (diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (e1, 3)
                with psycopg.connect(postgresql_url) as conn:
                    kept = conn.execute(
                        "SELECT s.state FROM groupd_snapshot s JOIN groupd_partition p ON p.id = s.pid "
                        "WHERE p.topic = 't' AND p.partition = %s AND s.name = %s",
                        (p, clustering.EPOCH_HISTORY),
                    ).fetchone()
                assert kept is not None and kept[0] == [[e1, 0], [e2, 3], [e3, 5]]  # saved by each taker
            finally:
                await back.close()
                await again.stop()

    asyncio.run(scenario())


def _consume(consumer: Any, n: int, seconds: float = 20) -> tuple[list[tuple[int, bytes]], list[str]]:
    """(offset, value) of the next ``n`` records, and the errors polled meanwhile (bounded in time)."""
    got: list[tuple[int, bytes]] = []
    errors: list[str] = []
    deadline = time.monotonic() + seconds
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error() is not None:
            errors.append(msg.error().name())
        else:
            got.append((msg.offset(), msg.value()))
    return got, errors


def test_librdkafka_validates_its_position_after_a_takeover(tmp_path: Path, postgresql_url: str) -> None:
    """librdkafka (confluent-kafka) validates a consumer's position when the partition's leader epoch rises
    (KIP-320): it asks the new leader OffsetForLeaderEpoch for the epoch of the last record it read. The new
    owner answers that epoch's end (where its own starts), so the consumer carries on from its position:
    nothing read twice, nothing skipped, no truncation reported."""
    from confluent_kafka import Consumer, TopicPartition

    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            nodes, clients = both.nodes, both.clients
            p = 0
            leader, e1, other = await three_written(both)
            asked: list[tuple[int, int, int]] = []  # what node `other` answered OffsetForLeaderEpoch
            metrics = nodes[other].metrics
            assert metrics is not None
            counted = metrics.request_finished

            def seen(api_key: int, started: float, response: Any) -> None:
                if api_key == 23:
                    asked.extend(
                        (e.error_code, e.leader_epoch, e.end_offset) for t in response.topics for e in t.partitions
                    )
                counted(api_key, started, response)

            metrics.request_finished = seen  # type: ignore[method-assign]
            bootstrap = ",".join(f"127.0.0.1:{nodes[n].port}" for n in (1, 2))
            consumer = Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": "v",
                    "enable.auto.commit": False,
                    "topic.metadata.refresh.interval.ms": 500,
                }
            )
            try:
                consumer.assign([TopicPartition("t", p, 0)])
                first, errors = await asyncio.to_thread(_consume, consumer, 3)
                assert [o for o, _v in first] == [0, 1, 2] and errors == []
                await both.stop(leader)
                await step(nodes[other])
                e2 = (await epochs_in_metadata(clients[other], "t"))[p][1]
                await produced(clients[other], "t", p, 2)
                after, errors = await asyncio.to_thread(_consume, consumer, 2)
                assert [o for o, _v in after] == [3, 4]
                assert not {"_LOG_TRUNCATION", "OFFSET_OUT_OF_RANGE", "_AUTO_OFFSET_RESET"} & set(errors)
                assert (ErrorCode.none, e1, 3) in asked and e2 > e1  # it validated e1 at the new leader
            finally:
                await asyncio.to_thread(consumer.close)

    asyncio.run(scenario())


def test_a_history_that_could_not_be_read_at_the_takeover_is_read_when_first_asked(
    tmp_path: Path, postgresql_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The takeover's read of the batches' epochs fails (the database refused it): the partition is served
    all the same; a request that needs its history while it still cannot be read gets KAFKA_STORAGE_ERROR
    (Kafka's answer when a log cannot be read; clients retry), and once it can, exact answers."""
    real = clustering._history

    def refused(lg: Any) -> Any:
        raise StorageError("reading t-0 failed in PostgreSQL: refused by the test")

    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            nodes, clients = both.nodes, both.clients
            leader, e1, other = await three_written(both)
            await both.stop(leader)
            monkeypatch.setattr(clustering, "_history", refused)
            await step(nodes[other])
            assert "t-0: its leader epochs could not be read (read when first asked)" in caplog.text
            co = clients[other]
            e2 = (await epochs_in_metadata(co, "t"))[0][1]
            await produced(co, "t", 0, 2)  # served: the history is not needed to append
            ofle = await co.call(23, 4, ofle_body([("t", [(0, e2, e1)])]))
            assert answers(ofle) == [("t", 0, ErrorCode.kafka_storage_error, -1, -1)]
            assert (await fetch_error(co, "t", 0, 3, current=e2, last=e1)).error_code == ErrorCode.kafka_storage_error
            row = (await co.call(2, 7, list_offsets_request("t", 0, EARLIEST, e2))).topics[0].partitions[0]
            assert row.error_code == ErrorCode.kafka_storage_error
            monkeypatch.setattr(clustering, "_history", real)
            ofle = await co.call(23, 4, ofle_body([("t", [(0, e2, e1), (0, e2, e2)])]))
            assert answers(ofle) == [("t", 0, ErrorCode.none, e1, 3), ("t", 0, ErrorCode.none, e2, 5)]

    asyncio.run(scenario())
