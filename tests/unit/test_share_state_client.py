"""The cluster's share-state client (groupd/cluster/share_state.py) retries as Kafka's PersisterStateManager:
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, UNKNOWN_TOPIC_OR_PARTITION and an
unreachable coordinator are tried again (the owner looked up afresh), five attempts at most, the back-off
from REQUEST_BACKOFF_MS = 1000 doubling (RETRY_BACKOFF_EXP_BASE = 2) up to REQUEST_BACKOFF_MAX_MS = 30000,
jitter 0.2; any other answer is returned at once. The remote path through a real socket is in
tests/cluster/test_share_state_across_nodes.py."""

from __future__ import annotations

import asyncio
import uuid

from groupd.cluster import share_state
from groupd.cluster.peers import Peers
from groupd.cluster.share_state import ShareStateClient, backoff_ms
from groupd.coordinator.share_state.persister import SharePartitionKey
from groupd.protocol.errors import ErrorCode
from tests.share.fake_persister import FakePersister

KEY = SharePartitionKey("g", uuid.UUID(int=7), 0)


class Answers(FakePersister):
    """The fake persister answering the codes given first, one per call, then as itself."""

    def __init__(self, *codes: int) -> None:
        super().__init__()
        self.codes = list(codes)

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> int:
        if self.codes:
            self.calls.append(("initialize", key))
            return self.codes.pop(0)
        return await super().initialize(key, state_epoch, start_offset)


def client(local: FakePersister, owners: list[int | None], waits: list[int]) -> ShareStateClient:
    """Node 1's client; ``owners`` is who holds the key's partition at each look-up (the last one stays)."""

    def owner(_partition: int) -> int | None:
        return owners.pop(0) if len(owners) > 1 else owners[0]

    def wait(attempt: int) -> float:
        waits.append(attempt)
        return 0

    no_address = Peers(lambda _node: None, "test", 1.0)  # a peer without an address cannot be reached
    return ShareStateClient(1, local, lambda _key: 0, owner, no_address, wait=wait)


def test_kafkas_backoff_numbers() -> None:
    assert (share_state.BACKOFF_MS, share_state.BACKOFF_MAX_MS, share_state.MAX_ATTEMPTS) == (1_000, 30_000, 5)
    assert [backoff_ms(a, jitter=0) for a in (1, 2, 3, 4, 5, 6, 7)] == [1000, 2000, 4000, 8000, 16000, 30000, 30000]
    assert backoff_ms(1, rng=lambda: 0.0) == 800 and backoff_ms(1, rng=lambda: 1.0) == 1200  # jitter 0.2


def test_retriable_answers_are_tried_again_until_the_owner_answers() -> None:
    async def scenario() -> None:
        local = Answers(ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator)
        waits: list[int] = []
        # nobody holds it, then an unreachable node 2, then this node (loading, then moved, then answering)
        c = client(local, [None, 2, 1], waits)
        assert await c.initialize(KEY, 0, 0) == ErrorCode.none
        assert waits == [1, 2, 3, 4] and c.retries == 4 and c.remote_calls == 1
        assert KEY in local.states

    asyncio.run(scenario())


def test_the_last_error_is_the_answer_after_five_attempts_and_others_at_once() -> None:
    async def scenario() -> None:
        waits: list[int] = []
        c = client(Answers(*[ErrorCode.not_coordinator] * 9), [1], waits)
        assert await c.initialize(KEY, 0, 0) == ErrorCode.not_coordinator
        assert waits == [1, 2, 3, 4]
        waits.clear()
        c = client(Answers(ErrorCode.invalid_request), [1], waits)
        assert await c.initialize(KEY, 0, 0) == ErrorCode.invalid_request
        assert waits == []
        c = client(FakePersister(), [2], waits)  # node 2 never reachable: NETWORK_EXCEPTION in the end
        read = await c.read(KEY, 0)
        assert read.error_code == ErrorCode.network_exception and c.remote_calls == 5

    asyncio.run(scenario())
