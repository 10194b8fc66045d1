"""Share-state RPCs to another node are batched as Kafka's PersisterStateManager batches them
(groupd/cluster/share_state_batches.py), against a fake peer:

- concurrent calls of one RPC for one node go in one request (Kafka's nodeRPCMap: node -> RPC type ->
  group id -> handlers, one request per group id, its topics by topic id);
- one request of a kind is in flight to a node at a time (Kafka's inFlight set): what arrives meanwhile
  goes together in the next one;
- each caller gets its own partition's result out of the combined answer, its own error;
- a peer that cannot be reached fails every caller of the request with NETWORK_EXCEPTION, one that does not
  answer in time with REQUEST_TIMED_OUT, both retried by the share-state client (PersisterStateManager maps
  a disconnection and a timeout to them); an answer without the caller's partition is UNKNOWN_SERVER_ERROR
  (Kafka: the error of an IllegalStateException).
"""

from __future__ import annotations

import asyncio
import uuid

from kio.schema.read_share_group_state.v0.request import PartitionData as ReadPartition
from kio.schema.write_share_group_state.v1 import request as write_request
from kio.schema.write_share_group_state.v1 import response as write_response
from kio.static.primitive import i32, i64

from groupd.cluster.peers import PeerUnavailable
from groupd.cluster.share_state import ShareStateClient
from groupd.cluster.share_state_batches import READ, WRITE, ShareStateBatches
from groupd.coordinator.share_state.persister import SharePartitionKey, StateBatch
from groupd.protocol.api_table import ApiKey
from groupd.protocol.errors import ErrorCode
from tests.share.fake_persister import FakePersister

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


class FakePeer:
    """Answers share-state requests: each partition with the code in ``codes`` (default NONE); ``gate``
    holds every answer until set, ``down`` makes every call fail as an unreachable peer does."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, ApiKey, int, object]] = []
        self.codes: dict[tuple[uuid.UUID, int], ErrorCode] = {}
        self.gate = asyncio.Event()
        self.gate.set()
        self.down = False
        self.late = False
        self.drop: set[tuple[uuid.UUID, int]] = set()  # partitions the answer leaves out

    async def call(self, node: int, api_key: ApiKey, version: int, body: object) -> object:
        self.requests.append((node, api_key, version, body))
        await self.gate.wait()
        if self.down:
            raise PeerUnavailable(f"node {node} is not live")
        if self.late:  # as Peers.call says a peer that did not answer within its timeout
            raise PeerUnavailable(f"node {node}: no answer") from TimeoutError()
        if not isinstance(body, write_request.WriteShareGroupStateRequest):
            return object()  # an answer without results
        return write_response.WriteShareGroupStateResponse(
            results=tuple(
                write_response.WriteStateResult(
                    topic_id=t.topic_id,
                    partitions=tuple(
                        write_response.PartitionResult(
                            partition=p.partition,
                            error_code=self.codes.get((t.topic_id, p.partition), ErrorCode.none),
                            error_message=None,
                        )
                        for p in t.partitions
                        if (t.topic_id, p.partition) not in self.drop
                    ),
                )
                for t in body.topics
            )
        )


def key(group: str, topic: uuid.UUID, partition: int) -> SharePartitionKey:
    return SharePartitionKey(group, topic, partition)


def entry(partition: int, start_offset: int = 0) -> write_request.PartitionData:
    return write_request.PartitionData(
        partition=i32(partition),
        state_epoch=i32(0),
        leader_epoch=i32(0),
        start_offset=i64(start_offset),
        delivery_complete_count=i32(0),
        state_batches=(),
    )


def sent(peer: FakePeer) -> list[tuple[str, list[tuple[uuid.UUID, list[int]]]]]:
    """Each request's group id and (topic id, partitions)."""
    out = []
    for _node, _api, _version, body in peer.requests:
        assert isinstance(body, write_request.WriteShareGroupStateRequest)
        out.append((str(body.group_id), [(t.topic_id, [int(p.partition) for p in t.partitions]) for t in body.topics]))
    return out


def codes(answers: list[object]) -> list[int]:
    return [a if isinstance(a, ErrorCode) else a.error_code for a in answers]  # type: ignore[attr-defined]


def test_concurrent_calls_go_in_one_request_and_each_gets_its_own_result() -> None:
    async def scenario() -> None:
        peer = FakePeer()
        peer.codes[(T2, 0)] = ErrorCode.fenced_state_epoch
        batches = ShareStateBatches(peer)
        answers = await asyncio.gather(
            batches.call(2, WRITE, key("g", T1, 0), entry(0)),
            batches.call(2, WRITE, key("g", T1, 3), entry(3)),
            batches.call(2, WRITE, key("g", T2, 0), entry(0)),
        )
        assert sent(peer) == [("g", [(T1, [0, 3]), (T2, [0])])]
        assert peer.requests[0][:3] == (2, ApiKey.WRITE_SHARE_GROUP_STATE, 1)
        assert codes(answers) == [ErrorCode.none, ErrorCode.none, ErrorCode.fenced_state_epoch]
        assert [a.partition for a in answers] == [0, 3, 0]  # type: ignore[union-attr]
        assert batches.requests_sent == 1

    asyncio.run(scenario())


def test_one_request_in_flight_per_node_and_rpc_the_rest_wait_and_go_together() -> None:
    async def scenario() -> None:
        peer = FakePeer()
        peer.gate.clear()
        batches = ShareStateBatches(peer)
        first = asyncio.ensure_future(batches.call(2, WRITE, key("g", T1, 0), entry(0)))
        for _ in range(100):  # a few turns of the loop: the sender's task, then its request's
            if peer.requests:
                break
            await asyncio.sleep(0)
        assert len(peer.requests) == 1  # in flight, held by the gate
        later = [asyncio.ensure_future(batches.call(2, WRITE, key("g", T1, p), entry(p))) for p in (1, 2, 3)]
        await asyncio.sleep(0.01)
        assert len(peer.requests) == 1  # they wait for the one in flight
        peer.gate.set()
        assert codes(await asyncio.gather(first, *later)) == [ErrorCode.none] * 4
        assert sent(peer) == [("g", [(T1, [0])]), ("g", [(T1, [1, 2, 3])])]

    asyncio.run(scenario())


def test_group_ids_nodes_and_rpcs_are_never_mixed_and_a_key_goes_once_a_request() -> None:
    async def scenario() -> None:
        peer = FakePeer()
        batches = ShareStateBatches(peer)
        await asyncio.gather(
            batches.call(2, WRITE, key("a", T1, 0), entry(0, start_offset=5)),
            batches.call(2, WRITE, key("b", T1, 0), entry(0)),
            batches.call(3, WRITE, key("a", T1, 1), entry(1)),
            batches.call(2, WRITE, key("a", T1, 0), entry(0, start_offset=9)),  # the same key again: after
        )
        assert sorted((n, g, ts) for (n, *_), (g, ts) in zip(peer.requests, sent(peer), strict=True)) == [
            (2, "a", [(T1, [0])]),
            (2, "a", [(T1, [0])]),
            (2, "b", [(T1, [0])]),
            (3, "a", [(T1, [1])]),
        ]
        to_a = [b for n, _, _, b in peer.requests if n == 2 and b.group_id == "a"]  # type: ignore[attr-defined]
        assert [b.topics[0].partitions[0].start_offset for b in to_a] == [5, 9]  # in the callers' order

    asyncio.run(scenario())


def test_an_unreachable_peer_fails_every_caller_with_network_exception() -> None:
    async def scenario() -> None:
        peer = FakePeer()
        peer.down = True
        batches = ShareStateBatches(peer)
        answers = await asyncio.gather(
            batches.call(2, WRITE, key("g", T1, 0), entry(0)), batches.call(2, WRITE, key("g", T2, 1), entry(1))
        )
        assert answers == [ErrorCode.network_exception, ErrorCode.network_exception]
        assert batches.requests_sent == 1
        peer.down = False
        peer.late = True  # connected, but no answer in time
        assert await batches.call(2, WRITE, key("g", T1, 0), entry(0)) == ErrorCode.request_timed_out
        peer.late = False
        peer.down = False
        peer.drop.add((T1, 1))  # an answer that leaves a partition out
        answers = await asyncio.gather(
            batches.call(2, WRITE, key("g", T1, 0), entry(0)), batches.call(2, WRITE, key("g", T1, 1), entry(1))
        )
        assert codes(answers) == [ErrorCode.none, ErrorCode.unknown_server_error]

    asyncio.run(scenario())


def test_an_answer_that_cannot_be_read_settles_its_callers() -> None:
    async def scenario() -> None:
        peer = FakePeer()  # answers WriteShareGroupState only: a read's answer cannot be read
        batches = ShareStateBatches(peer)
        p = ReadPartition(partition=i32(0), leader_epoch=i32(0))
        assert await batches.call(2, READ, key("g", T1, 0), p) == ErrorCode.network_exception
        assert batches.requests_sent == 1

    asyncio.run(scenario())


def test_the_share_state_client_batches_concurrent_writes_and_retries_a_lost_peer() -> None:
    """Two share-partitions written at once from node 1, their state at node 2: one request; then node 2
    unreachable once: each write is tried again (NETWORK_EXCEPTION is retriable), again in one request."""

    async def scenario() -> None:
        peer = FakePeer()
        waits: list[int] = []

        def wait(attempt: int) -> float:
            waits.append(attempt)
            peer.down = False  # the peer is back for the next attempt
            return 0

        client = ShareStateClient(1, FakePersister(), lambda _k: 0, lambda _p: 2, peer, wait=wait)  # type: ignore[arg-type]
        batch = (StateBatch(0, 4, 2, 1),)
        assert await asyncio.gather(
            client.write(key("g", T1, 0), 0, 0, 0, 0, batch), client.write(key("g", T1, 1), 0, 0, 0, 0, batch)
        ) == [ErrorCode.none, ErrorCode.none]
        assert client.batches.requests_sent == 1 and client.remote_calls == 2
        peer.down = True
        assert await asyncio.gather(
            client.write(key("g", T1, 0), 0, 0, 5, 0, batch), client.write(key("g", T1, 1), 0, 0, 5, 0, batch)
        ) == [ErrorCode.none, ErrorCode.none]
        assert waits == [1, 1] and client.batches.requests_sent == 3
        assert sent(peer)[1:] == [("g", [(T1, [0, 1])])] * 2

    asyncio.run(scenario())
