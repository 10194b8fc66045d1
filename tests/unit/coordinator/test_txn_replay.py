"""Start-up replay of transactional offsets agrees with the runtime over random histories.

The runtime applies each durable Result in write order (groupd/coordinator/offsets/transactional.py); a load walks the
same bytes with collect_latest + TxnWalk (groupd/storage/batch.py) and replays only what survives. Kafka's
loader (GroupMetadataManager / CoordinatorRuntime replaying control batches through
replayEndTransactionMarker) gives the same state as the runtime did: these tests hold groupd to it,
including a transaction still open at the end (pending after the load, ended afterwards)."""

from __future__ import annotations

import copy
import random

import pytest

from groupd.coordinator import shard
from groupd.coordinator.api import Result
from groupd.coordinator.records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value
from groupd.coordinator.shard import replay_walked
from groupd.storage.batch import (
    TRANSACTIONAL,
    TransactionalBatch,
    TxnWalk,
    build_batch,
    build_control_batch,
    collect_latest,
)

from .harness import Core

KEYS = [("g", "t", 0), ("g", "t", 1), ("h", "t", 0)]
PRODUCERS = [1, 2, 3]


def log_bytes(results: list[Result]) -> list[bytes]:
    """The batches the shell would have appended for these Results."""
    out = []
    for r in results:
        if r.marker is not None:
            pid, epoch, commit = r.marker
            out.append(bytes(build_control_batch(pid, epoch, commit, timestamp_ms=0)))
        elif r.records:
            recs = [(encode_key(k), encode_value(v)) for k, v in r.records]
            if r.producer is not None:
                out.append(
                    build_batch(
                        recs,
                        timestamp_ms=0,
                        producer_id=r.producer[0],
                        producer_epoch=r.producer[1],
                        attributes=TRANSACTIONAL,
                    )
                )
            else:
                out.append(build_batch(recs, timestamp_ms=0))
    return out


def load(batches: list[bytes], chunk: int) -> shard.ShardState:
    state = shard.ShardState(0)
    latest: dict = {}
    txn = TxnWalk()
    for i in range(0, len(batches), chunk):
        collect_latest(b"".join(batches[i : i + chunk]), latest, txn)
    replay_walked(state, latest, txn, 0)
    return state


def committed(state: shard.ShardState) -> dict:
    return {
        (gid, t, p): v.offset
        for gid, g in state.offsets.committed.items()
        for t, ps in g.items()
        for p, v in ps.items()
    }


def pending(state: shard.ShardState) -> dict:
    return {
        (pid, gid, tp): (po.value.offset, po.superseded)
        for pid, by_group in state.offsets.pending_txn.items()
        for gid, offs in by_group.items()
        for tp, po in offs.items()
    }


def random_history(rng: random.Random, n: int, tombstones: bool) -> Core:
    c = Core()
    for value in range(1, n + 1):
        g, t, p = rng.choice(KEYS)
        op = rng.random()
        if op < 0.3:
            c.commit((t, p, value), group=g)
        elif op < 0.4 and tombstones:
            c.apply(Result(records=((OffsetCommitKey(g, t, p), None),)))
        elif op < 0.75:
            c.txn_commit(
                (t, p, value), group=g, producer=rng.choice(PRODUCERS), epoch=rng.choice((0, 0, 0, 1)) + value // 30
            )
        else:
            c.end_txn(producer=rng.choice(PRODUCERS), commit=rng.random() < 0.6, epoch=value // 30)
    return c


def finish_all(state: shard.ShardState, commit: bool) -> dict:
    s = copy.deepcopy(state)
    for pid in PRODUCERS:
        shard.replay_marker(s, pid, commit, 0)
    return committed(s)


@pytest.mark.parametrize("seed", range(300))
def test_load_equals_runtime(seed: int) -> None:
    rng = random.Random(seed)
    tombstones = seed % 3 == 0
    c = random_history(rng, rng.randint(1, 40), tombstones)
    batches = log_bytes(c.results)
    for chunk in (1, 3, len(batches) or 1):
        loaded = load(batches, chunk)
        assert committed(loaded) == committed(c.state)
        assert finish_all(loaded, True) == finish_all(c.state, True)
        assert finish_all(loaded, False) == finish_all(c.state, False)
        if not tombstones:
            # with tombstones a load may drop a pending offset a later tombstone and value outran,
            # where the runtime keeps it superseded: neither is ever applied
            assert pending(loaded) == pending(c.state)
        assert set(loaded.offsets.open_txns) <= set(c.state.offsets.open_txns)
        assert loaded.producer_epochs == c.state.producer_epochs


def test_a_walk_without_txn_refuses_transactional_batches() -> None:
    batch = build_batch(
        [(b"\x00\x01k", b"v")], timestamp_ms=0, producer_id=1, producer_epoch=0, attributes=TRANSACTIONAL
    )
    with pytest.raises(TransactionalBatch):
        collect_latest(batch, {})


def test_markers_never_reach_latest_and_other_control_batches_are_skipped() -> None:
    latest: dict = {}
    control = build_batch([(b"\x00\x00\x00\x05", b"x")], timestamp_ms=0, attributes=0x20)  # not transactional
    marker = bytes(build_control_batch(9, 0, True, timestamp_ms=0))
    assert collect_latest(control + marker, latest, TxnWalk()) == 2
    assert latest == {}


def _gzipped(plain: bytes) -> bytes:
    """The batch with its records gzip-compressed (attributes keep their other bits)."""
    import gzip
    import struct

    from crc32c import crc32c

    from groupd.storage.batch import BATCH_OVERHEAD

    buf = bytearray(plain[:BATCH_OVERHEAD] + gzip.compress(plain[BATCH_OVERHEAD:]))
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">h", buf, 21, struct.unpack_from(">h", buf, 21)[0] | 1)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


@pytest.mark.parametrize("compress", [False, True])
def test_repeated_keys_and_tombstones_inside_one_transactional_batch(compress: bool) -> None:
    # a transactional tombstone acts at once (Kafka's replay: a null value is a tombstone whatever the
    # producer); the last write of a key in the batch is the pending one
    k = encode_key(OffsetCommitKey("g", "t", 0))
    j = encode_key(OffsetCommitKey("g", "t", 1))
    v = [encode_value(OffsetCommitValue(i, "", 0)) for i in range(4)]
    wrap = _gzipped if compress else bytes
    log = build_batch([(k, v[0]), (j, v[0])], timestamp_ms=0) + wrap(
        build_batch(
            [(k, None), (k, v[1]), (j, v[2]), (j, v[3])],
            timestamp_ms=0,
            producer_id=5,
            producer_epoch=0,
            attributes=TRANSACTIONAL,
        )
    )
    state = load([log], 1)
    assert committed(state) == {("g", "t", 1): 0}  # the tombstone removed partition 0's offset
    assert pending(state) == {(5, "g", ("t", 0)): (1, False), (5, "g", ("t", 1)): (3, False)}
    marker = wrap(bytes(build_control_batch(5, 0, True, timestamp_ms=0)))
    assert committed(load([log, marker], 1)) == {("g", "t", 0): 1, ("g", "t", 1): 3}
