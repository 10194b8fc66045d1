"""The broker's door to the authorizer (security/access.py): its configuration with Kafka's names, the
principal and host it asks about, the denial log's wording and rate, and the ACLs' store."""

from __future__ import annotations

import logging

import pytest

from groupd.broker.dispatch import RequestContext
from groupd.broker.security import acl_store
from groupd.broker.security.access import LOG_INTERVAL_S, Access
from groupd.broker.security.acl import (
    STANDARD_AUTHORIZER,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    parse_authorizer_class,
    parse_super_users,
)
from groupd.protocol.request import RequestHeader
from groupd.storage.errors import StorageError
from groupd.storage.local import LocalMetadata

CONFIG = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": frozenset({"User:admin"})}
READ_ORDERS = AclBinding(
    ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*", Operation.READ, Permission.ALLOW
)


class Conn:
    """What the access door reads of a connection: its principal, and the user name it is made of (the
    key of the remembered allowed checks)."""

    def __init__(self, principal: str) -> None:
        self.principal = principal
        self.user = principal.split(":", 1)[1]


def ctx(principal: str = "User:alice", host: str = "10.0.0.1", api_key: int = 0) -> RequestContext:
    return RequestContext(RequestHeader(api_key, 12, 1, "c"), host, "conn-1", Conn(principal))


def test_authorizer_class_name_accepts_kafkas_standard_authorizer_or_nothing():
    assert parse_authorizer_class("") == ""
    assert parse_authorizer_class(f" {STANDARD_AUTHORIZER} ") == STANDARD_AUTHORIZER
    with pytest.raises(ValueError):
        parse_authorizer_class("kafka.security.authorizer.AclAuthorizer")


def test_super_users_are_separated_by_semicolons():
    # StandardAuthorizer.getConfiguredSuperUsers: split(";"), trimmed, empties dropped
    assert parse_super_users("User:admin; User:ops;;") == frozenset({"User:admin", "User:ops"})
    assert parse_super_users("") == frozenset()
    with pytest.raises(ValueError):
        parse_super_users("admin")


def test_without_an_authorizer_everything_is_allowed_and_every_operation_reported(tmp_path):
    access = Access.of({"authorizer.class.name": ""}, LocalMetadata(tmp_path))
    assert not access.enabled
    assert access.allowed(ctx(), Operation.WRITE, ResourceType.TOPIC, "t")
    assert access.names(ctx(), Operation.READ, ResourceType.TOPIC, ["a", "b"]) == {"a", "b"}
    # AclEntry.supportedOperations(TRANSACTIONAL_ID) = DESCRIBE, WRITE
    assert access.operations(ctx(), ResourceType.TRANSACTIONAL_ID, "x") == (1 << 8) | (1 << 4)


def test_principal_and_host_come_from_the_request(tmp_path):
    access = Access.of(CONFIG, LocalMetadata(tmp_path))
    access.create(
        [
            AclBinding(
                ResourceType.TOPIC, "t", PatternType.LITERAL, "User:alice", "10.0.0.1", Operation.READ, Permission.ALLOW
            )
        ]
    )
    assert access.allowed(ctx(), Operation.READ, ResourceType.TOPIC, "t")
    assert not access.allowed(ctx(host="10.0.0.2"), Operation.READ, ResourceType.TOPIC, "t")
    assert not access.allowed(ctx("User:bob"), Operation.READ, ResourceType.TOPIC, "t")
    assert access.allowed(ctx("User:admin"), Operation.ALTER, ResourceType.CLUSTER, "kafka-cluster")
    assert access.names(ctx(), Operation.READ, ResourceType.TOPIC, ["t", "u", "t"]) == {"t"}


def test_a_denial_is_logged_once_per_interval_in_kafkas_wording_and_counted(tmp_path, caplog):
    now = [100.0]
    access = Access.of(CONFIG, LocalMetadata(tmp_path))
    access.clock = lambda: now[0]
    with caplog.at_level(logging.INFO, logger="kafka.authorizer.logger"):
        for _ in range(5):
            assert not access.allowed(ctx(), Operation.WRITE, ResourceType.TOPIC, "orders")
        assert not access.allowed(ctx(), Operation.WRITE, ResourceType.TOPIC, "other")
        now[0] += LOG_INTERVAL_S
        assert not access.allowed(ctx(), Operation.WRITE, ResourceType.TOPIC, "orders")
        assert not access.allowed(ctx(), Operation.DESCRIBE, ResourceType.TOPIC, "x", log_denied=False)
    lines = [r.getMessage() for r in caplog.records if r.name == "kafka.authorizer.logger"]
    assert len(lines) == 3
    # StandardAuthorizerData.buildAuditMessage
    assert lines[0] == (
        "Principal = User:alice is Denied operation = WRITE from host = 10.0.0.1 on resource = Topic:LITERAL:orders "
        "for request = Produce with resourceRefCount = 1 based on rule DefaultDeny"
    )
    assert access.denials == 7


def test_acls_are_stored_and_loaded(tmp_path):
    metadata = LocalMetadata(tmp_path)
    access = Access.of(CONFIG, metadata)
    access.create([READ_ORDERS])
    assert acl_store.load(metadata) == [READ_ORDERS]
    again = Access.of(CONFIG, metadata)
    again.load()
    assert again.allowed(ctx(), Operation.READ, ResourceType.TOPIC, "orders")
    assert again.delete([AclFilter.everything()]) == [[READ_ORDERS]]
    assert acl_store.load(metadata) == []


def test_a_change_that_could_not_be_stored_is_undone(tmp_path):
    (tmp_path / "a-file").write_bytes(b"")
    access = Access.of(CONFIG, LocalMetadata(tmp_path / "a-file" / "data"))  # no directory can be made there
    with pytest.raises(StorageError):
        access.create([READ_ORDERS])
    assert access.authorizer is not None and access.authorizer.bindings == []
    assert not access.allowed(ctx(), Operation.READ, ResourceType.TOPIC, "orders")


def test_an_unreadable_store_stops_start_up(tmp_path):
    metadata = LocalMetadata(tmp_path)
    metadata.put(acl_store.KEY, b"{not json")
    with pytest.raises(RuntimeError, match="cannot read the ACLs"):
        Access.of(CONFIG, metadata).load()


def test_denials_are_a_metric(tmp_path):
    from prometheus_client import generate_latest

    from groupd.broker.ops.metrics import Metrics

    class Host:
        access = Access.of(CONFIG, LocalMetadata(tmp_path))

    metrics = Metrics()
    metrics.bind(Host())
    Host.access.allowed(ctx(), Operation.READ, ResourceType.TOPIC, "t")
    Host.access.allowed(ctx(), Operation.READ, ResourceType.TOPIC, "u")
    assert "groupd_authorization_denials_total 2.0" in generate_latest(metrics.registry).decode()
