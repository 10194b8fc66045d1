"""Fencing in a real PostgreSQL: a write of a partition checks the writer's lease epoch in its own
transaction, so an ex-owner's write is refused, never stored and never acknowledged."""

from __future__ import annotations

import asyncio
import threading
import time

import psycopg
import pytest

from groupd.cluster.lease import decide
from groupd.cluster.store import ClusterStore
from groupd.storage import engines
from groupd.storage.batch import build_batch
from groupd.storage.postgresql.connection import Database
from groupd.storage.postgresql.engine import PostgresEngine
from groupd.storage.postgresql.fencing import Fence, Fenced
from tests.cluster.test_store import plaintext

ORDERS = ("orders", 0)


def node_engine(url: str, node: int) -> PostgresEngine:
    engine = engines.build({"storage.engine": "postgresql", "storage.postgresql.url": url})
    assert isinstance(engine, PostgresEngine)
    engine.db.fence = Fence(node)
    engine.open()
    return engine


def take(url: str, node: int, lease_ms: int) -> tuple[ClusterStore, int]:
    s = ClusterStore(Database(url), node, f"i{node}", lease_ms)
    assert s.register(plaintext(9000 + node), None)
    view = s.tick([ORDERS])
    assert view is not None
    held = s.apply(decide(node, view, [ORDERS]))
    return s, held[ORDERS]


def batch(i: int) -> bytes:
    return build_batch([(b"k", b"v%d" % i)], timestamp_ms=1_000 + i)


def test_an_ex_owners_writes_are_refused_and_the_new_owner_sees_only_acknowledged_ones(postgresql_url: str) -> None:
    one = node_engine(postgresql_url, 1)
    _s1, epoch = take(postgresql_url, 1, 300)
    assert epoch == 1
    one.db.fence.hold(ORDERS, epoch)  # type: ignore[union-attr]
    log = one.open_partition(*ORDERS)
    log.append(batch(0))
    log.flush()  # acknowledged: the epoch matched

    async def round_trip() -> None:
        durability = one.durability()
        log.append(batch(1))
        await durability.durable(log)
        await durability.close()

    asyncio.run(round_trip())
    assert log.log_end_offset == 2
    # node 1 pauses past its lease (no heartbeat); node 2 takes the partition over at the next epoch
    time.sleep(0.35)
    two = node_engine(postgresql_url, 2)
    _s2, epoch2 = take(postgresql_url, 2, 5000)
    assert epoch2 == 2
    # node 1 wakes up still believing it holds epoch 1: both write paths are refused by the database
    log.append(batch(2))
    with pytest.raises(Fenced, match="lost the lease of orders-0"):
        log.flush()

    async def late_round() -> None:
        durability = one.durability()
        with pytest.raises(Fenced):
            await durability.durable(log)
        await durability.close()

    asyncio.run(late_round())
    with pytest.raises(Fenced):
        log.delete_records_before(1)
    two.db.fence.hold(ORDERS, epoch2)  # type: ignore[union-attr]
    fresh = two.open_partition(*ORDERS)
    assert (fresh.log_start_offset, fresh.log_end_offset) == (0, 2)  # the two acknowledged batches only
    fresh.append(batch(3))
    fresh.flush()  # the new owner writes at its epoch
    assert two.open_partition(*ORDERS).log_end_offset == 3
    one.close()
    two.close()


def test_a_write_of_a_partition_this_node_holds_no_lease_of_never_reaches_the_database(postgresql_url: str) -> None:
    engine = node_engine(postgresql_url, 1)
    log = engine.open_partition(*ORDERS)
    log.append(batch(0))
    with pytest.raises(Fenced, match="does not own orders-0"):
        log.flush()
    engine.db.close()


def test_a_takeover_under_way_makes_the_write_wait_and_then_refuses_it(postgresql_url: str) -> None:
    one = node_engine(postgresql_url, 1)
    _s1, epoch = take(postgresql_url, 1, 60_000)
    one.db.fence.hold(ORDERS, epoch)  # type: ignore[union-attr]
    log = one.open_partition(*ORDERS)
    log.append(batch(0))
    with psycopg.connect(postgresql_url) as other:  # a takeover's UPDATE, not yet committed
        other.execute("UPDATE groupd_lease SET owner = 2, epoch = epoch + 1 WHERE topic = 'orders'")
        outcome: list[BaseException | None] = []

        def write() -> None:
            try:
                log.flush()
                outcome.append(None)
            except Fenced as exc:
                outcome.append(exc)

        writer = threading.Thread(target=write)
        writer.start()
        writer.join(0.3)
        assert writer.is_alive()  # the check waits for the row the takeover holds
        other.commit()
        writer.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], Fenced)
    one.close()


def test_a_restarted_node_id_takes_its_predecessors_leases_at_a_new_epoch_and_fences_it(postgresql_url: str) -> None:
    old = node_engine(postgresql_url, 1)
    _s, epoch = take(postgresql_url, 1, 300)
    old.db.fence.hold(ORDERS, epoch)  # type: ignore[union-attr]
    log = old.open_partition(*ORDERS)
    log.append(batch(0))
    log.flush()
    time.sleep(0.35)  # the old process stops heartbeating (paused); its registration expires
    new = ClusterStore(Database(postgresql_url), 1, "new-process", 5000)
    assert new.register(plaintext(9001), None)
    view = new.tick([ORDERS])
    assert view is not None
    held = new.apply(decide(1, view, [ORDERS], serving=[]))
    assert held == {ORDERS: epoch + 1}
    log.append(batch(1))
    with pytest.raises(Fenced, match="lost the lease of orders-0"):  # same node id, older epoch
        log.flush()
    old.close()


def test_a_round_refused_for_one_lost_lease_still_commits_the_other_partitions_writes(postgresql_url: str) -> None:
    """A group-commit round carries every partition's waiting batches in one statement; the lease check
    refuses it whole when one lease was lost. The writes of the partitions still held are committed at once
    by the round without the lost ones, and only the lost partition's waiters get Fenced."""
    other = ("orders", 1)
    one = node_engine(postgresql_url, 1)
    s1 = ClusterStore(Database(postgresql_url), 1, "i1", 300)
    assert s1.register(plaintext(9001), None)
    view = s1.tick([ORDERS, other])
    assert view is not None
    held = s1.apply(decide(1, view, [ORDERS, other]))
    for resource in (ORDERS, other):
        one.db.fence.hold(resource, held[resource])  # type: ignore[union-attr]
    lost, kept = one.open_partition(*ORDERS), one.open_partition(*other)
    time.sleep(0.35)  # node 1 pauses past its lease; node 2 takes orders-0 only
    s2 = ClusterStore(Database(postgresql_url), 2, "i2", 5000)
    assert s2.register(plaintext(9002), None)
    view2 = s2.tick([ORDERS])
    assert view2 is not None
    assert ORDERS in s2.apply(decide(2, view2, [ORDERS]))
    with psycopg.connect(postgresql_url) as conn:  # node 1's lease of orders-1 is renewed meanwhile
        conn.execute("UPDATE groupd_lease SET expires_at = now() + interval '1 minute' WHERE partition = 1")

    async def round_of_both() -> list[BaseException | None]:
        durability = one.durability(shared=True)
        lost.append(batch(0))
        kept.append(batch(1))
        outcomes = await asyncio.gather(durability.durable(lost), durability.durable(kept), return_exceptions=True)
        kept.append(batch(2))  # the kept partition takes appends and commits them, round after round
        await durability.durable(kept)
        await durability.close()
        return [o if isinstance(o, BaseException) else None for o in outcomes]

    refused, committed = asyncio.run(round_of_both())
    assert isinstance(refused, Fenced) and "orders-0" in str(refused) and "orders-1" not in str(refused)
    assert committed is None
    assert kept.durable_end == 2 and lost.durable_end == 0
    with psycopg.connect(postgresql_url) as conn:
        rows = conn.execute(
            "SELECT p.partition, count(*) FROM groupd_batch b JOIN groupd_partition p ON p.id = b.pid "
            "GROUP BY p.partition ORDER BY 1"
        ).fetchall()
    assert rows == [(1, 2)]
    one.close()
