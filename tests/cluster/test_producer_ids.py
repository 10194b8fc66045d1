"""Producer-id blocks reserved by several nodes at once over one database: each block is reserved by one
atomic update, so no two nodes hand out one producer id (a read then a write could)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from groupd.broker.dataplane.producers import BLOCK, BLOCK_KEY, ProducerIds
from groupd.storage import engines
from groupd.storage.postgresql.engine import PostgresEngine


def engine(url: str) -> PostgresEngine:
    e = engines.build({"storage.engine": "postgresql", "storage.postgresql.url": url})
    assert isinstance(e, PostgresEngine)
    e.open()
    return e


def test_nodes_reserving_blocks_at_the_same_instant_get_disjoint_blocks(postgresql_url: str) -> None:
    engines_ = [engine(postgresql_url) for _ in range(4)]
    try:
        with ThreadPoolExecutor(4) as pool:
            starts = list(pool.map(lambda i: engines_[i % 4].metadata.reserve(BLOCK_KEY, BLOCK, 0), range(40)))
        assert sorted(starts) == [i * BLOCK for i in range(40)]
        assert engines_[0].metadata.get(BLOCK_KEY) == str(40 * BLOCK).encode()
    finally:
        for e in engines_:
            e.close()


def test_a_reservation_continues_after_the_block_a_single_node_stored_and_never_goes_back(postgresql_url: str) -> None:
    e = engine(postgresql_url)
    try:
        e.metadata.put(BLOCK_KEY, b"5000")  # what one node (ProducerIds without reserve) left behind
        assert e.metadata.reserve(BLOCK_KEY, BLOCK, 0) == 5000
        assert e.metadata.reserve(BLOCK_KEY, BLOCK, 9000) == 9000  # past this node's own ids
        assert e.metadata.get(BLOCK_KEY) == b"10000"
    finally:
        e.close()


def test_two_nodes_producer_ids_never_meet(postgresql_url: str) -> None:
    engines_ = [engine(postgresql_url) for _ in range(2)]
    try:
        ids = [ProducerIds(e.metadata) for e in engines_]
        for p, e in zip(ids, engines_, strict=True):
            p.reserve = e.metadata.reserve
        handed = [p.allocate() for _ in range(BLOCK + 10) for p in ids]
        assert len(set(handed)) == len(handed)
        assert min(handed) == 0 and max(handed) < 4 * BLOCK
    finally:
        for e in engines_:
            e.close()
