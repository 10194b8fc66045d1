"""The authorizer's decisions, each fact from Apache Kafka's source (metadata/.../authorizer/
StandardAuthorizerData.java, clients/.../Authorizer.java authorizeByResourceType, clients/.../
ResourcePatternFilter.java and AccessControlEntryFilter.java, metadata/.../AclControlManager.java,
core/.../AclApis.scala, server/.../AclEntry.java supportedOperations)."""

from __future__ import annotations

import pytest

from groupd.broker.security.acl import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    invalid_binding,
)
from groupd.broker.security.authorizer import Authorizer

ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"
TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
Op = Operation


def acl(
    rtype: ResourceType = TOPIC,
    name: str = "orders",
    pattern: PatternType = LIT,
    principal: str = ALICE,
    host: str = "*",
    op: Operation = Op.READ,
    perm: Permission = ALLOW,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def auth(*acls: AclBinding, allow_if_no_acl: bool = False, super_users: tuple[str, ...] = ()) -> Authorizer:
    return Authorizer(super_users, allow_if_no_acl, acls)


def ok(
    a: Authorizer,
    op: Operation = Op.READ,
    name: str = "orders",
    principal: str = ALICE,
    rtype: ResourceType = TOPIC,
    host: str = HOST,
) -> bool:
    return a.authorize(principal, host, op, rtype, name)


def test_wire_codes_are_kafkas():
    # AclOperation, ResourceType, PatternType, AclPermissionType codes
    assert list(range(5)) == [Op.UNKNOWN, Op.ANY, Op.ALL, Op.READ, Op.WRITE]
    assert (Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE) == (5, 6, 7, 8)
    assert (Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE) == (9, 10, 11, 12)
    assert (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS) == (13, 14)
    assert (TOPIC, GROUP, CLUSTER, TXN, ResourceType.DELEGATION_TOKEN, ResourceType.USER) == (2, 3, 4, 5, 6, 7)
    assert (PatternType.ANY, PatternType.MATCH, LIT, PRE) == (1, 2, 3, 4)
    assert (Permission.ANY, DENY, ALLOW) == (1, 2, 3)


def test_no_acls_denies_by_default_and_allow_everyone_allows():
    # allow.everyone.if.no.acl.found defaults to false: DENIED (StandardAuthorizer.getDefaultResult)
    assert not ok(auth())
    assert ok(auth(allow_if_no_acl=True))


def test_a_resource_with_acls_for_someone_else_is_denied_even_with_allow_everyone():
    # MatchingRuleBuilder.build: hasResourceAcls without a match -> DENY_RULE, not the noAclRule
    a = auth(acl(principal=BOB), allow_if_no_acl=True)
    assert not ok(a)
    assert ok(a, principal=BOB)
    assert ok(a, name="other")  # no ACL on that topic: the default


def test_super_users_are_allowed_everything_even_against_deny():
    a = auth(acl(perm=DENY, op=Op.ALL), super_users=(ALICE,))
    assert ok(a, Op.ALTER)
    assert ok(a, Op.CLUSTER_ACTION, name="kafka-cluster", rtype=CLUSTER)
    assert not ok(a, principal=BOB)


def test_deny_wins_over_allow():
    a = auth(acl(op=Op.READ), acl(op=Op.READ, perm=DENY))
    assert not ok(a)


def test_deny_of_the_wildcard_principal_denies_everyone():
    a = auth(acl(op=Op.READ), acl(principal="User:*", op=Op.READ, perm=DENY))
    assert not ok(a)


def test_wildcard_principal_allows_everyone():
    a = auth(acl(principal="User:*"))
    assert ok(a) and ok(a, principal=BOB)


@pytest.mark.parametrize("implying", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE])
def test_allow_of_read_write_delete_alter_implies_describe(implying):
    # IMPLIES_DESCRIBE = {DESCRIBE, READ, WRITE, DELETE, ALTER}
    assert ok(auth(acl(op=implying)), Op.DESCRIBE)


@pytest.mark.parametrize("not_implying", [Op.CREATE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE])
def test_other_operations_do_not_imply_describe(not_implying):
    assert not ok(auth(acl(op=not_implying)), Op.DESCRIBE)


def test_alter_configs_implies_describe_configs_but_not_the_reverse():
    # IMPLIES_DESCRIBE_CONFIGS = {DESCRIBE_CONFIGS, ALTER_CONFIGS}
    assert ok(auth(acl(op=Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS)
    assert not ok(auth(acl(op=Op.DESCRIBE_CONFIGS)), Op.ALTER_CONFIGS)
    assert not ok(auth(acl(op=Op.ALTER)), Op.DESCRIBE_CONFIGS)


def test_implication_is_for_allow_only_a_deny_of_read_leaves_describe():
    a = auth(acl(op=Op.DESCRIBE), acl(op=Op.READ, perm=DENY))
    assert ok(a, Op.DESCRIBE)
    assert not ok(a, Op.READ)


def test_read_does_not_imply_write():
    assert not ok(auth(acl(op=Op.READ)), Op.WRITE)


def test_all_allows_and_denies_every_operation():
    for op in (Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DELETE):
        assert ok(auth(acl(op=Op.ALL)), op)
        assert not ok(auth(acl(op=Op.ALL, perm=DENY), acl(op=op)), op)


def test_literal_matches_only_its_name():
    a = auth(acl(name="orders"))
    assert ok(a, name="orders")
    assert not ok(a, name="orders-eu")
    assert not ok(a, name="order")


def test_prefixed_matches_names_starting_with_it_including_itself():
    a = auth(acl(name="ord", pattern=PRE))
    assert ok(a, name="orders") and ok(a, name="ord")
    assert not ok(a, name="or") and not ok(a, name="payments")


def test_prefixed_deny_overrides_literal_allow():
    a = auth(acl(name="orders"), acl(name="ord", pattern=PRE, perm=DENY))
    assert not ok(a)


def test_several_prefixes_each_apply():
    a = auth(acl(name="o", pattern=PRE, op=Op.WRITE), acl(name="orders-", pattern=PRE))
    assert ok(a, Op.WRITE, name="orders-eu") and ok(a, Op.READ, name="orders-eu")
    assert not ok(a, Op.READ, name="other")


def test_literal_wildcard_resource_matches_every_name_of_its_type():
    a = auth(acl(name="*"))
    assert ok(a, name="anything")
    assert not ok(a, name="anything", rtype=GROUP)


def test_prefixed_star_is_an_ordinary_prefix_not_a_wildcard():
    a = auth(acl(name="*", pattern=PRE))
    assert ok(a, name="*x")
    assert not ok(a, name="orders")


def test_wildcard_deny_overrides_a_literal_allow():
    assert not ok(auth(acl(), acl(name="*", perm=DENY)))


def test_host_must_be_the_clients_address_or_wildcard():
    a = auth(acl(host="10.0.0.1"))
    assert ok(a, host="10.0.0.1")
    assert not ok(a, host="10.0.0.2")
    b = auth(acl(), acl(host="10.0.0.2", perm=DENY))
    assert ok(b, host="10.0.0.1") and not ok(b, host="10.0.0.2")


def test_cache_is_dropped_when_acls_change():
    a = auth()
    assert not ok(a)
    a.create([acl()])
    assert ok(a)
    a.delete(AclFilter(TOPIC, "orders", LIT, None, None, Op.ANY, Permission.ANY))
    assert not ok(a)


def test_the_access_doors_allowed_checks_by_user_name_are_dropped_when_acls_change():
    """Access.allowed remembers an allowed check by the connection's user name (no principal string built);
    a deleted ACL refuses the next check, and another user with the same name's principal is not confused."""
    from types import SimpleNamespace

    from groupd.broker.security.access import Access

    a = auth(acl())
    access = Access(a, None)  # type: ignore[arg-type]  (no store: nothing is created or deleted through it)
    ctx = SimpleNamespace(conn=SimpleNamespace(user="alice", principal=ALICE), client_host=HOST)
    assert access.allowed(ctx, Op.READ, TOPIC, "orders") and access.allowed(ctx, Op.READ, TOPIC, "orders")
    assert ("alice", HOST, Op.READ, TOPIC, "orders") in a.allowed_users
    # a user literally named "User:alice" is User:User:alice, not alice
    other = SimpleNamespace(conn=SimpleNamespace(user=ALICE, principal=f"User:{ALICE}"), client_host=HOST)
    assert not access.allowed(other, Op.READ, TOPIC, "orders", log_denied=False)
    a.delete(AclFilter(TOPIC, "orders", LIT, None, None, Op.ANY, Permission.ANY))
    assert not a.allowed_users
    assert not access.allowed(ctx, Op.READ, TOPIC, "orders", log_denied=False)


def test_authorized_operations_bits_range_over_the_supported_operations():
    # AclEntry.supportedOperations(GROUP) = READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS;
    # Utils.to32BitField sets bit 1 << code
    a = auth(acl(rtype=GROUP, name="g", op=Op.ALL))
    expected = sum(1 << op for op in (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS))
    assert a.authorized_operations(ALICE, HOST, GROUP, "g") == expected
    b = auth(acl(rtype=GROUP, name="g", op=Op.READ))
    assert b.authorized_operations(ALICE, HOST, GROUP, "g") == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert b.authorized_operations(BOB, HOST, GROUP, "g") == 0


def test_allow_everyone_gives_every_operation_until_an_acl_names_the_resource():
    """What librdkafka's 0081 (DescribeTopics/DescribeCluster/DescribeConsumerGroups with authorized operations)
    checks against a broker with allow.everyone.if.no.acl.found=true and its user no super user: every
    supported operation of a topic without ACLs; once an ALLOW READ names the topic, READ and the DESCRIBE
    it implies only (StandardAuthorizerData: a resource with ACLs is never the default's)."""
    a = auth(allow_if_no_acl=True)
    every = sum(1 << op for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE,
                                   Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS))  # AclEntry.supportedOperations(TOPIC)
    assert a.authorized_operations(ALICE, HOST, TOPIC, "orders") == every
    a.create([acl(op=Op.READ)])
    assert a.authorized_operations(ALICE, HOST, TOPIC, "orders") == (1 << Op.READ) | (1 << Op.DESCRIBE)
    a.delete(AclFilter(TOPIC, "orders", LIT, None, None, Op.ANY, Permission.ANY))
    assert a.authorized_operations(ALICE, HOST, TOPIC, "orders") == every


def test_decisions_are_cached_until_the_acls_change():
    """A decision is kept by (principal, host, operation, type, name), which Access.allowed reads directly; any
    change to the ACLs forgets them all."""
    a = auth(acl(op=Op.READ))
    assert ok(a) and a.cache[(ALICE, HOST, Op.READ, TOPIC, "orders")].allowed
    a.create([acl(op=Op.READ, perm=DENY)])
    assert not a.cache and not ok(a)
    a.delete(AclFilter(TOPIC, "orders", LIT, None, None, Op.ANY, DENY))
    assert not a.cache and ok(a)


def test_authorize_by_resource_type():
    # Authorizer.authorizeByResourceType: any unshadowed ALLOW of exactly op (or ALL) for the type
    assert auth(acl(op=Op.WRITE, name="t1")).authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)
    assert auth(acl(op=Op.ALL, name="t", pattern=PRE)).authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)
    assert not auth(acl(op=Op.READ)).authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)
    # a DENY of the same literal or of a prefix of the allowed name shadows it
    shadowed = auth(acl(op=Op.WRITE), acl(op=Op.WRITE, perm=DENY))
    assert not shadowed.authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)
    assert not auth(
        acl(op=Op.WRITE, name="orders", pattern=PRE), acl(op=Op.WRITE, name="or", pattern=PRE, perm=DENY)
    ).authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)
    # the literal wildcard: DENY denies outright, ALLOW allows
    assert not auth(acl(op=Op.WRITE, name="a"), acl(op=Op.WRITE, name="*", perm=DENY)).authorize_by_resource_type(
        ALICE, HOST, Op.WRITE, TOPIC
    )
    assert auth(acl(op=Op.WRITE, name="*")).authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)
    # allowed by the made-up name: the default, a super user
    assert Authorizer((), True).authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)
    assert Authorizer((ALICE,), False).authorize_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)


def test_decision_rule_wording():
    assert auth(super_users=(ALICE,)).decide(ALICE, HOST, Op.READ, TOPIC, "t").rule == "SuperUser"
    assert auth().decide(ALICE, HOST, Op.READ, TOPIC, "t").rule == "DefaultDeny"
    assert auth(allow_if_no_acl=True).decide(ALICE, HOST, Op.READ, TOPIC, "t").rule == "DefaultAllow"
    assert auth(acl()).decide(ALICE, HOST, Op.READ, TOPIC, "orders").rule.startswith("MatchingAcl(acl=StandardAcl(")


# ------------------------------------------------------------ CreateAcls validation


@pytest.mark.parametrize(
    "binding, message",
    [
        # AclApis.handleCreateAcls
        (acl(rtype=CLUSTER, name="other"), "The only valid name for the CLUSTER resource is kafka-cluster"),
        (acl(name=""), "Invalid empty resource name"),
        # AclControlManager.validateNewAcl
        (acl(rtype=ResourceType.ANY), "Invalid resourceType ANY"),
        (acl(pattern=PatternType.MATCH), "Invalid patternType MATCH"),
        (acl(pattern=PatternType.ANY), "Invalid patternType ANY"),
        (acl(op=Op.ANY), "Invalid operation ANY"),
        (acl(perm=Permission.ANY), "Invalid permissionType ANY"),
        # SecurityUtils.parseKafkaPrincipal
        (acl(principal="alice"), "expected a string in format principalType:principalName but got alice"),
    ],
)
def test_invalid_bindings_are_refused_with_kafkas_message(binding, message):
    assert invalid_binding(binding) == message
    a = auth()
    assert a.create([binding]) == [message]
    assert len(a) == 0


def test_create_is_idempotent_and_keeps_order():
    a = auth()
    first, second = acl(name="b"), acl(name="a")
    assert a.create([first, second, first]) == [None, None, None]
    assert a.bindings == [first, second]
    assert invalid_binding(acl(rtype=CLUSTER, name="kafka-cluster")) is None


def test_unknown_wire_codes_read_as_unknown():
    b = AclBinding.of_wire(99, "t", 99, ALICE, "*", 99, 99)
    assert (b.resource_type, b.pattern, b.operation, b.permission) == (0, 0, 0, 0)


# ------------------------------------------------------------ filters


def flt(
    rtype: ResourceType = ResourceType.ANY,
    name: str | None = None,
    pattern: PatternType = PatternType.ANY,
    principal: str | None = None,
    host: str | None = None,
    op: Operation = Op.ANY,
    perm: Permission = Permission.ANY,
) -> AclFilter:
    return AclFilter(rtype, name, pattern, principal, host, op, perm)


def test_any_filter_matches_everything():
    for b in (acl(), acl(rtype=GROUP, pattern=PRE, op=Op.DELETE, perm=DENY, host="1.2.3.4")):
        assert flt().matches(b)


def test_filter_fields_narrow():
    b = acl()
    assert flt(rtype=TOPIC).matches(b) and not flt(rtype=GROUP).matches(b)
    assert flt(principal=ALICE).matches(b) and not flt(principal=BOB).matches(b)
    assert flt(host="*").matches(b) and not flt(host=HOST).matches(b)
    assert flt(op=Op.READ).matches(b) and not flt(op=Op.WRITE).matches(b)
    assert flt(perm=ALLOW).matches(b) and not flt(perm=DENY).matches(b)
    assert flt(pattern=LIT).matches(b) and not flt(pattern=PRE).matches(b)


def test_any_pattern_with_a_name_matches_that_exact_name_of_any_pattern():
    # ResourcePatternFilter.matches: ANY or the same pattern type -> name equality
    assert flt(name="ord", pattern=PatternType.ANY).matches(acl(name="ord", pattern=PRE))
    assert not flt(name="orders", pattern=PatternType.ANY).matches(acl(name="ord", pattern=PRE))
    assert not flt(name="orders", pattern=PatternType.ANY).matches(acl(name="*"))


def test_match_selects_the_bindings_that_apply_to_a_resource():
    f = flt(rtype=TOPIC, name="orders", pattern=PatternType.MATCH)
    assert f.matches(acl(name="orders"))
    assert f.matches(acl(name="*"))  # the literal wildcard
    assert f.matches(acl(name="ord", pattern=PRE))
    assert f.matches(acl(name="orders", pattern=PRE))
    assert not f.matches(acl(name="orders-eu"))
    assert not f.matches(acl(name="orders-", pattern=PRE))


def test_unknown_filters_are_refused():
    # AclControlManager.validateFilter
    assert flt(rtype=ResourceType.UNKNOWN).unknown() == "Unknown patternFilter."
    assert flt(pattern=PatternType.UNKNOWN).unknown() == "Unknown patternFilter."
    assert flt(op=Op.UNKNOWN).unknown() == "Unknown entryFilter."
    assert flt(perm=Permission.UNKNOWN).unknown() == "Unknown entryFilter."
    assert flt().unknown() is None


def test_delete_returns_what_it_removed_and_describe_reads():
    a = auth(acl(name="a"), acl(name="b", pattern=PRE), acl(rtype=GROUP, name="g"))
    assert a.describe(flt(rtype=TOPIC)) == [acl(name="a"), acl(name="b", pattern=PRE)]
    assert a.delete(flt(pattern=PRE)) == [acl(name="b", pattern=PRE)]
    assert a.bindings == [acl(name="a"), acl(rtype=GROUP, name="g")]
    assert not ok(auth(*a.bindings), name="b")
    assert a.delete(flt(pattern=PRE)) == []


def test_removing_a_prefix_keeps_others_of_the_same_length():
    a = auth(acl(name="ab", pattern=PRE), acl(name="cd", pattern=PRE))
    a.delete(flt(name="ab"))
    assert ok(a, name="cde") and not ok(a, name="abc")


def test_json_round_trip():
    b = acl(rtype=TXN, name="tx-", pattern=PRE, host="1.1.1.1", op=Op.WRITE, perm=DENY)
    assert AclBinding.from_json(b.to_json()) == b
