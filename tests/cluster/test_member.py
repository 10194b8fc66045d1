"""A node's cluster loop against the test PostgreSQL: acquisitions and losses reach the broker's callbacks,
a leaving node hands over at once, a node past its own deadline stops serving before its next step."""

from __future__ import annotations

import asyncio

from groupd.cluster.assignment import Resource
from groupd.cluster.member import ClusterMember
from groupd.cluster.store import ClusterStore
from groupd.storage import engines
from groupd.storage.errors import StorageError
from groupd.storage.postgresql.connection import Database
from groupd.storage.postgresql.fencing import Fence
from tests.cluster.test_store import plaintext

RESOURCES: list[Resource] = [("__consumer_offsets", p) for p in range(4)] + [("t", p) for p in range(2)]


class Events:
    def __init__(self) -> None:
        self.held: dict[Resource, int] = {}
        self.lost: list[Resource] = []

    def acquired(self, r: Resource, epoch: int) -> None:
        self.held[r] = epoch

    def dropped(self, r: Resource) -> None:
        self.held.pop(r, None)
        self.lost.append(r)


def member(url: str, node: int, lease_ms: int, events: Events, clock: list[int] | None = None) -> ClusterMember:
    kwargs = {"clock": lambda: clock[0]} if clock is not None else {}
    return ClusterMember(
        ClusterStore(Database(url), node, f"m{node}", lease_ms),
        Fence(node),
        lambda: RESOURCES,
        on_acquired=events.acquired,
        on_lost=events.dropped,
        **kwargs,  # type: ignore[arg-type]
    )


def migrated(url: str) -> str:
    engines.build({"storage.engine": "postgresql", "storage.postgresql.url": url}).open()
    return url


def test_two_members_share_then_one_leaves_and_the_other_takes_all_at_once(postgresql_url: str) -> None:
    url = migrated(postgresql_url)

    async def scenario() -> None:
        e1, e2 = Events(), Events()
        m1, m2 = member(url, 1, 2000, e1), member(url, 2, 2000, e2)
        await m1.start(plaintext(9001))
        assert set(e1.held) == set(RESOURCES)  # alone: everything, at epoch 1
        await m2.start(plaintext(9002))
        await m1.step()  # node 1 sees node 2 and hands half over (stops serving first)
        await m2.step()
        assert sorted([len(e1.held), len(e2.held)]) == [3, 3]
        assert set(e1.lost) == set(e2.held)
        assert all(m1.serving(r) == 1 for r in e1.held) and all(m2.serving(r) == 2 for r in e2.held)
        assert all(m1.owner(r) is None for r in e2.held)  # its last view: released, not yet taken
        await m1.step()
        assert all(m1.owner(r) == 2 for r in e2.held)  # routing: the other node's, from the last view
        assert [n.endpoint("PLAINTEXT") for n in m1.nodes] == [("127.0.0.1", 9001), ("127.0.0.1", 9002)]
        await m2.stop()
        assert e2.held == {}
        await m1.step()
        assert set(e1.held) == set(RESOURCES)  # no wait for the lease: node 2 released
        assert all(m1.serving(r) in (1, 3) for r in RESOURCES)
        await m1.stop()

    asyncio.run(scenario())


def test_a_member_past_its_deadline_stops_serving_before_its_next_step(postgresql_url: str) -> None:
    url = migrated(postgresql_url)
    clock = [0]

    async def scenario() -> None:
        events = Events()
        m = member(url, 1, 1000, events, clock)
        await m.start(plaintext(9001))
        assert m.serving(RESOURCES[0]) == 1
        clock[0] = 799  # a fifth of the lease before the database's expiry: still serving
        assert m.serving(RESOURCES[0]) == 1
        clock[0] = 800  # paused past its deadline: every request is refused from now on
        assert m.serving(RESOURCES[0]) is None and m.owner(RESOURCES[0]) is None
        await m.step()  # the next step drops them first (and then takes them back: nobody else is live)
        assert set(events.lost) == set(RESOURCES)
        assert m.serving(RESOURCES[0]) == 2  # taken again at the next epoch (and reloaded), never renewed as is
        if m._task is not None:
            m._task.cancel()

    asyncio.run(scenario())


def test_a_step_whose_resources_cannot_be_read_is_a_failed_beat_and_the_next_one_succeeds(postgresql_url: str) -> None:
    """The resources come from the topics kept in the database: while it is unreachable, reading them fails
    like the heartbeat itself (counted, logged once), and the loop goes on instead of ending for good."""
    url = migrated(postgresql_url)
    readable = [True]

    def resources() -> list[Resource]:
        if not readable[0]:
            raise StorageError("reading topics.json failed in PostgreSQL: server closed the connection")
        return RESOURCES

    async def scenario() -> None:
        events = Events()
        m = member(url, 1, 2000, events)
        m.resources = resources
        await m.start(plaintext(9001))
        readable[0] = False
        await m.step()
        assert m.failures == 1 and set(events.held) == set(RESOURCES)  # still serving within its deadline
        readable[0] = True
        renewed = m.renewals
        await m.step()
        assert m.failures == 1 and m.renewals == renewed + len(RESOURCES)
        await m.stop()

    asyncio.run(scenario())
