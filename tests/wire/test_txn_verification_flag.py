"""``transaction.partition.verification.enable`` on one node (Kafka's TransactionLogConfig, default true):
with it, a transactional batch for a partition never added to the producer's transaction is refused
INVALID_TXN_STATE; without it Kafka's leader skips the verification (ReplicaManager's
maybeStartTransactionVerificationForPartitions) and UnifiedLog asks no guard, so the batch is written."""

from __future__ import annotations

from groupd.broker.app import Broker
from groupd.broker.config import KEYS
from groupd.protocol.errors import ErrorCode
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.wire.test_transactions import begin, produce, txn_batch


def test_kafkas_default_is_on() -> None:
    assert KEYS["transaction.partition.verification.enable"].default == "true"


async def test_a_partition_never_added_is_written_only_without_verification(tmp_path) -> None:  # type: ignore[no-untyped-def]
    for enabled, expected in (("true", (ErrorCode.invalid_txn_state, -1)), ("false", (ErrorCode.none, 0))):
        b = Broker(broker_config(tmp_path / enabled, **{"transaction.partition.verification.enable": enabled}))
        await b.start()
        wire = await WireClient.connect(b.port)
        try:
            b.create_topic("v", 2, {})
            pid, epoch = await begin(wire, "t", {"v": [0]})
            assert await produce(wire, "v", 1, txn_batch(pid, epoch, 0, [b"x"])) == expected
            assert await produce(wire, "v", 0, txn_batch(pid, epoch, 0, [b"y"])) == (ErrorCode.none, 0)
        finally:
            await wire.close()
            await b.stop()
