"""The share-partition leader's way to the share coordinator in a cluster (Kafka's DefaultStatePersister
over PersisterStateManager): the Persister a node's share partitions and share groups use.

A share-partition's state lives in the ``__share_group_state`` partition of its key; the node holding that
partition's lease is its share coordinator. When it is this node, the call goes to the local coordinator;
otherwise it is the coordinator's RPC (ReadShareGroupState, WriteShareGroupState, ...) to the holder, over
the connection this node keeps to it (peers.py), batched with the other calls of that RPC to that node as
Kafka batches them (share_state_batches.py). Either way the answer means the change is durable where
it went: the coordinator answers once its record is committed in the database.

Retries are Kafka's: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS and
UNKNOWN_TOPIC_OR_PARTITION in a partition's result, or a peer that cannot be reached (NETWORK_EXCEPTION)
or does not answer in time (REQUEST_TIMED_OUT), are tried again, the owner looked up afresh each time, up
to five attempts, after an exponential back-off from 1 s (base 2, at most 30 s, jitter 0.2); the last
error is the answer. A lease moving between nodes is such an error, so a write made during a takeover
lands at the new owner once it has loaded the partition.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kio.schema.delete_share_group_state.v0.request import PartitionData as DeletePartition
from kio.schema.initialize_share_group_state.v0.request import PartitionData as InitializePartition
from kio.schema.read_share_group_state.v0.request import PartitionData as ReadPartition
from kio.schema.read_share_group_state_summary.v1.request import PartitionData as SummaryPartition
from kio.schema.write_share_group_state.v1.request import PartitionData as WritePartition
from kio.schema.write_share_group_state.v1.request import StateBatch as WireBatch
from kio.static.primitive import i8, i16, i32, i64

from groupd.cluster.peers import Peers
from groupd.cluster.share_state_batches import (
    DELETE,
    INITIALIZE,
    READ,
    SUMMARY,
    WRITE,
    PartitionAnswer,
    ShareStateBatches,
)
from groupd.coordinator.share_state.keys import coordinator_key
from groupd.coordinator.share_state.persister import (
    Persister,
    ReadStateResult,
    ReadSummaryResult,
    SharePartitionKey,
    StateBatch,
)
from groupd.protocol.errors import ErrorCode

log = logging.getLogger("groupd.cluster")

T = TypeVar("T")

# PersisterStateManager: REQUEST_BACKOFF_MS, REQUEST_BACKOFF_MAX_MS, MAX_FIND_COORD_ATTEMPTS, and the client
# retry back-off's exponent base and jitter (CommonClientConfigs.RETRY_BACKOFF_EXP_BASE, RETRY_BACKOFF_JITTER)
BACKOFF_MS = 1_000
BACKOFF_MAX_MS = 30_000
MAX_ATTEMPTS = 5
BACKOFF_BASE = 2
BACKOFF_JITTER = 0.2

RETRIABLE = frozenset(
    (
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.network_exception,
        ErrorCode.request_timed_out,
    )
)


def backoff_ms(attempt: int, jitter: float = BACKOFF_JITTER, rng: Callable[[], float] = random.random) -> float:
    """The wait after the ``attempt``-th failed attempt (1, 2, ...): 1 s, 2 s, 4 s ... up to 30 s, +-20 %."""
    term = BACKOFF_MS * BACKOFF_BASE ** (attempt - 1)
    factor = 1.0 + jitter * (2 * rng() - 1) if jitter > 0 else 1.0
    return min(term * factor, BACKOFF_MAX_MS)


class ShareStateClient:
    """A Persister (coordinator/share_state/persister.py) that finds each key's share coordinator.

    ``owner(p)`` is the node holding ``__share_group_state-<p>`` as this node knows it (None: nobody),
    ``local`` this node's share coordinator, ``peers`` the connections to the others."""

    def __init__(
        self,
        node_id: int,
        local: Persister,
        partition_for: Callable[[SharePartitionKey], int],
        owner: Callable[[int], int | None],
        peers: Peers,
        *,
        attempts: int = MAX_ATTEMPTS,
        wait: Callable[[int], float] = backoff_ms,
    ) -> None:
        self.node_id = node_id
        self.local = local
        self.partition_for = partition_for
        self.owner = owner
        self.peers = peers
        self.attempts = attempts
        self.wait = wait
        self.batches = ShareStateBatches(peers)  # concurrent calls to one node go in one request
        self.remote_calls = 0  # calls that went to other nodes (tests, metrics); batches.requests_sent: requests
        self.retries = 0

    async def _retried(
        self,
        key: SharePartitionKey,
        what: str,
        here: Callable[[], Awaitable[T]],
        there: Callable[[int], Awaitable[T]],
        failed: Callable[[int], T],
        code_of: Callable[[T], int],
    ) -> T:
        result = failed(ErrorCode.coordinator_not_available)
        for attempt in range(1, self.attempts + 1):
            owner = self.owner(self.partition_for(key))
            if owner == self.node_id:
                result = await here()
            elif owner is None:
                result = failed(ErrorCode.coordinator_not_available)
            else:
                self.remote_calls += 1
                result = await there(owner)
            code = code_of(result)
            if code not in RETRIABLE or attempt == self.attempts:
                if code != ErrorCode.none:
                    log.info("%s of %s answered %s", what, coordinator_key(key), ErrorCode(code).name)
                return result
            self.retries += 1
            await asyncio.sleep(self.wait(attempt) / 1000)
        return result

    # ------------------------------------------------------------ the Persister

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> int:
        async def there(node: int) -> int:
            p = InitializePartition(
                partition=i32(key.partition), state_epoch=i32(state_epoch), start_offset=i64(start_offset)
            )
            return _code(await self.batches.call(node, INITIALIZE, key, p))

        return await self._retried(
            key,
            "InitializeShareGroupState",
            lambda: self.local.initialize(key, state_epoch, start_offset),
            there,
            int,
            int,
        )

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ReadStateResult:
        async def there(node: int) -> ReadStateResult:
            p = ReadPartition(partition=i32(key.partition), leader_epoch=i32(leader_epoch))
            r = await self.batches.call(node, READ, key, p)
            if isinstance(r, ErrorCode):
                return ReadStateResult(r, None, 0, -1, ())
            return ReadStateResult(
                r.error_code,
                r.error_message,
                r.state_epoch,
                r.start_offset,
                tuple(
                    StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in r.state_batches
                ),
            )

        return await self._retried(
            key,
            "ReadShareGroupState",
            lambda: self.local.read(key, leader_epoch),
            there,
            lambda code: ReadStateResult(code, None, 0, -1, ()),
            lambda r: r.error_code,
        )

    async def write(
        self,
        key: SharePartitionKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        delivery_complete_count: int,
        batches: tuple[StateBatch, ...],
    ) -> int:
        async def there(node: int) -> int:
            p = WritePartition(
                partition=i32(key.partition),
                state_epoch=i32(state_epoch),
                leader_epoch=i32(leader_epoch),
                start_offset=i64(start_offset),
                delivery_complete_count=i32(delivery_complete_count),
                state_batches=tuple(
                    WireBatch(
                        first_offset=i64(b.first_offset),
                        last_offset=i64(b.last_offset),
                        delivery_state=i8(b.delivery_state),
                        delivery_count=i16(b.delivery_count),
                    )
                    for b in batches
                ),
            )
            return _code(await self.batches.call(node, WRITE, key, p))

        return await self._retried(
            key,
            "WriteShareGroupState",
            lambda: self.local.write(key, state_epoch, leader_epoch, start_offset, delivery_complete_count, batches),
            there,
            int,
            int,
        )

    async def delete(self, key: SharePartitionKey) -> int:
        async def there(node: int) -> int:
            return _code(await self.batches.call(node, DELETE, key, DeletePartition(partition=i32(key.partition))))

        return await self._retried(key, "DeleteShareGroupState", lambda: self.local.delete(key), there, int, int)

    async def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ReadSummaryResult:
        async def there(node: int) -> ReadSummaryResult:
            p = SummaryPartition(partition=i32(key.partition), leader_epoch=i32(leader_epoch))
            r = await self.batches.call(node, SUMMARY, key, p)
            if isinstance(r, ErrorCode):
                return ReadSummaryResult(r, None, 0, 0, -1, -1)
            return ReadSummaryResult(
                r.error_code, r.error_message, r.state_epoch, r.leader_epoch, r.start_offset, r.delivery_complete_count
            )

        return await self._retried(
            key,
            "ReadShareGroupStateSummary",
            lambda: self.local.read_summary(key, leader_epoch),
            there,
            lambda code: ReadSummaryResult(code, None, 0, 0, -1, -1),
            lambda r: r.error_code,
        )


def _code(answer: PartitionAnswer | ErrorCode) -> int:
    """A partition's error code, or the error that failed its request."""
    return answer if isinstance(answer, ErrorCode) else answer.error_code
