"""CreateAcls, DescribeAcls and DeleteAcls with an authorizer, through SASL PLAIN sockets: Kafka's
AclApis (CLUSTER ALTER/DESCRIBE first), its validation (AclApis, AclControlManager) and filters, and the
ACLs' durability across a restart."""

from __future__ import annotations

import pytest

from groupd.broker.app import Broker
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from tests.conftest import broker_config
from tests.harness import WireClient
from tests.wire.test_sasl import login

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";'
)
AUTHORIZED_CONFIG = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "connection.failed.authentication.delay.ms": 0,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
}
# ResourceType TOPIC 2, GROUP 3, CLUSTER 4; PatternType ANY 1, MATCH 2, LITERAL 3, PREFIXED 4;
# AclOperation ANY 1, ALL 2, READ 3, WRITE 4, DESCRIBE 8; AclPermissionType ANY 1, DENY 2, ALLOW 3
TOPIC, GROUP, CLUSTER = 2, 3, 4
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
READ, WRITE = 3, 4
DENY, ALLOW = 2, 3


async def start(tmp_path, **overrides) -> Broker:
    b = Broker(broker_config(tmp_path, **{**AUTHORIZED_CONFIG, **overrides}))
    await b.start()
    return b


@pytest.fixture
async def acl_broker(tmp_path):
    b = await start(tmp_path)
    yield b
    await b.stop()


async def user(b: Broker, name: str) -> WireClient:
    client = await WireClient.connect(b.port_of("SASL_PLAINTEXT"))
    auth = await login(client, name, f"{name}-secret")
    assert auth.error_code == ErrorCode.none
    return client


def creation(rtype=TOPIC, name="orders", pattern=LITERAL, principal="User:alice", host="*", op=READ, perm=ALLOW):
    return codec.make(
        codec.nested(codec.request_class(30, 3), "AclCreation"),
        resource_type=rtype,
        resource_name=name,
        resource_pattern_type=pattern,
        principal=principal,
        host=host,
        operation=op,
        permission_type=perm,
    )


def filter_fields(rtype=ANY, name=None, pattern=ANY, principal=None, host=None, op=ANY, perm=ANY):
    return {
        "resource_type_filter": rtype,
        "resource_name_filter": name,
        "pattern_type_filter": pattern,
        "principal_filter": principal,
        "host_filter": host,
        "operation": op,
        "permission_type": perm,
    }


async def create(client: WireClient, *creations):
    return [(r.error_code, r.error_message) for r in (await client.call(30, 3, {"creations": creations})).results]


async def describe(client: WireClient, **fields):
    return await client.call(29, 3, filter_fields(**fields))


def rows(resp) -> set[tuple]:
    return {
        (r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type)
        for r in resp.resources
        for a in r.acls
    }


async def test_only_cluster_alter_may_create_and_cluster_describe_may_describe(acl_broker):
    alice = await user(acl_broker, "alice")
    # AclApis: authorizeClusterOperation(ALTER) / (DESCRIBE) -> CLUSTER_AUTHORIZATION_FAILED
    assert [code for code, _ in await create(alice, creation(), creation(name="x"))] == [
        ErrorCode.cluster_authorization_failed
    ] * 2
    assert (await describe(alice)).error_code == ErrorCode.cluster_authorization_failed
    flt = codec.make(codec.nested(codec.request_class(31, 3), "DeleteAclsFilter"), **filter_fields())
    deleted = await alice.call(31, 3, {"filters": (flt,)})
    assert deleted.filter_results[0].error_code == ErrorCode.cluster_authorization_failed
    # a super user may; then an ALTER on the cluster lets alice create, which implies DESCRIBE
    admin = await user(acl_broker, "admin")
    assert await create(admin, creation(rtype=CLUSTER, name="kafka-cluster", op=7)) == [(ErrorCode.none, None)]
    assert await create(alice, creation()) == [(ErrorCode.none, None)]
    assert (await describe(alice)).error_code == ErrorCode.none
    await alice.close()
    await admin.close()


async def test_created_acls_are_described_by_filters(acl_broker):
    admin = await user(acl_broker, "admin")
    acls = [
        creation(),
        creation(name="ord", pattern=PREFIXED, op=WRITE),
        creation(name="*", principal="User:bob", perm=DENY),
        creation(rtype=GROUP, name="g1"),
    ]
    assert await create(admin, *acls) == [(ErrorCode.none, None)] * 4
    everything = await describe(admin)
    assert everything.error_code == ErrorCode.none
    assert rows(everything) == {
        (TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW),
        (TOPIC, "ord", PREFIXED, "User:alice", "*", WRITE, ALLOW),
        (TOPIC, "*", LITERAL, "User:bob", "*", READ, DENY),
        (GROUP, "g1", LITERAL, "User:alice", "*", READ, ALLOW),
    }
    # grouped by resource pattern (DescribeAclsResponse.aclsResources)
    assert len(everything.resources) == 4
    # MATCH: every ACL that applies to the topic "orders": its literal, the wildcard and the prefix
    matched = await describe(admin, rtype=TOPIC, name="orders", pattern=MATCH)
    assert {(r[1], r[2]) for r in rows(matched)} == {("orders", LITERAL), ("ord", PREFIXED), ("*", LITERAL)}
    # LITERAL with a name: only that exact binding
    assert {r[1] for r in rows(await describe(admin, rtype=TOPIC, name="orders", pattern=LITERAL))} == {"orders"}
    assert {r[1] for r in rows(await describe(admin, principal="User:bob"))} == {"*"}
    assert {r[1] for r in rows(await describe(admin, perm=ALLOW, op=WRITE))} == {"ord"}
    await admin.close()


async def test_invalid_creations_get_invalid_request_each(acl_broker):
    admin = await user(acl_broker, "admin")
    got = await create(
        admin,
        creation(rtype=CLUSTER, name="other"),
        creation(name=""),
        creation(pattern=MATCH),
        creation(op=ANY),
        creation(perm=ANY),
        creation(principal="alice"),
        creation(),
    )
    assert got == [
        (ErrorCode.invalid_request, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (ErrorCode.invalid_request, "Invalid empty resource name"),
        (ErrorCode.invalid_request, "Invalid patternType MATCH"),
        (ErrorCode.invalid_request, "Invalid operation ANY"),
        (ErrorCode.invalid_request, "Invalid permissionType ANY"),
        (ErrorCode.invalid_request, "expected a string in format principalType:principalName but got alice"),
        (ErrorCode.none, None),
    ]
    assert len(rows(await describe(admin))) == 1
    # an UNKNOWN filter (code 0) is refused (AclControlManager.validateFilter)
    bad = await describe(admin, op=0)
    assert (bad.error_code, bad.error_message) == (ErrorCode.invalid_request, "Unknown entryFilter.")
    await admin.close()


async def test_delete_returns_what_each_filter_removed(acl_broker):
    admin = await user(acl_broker, "admin")
    await create(admin, creation(), creation(name="ord", pattern=PREFIXED), creation(rtype=GROUP, name="g"))
    cls = codec.nested(codec.request_class(31, 3), "DeleteAclsFilter")
    resp = await admin.call(
        31,
        3,
        {
            "filters": (
                codec.make(cls, **filter_fields(pattern=PREFIXED)),
                codec.make(cls, **filter_fields(rtype=GROUP)),
                codec.make(cls, **filter_fields(rtype=GROUP)),  # nothing left for it
                codec.make(cls, **filter_fields(perm=0)),
            )
        },
    )
    results = resp.filter_results
    assert [r.error_code for r in results] == [ErrorCode.none] * 3 + [ErrorCode.invalid_request]
    assert [(m.resource_name, m.pattern_type, m.error_code) for m in results[0].matching_acls] == [
        ("ord", PREFIXED, ErrorCode.none)
    ]
    assert [m.resource_name for m in results[1].matching_acls] == ["g"]
    assert results[2].matching_acls == ()
    assert {r[1] for r in rows(await describe(admin))} == {"orders"}
    await admin.close()


async def test_acls_survive_a_restart(tmp_path):
    b = await start(tmp_path)
    admin = await user(b, "admin")
    await create(admin, creation(), creation(name="p-", pattern=PREFIXED, perm=DENY))
    await admin.close()
    await b.stop()
    b = await start(tmp_path)
    try:
        admin = await user(b, "admin")
        assert {(r[1], r[6]) for r in rows(await describe(admin))} == {("orders", ALLOW), ("p-", DENY)}
        await admin.close()
    finally:
        await b.stop()
