"""Inter-broker security: two in-process nodes whose only listener is SASL_SSL carry a transaction's
produce-time verification (AddPartitionsToTxn) and markers (WriteTxnMarkers) and a share-partition's state
(the share-state RPCs) across nodes. Each node reaches the other on the inter-broker listener
(``security.inter.broker.protocol=SASL_SSL``), over TLS checked against the listener's truststore (and the
peer's host name, Kafka's default), logged in with ``sasl.mechanism.inter.broker.protocol`` as the user of
the listener's JAAS config: PLAIN, or SCRAM-SHA-256 with credentials an administrator created first. A
login with a wrong password is refused: the request never reaches the peer. Stepped by hand."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from groupd.broker.app import Broker
from groupd.broker.security.scram import SHA_256
from groupd.cluster.peers import Peers, PeerUnavailable
from groupd.coordinator.share_state.persister import ACKNOWLEDGED, AVAILABLE, StateBatch
from groupd.protocol.api_table import ApiKey
from groupd.protocol.errors import ErrorCode
from tests.cluster.stepped import LONG_LEASE_MS, STATE_SHARDS, TwoNodes, step, stepped
from tests.cluster.test_broker_nodes import metadata, node_config
from tests.cluster.test_share_state_across_nodes import split_pair
from tests.cluster.test_txn_verification_across_nodes import produced, split
from tests.harness import WireClient
from tests.tls_certs import Certs, make_certs
from tests.wire.test_scram import alter as alter_scram
from tests.wire.test_scram import upsertion
from tests.wire.test_tls import connect_tls
from tests.wire.test_transactions import add_body, committed_fetch, end_body, init_body, txn_batch

ADMIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="node" password="node-secret" user_node="node-secret" user_admin="admin-secret";'
)
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="peer" password="peer-secret";'


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def secured(certs: Certs, mechanism: str) -> dict[str, str]:
    return {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": ADMIN_JAAS,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "security.inter.broker.protocol": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": mechanism,
        "connection.failed.authentication.delay.ms": "0",
        "num.partitions": "4",
        "share.coordinator.state.topic.num.partitions": str(STATE_SHARDS),
    }


async def admin(node: Broker, certs: Certs) -> WireClient:
    """A client of the node's SASL_SSL listener, logged in as admin (PLAIN)."""
    client = await connect_tls(node.port_of("SASL_SSL"), ssl.create_default_context(cafile=str(certs.ca)))
    assert (await client.call(17, 1, {"mechanism": "PLAIN"})).error_code == ErrorCode.none
    assert (await client.call(36, 2, {"auth_bytes": b"\0admin\0admin-secret"})).error_code == ErrorCode.none
    return client


@contextlib.asynccontextmanager
async def two_secured(tmp_path: Path, url: str, certs: Certs, mechanism: str) -> AsyncIterator[TwoNodes]:
    """Nodes 1 and 2, SASL_SSL only, topic ``t`` created and every lease spread; for SCRAM the peers' user
    created at node 1 and followed by node 2."""
    config = secured(certs, mechanism)
    nodes = {n: stepped(node_config(tmp_path, url, n, LONG_LEASE_MS, **config)) for n in (1, 2)}
    for n in (1, 2):
        await nodes[n].start()
    both = TwoNodes(nodes, {})
    try:
        both.clients = {n: await admin(nodes[n], certs) for n in (1, 2)}
        if mechanism == "SCRAM-SHA-256":
            altered = await alter_scram(both.clients[1], upsertions=[upsertion("peer", SHA_256, "peer-secret")])
            assert altered == {"peer": (ErrorCode.none, None)}
        await step(nodes[1], nodes[2])  # node 2 follows the credential (and the topic) at its step
        await metadata(both.clients[1], "t")
        await step(nodes[1], nodes[2], nodes[1], nodes[2])
        yield both
    finally:
        for c in both.clients.values():
            await c.close()
        for n in (2, 1):
            await nodes[n].stop()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_markers_and_share_state_cross_nodes_whose_only_listener_is_sasl_ssl(
    tmp_path: Path, postgresql_url: str, certs: Certs, mechanism: str
) -> None:
    async def scenario() -> None:
        async with two_secured(tmp_path, postgresql_url, certs, mechanism) as both:
            nodes = both.nodes
            for n in (1, 2):
                inter = nodes[n].config.inter_broker
                assert inter is not None and (inter.listener, inter.mechanism) == ("SASL_SSL", mechanism)
            # a transaction coordinated by one node, written to partitions the other leads: the leader verifies
            # the partition at the coordinator (AddPartitionsToTxn), the coordinator sends it the markers
            tid, coordinator, led = split(both, "t", 4)
            leader, p = 3 - coordinator, led[0]
            at_coordinator, at_leader = both.clients[coordinator], both.clients[leader]
            init = await at_coordinator.call(22, 4, init_body(tid))
            pid, epoch = init.producer_id, init.producer_epoch
            await at_coordinator.call(24, 3, add_body(tid, pid, epoch, {"t": [p]}))
            sent = nodes[leader].transactions.verifier.requests_sent  # type: ignore[union-attr]
            assert await produced(at_leader, tid, "t", p, txn_batch(pid, epoch, 0, [b"a", b"b"])) == (ErrorCode.none, 0)
            assert nodes[leader].transactions.verifier.requests_sent == sent + 1  # type: ignore[union-attr]
            assert (await at_coordinator.call(26, 3, end_body(tid, pid, epoch, True))).error_code == ErrorCode.none
            for _ in range(100):  # the markers go out after EndTxn is answered
                part = (await at_leader.call(1, 11, committed_fetch("t", p, 0))).responses[0].partitions[0]
                if part.last_stable_offset >= 3:
                    break
                await asyncio.sleep(0.05)
            assert part.last_stable_offset == part.high_watermark == 3  # two records and the commit marker
            # a share-partition whose state another node holds: initialized, written and read there by RPC
            topic_id = nodes[1].listed_topic("t").topic_id  # type: ignore[union-attr]
            key, data_leader, owner = split_pair(nodes[1], "t", topic_id, 4)
            persister = nodes[data_leader].cluster.share_state  # type: ignore[union-attr]
            calls = persister.remote_calls
            assert await persister.initialize(key, 0, 0) == ErrorCode.none
            batches = (StateBatch(0, 1, ACKNOWLEDGED, 1), StateBatch(2, 4, AVAILABLE, 1))
            assert await persister.write(key, 0, 1, 0, -1, batches) == ErrorCode.none
            state = await persister.read(key, 1)
            assert (state.error_code, state.start_offset, state.batches) == (ErrorCode.none, 0, batches)
            assert persister.remote_calls == calls + 3
            assert (await nodes[owner].share_coordinator.read(key, 1)).batches == batches  # stored at the owner
            # both nodes logged in on each other (there is no other listener to reach)
            assert {n: nodes[n].cluster.peers.logins >= 1 for n in (1, 2)} == {1: True, 2: True}  # type: ignore[union-attr]

            # a node that presents a wrong password is refused: its request never reaches the peer
            inter = nodes[1].config.inter_broker
            assert inter is not None
            wrong = Peers(
                lambda node: nodes[node].advertised, "wrong", 5.0, dataclasses.replace(inter, password="wrong")
            )
            with pytest.raises(PeerUnavailable, match="refused"):
                await wrong.call(
                    2, ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
                )
            wrong.close()

    asyncio.run(scenario())
