"""A producer id that is not its transactional id's current one, through a real socket, on every request that
names both: INVALID_PRODUCER_ID_MAPPING, as Kafka answers.

Kafka facts (core/.../transaction/TransactionCoordinator.scala; KafkaApis; ReplicaManager;
AddPartitionsToTxnManager; group-coordinator's CoordinatorRuntime.scheduleTransactionalWriteOperation through
CoordinatorPartitionWriter.maybeStartTransactionVerification):
- AddPartitionsToTxn, AddOffsetsToTxn (which adds the group's offsets partition) and EndTxn check the producer
  id before the epoch, so a wrong id with a wrong epoch is INVALID_PRODUCER_ID_MAPPING, never
  PRODUCER_FENCED, and it is not rewritten for old versions (only PRODUCER_FENCED is, below v2);
- a Produce is verified against the transactional id it names, not against whichever id the producer id
  belongs to; a partition not added is TRANSACTION_ABORTABLE to Produce v11+ and INVALID_TXN_STATE below;
- a TxnOffsetCommit is verified against the transaction coordinator before its offsets are written when the
  producer's transaction is not yet open in the group's offsets partition: a wrong producer id is
  INVALID_PRODUCER_ID_MAPPING, an older epoch INVALID_PRODUCER_EPOCH (PRODUCER_FENCED as the leader passes it
  on), an offsets partition never added TRANSACTION_ABORTABLE from v4 and INVALID_TXN_STATE up to v3.
"""

import dataclasses

import pytest

from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from tests.wire.test_data_plane import produce_body
from tests.wire.test_groups import wait_loaded
from tests.wire.test_transactions import add_body, end_body, init_body, partition_errors, txn_batch
from tests.wire.test_txn_offsets import errors, fetched, stable_fetch_body, txn_body

MAPPING = ErrorCode.invalid_producer_id_mapping

pytestmark = pytest.mark.engines


async def _init(wire, tid):
    init = await wire.call(22, 4, init_body(tid))
    assert init.error_code == ErrorCode.none
    return init.producer_id, init.producer_epoch


def _add_offsets(tid, pid, epoch, group, version=3):
    return codec.make(
        codec.request_class(25, version), transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group
    )


async def _produced(wire, tid, topic, partition, batch, version=9):
    body = dataclasses.replace(produce_body(topic, partition, batch, version=version), transactional_id=tid)
    p = (await wire.call(0, version, body)).responses[0].partition_responses[0]
    return p.error_code, p.base_offset


async def test_the_coordinator_answers_a_foreign_producer_id_on_every_request(broker, wire):
    broker.create_topic("m", 2, {})
    a_pid, a_epoch = await _init(wire, "a")
    b_pid, b_epoch = await _init(wire, "b")
    assert a_pid != b_pid
    for version in (0, 3):  # not rewritten for old versions, as PRODUCER_FENCED is
        added = await wire.call(24, version, add_body("a", b_pid, a_epoch, {"m": [0]}, version=version))
        assert set(partition_errors(added).values()) == {MAPPING}
    added = await wire.call(24, 3, add_body("a", b_pid, a_epoch + 7, {"m": [0]}))  # the id is checked first
    assert set(partition_errors(added).values()) == {MAPPING}
    added = await wire.call(24, 3, add_body("nobody", a_pid, a_epoch, {"m": [0]}))  # an id never initialised
    assert set(partition_errors(added).values()) == {MAPPING}
    for version in (0, 3):
        assert (await wire.call(25, version, _add_offsets("a", b_pid, a_epoch, "g", version))).error_code == MAPPING
    # the transaction opened by its own producer id, then ended by another one
    assert set(partition_errors(await wire.call(24, 3, add_body("a", a_pid, a_epoch, {"m": [0]}))).values()) == {0}
    for version in (1, 3):
        ended = await wire.call(26, version, end_body("a", b_pid, a_epoch + 3, True, version=version))
        assert ended.error_code == MAPPING
    ended = await wire.call(26, 3, end_body("a", a_pid, a_epoch + 1, True))
    assert ended.error_code == ErrorCode.producer_fenced  # its own id, another epoch
    assert (await wire.call(26, 3, end_body("a", a_pid, a_epoch, False))).error_code == ErrorCode.none
    assert b_epoch == a_epoch == 0


async def test_a_produce_is_verified_against_the_transactional_id_it_names(broker, wire):
    broker.create_topic("m", 2, {})
    a_pid, a_epoch = await _init(wire, "a")
    b_pid, b_epoch = await _init(wire, "b")
    assert set(partition_errors(await wire.call(24, 3, add_body("b", b_pid, b_epoch, {"m": [0]}))).values()) == {0}
    # b's producer id writing as "a": Kafka asks a's transaction, whose producer id is another
    assert (await _produced(wire, "a", "m", 0, txn_batch(b_pid, b_epoch, 0, [b"x"])))[0] == MAPPING
    # a partition not added to a's transaction: the answer each Produce version knows
    assert set(partition_errors(await wire.call(24, 3, add_body("a", a_pid, a_epoch, {"m": [0]}))).values()) == {0}
    batch = txn_batch(a_pid, a_epoch, 0, [b"y"])
    assert (await _produced(wire, "a", "m", 1, batch, version=10))[0] == ErrorCode.invalid_txn_state
    assert (await _produced(wire, "a", "m", 1, batch, version=11))[0] == ErrorCode.transaction_abortable
    assert await _produced(wire, "a", "m", 0, batch) == (ErrorCode.none, 0)
    assert await _produced(wire, "b", "m", 0, txn_batch(b_pid, b_epoch, 0, [b"z"])) == (ErrorCode.none, 1)


async def test_txn_offset_commit_is_verified_with_the_transaction_coordinator(broker, wire):
    broker.create_topic("t", 2, {})
    await wait_loaded(broker)
    a_pid, a_epoch = await _init(wire, "a")
    b_pid, _ = await _init(wire, "b")

    def commit(pid, epoch, version=3, offset=10):
        return txn_body(version, "g", "t", [(0, offset)], producer_id=pid, epoch=epoch, transactional_id="a")

    # the group's offsets partition not yet added (no AddOffsetsToTxn): refused, nothing pending
    assert errors(await wire.call(28, 3, commit(a_pid, a_epoch))) == [("t", 0, ErrorCode.invalid_txn_state)]
    assert errors(await wire.call(28, 4, commit(a_pid, a_epoch, 4))) == [("t", 0, ErrorCode.transaction_abortable)]
    assert fetched(await wire.call(9, 7, stable_fetch_body("g", "t", [0]))) == [(-1, 0)]
    assert (await wire.call(25, 3, _add_offsets("a", a_pid, a_epoch, "g"))).error_code == ErrorCode.none
    assert errors(await wire.call(28, 3, commit(b_pid, a_epoch))) == [("t", 0, MAPPING)]
    assert errors(await wire.call(28, 3, commit(a_pid, a_epoch + 1))) == [("t", 0, ErrorCode.invalid_producer_epoch)]
    assert errors(await wire.call(28, 3, commit(a_pid, a_epoch))) == [("t", 0, ErrorCode.none)]
    assert fetched(await wire.call(9, 7, stable_fetch_body("g", "t", [0]))) == [(-1, 88)]  # UNSTABLE_OFFSET_COMMIT
    assert (await wire.call(26, 3, end_body("a", a_pid, a_epoch, True))).error_code == ErrorCode.none
    assert fetched(await wire.call(9, 7, stable_fetch_body("g", "t", [0]))) == [(10, 0)]
