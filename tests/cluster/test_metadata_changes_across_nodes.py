"""What one node changes in the shared metadata reaches the others at once, not at their next heartbeat
(groupd/cluster/changes.py): PostgreSQL notifies every write of ``groupd_metadata`` when it commits.

The nodes' lease is two minutes (a heartbeat every 30 s), so within the few seconds these tests wait only
a notification can explain that a node followed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

from groupd.cluster.changes import METADATA
from groupd.protocol.errors import ErrorCode
from groupd.storage.postgresql.connection import Database
from groupd.storage.postgresql.schema import migrate
from tests.cluster.stepped import two_started
from tests.cluster.test_broker_nodes import metadata
from tests.wire import test_group_configs as group_configs
from tests.wire import test_quotas as quotas

SOON_S = 5.0  # far below a heartbeat (30 s)


async def soon(condition: Callable[[], bool]) -> float:
    """Seconds until ``condition`` held (AssertionError after SOON_S)."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < SOON_S, "not followed within the wait"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


def test_a_metadata_write_notifies_its_key_when_it_commits_and_not_when_it_rolls_back(postgresql_url: str) -> None:
    migrate(Database(postgresql_url))
    with psycopg.connect(postgresql_url, autocommit=True) as listener, psycopg.connect(postgresql_url) as writer:
        listener.execute(f"LISTEN {METADATA}")
        writer.execute("INSERT INTO groupd_metadata (key, value) VALUES ('k1', 'a')")
        writer.rollback()
        writer.execute("INSERT INTO groupd_metadata (key, value) VALUES ('k2', 'a')")
        writer.execute("UPDATE groupd_metadata SET value = 'b' WHERE key = 'k2'")
        writer.commit()
        writer.execute("DELETE FROM groupd_metadata WHERE key = 'k2'")
        writer.commit()
        got = [n.payload for n in listener.notifies(timeout=2.0, stop_after=3)]
    # one per committed transaction and key (PostgreSQL folds a transaction's repeated payloads into one),
    # in commit order; the rolled-back insert of k1 notified nobody
    assert got == ["k2", "k2"]


def test_topics_configs_and_quotas_made_at_one_node_reach_the_other_without_a_heartbeat(
    tmp_path: Path, postgresql_url: str
) -> None:
    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url, by_hand=False) as both:
            one, two = both.nodes[1], both.nodes[2]
            c1, c2 = both.clients[1], both.clients[2]
            assert one.cluster is not None and two.cluster is not None
            await soon(lambda: two.cluster is not None and two.cluster.changes.connections >= 1)
            steps = (one.cluster.member.steps, two.cluster.member.steps)
            # a topic created at node 1: node 2 knows it, and its partitions have owners that node 2's Metadata
            # names, long before any heartbeat; each node stepped a few times for it (woken by the topic's
            # and the leases' notifications), not in a loop
            assert (await metadata(c1, "fresh")).topics[0].error_code == ErrorCode.none
            await soon(lambda: two.topics.get("fresh") is not None)

            async def led_at_two() -> bool:
                answer = await metadata(c2, "fresh")
                parts = answer.topics[0].partitions
                return len(parts) == 4 and all(p.error_code == ErrorCode.none and p.leader_id >= 0 for p in parts)

            deadline = time.monotonic() + SOON_S
            while not await led_at_two():
                assert time.monotonic() < deadline, "the new topic's partitions got no owners without a heartbeat"
                await asyncio.sleep(0.05)
            assert one.cluster.member.steps > steps[0] and two.cluster.member.steps > steps[1]
            assert two.cluster.member.steps - steps[1] <= 4  # woken per change, not stepping in a loop
            # a group config and a client quota set at node 1 bind what node 2 runs with
            assert await group_configs.set_configs(c1, "g", consumer_session_timeout_ms="50000") == (
                ErrorCode.none,
                None,
            )
            await soon(lambda: two.group_configs.overrides("g") == {"consumer.session.timeout.ms": "50000"})
            altered = await c1.call(
                49, 1, quotas.alter_body(1, [([("user", "alice")], [("producer_byte_rate", 1024)])])
            )
            assert [e.error_code for e in altered.entries] == [ErrorCode.none]
            await soon(lambda: two.quotas.produce.limit("alice", "any") == 1024.0)
            # the listening connection is cut (a database restart, a proxy): the node listens again and
            # follows what changed meanwhile
            with psycopg.connect(postgresql_url, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE %s",
                    (f"LISTEN {METADATA}%",),
                )
            await soon(lambda: two.cluster is not None and two.cluster.changes.connections >= 2)
            assert await group_configs.set_configs(c1, "g", consumer_session_timeout_ms="51000") == (
                ErrorCode.none,
                None,
            )
            await soon(lambda: two.group_configs.overrides("g") == {"consumer.session.timeout.ms": "51000"})

    asyncio.run(scenario())
