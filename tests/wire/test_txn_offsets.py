"""TxnOffsetCommit (api 28) and OffsetFetch require_stable through a real socket; the marker through
GroupCoordinator.complete_transaction, as EndTxn calls it.

Kafka facts: KafkaApis.handleTxnOffsetCommitRequest (unknown topics/partitions answer
UNKNOWN_TOPIC_OR_PARTITION without asking the coordinator; v0-1 get COORDINATOR_NOT_AVAILABLE instead of
COORDINATOR_LOAD_IN_PROGRESS); OffsetMetadataManager.fetchOffsets (UNSTABLE_OFFSET_COMMIT = 88 with
offset -1, leader epoch -1, metadata "")."""

import asyncio

import pytest

from groupd.broker.app import Broker
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.storage.batch import ABORT_MARKER, COMMIT_MARKER, TRANSACTIONAL, control_marker
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.wire.test_groups import start_broker, wait_loaded

# the storage-touching wire tests run on both engines (tests/conftest.py)
pytestmark = pytest.mark.engines

UNSTABLE = 88
# These tests drive the group coordinator's side alone (their producers have no transactional id behind them,
# and the markers come from complete_transaction directly): Kafka skips a TxnOffsetCommit's verification
# with the transaction coordinator when this is false (tests/wire/test_producer_id_mapping.py has it on).
UNVERIFIED = {"transaction.partition.verification.enable": "false"}


def txn_body(
    version, group, topic, partitions, producer_id=4000, epoch=2, member_id="", generation=-1, transactional_id="tx-1"
):
    cls = codec.request_class(28, version)
    t = codec.nested(cls, "TxnOffsetCommitRequestTopic")
    p = codec.nested(cls, "TxnOffsetCommitRequestPartition")
    parts = tuple(
        codec.make(p, partition_index=i, committed_offset=off, committed_leader_epoch=5, committed_metadata=f"m{off}")
        for i, off in partitions
    )
    values = {"transactional_id": transactional_id, "group_id": group, "producer_id": producer_id,
              "producer_epoch": epoch, "topics": (codec.make(t, name=topic, partitions=parts),)}
    if version >= 3:
        values.update(generation_id=generation, member_id=member_id, group_instance_id=None)
    return codec.make(cls, **values)


def stable_fetch_body(group, topic, partitions, version=7, require_stable=True):
    cls = codec.request_class(9, version)
    if version >= 8:
        g = codec.nested(cls, "OffsetFetchRequestGroup")
        t = codec.nested(cls, "OffsetFetchRequestTopics")
        return codec.make(
            cls,
            groups=(
                codec.make(g, group_id=group, topics=(codec.make(t, name=topic, partition_indexes=tuple(partitions)),)),
            ),
            require_stable=require_stable,
        )
    t = codec.nested(cls, "OffsetFetchRequestTopic")
    return codec.make(
        cls, group_id=group, topics=(t(name=topic, partition_indexes=tuple(partitions)),), require_stable=require_stable
    )


def fetched(resp, version=7):
    topics = resp.groups[0].topics if version >= 8 else resp.topics
    return [(p.committed_offset, p.error_code) for p in topics[0].partitions]


def errors(resp):
    return [(t.name, p.partition_index, p.error_code) for t in resp.topics for p in t.partitions]


async def test_api_versions_advertises_txn_offset_commit_0_to_4(tmp_path):
    b = await start_broker(tmp_path, **UNVERIFIED)
    try:
        c = await WireClient.connect(b.port)
        resp = await c.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        spec = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert spec[28] == (0, 4)
        await c.close()
    finally:
        await b.stop()


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
async def test_pending_until_committed_then_fetched(tmp_path, version):
    b = await start_broker(tmp_path, **UNVERIFIED)
    b.create_topic("t", 2, {})
    try:
        c = await WireClient.connect(b.port)
        resp = await c.call(28, version, txn_body(version, "cg", "t", [(0, 10), (1, 11)]))
        assert errors(resp) == [("t", 0, 0), ("t", 1, 0)]
        assert fetched(await c.call(9, 7, stable_fetch_body("cg", "t", [0, 1], require_stable=False))) == [
            (-1, 0),
            (-1, 0),
        ]
        assert fetched(await c.call(9, 7, stable_fetch_body("cg", "t", [0, 1]))) == [(-1, UNSTABLE), (-1, UNSTABLE)]
        assert fetched(await c.call(9, 8, stable_fetch_body("cg", "t", [0, 1], 8)), 8) == [
            (-1, UNSTABLE),
            (-1, UNSTABLE),
        ]
        assert b.coordinator.has_pending_transactional_offsets("cg")
        await b.coordinator.complete_transaction("cg", 4000, 2, True)
        assert not b.coordinator.has_pending_transactional_offsets("cg")
        got = await c.call(9, 7, stable_fetch_body("cg", "t", [0, 1]))
        assert fetched(got) == [(10, 0), (11, 0)]
        assert got.topics[0].partitions[0].metadata == "m10"
        assert got.topics[0].partitions[0].committed_leader_epoch == (5 if version >= 2 else -1)
        await c.close()
    finally:
        await b.stop()


async def test_the_offsets_partition_holds_a_transactional_batch_and_the_marker(tmp_path):
    b = await start_broker(tmp_path, **UNVERIFIED)
    b.create_topic("t", 1, {})
    try:
        c = await WireClient.connect(b.port)
        await c.call(28, 3, txn_body(3, "cg", "t", [(0, 10)], producer_id=77, epoch=4))
        await b.coordinator.complete_transaction("cg", 77, 4, False)
        await b.coordinator.complete_transaction("cg", 77, 5, True)  # nothing pending: a marker all the same
        log = b.coordinator.shard_for("cg").log
        batches = [(h, bytes(batch)) for h, batch in log.batches()]
        assert [(h.attributes & 0x30, h.producer_id, h.producer_epoch) for h, _ in batches] == [
            (TRANSACTIONAL, 77, 4),
            (0x30, 77, 4),
            (0x30, 77, 5),
        ]
        assert [control_marker(raw, h) for h, raw in batches[1:]] == [ABORT_MARKER, COMMIT_MARKER]
        assert fetched(await c.call(9, 7, stable_fetch_body("cg", "t", [0]))) == [(-1, 0)]
        await c.close()
    finally:
        await b.stop()


async def test_a_stable_fetch_waits_for_the_transactional_write_before_it(tmp_path):
    # Kafka 4.x reads require_stable fetches after the writes in flight: the offset is then pending
    b = await start_broker(tmp_path, **UNVERIFIED)
    b.create_topic("t", 1, {})
    try:
        c1, c2 = await WireClient.connect(b.port), await WireClient.connect(b.port)
        for _ in range(5):
            c1.send(28, 3, txn_body(3, "cg", "t", [(0, 10)]))
            got = await c2.call(9, 7, stable_fetch_body("cg", "t", [0]))
            assert fetched(got) == [(-1, UNSTABLE)]
            assert errors(await c1.recv()) == [("t", 0, 0)]
        await c1.close()
        await c2.close()
    finally:
        await b.stop()


async def test_unknown_topics_answered_without_the_coordinator(tmp_path):
    b = Broker(broker_config(tmp_path, **UNVERIFIED))
    gate = asyncio.Event()
    b.coordinator.load_gate = gate
    await b.start()
    b.create_topic("t", 1, {})
    try:
        c = await WireClient.connect(b.port)
        # only unknown partitions: answered at once, though the coordinator is still loading
        resp = await c.call(28, 3, txn_body(3, "cg", "nope", [(0, 1)]))
        assert errors(resp) == [("nope", 0, ErrorCode.unknown_topic_or_partition)]
        resp = await c.call(28, 3, txn_body(3, "cg", "t", [(3, 1)]))
        assert errors(resp) == [("t", 3, ErrorCode.unknown_topic_or_partition)]
        # loading: v2+ hear COORDINATOR_LOAD_IN_PROGRESS, v0-1 COORDINATOR_NOT_AVAILABLE
        resp = await c.call(28, 2, txn_body(2, "cg", "t", [(0, 1)]))
        assert errors(resp) == [("t", 0, ErrorCode.coordinator_load_in_progress)]
        resp = await c.call(28, 1, txn_body(1, "cg", "t", [(0, 1)]))
        assert errors(resp) == [("t", 0, ErrorCode.coordinator_not_available)]
        gate.set()
        await wait_loaded(b)
        await c.close()
    finally:
        await b.stop()


async def test_member_checks_on_the_wire(tmp_path):
    b = await start_broker(tmp_path, **UNVERIFIED)
    b.create_topic("t", 1, {})
    try:
        c = await WireClient.connect(b.port)
        resp = await c.call(28, 3, txn_body(3, "cg", "t", [(0, 1)], member_id="m", generation=1))
        assert errors(resp) == [("t", 0, ErrorCode.illegal_generation)]
        resp = await c.call(28, 3, txn_body(3, "", "t", [(0, 1)]))
        assert errors(resp) == [("t", 0, ErrorCode.invalid_group_id)]
        await c.close()
    finally:
        await b.stop()


async def test_complete_transaction_fails_where_the_group_is_not_ours(tmp_path):
    from groupd.coordinator.service import CoordinatorError

    b = await start_broker(tmp_path, **UNVERIFIED)
    try:
        b.coordinator.owned.discard(b.coordinator.partition_for("cg"))
        with pytest.raises(CoordinatorError) as info:
            await b.coordinator.complete_transaction("cg", 1, 0, True)
        assert info.value.code == ErrorCode.not_coordinator
    finally:
        await b.stop()


async def test_an_older_epoch_is_fenced_on_the_wire_and_in_complete_transaction(tmp_path):
    from groupd.coordinator.service import CoordinatorError

    b = await start_broker(tmp_path, **UNVERIFIED)
    b.create_topic("t", 1, {})
    try:
        c = await WireClient.connect(b.port)
        assert errors(await c.call(28, 3, txn_body(3, "cg", "t", [(0, 1)], producer_id=8, epoch=3))) == [("t", 0, 0)]
        assert errors(await c.call(28, 3, txn_body(3, "cg", "t", [(0, 1)], producer_id=8, epoch=2))) == [
            ("t", 0, ErrorCode.invalid_producer_epoch)
        ]
        with pytest.raises(CoordinatorError) as info:
            await b.coordinator.complete_transaction("cg", 8, 2, True)
        assert info.value.code == ErrorCode.invalid_producer_epoch
        assert b.coordinator.has_pending_transactional_offsets("cg")
        await b.coordinator.complete_transaction("cg", 8, 3, True)
        assert fetched(await c.call(9, 7, stable_fetch_body("cg", "t", [0]))) == [(1, 0)]
        await c.close()
    finally:
        await b.stop()
