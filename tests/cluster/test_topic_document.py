"""The topics document shared by a cluster's nodes (docs/cluster.md): each node changes it by
compare-and-set over the version it read, so two nodes changing it at once keep both changes, and each
node follows creations, growth, deletions and config changes made elsewhere at its next refresh (every
heartbeat)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from groupd.broker.dataplane.topics import REGISTRY_FILE, Topic, TopicError, TopicRegistry
from groupd.protocol.errors import ErrorCode
from groupd.storage import engines
from groupd.storage.postgresql.engine import PostgresEngine
from groupd.storage.postgresql.metadata import PgMetadata


class Node:
    """One node's registry over its own engine, and what its listeners were told."""

    def __init__(self, url: str) -> None:
        engine = engines.build({"storage.engine": "postgresql", "storage.postgresql.url": url})
        assert isinstance(engine, PostgresEngine) and isinstance(engine.metadata, PgMetadata)
        engine.open()
        self.engine = engine
        self.topics = TopicRegistry(engine.metadata)
        self.topics.compare_and_put = engine.metadata.compare_and_put
        self.topics.load()
        self.events: list[tuple[str, str]] = []
        self.topics.on_create.append(lambda t: self.events.append(("created", t.name)))
        self.topics.on_delete.append(lambda t: self.events.append(("deleted", t.name)))
        self.topics.on_grow.append(lambda t, old: self.events.append(("grown", f"{t.name} {old}->{t.partitions}")))
        self.topics.on_configs.append(lambda t: self.events.append(("configs", t.name)))

    def names(self) -> set[str]:
        return {t.name for t in self.topics.all()}


@pytest.fixture
def two(postgresql_url: str) -> Iterator[tuple[Node, Node]]:
    a, b = Node(postgresql_url), Node(postgresql_url)
    yield a, b
    a.engine.close()
    b.engine.close()


def stored(node: Node) -> set[str]:
    probe = TopicRegistry(node.engine.metadata)
    probe.load()
    return {t.name for t in probe.all()}


def test_two_nodes_creating_topics_one_after_the_other_without_reading_keep_both(two: tuple[Node, Node]) -> None:
    a, b = two
    a.topics.create("orders", 3)
    b.topics.create("payments", 2)  # b had not read a's change: its write over the old version is retried
    assert stored(a) == {"orders", "payments"}
    assert b.names() == {"orders", "payments"} and ("created", "orders") in b.events
    a.topics.refresh()
    assert a.names() == {"orders", "payments"}


def test_a_name_another_node_took_is_refused_as_kafka_refuses_it(two: tuple[Node, Node]) -> None:
    a, b = two
    a.topics.create("orders", 3)
    with pytest.raises(TopicError) as refused:
        b.topics.create("orders", 1)
    assert refused.value.code == ErrorCode.topic_already_exists
    assert stored(a) == {"orders"}


def test_deletions_growth_and_config_changes_made_elsewhere_are_followed(two: tuple[Node, Node]) -> None:
    a, b = two
    a.topics.create("orders", 3)
    a.topics.create("audit", 1)
    b.topics.refresh()
    b.events.clear()
    a.topics.delete("audit")
    a.topics.grow("orders", 5)
    a.topics.set_configs("orders", {"retention.ms": "1000"})
    b.topics.refresh()
    orders = b.topics.get("orders")
    assert isinstance(orders, Topic)
    assert b.names() == {"orders"} and orders.partitions == 5 and orders.configs == {"retention.ms": "1000"}
    assert b.events == [("deleted", "audit"), ("grown", "orders 3->5"), ("configs", "orders")]
    b.topics.refresh()  # nothing new: nothing told again
    assert len(b.events) == 3


def test_a_topic_deleted_and_created_again_elsewhere_is_followed_as_both(two: tuple[Node, Node]) -> None:
    a, b = two
    a.topics.create("orders", 3)
    b.topics.refresh()
    old = b.topics.get("orders")
    a.topics.delete("orders")
    a.topics.create("orders", 1)
    b.topics.refresh()
    new = b.topics.get("orders")
    assert old is not None and new is not None and new.topic_id != old.topic_id and new.partitions == 1
    assert b.events[-2:] == [("deleted", "orders"), ("created", "orders")]


def test_a_compare_and_put_over_a_stale_version_stores_nothing(two: tuple[Node, Node]) -> None:
    a, _b = two
    metadata = a.engine.metadata
    assert isinstance(metadata, PgMetadata)
    assert metadata.compare_and_put("doc.json", None, b"1")
    assert not metadata.compare_and_put("doc.json", None, b"2")  # it exists now
    assert not metadata.compare_and_put("doc.json", b"0", b"2")
    assert metadata.compare_and_put("doc.json", b"1", b"2")
    assert metadata.get("doc.json") == b"2" and REGISTRY_FILE != "doc.json"
