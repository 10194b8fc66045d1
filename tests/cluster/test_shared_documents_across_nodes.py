"""A SCRAM user, an ACL, a group config and a client quota made at node 1 take effect at node 2 after node
2's next heartbeat (docs/cluster.md, "what is shared"): a kafka-python SCRAM login at node 2, then its
Metadata showing the topic once the ACL is followed; DescribeConfigs and DescribeClientQuotas at node 2,
and node 2's quota bound.

Two in-process nodes with a lease long enough that neither heartbeats by itself during the test: each
heartbeat is stepped by hand, so "node 2 has not followed yet" is a fact, not a race."""

from __future__ import annotations

import asyncio
from pathlib import Path

from groupd.broker.security.scram import SHA_256
from groupd.protocol.errors import ErrorCode
from tests.cluster.stepped import LONG_LEASE_MS, step, stepped
from tests.cluster.test_broker_nodes import metadata, node_config
from tests.harness import WireClient
from tests.wire import test_acls as acls
from tests.wire import test_group_configs as group_configs
from tests.wire import test_quotas as quotas
from tests.wire.test_scram import alter as alter_scram
from tests.wire.test_scram import describe as describe_scram
from tests.wire.test_scram import scram_login, upsertion

# a SCRAM client on SASL_PLAINTEXT is given the other node's SASL_PLAINTEXT address by Metadata; the admin
# (ANONYMOUS, a super user) uses the PLAINTEXT listener
SECURED = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": (
        "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    ),
    "connection.failed.authentication.delay.ms": "0",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
    "num.partitions": "2",
}


def kafka_python_topics(port: int, user: str, password: str) -> set[str]:
    """The topics a kafka-python consumer logged in by SCRAM-SHA-256 at ``port`` may see (Metadata)."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{port}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username=user,
        sasl_plain_password=password,
        request_timeout_ms=10_000,
    )
    try:
        return set(consumer.topics())
    finally:
        consumer.close()


def test_scram_users_and_acls_made_at_one_node_hold_at_the_other_after_its_heartbeat(
    tmp_path: Path, postgresql_url: str
) -> None:
    async def scenario() -> None:
        one = stepped(node_config(tmp_path, postgresql_url, 1, LONG_LEASE_MS, **SECURED))
        two = stepped(node_config(tmp_path, postgresql_url, 2, LONG_LEASE_MS, **SECURED))
        await one.start()
        await two.start()
        admin1 = await WireClient.connect(one.port_of("PLAINTEXT"))
        admin2 = await WireClient.connect(two.port_of("PLAINTEXT"))
        sasl2 = two.port_of("SASL_PLAINTEXT")
        try:
            assert (await metadata(admin1, "t")).topics[0].error_code == ErrorCode.none  # auto-created at 1
            await step(one, two, one, two)  # both follow t; each takes its share
            assert await alter_scram(admin1, upsertions=[upsertion("alice", SHA_256, "alice-secret")]) == {
                "alice": (ErrorCode.none, None)
            }
            # node 2 has not followed: alice is unknown there
            client, answer = await scram_login(sasl2, SHA_256, "alice", "alice-secret")
            await client.close()
            assert answer.error_code == ErrorCode.sasl_authentication_failed
            await step(two)
            client, answer = await scram_login(sasl2, SHA_256, "alice", "alice-secret")
            await client.close()
            assert answer.error_code == ErrorCode.none
            # a real client logs in at node 2; without an ACL t is hidden from alice
            assert "t" not in await asyncio.to_thread(kafka_python_topics, sasl2, "alice", "alice-secret")
            created = await acls.create(admin1, acls.creation(name="t", principal="User:alice", op=acls.READ))
            assert created == [(ErrorCode.none, None)]
            # alice at node 2 before its heartbeat (a raw client: kafka-python may ask node 1)
            alice2, answer = await scram_login(sasl2, SHA_256, "alice", "alice-secret")
            try:
                assert answer.error_code == ErrorCode.none
                assert (await metadata(alice2, "t")).topics[0].error_code == ErrorCode.topic_authorization_failed
                await step(two)
                assert (await metadata(alice2, "t")).topics[0].error_code == ErrorCode.none
            finally:
                await alice2.close()
            assert "t" in await asyncio.to_thread(kafka_python_topics, sasl2, "alice", "alice-secret")
            described = acls.rows(await acls.describe(admin2))
            assert described == {(acls.TOPIC, "t", acls.LITERAL, "User:alice", "*", acls.READ, acls.ALLOW)}
            # a change made at node 2 without a step keeps node 1's: bob's credentials beside alice's
            assert await alter_scram(admin2, upsertions=[upsertion("bob", SHA_256, "bob-secret")]) == {
                "bob": (ErrorCode.none, None)
            }
            described_users = await describe_scram(admin1, None)  # node 1 reads the document first
            assert {user: infos for user, (_, _, infos) in described_users.items()} == {
                "alice": [(SHA_256.type, 4096)],
                "bob": [(SHA_256.type, 4096)],
            }
            await step(one)
            for user in ("alice", "bob"):
                client, answer = await scram_login(one.port_of("SASL_PLAINTEXT"), SHA_256, user, f"{user}-secret")
                await client.close()
                assert answer.error_code == ErrorCode.none, user
        finally:
            await admin1.close()
            await admin2.close()
            await two.stop()
            await one.stop()

    asyncio.run(scenario())


def test_group_configs_and_quotas_made_at_one_node_hold_at_the_other_after_its_heartbeat(
    tmp_path: Path, postgresql_url: str
) -> None:
    async def scenario() -> None:
        one = stepped(node_config(tmp_path, postgresql_url, 1, LONG_LEASE_MS))
        two = stepped(node_config(tmp_path, postgresql_url, 2, LONG_LEASE_MS))
        await one.start()
        await two.start()
        c1, c2 = await WireClient.connect(one.port), await WireClient.connect(two.port)
        try:
            await step(one, two)
            # a group config set at node 1
            assert await group_configs.set_configs(c1, "g", consumer_session_timeout_ms="50000") == (
                ErrorCode.none,
                None,
            )
            assert two.group_configs.overrides("g") == {}  # what node 2's groups run with: not followed yet
            await step(two)
            assert two.group_configs.overrides("g") == {"consumer.session.timeout.ms": "50000"}
            assert (await group_configs.described(c2, "g"))["consumer.session.timeout.ms"].value == "50000"
            # node 2 alters the same group before its next heartbeat: it starts from node 1's latest change;
            # DescribeConfigs there reads the document first, as AlterConfigs does
            assert await group_configs.set_configs(c1, "g", consumer_heartbeat_interval_ms="6000") == (
                ErrorCode.none,
                None,
            )
            assert (await group_configs.described(c2, "g"))["consumer.heartbeat.interval.ms"].value == "6000"
            assert await group_configs.set_configs(c2, "g", consumer_session_timeout_ms="55000") == (
                ErrorCode.none,
                None,
            )
            await step(one)
            expected = {"consumer.session.timeout.ms": "55000", "consumer.heartbeat.interval.ms": "6000"}
            assert one.group_configs.stored("g") == two.group_configs.stored("g") == expected
            # the same for a topic's configs: node 2's incremental change starts from node 1's latest
            assert (await metadata(c1, "t")).topics[0].error_code == ErrorCode.none
            for client, key, value in ((c1, "retention.ms", "60000"), (c2, "segment.bytes", "1048576")):
                answer = await client.call(
                    44, 1, group_configs.incremental([(group_configs.TOPIC, "t", [(key, group_configs.SET, value)])])
                )
                assert group_configs.outcomes(answer) == [("t", ErrorCode.none, None)]
            await step(one)
            for node in (one, two):
                topic = node.topics.get("t")
                assert topic is not None and topic.configs == {"retention.ms": "60000", "segment.bytes": "1048576"}
            # a client quota set at node 1 binds at node 2 after its heartbeat
            entity = [("user", "alice")]
            altered = await c1.call(49, 1, quotas.alter_body(1, [(entity, [("producer_byte_rate", 1024)])]))
            assert [e.error_code for e in altered.entries] == [ErrorCode.none]
            assert two.quotas.produce.limit("alice", "any") is None
            await step(two)
            assert two.quotas.produce.limit("alice", "any") == 1024.0
            # DescribeClientQuotas at node 2 reads the document first: bob's quota, set at node 1 just now
            altered = await c1.call(49, 1, quotas.alter_body(1, [([("user", "bob")], [("producer_byte_rate", 2048)])]))
            assert [e.error_code for e in altered.entries] == [ErrorCode.none]
            describe = quotas.describe_body(1, [("user", 2, None)])
            assert quotas.described(await c2.call(48, 1, describe)) == {
                (("user", "alice"),): {"producer_byte_rate": 1024.0},
                (("user", "bob"),): {"producer_byte_rate": 2048.0},
            }
            # a node whose every compare-and-set loses (another writer always first): after the attempts
            # the change is answered KAFKA_STORAGE_ERROR, one log line, and nothing of it stays
            for document in (two.quota_store.document, two.group_configs.document):
                document.compare_and_put = lambda key, expected, value: False
            altered = await c2.call(49, 1, quotas.alter_body(1, [(entity, [("producer_byte_rate", 7)])]))
            assert [e.error_code for e in altered.entries] == [ErrorCode.kafka_storage_error]
            assert two.quotas.produce.limit("alice", "any") == 1024.0
            assert await group_configs.set_configs(c2, "g", consumer_session_timeout_ms="60000") == (
                ErrorCode.kafka_storage_error,
                "configs not saved: __group_configs.json kept changing on other nodes: the change was not stored",
            )
            assert two.group_configs.stored("g") == expected
        finally:
            await c1.close()
            await c2.close()
            await two.stop()
            await one.stop()

    asyncio.run(scenario())
