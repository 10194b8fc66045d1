"""The transaction coordinator's core: one transactional id's state and its transitions, as Kafka's
TransactionCoordinator and TransactionMetadata define them (transactions v1: the client never bumps
its epoch itself).

Plain data and synchronous functions, no I/O and no clock: the shell (``coordinator/transactions/service.py``)
persists each new state before acting on it, writes the markers, and runs the timers. Every function
returns a Kafka error code, or the state to persist next.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from groupd.coordinator.partitioning import partition_for
from groupd.protocol.errors import ErrorCode

EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, PREPARE_EPOCH_FENCE = range(8)
STATE_NAMES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)
NO_PRODUCER_ID = -1
NO_EPOCH = -1
EPOCH_MAX = 32767  # Short.MaxValue: an epoch at MAX - 1 is exhausted, so a fence can always bump once more

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Txn:
    """What Kafka keeps per transactional id (TransactionMetadata), plus ``groups``: the consumer groups
    whose offsets the transaction carries (AddOffsetsToTxn), which Kafka leaves to the group
    coordinator's own bookkeeping of its offsets partition."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_epoch: int = NO_EPOCH
    groups: frozenset[str] = frozenset()

    @property
    def state_name(self) -> str:
        return STATE_NAMES[self.state]

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= EPOCH_MAX - 1

    @property
    def completing(self) -> bool:
        return self.state in (PREPARE_COMMIT, PREPARE_ABORT)


@dataclass(frozen=True, slots=True)
class Next:
    """A transition: ``txn`` to persist; then, for ``fence``, abort the open transaction first."""

    txn: Txn
    fence: bool = False


def validate_timeout(timeout_ms: int, max_timeout_ms: int) -> bool:
    return 0 < timeout_ms <= max_timeout_ms


def init_producer_id(
    txn: Txn | None,
    transactional_id: str,
    timeout_ms: int,
    expected: tuple[int, int] | None,
    now: int,
    allocate: Callable[[], int],
    max_timeout_ms: int,
) -> ErrorCode | Next:
    """InitProducerId with a transactional id (``expected``: the producer id and epoch a v3+ client
    sends to keep its id after an error, KIP-360; None when it sends -1/-1)."""
    if not transactional_id:
        return ErrorCode.invalid_request
    if not validate_timeout(timeout_ms, max_timeout_ms):
        return ErrorCode.invalid_transaction_timeout
    if txn is None:
        txn = Txn(transactional_id, allocate(), NO_EPOCH, timeout_ms, EMPTY, last_update_ms=now)
    if expected is not None and not (
        txn.producer_epoch == NO_EPOCH or expected[0] == txn.producer_id
        # a retry after a rotation the client never heard of (Kafka keeps the previous id for this)
    ):
        return ErrorCode.producer_fenced
    if txn.completing:
        return ErrorCode.concurrent_transactions
    if txn.state == ONGOING:
        # abort the open transaction under a bumped epoch, then let the client retry
        return Next(fence_epoch(txn), fence=True)
    # Empty, CompleteCommit, CompleteAbort
    if txn.epoch_exhausted and (expected is None or expected[1] == txn.producer_epoch):
        last = txn.producer_epoch if expected is not None else NO_EPOCH
        return Next(
            replace(
                txn,
                producer_id=allocate(),
                producer_epoch=0,
                last_producer_epoch=last,
                timeout_ms=timeout_ms,
                state=EMPTY,
                partitions=frozenset(),
                groups=frozenset(),
                start_ms=-1,
                last_update_ms=now,
            )
        )
    bumped = txn.producer_epoch + 1
    if expected is None:
        epoch, last = bumped, NO_EPOCH
    elif txn.producer_epoch == NO_EPOCH or expected[1] == txn.producer_epoch:
        epoch, last = bumped, txn.producer_epoch
    elif expected[1] == txn.last_producer_epoch:
        epoch, last = txn.producer_epoch, txn.last_producer_epoch  # a retry of a call that succeeded
    else:
        return ErrorCode.producer_fenced
    return Next(
        replace(
            txn,
            producer_epoch=epoch,
            last_producer_epoch=last,
            timeout_ms=timeout_ms,
            state=EMPTY,
            partitions=frozenset(),
            groups=frozenset(),
            start_ms=-1,
            last_update_ms=now,
        )
    )


def _check_producer(txn: Txn | None, producer_id: int, producer_epoch: int) -> ErrorCode:
    if txn is None or txn.producer_id != producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if txn.producer_epoch != producer_epoch:
        return ErrorCode.producer_fenced
    if txn.completing:
        return ErrorCode.concurrent_transactions
    return ErrorCode.none


def while_pending(txn: Txn | None, producer_id: int, producer_epoch: int) -> ErrorCode:
    """AddPartitionsToTxn or EndTxn finding a transition of its id under way: Kafka checks the producer
    id and epoch before the pending transition, so a fenced producer (its transaction aborted for a
    timeout, say) hears PRODUCER_FENCED, not CONCURRENT_TRANSACTIONS, which it would retry."""
    error = _check_producer(txn, producer_id, producer_epoch)
    return (
        error
        if error in (ErrorCode.invalid_producer_id_mapping, ErrorCode.producer_fenced)
        else ErrorCode.concurrent_transactions
    )


def add_partitions(
    txn: Txn | None,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
    now: int,
    groups: Iterable[str] = (),
) -> ErrorCode | Next:
    """AddPartitionsToTxn (and AddOffsetsToTxn, whose partition is the group's offsets partition):
    the transaction is Ongoing from the first one on. ``ErrorCode.none`` when nothing changes."""
    error = _check_producer(txn, producer_id, producer_epoch)
    if error:
        return error
    assert txn is not None
    wanted = frozenset(partitions)
    new_groups = frozenset(groups)
    if txn.state == ONGOING and wanted <= txn.partitions and new_groups <= txn.groups:
        return ErrorCode.none
    start = now if txn.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT) else txn.start_ms
    return Next(
        replace(
            txn,
            state=ONGOING,
            partitions=txn.partitions | wanted,
            groups=txn.groups | new_groups,
            start_ms=start,
            last_update_ms=now,
        )
    )


def verify_partition(txn: Txn | None, producer_id: int, producer_epoch: int, tp: TopicPartition) -> ErrorCode:
    """May this producer write transactional data to ``tp`` now (Kafka's produce-time verification)?"""
    error = _check_producer(txn, producer_id, producer_epoch)
    if error:
        return error
    assert txn is not None
    if txn.state != ONGOING or tp not in txn.partitions:
        return ErrorCode.invalid_txn_state
    return ErrorCode.none


def end_txn(txn: Txn | None, producer_id: int, producer_epoch: int, commit: bool, now: int) -> ErrorCode | Next:
    """EndTxn from the client: Ongoing -> PrepareCommit/PrepareAbort; a retry of a finished end is
    answered without error, the opposite end of a finished one is INVALID_TXN_STATE."""
    if txn is None or txn.producer_id != producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if producer_epoch != txn.producer_epoch:
        return ErrorCode.producer_fenced
    state = txn.state
    if state == ONGOING:
        return Next(replace(txn, state=PREPARE_COMMIT if commit else PREPARE_ABORT, last_update_ms=now))
    if state == COMPLETE_COMMIT:
        return ErrorCode.none if commit else ErrorCode.invalid_txn_state
    if state == COMPLETE_ABORT:
        return ErrorCode.invalid_txn_state if commit else ErrorCode.none
    if state == PREPARE_COMMIT:
        return ErrorCode.concurrent_transactions if commit else ErrorCode.invalid_txn_state
    if state == PREPARE_ABORT:
        return ErrorCode.invalid_txn_state if commit else ErrorCode.concurrent_transactions
    return ErrorCode.invalid_txn_state  # Empty: nothing to end


def fence_epoch(txn: Txn) -> Txn:
    """Abort an open transaction under a bumped epoch (a timeout, or a new producer's InitProducerId):
    the old producer's next request is fenced."""
    epoch = txn.producer_epoch + 1 if txn.producer_epoch < EPOCH_MAX else txn.producer_epoch
    return replace(txn, producer_epoch=epoch, last_producer_epoch=NO_EPOCH, state=PREPARE_ABORT)


def complete(txn: Txn, now: int) -> Txn:
    """Markers written: PrepareCommit -> CompleteCommit, PrepareAbort -> CompleteAbort."""
    state = COMPLETE_COMMIT if txn.state == PREPARE_COMMIT else COMPLETE_ABORT
    return replace(
        txn,
        state=state,
        partitions=frozenset(),
        groups=frozenset(),
        last_update_ms=now,
        last_producer_epoch=txn.producer_epoch,
    )


def timed_out(txns: Iterable[Txn], now: int) -> list[Txn]:
    """Open transactions older than their timeout: the coordinator aborts them."""
    return [t for t in txns if t.state == ONGOING and t.start_ms >= 0 and now > t.start_ms + t.timeout_ms]


def expired(txns: Iterable[Txn], now: int, expiration_ms: int) -> list[Txn]:
    """Transactional ids idle past ``transactional.id.expiration.ms`` with nothing open: forgotten."""
    return [
        t
        for t in txns
        if t.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT) and now - t.last_update_ms >= expiration_ms
    ]


# ------------------------------------------------------------ Kafka's __transaction_state records

_KEY = struct.Struct(">hh")  # version 0, string length
_VALUE_HEAD = struct.Struct(">hqhib")  # version 0, producer id, epoch, timeout, status
_TIMES = struct.Struct(">qq")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return _KEY.pack(0, len(raw)) + raw


def decode_key(key: bytes) -> str:
    version, n = _KEY.unpack_from(key, 0)
    if version != 0:
        raise ValueError(f"unknown transaction log key version {version}")
    return key[4 : 4 + n].decode()


def encode_value(txn: Txn) -> bytes:
    """TransactionLogValue v0: producer id, epoch, timeout, status, partitions by topic, last update and
    start times. (groupd's ``groups`` are not in Kafka's record; after a restart they are found from
    the offsets store's pending transactional offsets.)"""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(txn.partitions):
        by_topic.setdefault(topic, []).append(partition)
    parts = [
        _VALUE_HEAD.pack(0, txn.producer_id, txn.producer_epoch, txn.timeout_ms, txn.state),
        _I32.pack(len(by_topic)),
    ]
    for topic, ids in by_topic.items():
        raw = topic.encode()
        parts.append(_I16.pack(len(raw)) + raw + _I32.pack(len(ids)) + struct.pack(f">{len(ids)}i", *ids))
    parts.append(_TIMES.pack(txn.last_update_ms, txn.start_ms))
    return b"".join(parts)


def decode_value(transactional_id: str, value: bytes) -> Txn:
    """A v0 value (what groupd writes); v1, Kafka's flexible version, is not read."""
    version, pid, epoch, timeout, status = _VALUE_HEAD.unpack_from(value, 0)
    if version != 0:
        raise ValueError(f"unsupported transaction log value version {version}")
    pos = _VALUE_HEAD.size
    (count,) = _I32.unpack_from(value, pos)
    pos += 4
    partitions: set[TopicPartition] = set()
    for _ in range(max(count, 0)):
        (n,) = _I16.unpack_from(value, pos)
        topic = value[pos + 2 : pos + 2 + n].decode()
        pos += 2 + n
        (k,) = _I32.unpack_from(value, pos)
        pos += 4
        for p in struct.unpack_from(f">{k}i", value, pos):
            partitions.add((topic, p))
        pos += 4 * k
    last_update, start = _TIMES.unpack_from(value, pos)
    return Txn(transactional_id, pid, epoch, timeout, status, frozenset(partitions), start, last_update)


# ------------------------------------------------------------ the partitions of __transaction_state


@dataclass(slots=True)
class Layout:
    """What start-up finds in the ``__transaction_state`` partitions, and what to write to put every
    transactional id in its own partition (``partition_for(id, partitions)``, Kafka's placement)."""

    txns: dict[str, Txn] = field(default_factory=dict)  # every id's current state
    moves: dict[int, list[tuple[bytes, bytes | None]]] = field(
        default_factory=dict
    )  # home partition -> records to write there
    clears: dict[int, list[bytes]] = field(
        default_factory=dict
    )  # partition -> keys to tombstone, once the moves are durable
    skipped: list[str] = field(default_factory=list)  # unreadable records, why


def settle_layout(found: Mapping[int, Mapping[bytes, bytes | None]], partitions: int) -> Layout:
    """``found``: each stored partition's latest value per key (None: a tombstone).

    A record in the id's own partition is its state: only the shell writes there, and only after the
    id was settled. Otherwise (the one partition of earlier groupd versions, or a changed
    ``transaction.state.log.num.partitions``) the latest update found elsewhere is, and it moves home.
    Every copy elsewhere is cleared, after the move, so that none revives once the home record is
    compacted away; a stop in between is settled the same way at the next start."""
    out = Layout()
    home_state: dict[str, Txn | None] = {}
    elsewhere: dict[str, list[tuple[int, bytes, Txn]]] = {}
    for p, latest in sorted(found.items()):
        for key, value in latest.items():
            try:
                tid = decode_key(key)
                txn = None if value is None else decode_value(tid, value)
            except (ValueError, UnicodeDecodeError, IndexError, struct.error) as exc:
                out.skipped.append(f"{p}: {exc}")
                continue
            if partition_for(tid, partitions) == p:
                home_state[tid] = txn
            elif txn is not None:
                elsewhere.setdefault(tid, []).append((p, key, txn))
    for tid, copies in elsewhere.items():
        for p, key, _ in copies:
            out.clears.setdefault(p, []).append(key)
        if tid not in home_state:
            p, key, txn = max(copies, key=lambda c: (c[2].last_update_ms, c[2].producer_epoch))
            out.moves.setdefault(partition_for(tid, partitions), []).append((key, found[p][key]))
            out.txns[tid] = txn
    out.txns.update((tid, txn) for tid, txn in home_state.items() if txn is not None)
    return out
