"""Two nodes creating one new topic name at the same instant (docs/cluster.md): both read the topics
document before either wrote it. The partition rows are shared by name, so a creation may clear what the
name left behind (a crashed deletion's rows, or a losing creation's) only when it wins the name: the
clearing is part of the compare-and-set that claims it (PgMetadata.claim_topic), and the partitions are
opened after. Stepped by hand: node 2's claim is made over the version it read before node 1's creation."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from groupd.broker.app import Broker
from groupd.protocol.errors import ErrorCode
from groupd.storage.engine import LogConfig
from groupd.storage.postgresql.engine import PostgresEngine
from tests.cluster.stepped import step, two_started
from tests.cluster.test_topic_changes_across_nodes import offsets_at_leaders
from tests.wire.test_quotas import create_topics_body

PARTITIONS = 4


def engine(node: Broker) -> PostgresEngine:
    assert isinstance(node.storage, PostgresEngine)
    return node.storage


def test_the_creation_that_loses_the_name_removes_nothing_of_the_winners(tmp_path: Path, postgresql_url: str) -> None:
    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            one, two = both.nodes[1], both.nodes[2]
            clients = both.clients
            await step(one, two)
            one.topics.follow()
            two.topics.follow()
            key, read_by_two = two.topics.document.key, two.topics.document.seen
            # node 2's creation of "r" has begun and opened rows under the name before claiming it
            for p in range(PARTITIONS):
                engine(two).open_partition("r", p, LogConfig()).close()
            # node 1 wins the name: its claim clears those rows in the same statement, then it opens its own
            one.create_topic("r", PARTITIONS, {})
            await step(one, two, one, two)
            assert await offsets_at_leaders(clients, one, "r", PARTITIONS) == [(ErrorCode.none, 0)] * PARTITIONS
            # node 2's claim, over the document it read before: refused, and it clears nothing
            doc = json.loads(read_by_two or b'{"version": 1, "topics": []}')
            doc["topics"].append({"name": "r", "id": "00000000-0000-0000-0000-000000000001", "partitions": 4})
            claimed = engine(two).metadata.claim_topic(key, read_by_two, json.dumps(doc).encode(), topic="r")  # type: ignore[attr-defined]
            assert claimed is False
            assert await offsets_at_leaders(clients, one, "r", PARTITIONS) == [(ErrorCode.none, 1)] * PARTITIONS
            # node 2's CreateTopics of the name: TOPIC_ALREADY_EXISTS, node 1's records stay where they are
            refused = await clients[2].call(19, 7, create_topics_body(7, [("r", PARTITIONS)]))
            assert refused.topics[0].error_code == ErrorCode.topic_already_exists
            await step(two, one)
            assert await offsets_at_leaders(clients, one, "r", PARTITIONS) == [(ErrorCode.none, 2)] * PARTITIONS

    asyncio.run(scenario())


def test_a_claim_clears_a_crashed_deletions_rows_and_only_when_it_wins(tmp_path: Path, postgresql_url: str) -> None:
    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            one, two = both.nodes[1], both.nodes[2]
            await step(one, two)
            created = await both.clients[1].call(19, 7, create_topics_body(7, [("s", PARTITIONS)]))
            assert created.topics[0].error_code == ErrorCode.none
            await step(one, two, one, two)
            assert await offsets_at_leaders(both.clients, one, "s", PARTITIONS) == [(ErrorCode.none, 0)] * PARTITIONS
            # a deletion that wrote the document and crashed before removing the rows: they are left over
            document = one.topics.document
            document.refresh()
            doc = json.loads(document.seen or b"{}")
            doc["topics"] = [t for t in doc["topics"] if t["name"] != "s"]
            assert engine(one).metadata.compare_and_put(document.key, document.seen, json.dumps(doc).encode())  # type: ignore[attr-defined]
            await step(one, two, one, two)
            assert engine(one).partitions("s")  # the rows are still there
            # created again at node 2: its claim clears them in the same statement
            again = await both.clients[2].call(19, 7, create_topics_body(7, [("s", PARTITIONS)]))
            assert again.topics[0].error_code == ErrorCode.none
            await step(one, two, one, two)
            # the new topic starts empty: its first record is at offset 0
            assert await offsets_at_leaders(both.clients, one, "s", PARTITIONS) == [(ErrorCode.none, 0)] * PARTITIONS

    asyncio.run(scenario())
