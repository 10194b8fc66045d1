"""The share coordinator's RPCs to another node, batched as Kafka's PersisterStateManager batches them.

Kafka's persister keeps at most one request of each RPC type in flight to each share coordinator node;
the calls that arrive meanwhile wait, and when the request in flight is answered they go together, one
request per group id (the schemas hold one group id a request, its topics by topic id, their partitions).
Each caller then takes its own partition's result out of the combined answer. A burst of share-partition
writes to one coordinator node thus costs a few round trips, not one each.

A key asked twice before a request leaves (two writes of one share-partition) goes in two requests, one
after the other: the coordinator answers one result per partition of a request, and the order of two
writes of one state matters. A peer that cannot be reached fails every caller of that request with
NETWORK_EXCEPTION, one that does not answer in time with REQUEST_TIMED_OUT, which the caller
(share_state.py) retries as Kafka retries them; an
answer without the caller's partition is UNKNOWN_SERVER_ERROR (Kafka's persister completes that caller
with the error of an IllegalStateException, which is not retried).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar, cast

from kio.schema.delete_share_group_state.v0.request import DeleteShareGroupStateRequest, DeleteStateData
from kio.schema.delete_share_group_state.v0.response import PartitionResult as DeleteResult
from kio.schema.initialize_share_group_state.v0.request import (
    InitializeShareGroupStateRequest,
    InitializeStateData,
)
from kio.schema.initialize_share_group_state.v0.response import PartitionResult as InitializeResult
from kio.schema.read_share_group_state.v0.request import ReadShareGroupStateRequest, ReadStateData
from kio.schema.read_share_group_state.v0.response import PartitionResult as ReadResult
from kio.schema.read_share_group_state_summary.v1.request import (
    ReadShareGroupStateSummaryRequest,
    ReadStateSummaryData,
)
from kio.schema.read_share_group_state_summary.v1.response import PartitionResult as SummaryResult
from kio.schema.write_share_group_state.v1.request import WriteShareGroupStateRequest, WriteStateData
from kio.schema.write_share_group_state.v1.response import PartitionResult as WriteResult

from groupd.cluster.peers import PeerUnavailable
from groupd.coordinator.share_state.persister import SharePartitionKey
from groupd.coordinator.tasks import Tasks
from groupd.protocol.api_table import ApiKey
from groupd.protocol.errors import ErrorCode

log = logging.getLogger("groupd.cluster")


class PartitionAnswer(Protocol):
    """What every share-state response holds per partition."""

    @property
    def partition(self) -> int: ...

    @property
    def error_code(self) -> int: ...


class _TopicAnswer(Protocol):
    @property
    def topic_id(self) -> uuid.UUID: ...

    @property
    def partitions(self) -> Sequence[PartitionAnswer]: ...


class _Response(Protocol):
    @property
    def results(self) -> Sequence[_TopicAnswer]: ...


class PeerCaller(Protocol):
    """peers.Peers, or a test's fake peer."""

    async def call(self, node: int, api_key: ApiKey, version: int, body: object) -> object: ...


P = TypeVar("P", bound=PartitionAnswer)


@dataclass(frozen=True)
class Rpc(Generic[P]):
    """One share-state RPC as it is sent: its key and version, its request and per-topic entities."""

    name: str
    api_key: ApiKey
    version: int
    request: Callable[..., object]  # (group_id=, topics=)
    topic: Callable[..., object]  # (topic_id=, partitions=)


INITIALIZE: Rpc[InitializeResult] = Rpc(
    "InitializeShareGroupState",
    ApiKey.INITIALIZE_SHARE_GROUP_STATE,
    0,
    InitializeShareGroupStateRequest,
    InitializeStateData,
)
READ: Rpc[ReadResult] = Rpc(
    "ReadShareGroupState", ApiKey.READ_SHARE_GROUP_STATE, 0, ReadShareGroupStateRequest, ReadStateData
)
WRITE: Rpc[WriteResult] = Rpc(
    "WriteShareGroupState", ApiKey.WRITE_SHARE_GROUP_STATE, 1, WriteShareGroupStateRequest, WriteStateData
)
DELETE: Rpc[DeleteResult] = Rpc(
    "DeleteShareGroupState", ApiKey.DELETE_SHARE_GROUP_STATE, 0, DeleteShareGroupStateRequest, DeleteStateData
)
SUMMARY: Rpc[SummaryResult] = Rpc(
    "ReadShareGroupStateSummary",
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
    1,
    ReadShareGroupStateSummaryRequest,
    ReadStateSummaryData,
)


@dataclass
class _Call:
    key: SharePartitionKey
    partition: object  # the request's PartitionData entity for this key
    answer: asyncio.Future[PartitionAnswer | ErrorCode] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class ShareStateBatches:
    """Per (node, RPC): the calls waiting for the request in flight to be answered, sent together next."""

    def __init__(self, peers: PeerCaller) -> None:
        self.peers = peers
        self._waiting: dict[tuple[int, ApiKey], list[_Call]] = {}
        self._tasks = Tasks()
        self.requests_sent = 0  # share-state requests that went out (tests, the benchmark)

    async def call(self, node: int, rpc: Rpc[P], key: SharePartitionKey, partition: object) -> P | ErrorCode:
        """The coordinator's result for ``key``'s partition, or the error that failed the request."""
        slot = (node, rpc.api_key)
        c = _Call(key, partition)
        waiting = self._waiting.get(slot)
        if waiting is None:  # nothing of this kind in flight to that node: a sender starts
            self._waiting[slot] = [c]
            self._tasks.spawn(self._send_all(node, rpc))
        else:
            waiting.append(c)
        return cast("P | ErrorCode", await asyncio.shield(c.answer))  # a P: the answer to this rpc

    async def _send_all(self, node: int, rpc: Rpc[P]) -> None:
        """Send what waits for (node, rpc), round after round, until nothing does; the slot's list stays
        in ``_waiting`` while a request is in flight, so the calls arriving meanwhile join the next round."""
        slot = (node, rpc.api_key)
        calls = self._waiting[slot]
        try:
            while calls:
                now: list[_Call] = []
                later: list[_Call] = []
                seen: set[SharePartitionKey] = set()
                for c in calls:  # a key once a request
                    (later if c.key in seen else now).append(c)
                    seen.add(c.key)
                self._waiting[slot] = calls = later
                by_group: dict[str, list[_Call]] = {}
                for c in now:
                    by_group.setdefault(c.key.group_id, []).append(c)
                await asyncio.gather(*(self._send(node, rpc, group, cs) for group, cs in by_group.items()))
                calls = self._waiting[slot]
        finally:
            for c in self._waiting.pop(slot, []):  # only when cancelled: nobody may wait for ever
                _settle(c, ErrorCode.network_exception)

    async def _send(self, node: int, rpc: Rpc[P], group: str, calls: list[_Call]) -> None:
        topics: dict[uuid.UUID, list[object]] = {}
        for c in calls:
            topics.setdefault(c.key.topic_id, []).append(c.partition)
        request = rpc.request(
            group_id=group, topics=tuple(rpc.topic(topic_id=t, partitions=tuple(ps)) for t, ps in topics.items())
        )
        self.requests_sent += 1
        found: dict[tuple[uuid.UUID, int], PartitionAnswer] = {}
        missing = ErrorCode.network_exception  # what a caller gets unless the answer holds its partition
        try:
            response = cast(_Response, await self.peers.call(node, rpc.api_key, rpc.version, request))
            found = {(t.topic_id, int(p.partition)): p for t in response.results for p in t.partitions}
            missing = ErrorCode.unknown_server_error
        except PeerUnavailable as exc:
            log.info("%s of %d partition(s) at node %d failed: %s", rpc.name, len(calls), node, exc)
            if isinstance(exc.__cause__, TimeoutError):  # no answer in time, rather than no connection
                missing = ErrorCode.request_timed_out
        except Exception as exc:  # an answer that cannot be read: its callers retry as after a lost connection
            log.warning("%s of %d partition(s) at node %d failed: %r", rpc.name, len(calls), node, exc)
        finally:  # cancelled too: nobody may wait for ever
            for c in calls:
                _settle(c, found.get((c.key.topic_id, c.key.partition), missing))

    async def close(self) -> None:
        await self._tasks.cancel_all()


def _settle(c: _Call, answer: PartitionAnswer | ErrorCode) -> None:
    if not c.answer.done():
        c.answer.set_result(answer)
