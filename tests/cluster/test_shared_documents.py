"""The metadata documents a cluster's nodes share besides the topics (docs/cluster.md): ACLs, SCRAM
credentials, group configs and client quotas. Two nodes' stores over one PostgreSQL, each changing its
document without having read the other's change first, keep both changes (compare-and-set, then the
change made again over the newer version), and each follows the other's changes at its next refresh
(every heartbeat), in one read of every document."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from groupd.broker.dataplane.group_configs import GroupConfigStore
from groupd.broker.ops.quotas import PRODUCER_BYTE_RATE, USER, Quotas, QuotaStore
from groupd.broker.security.access import Access
from groupd.broker.security.acl import (
    STANDARD_AUTHORIZER,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from groupd.broker.security.scram import SHA_256, salted_password
from groupd.broker.security.scram_store import ScramStore
from groupd.broker.shared_documents import SharedDocuments
from groupd.protocol.errors import ErrorCode
from groupd.storage import engines
from groupd.storage.errors import StorageError
from groupd.storage.postgresql.engine import PostgresEngine
from groupd.storage.postgresql.metadata import PgMetadata
from groupd.storage.shared_document import SharedDocument, WriteConflict
from tests.conftest import broker_config

ACL_CONFIG = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": frozenset({"User:admin"})}


def read_acl(user: str, topic: str) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC, topic, PatternType.LITERAL, f"User:{user}", "*", Operation.READ, Permission.ALLOW
    )


def scram_user(name: str, password: str) -> tuple[str, int, int, bytes, bytes]:
    salt = f"salt-of-{name}".encode()
    return name, SHA_256.type, 4096, salt, salted_password(SHA_256, password, salt, 4096)


class Node:
    """One node's four stores over its own engine, shared as ClusterNode shares them."""

    def __init__(self, url: str, tmp: Path) -> None:
        engine = engines.build({"storage.engine": "postgresql", "storage.postgresql.url": url})
        assert isinstance(engine, PostgresEngine) and isinstance(engine.metadata, PgMetadata)
        engine.open()
        self.engine = engine
        metadata = engine.metadata
        self.access = Access.of(ACL_CONFIG, metadata)
        self.scram = ScramStore(metadata)
        self.group_configs = GroupConfigStore(metadata, broker_config(tmp))
        self.quotas = Quotas()
        self.quota_store = QuotaStore(metadata, self.quotas)
        stores = (self.access, self.scram, self.group_configs, self.quota_store)
        self.documents = SharedDocuments(metadata, [s.document for s in stores])
        for store in stores:
            store.load()

    def acls(self) -> set[AclBinding]:
        assert self.access.authorizer is not None
        return set(self.access.authorizer.bindings)

    def set_quota(self, user: str, rate: float) -> bool:
        """AlterClientQuotas' change: whether it changed anything (and was stored)."""

        def alter() -> tuple[bool, bool]:
            changed = self.quotas.alter(((USER, user),), [(PRODUCER_BYTE_RATE, rate)], False)
            return changed, changed

        return self.quota_store.change(alter)


@pytest.fixture
def two(postgresql_url: str, tmp_path: Path) -> Iterator[tuple[Node, Node]]:
    a, b = Node(postgresql_url, tmp_path / "a"), Node(postgresql_url, tmp_path / "b")
    yield a, b
    a.engine.close()
    b.engine.close()


def test_acls_created_at_two_nodes_without_reading_each_other_keep_both(two: tuple[Node, Node]) -> None:
    a, b = two
    assert a.access.create([read_acl("alice", "orders")]) == [None]
    assert b.access.create([read_acl("bob", "payments")]) == [None]  # over a version a rewrote: tried again
    both = {read_acl("alice", "orders"), read_acl("bob", "payments")}
    assert b.acls() == both
    assert a.acls() == {read_acl("alice", "orders")}  # a has not followed yet
    a.documents.refresh()
    assert a.acls() == both
    # a deletion at a, followed by b; a new node loads what both stored
    alice = read_acl("alice", "orders")
    only_alice = AclFilter(
        ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*", Operation.READ, Permission.ALLOW
    )
    assert a.access.delete([only_alice]) == [[alice]]
    b.documents.refresh()
    assert b.acls() == {read_acl("bob", "payments")}


def test_an_authorization_follows_the_other_nodes_acls(two: tuple[Node, Node]) -> None:
    a, b = two
    assert b.access.authorizer is not None
    assert not b.access.authorizer.authorize("User:alice", "10.0.0.1", Operation.READ, ResourceType.TOPIC, "orders")
    a.access.create([read_acl("alice", "orders")])
    b.documents.refresh()  # the cached denial is forgotten with the bindings
    assert b.access.authorizer.authorize("User:alice", "10.0.0.1", Operation.READ, ResourceType.TOPIC, "orders")


def test_scram_users_altered_at_two_nodes_keep_both(two: tuple[Node, Node]) -> None:
    a, b = two
    assert a.scram.alter([], [scram_user("alice", "a-secret")])[0].error == ErrorCode.none
    assert b.scram.alter([], [scram_user("bob", "b-secret")])[0].error == ErrorCode.none
    assert b.scram.credentials_of("alice", SHA_256.name) is not None
    assert a.scram.credentials_of("bob", SHA_256.name) is None
    a.documents.refresh()
    alice, bob = a.scram.credentials_of("alice", SHA_256.name), a.scram.credentials_of("bob", SHA_256.name)
    assert alice is not None and bob is not None
    assert alice != bob  # each user's own keys, not one copied over the other
    # a deletion at b: a refuses bob's login after its refresh
    assert b.scram.alter([("bob", SHA_256.type)], [])[0].error == ErrorCode.none
    a.documents.refresh()
    assert a.scram.credentials_of("bob", SHA_256.name) is None
    assert a.scram.credentials_of("alice", SHA_256.name) == alice


def test_group_configs_set_at_two_nodes_keep_both(two: tuple[Node, Node]) -> None:
    a, b = two
    a.group_configs.set("g1", {"consumer.session.timeout.ms": "50000"})
    b.group_configs.set("g2", {"consumer.heartbeat.interval.ms": "6000"})
    a.documents.refresh()
    for node in (a, b):
        assert node.group_configs.stored("g1") == {"consumer.session.timeout.ms": "50000"}
        assert node.group_configs.overrides("g2") == {"consumer.heartbeat.interval.ms": "6000"}
        assert node.group_configs.group_ids() == ["g1", "g2"]
    b.group_configs.set("g1", {})  # removed at b
    a.documents.refresh()
    assert a.group_configs.group_ids() == ["g2"] and a.group_configs.overrides("g1") == {}


def test_quotas_set_at_two_nodes_keep_both_and_bind_after_a_refresh(two: tuple[Node, Node]) -> None:
    a, b = two
    assert a.set_quota("alice", 1024.0)
    assert b.set_quota("bob", 2048.0)
    assert a.quotas.produce.limit("bob", "any-client") is None  # not followed yet
    a.documents.refresh()
    for node in (a, b):
        assert node.quotas.values == {
            ((USER, "alice"),): {PRODUCER_BYTE_RATE: 1024.0},
            ((USER, "bob"),): {PRODUCER_BYTE_RATE: 2048.0},
        }
        assert node.quotas.produce.limit("bob", "any-client") == 2048.0


def test_every_document_is_read_in_one_statement_and_unchanged_ones_are_not_applied_again(
    two: tuple[Node, Node],
) -> None:
    a, b = two
    applied: list[bytes | None] = []

    def noted(inner: Callable[[bytes | None], None]) -> Callable[[bytes | None], None]:
        def apply(raw: bytes | None) -> None:
            applied.append(raw)
            inner(raw)

        return apply

    for document in a.documents.documents:
        document.apply = noted(document.apply)
    reads = {"n": 0}
    get_many = a.engine.metadata.get_many  # type: ignore[attr-defined]

    def counted(keys: list[str]) -> dict[str, bytes]:
        reads["n"] += 1
        return get_many(keys)

    a.documents.metadata.get_many = counted  # type: ignore[method-assign]
    a.documents.refresh()
    assert reads["n"] == 1 and applied == []  # nothing changed elsewhere
    b.set_quota("carol", 10.0)
    b.access.create([read_acl("carol", "t")])
    a.documents.refresh()
    assert reads["n"] == 2 and len(applied) == 2


def test_a_change_that_keeps_losing_is_refused_and_leaves_nothing_behind(two: tuple[Node, Node]) -> None:
    """Another writer wins every time (a node that rewrites the document between each read and write):
    after the attempts the change is refused (a StorageError the handler answers) and the node's state
    is the stored one, without the refused change."""
    a, b = two
    document = a.access.document
    honest = document.compare_and_put
    assert honest is not None
    rival = [0]

    def always_beaten(key: str, expected: bytes | None, value: bytes) -> bool:
        rival[0] += 1
        b.access.create([read_acl(f"rival-{rival[0]}", "t")])  # b writes first, every time
        return honest(key, expected, value)

    document.compare_and_put = always_beaten
    with pytest.raises(WriteConflict):
        a.access.create([read_acl("alice", "orders")])
    assert read_acl("alice", "orders") not in a.acls()
    assert read_acl("rival-1", "t") in a.acls()  # followed while retrying


def test_alone_a_document_is_put_without_compare(tmp_path: Path) -> None:
    from groupd.storage.local import LocalMetadata

    metadata = LocalMetadata(tmp_path)
    seen: list[bytes | None] = []
    document = SharedDocument(metadata, "doc.json", seen.append)
    assert not document.shared and document.load() is None
    document.write(b"one")
    document.follow()  # alone: nothing to follow, nothing read
    assert metadata.get("doc.json") == b"one" and seen == []
    assert document.changing(lambda: "answered") == "answered"


def test_a_describe_that_cannot_read_the_document_answers_from_the_nodes_copy(
    two: tuple[Node, Node], caplog: pytest.LogCaptureFixture
) -> None:
    a, b = two
    a.set_quota("alice", 1024.0)
    document = b.quota_store.document

    class Unreadable:
        def get(self, key: str) -> bytes | None:
            raise StorageError("the database is gone")

    document.metadata = Unreadable()  # type: ignore[assignment]
    document.catch_up()
    assert b.quotas.values == {}  # b's copy, a heartbeat old at most
    assert [r.getMessage() for r in caplog.records if r.name == "groupd.storage"] == [
        "answering from this node's copy of client-quotas.json, which could not be read again: the database is gone"
    ]
