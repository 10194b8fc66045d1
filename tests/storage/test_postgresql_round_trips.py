"""Round trips to PostgreSQL, counted by a relay (tests/pg_relay.py): a group-commit round is one (its
prepared INSERT, autocommit), in a cluster too (the lease check is inside the statement), after the one
that prepares the statement on a new connection; a coordinator's set of partitions opens in two, however
many it holds; a read is one per statement whose rows it reads (no BEGIN nor COMMIT); and a transaction
that fails anywhere leaves nothing behind and the connection ready for the next one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import psycopg
import pytest

from groupd.cluster.lease import decide
from groupd.cluster.store import ClusterStore
from groupd.storage import engines
from groupd.storage.batch import build_batch, iter_batches
from groupd.storage.engine import LogConfig
from groupd.storage.errors import StorageError
from groupd.storage.postgresql import log as pg_log
from groupd.storage.postgresql.connection import Database
from groupd.storage.postgresql.engine import PostgresEngine
from groupd.storage.postgresql.fencing import Fence
from groupd.storage.postgresql.log import PgPartitionLog
from groupd.storage.postgresql.sets import PgPartitionSet
from tests.cluster.test_store import plaintext
from tests.pg_relay import Relay
from tests.postgresql_server import PostgresServer


@pytest.fixture
def relay(postgresql_server: PostgresServer) -> Iterator[Relay]:
    r = Relay(postgresql_server.port)
    yield r
    r.close()


def engine_via(relay: Relay, url: str) -> PostgresEngine:
    engine = engines.build({"storage.engine": "postgresql", "storage.postgresql.url": relay.url(url)})
    assert isinstance(engine, PostgresEngine)
    engine.open()
    return engine


def batch(i: int) -> bytes:
    return build_batch([(b"k%d" % i, b"v%d" % i)], timestamp_ms=1_000 + i)


def stored(url: str) -> list[tuple[str, int, int]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT p.topic, p.partition, b.base_offset FROM groupd_batch b JOIN groupd_partition p ON p.id = b.pid "
            "ORDER BY 1, 2, 3"
        ).fetchall()
    return [(t, int(p), int(o)) for t, p, o in rows]


async def one_round(engine: PostgresEngine, logs: list[PgPartitionLog]) -> None:
    """Every log appends a batch and waits for one shared round to commit them all."""
    durability = engine.durability(shared=True)
    for i, log in enumerate(logs):
        log.append(batch(i))
    await asyncio.gather(*(durability.durable(log) for log in logs))
    await durability.close()


def test_a_group_commit_round_over_three_partitions_is_one_round_trip(relay: Relay, postgresql_url: str) -> None:
    engine = engine_via(relay, postgresql_url)
    logs = [engine.open_partition("orders", p) for p in range(3)]
    before = relay.counted()
    asyncio.run(one_round(engine, logs))
    assert relay.counted() - before == 2  # the first round on the connection prepares its statement first
    assert stored(postgresql_url) == [("orders", 0, 0), ("orders", 1, 0), ("orders", 2, 0)]
    before = relay.counted()
    asyncio.run(one_round(engine, logs))
    assert relay.counted() - before == 1
    assert stored(postgresql_url) == [("orders", p, o) for p in range(3) for o in range(2)]
    before = relay.counted()
    logs[1].append(batch(9))
    logs[1].flush()  # a flush on the caller's thread: one round trip too
    assert relay.counted() - before == 1
    assert ("orders", 1, 2) in stored(postgresql_url)
    engine.close()


def test_in_a_cluster_the_lease_check_adds_no_round_trip_in_the_same_transaction(
    relay: Relay, postgresql_url: str
) -> None:
    engine = engine_via(relay, postgresql_url)
    engine.db.fence = Fence(1)
    store = ClusterStore(Database(postgresql_url), 1, "i1", 5_000)
    assert store.register(plaintext(9001), None)
    view = store.tick([("orders", 0)])
    assert view is not None
    engine.db.fence.hold(("orders", 0), store.apply(decide(1, view, [("orders", 0)]))[("orders", 0)])
    log = engine.open_partition("orders", 0)
    asyncio.run(one_round(engine, [log]))  # prepares the fenced statement on the connection
    before = relay.counted()
    asyncio.run(one_round(engine, [log]))
    assert relay.counted() - before == 1  # the check (groupd_fence raises, nothing to read) and the INSERT
    assert stored(postgresql_url) == [("orders", 0, 0), ("orders", 0, 1)]
    engine.close()


def test_a_statement_that_fails_rolls_back_everything_before_it_and_the_next_transaction_runs(
    postgresql_url: str,
) -> None:
    db = Database(postgresql_url)
    engine = engines.build({"storage.engine": "postgresql", "storage.postgresql.url": postgresql_url})
    assert isinstance(engine, PostgresEngine)
    log = engine.open_partition("orders", 0)

    def insert_then_fail(conn: psycopg.Connection) -> None:
        conn.execute("INSERT INTO groupd_metadata (key, value) VALUES ('kept?', 'x')")
        conn.execute(
            "INSERT INTO groupd_batch (pid, base_offset, last_offset, max_timestamp, size, data) "
            "VALUES (-1, 0, 0, 0, 1, 'x')"
        )  # no partition -1: a foreign key violation, not read back

    with pytest.raises(StorageError, match="a failing write failed in PostgreSQL: insert or update on table"):
        db.run(insert_then_fail, "a failing write")
    conn = db.connection()
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE

    def then_raise(conn: psycopg.Connection) -> None:
        conn.execute("INSERT INTO groupd_metadata (key, value) VALUES ('kept?', 'y')")
        raise ValueError("the work's own error")

    with pytest.raises(ValueError, match="the work's own error"):
        db.run(then_raise, "a write")
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert db.run(lambda c: c.execute("SELECT count(*) FROM groupd_metadata").fetchone(), "counting") == (0,)
    log.append(batch(0))
    log.flush()  # the engine's own connection was never disturbed; the failed one serves again too
    assert stored(postgresql_url) == [("orders", 0, 0)]
    assert db.run(lambda c: c.execute("SELECT 1").fetchone(), "a read") == (1,)
    engine.close()
    db.close()


def test_a_coordinators_set_of_fifty_partitions_opens_in_two_round_trips_made_or_found(
    relay: Relay, postgresql_url: str
) -> None:
    """The set's rows, sizes, ends and newest batches in one transaction: BEGIN and three statements whose
    rows are read together, then COMMIT; the same at a restart, with what the partitions hold."""
    engine = engine_via(relay, postgresql_url)
    before = relay.counted()
    made = engine.open_partition_set("__consumer_offsets", range(50), LogConfig(), engine.durability())
    assert relay.counted() - before == 2
    assert isinstance(made, PgPartitionSet) and sorted(made.logs) == list(range(50))
    for p in (0, 7, 49):
        for i in range(p % 5 + 1):
            made.logs[p].append(batch(i))
        made.logs[p].flush()
    made.logs[7].delete_records_before(1)
    made.close()
    engine.close()

    again = engine_via(relay, postgresql_url)
    before = relay.counted()
    found = again.open_partition_set("__consumer_offsets", range(50), LogConfig(), again.durability())
    assert relay.counted() - before == 2
    assert isinstance(found, PgPartitionSet)
    ends = {p: (lg.log_start_offset, lg.log_end_offset) for p, lg in found.logs.items() if lg.log_end_offset}
    assert ends == {0: (0, 1), 7: (1, 3), 49: (0, 5)}
    assert found.logs[49].size_bytes == sum(len(batch(i)) for i in range(5))
    assert found.logs[7].size_bytes == sum(len(batch(i)) for i in range(1, 3))
    read = found.logs[49].read(0, 1 << 20)
    assert [h.base_offset for _pos, h in iter_batches(read)] == [0, 1, 2, 3, 4]
    assert len(stored(postgresql_url)) == 1 + 2 + 5
    found.close()
    again.close()


def test_reads_send_no_begin_nor_commit_one_round_trip_per_statement_read(
    relay: Relay, postgresql_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_log, "TAIL_CACHE_BYTES", 1)  # every read below the newest batch is a range scan
    engine = engine_via(relay, postgresql_url)
    engine.metadata.put("topics", b"{}")
    log = engine.open_partition("orders", 0)
    for i in range(5):
        log.append(batch(i))
    log.flush()
    before = relay.counted()
    assert engine.metadata.get("topics") == b"{}"
    assert relay.counted() - before == 1
    before = relay.counted()
    assert [h.base_offset for _pos, h in iter_batches(log.read(1, 1 << 20))][:1] == [1]
    assert relay.counted() - before == 1  # the batches that fit picked by their sizes and read in one statement
    engine.close()


def test_the_relay_holds_each_answer_back_once_as_a_network_would(postgresql_server: PostgresServer) -> None:
    """bench/engines.py --db-latency-ms: every round trip costs the delay once, however long the answer."""
    slow = Relay(postgresql_server.port, delay_s=0.05)
    db = Database(slow.url(postgresql_server.admin_url))
    db.read(lambda conn: conn.execute("SELECT 1").fetchone(), "connecting")
    began = time.perf_counter()
    rows = db.read(
        lambda conn: conn.execute("SELECT repeat('x', 300000) FROM generate_series(1, 3)").fetchall(), "a read"
    )
    took = time.perf_counter() - began
    assert len(rows) == 3 and 0.05 <= took < 0.5  # ~900 KB: 14 chunks or more (0.7 s if each waited), one delay
    db.close()
    slow.close()
