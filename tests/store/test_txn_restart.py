"""Transactional offsets across crashes: pending offsets survive a SIGKILL, a COMMIT after the restart
applies them, an ABORT drops them, and a marker made durable before a crash is honoured after it.

Kafka facts: a TxnOffsetCommit's offsets are pending until the producer's marker, also across a
coordinator load (GroupMetadataManager / CoordinatorRuntime replay of transactional batches and control
batches through OffsetMetadataManager.replay and replayEndTransactionMarker); require_stable fetches of
such partitions answer UNSTABLE_OFFSET_COMMIT (88)."""

import shutil

import pytest

from groupd.broker.app import Broker
from groupd.coordinator.service import CoordinatorError
from tests.conftest import broker_config
from tests.harness import BrokerProcess, WireClient
from tests.wire.test_groups import start_broker, wait_loaded
from tests.wire.test_txn_offsets import UNVERIFIED, errors, fetched, stable_fetch_body, txn_body

UNSTABLE = 88


async def fetch(port, group, require_stable=True):
    c = await WireClient.connect(port)
    try:
        return fetched(await c.call(9, 7, stable_fetch_body(group, "t", [0, 1], require_stable=require_stable)))
    finally:
        await c.close()


@pytest.mark.timeout(120)
async def test_pending_offsets_survive_sigkill_then_commit_and_abort_apply(tmp_path):
    b = await start_broker(tmp_path, **UNVERIFIED)  # the topic, made and kept by an in-process broker
    b.create_topic("t", 2, {})
    await b.stop()

    proc = BrokerProcess(tmp_path / "data", UNVERIFIED)
    proc.start()
    try:
        c = await WireClient.connect(proc.port)
        assert errors(await c.call(28, 3, txn_body(3, "ga", "t", [(0, 10), (1, 11)], producer_id=1, epoch=0))) == [
            ("t", 0, 0),
            ("t", 1, 0),
        ]
        assert errors(await c.call(28, 3, txn_body(3, "gb", "t", [(0, 20)], producer_id=2, epoch=0))) == [("t", 0, 0)]
        await c.close()
        proc.kill()  # acknowledged, no marker yet
        proc.start()
        assert await fetch(proc.port, "ga") == [(-1, UNSTABLE), (-1, UNSTABLE)]
        assert await fetch(proc.port, "ga", require_stable=False) == [(-1, 0), (-1, 0)]
        assert await fetch(proc.port, "gb") == [(-1, UNSTABLE), (-1, 0)]
    finally:
        proc.kill()

    # the transaction coordinator ends them after the restart (EndTxn calls complete_transaction)
    b = await start_broker(tmp_path, **UNVERIFIED)
    try:
        assert b.coordinator.has_pending_transactional_offsets("ga")
        await b.coordinator.complete_transaction("ga", 1, 0, True)
        await b.coordinator.complete_transaction("gb", 2, 0, False)
        assert await fetch(b.port, "ga") == [(10, 0), (11, 0)]
        assert await fetch(b.port, "gb") == [(-1, 0), (-1, 0)]
        # a crash right after the markers were acknowledged: the files as they are now
        shutil.copytree(tmp_path / "data", tmp_path / "crashed" / "data")
    finally:
        await b.stop()
    for root in (tmp_path, tmp_path / "crashed"):
        b = await start_broker(root, **UNVERIFIED)
        try:
            assert await fetch(b.port, "ga") == [(10, 0), (11, 0)]
            assert await fetch(b.port, "gb") == [(-1, 0), (-1, 0)]
            assert not b.coordinator.has_pending_transactional_offsets("ga")
        finally:
            await b.stop()


async def test_a_marker_durable_before_a_crash_is_honoured_after_it(tmp_path):
    b = await start_broker(tmp_path, **UNVERIFIED)
    b.create_topic("t", 2, {})
    try:
        c = await WireClient.connect(b.port)
        await c.call(28, 3, txn_body(3, "g", "t", [(0, 5)], producer_id=9, epoch=0))
        await b.coordinator.complete_transaction("g", 9, 0, True)
        await c.call(28, 3, txn_body(3, "g", "t", [(1, 6)], producer_id=9, epoch=1))  # the next transaction: open
        await c.close()
        shutil.copytree(tmp_path / "data", tmp_path / "crashed" / "data")  # no clean shutdown
    finally:
        await b.stop()
    b = Broker(broker_config(tmp_path / "crashed", **UNVERIFIED))
    await b.start()
    try:
        await wait_loaded(b)
        assert await fetch(b.port, "g") == [(5, 0), (-1, UNSTABLE)]
        with pytest.raises(CoordinatorError) as info:  # the producer's epoch came back with the load
            await b.coordinator.complete_transaction("g", 9, 0, False)
        assert info.value.code == 47
        await b.coordinator.complete_transaction("g", 9, 1, False)
        assert await fetch(b.port, "g") == [(5, 0), (-1, 0)]
    finally:
        await b.stop()
