"""The coordinators' partition counts may not change once their topics hold state.

Kafka facts: ``offsets.topic.num.partitions``, ``transaction.state.log.num.partitions`` and
``share.coordinator.state.topic.num.partitions`` (each default 50) are documented "should not change after
deployment" (GroupCoordinatorConfig, TransactionLogConfig, ShareCoordinatorConfig); a group's or a
transactional id's partition is ``abs(hashCode) % count`` (Utils.abs of String.hashCode), so another count
moves most keys; Kafka itself does not detect a change. groupd records the count at the first start and
refuses another one (a single node moves transactional ids home instead, so only a cluster refuses that
one); the store is the test engine, held in memory.
"""

from __future__ import annotations

import uuid

import pytest

from groupd.broker import coordinator_partitions as C
from groupd.broker.config import ConfigError, default_config
from groupd.coordinator.partitioning import partition_for
from groupd.protocol.topic_names import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_STATE_TOPIC
from groupd.storage.memory import MemoryEngine


def _engine() -> MemoryEngine:
    return MemoryEngine(f"coordinator-partitions-{uuid.uuid4()}")


def test_kafkas_defaults_and_why_a_count_must_stay() -> None:
    config = default_config()
    assert config["offsets.topic.num.partitions"] == config["transaction.state.log.num.partitions"] == 50
    assert config["share.coordinator.state.topic.num.partitions"] == 50
    moved = sum(partition_for(f"group-{i}", 50) != partition_for(f"group-{i}", 51) for i in range(1000))
    assert moved > 900  # one partition more sends nearly every group elsewhere


def test_the_first_start_records_the_counts_and_the_same_counts_start_again() -> None:
    engine = _engine()
    counts = {OFFSETS_TOPIC: 5, TXN_STATE_TOPIC: 3}
    C.check(engine, counts, C.refused(clustered=True))
    assert C.stored_count(engine, OFFSETS_TOPIC) == C.Stored(5, True)
    assert C.stored_count(engine, TXN_STATE_TOPIC) == C.Stored(3, True)
    C.check(engine, counts, C.refused(clustered=True))


@pytest.mark.parametrize("clustered", [False, True])
def test_a_changed_offsets_count_is_refused_naming_both_numbers(clustered: bool) -> None:
    engine = _engine()
    C.check(engine, {OFFSETS_TOPIC: 5, TXN_STATE_TOPIC: 3}, C.refused(clustered))
    for other in (4, 6):
        with pytest.raises(ConfigError) as refused:
            C.check(engine, {OFFSETS_TOPIC: other, TXN_STATE_TOPIC: 3}, C.refused(clustered))
        message = str(refused.value)
        assert f"offsets.topic.num.partitions={other}" in message and "created with 5 partitions" in message
    assert C.stored_count(engine, OFFSETS_TOPIC) == C.Stored(5, True)  # the refused count was not recorded


def test_a_changed_transaction_count_is_refused_only_in_a_cluster() -> None:
    engine = _engine()
    C.check(engine, {OFFSETS_TOPIC: 5, TXN_STATE_TOPIC: 3}, C.refused(clustered=True))
    with pytest.raises(ConfigError, match=r"transaction.state.log.num.partitions=4 .* created with 3 partitions"):
        C.check(engine, {OFFSETS_TOPIC: 5, TXN_STATE_TOPIC: 4}, C.refused(clustered=True))
    C.check(engine, {OFFSETS_TOPIC: 5, TXN_STATE_TOPIC: 4}, C.refused(clustered=False))  # ids move home
    assert C.stored_count(engine, TXN_STATE_TOPIC) == C.Stored(4, True)


def test_a_store_from_before_the_record_is_judged_by_the_partitions_it_holds() -> None:
    engine = _engine()
    for p in range(6):
        engine.open_partition(OFFSETS_TOPIC, p)
    assert C.stored_count(engine, OFFSETS_TOPIC) == C.Stored(6, False)
    with pytest.raises(ConfigError, match=r"at least 6 \(its partition 5 exists\)"):
        C.check(engine, {OFFSETS_TOPIC: 4}, C.refused(clustered=False))  # partition 5 would be left unread
    C.check(engine, {OFFSETS_TOPIC: 8}, C.refused(clustered=False))  # not provably changed: recorded from now on
    assert C.stored_count(engine, OFFSETS_TOPIC) == C.Stored(8, True)


@pytest.mark.parametrize("clustered", [False, True])
def test_a_changed_share_state_count_is_refused_alone_or_in_a_cluster(clustered: bool) -> None:
    engine = _engine()
    C.check(engine, {SHARE_STATE_TOPIC: 3}, C.refused(clustered))
    with pytest.raises(ConfigError, match=r"share.coordinator.state.topic.num.partitions=2 .* created with 3"):
        C.check(engine, {SHARE_STATE_TOPIC: 2}, C.refused(clustered))
