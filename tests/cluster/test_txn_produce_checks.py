"""Produce-time verification across two hand-stepped nodes (KIP-890), what Kafka's leader does around it:

- a verification guard between the coordinator's answer and the append (Kafka's VerificationGuard,
  UnifiedLog.maybeStartTransactionVerification): a transaction that ended (its abort marker landed) while
  its partition was being verified is not appended to; the batch is refused INVALID_TXN_STATE ("Record was
  not part of an ongoing transaction") and no transaction is left open on the partition;
- the order of KafkaApis.handleProduceRequest: WRITE on the transactional id, then on each topic, before
  ReplicaManager verifies anything, so a refused produce costs the coordinator no request;
- ``transaction.partition.verification.enable`` (Kafka's default true): false skips the verification
  (ReplicaManager.maybeStartTransactionVerificationForPartitions) and appends;
- acks=0: Kafka's handleProduceAppend verifies transactional batches whatever the acks, and KafkaApis closes
  the connection of an acks=0 produce that failed for any partition instead of answering it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path

from groupd.broker.app import Broker
from groupd.cluster.txn_verification import TxnVerifier
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.protocol.topic_names import OFFSETS_TOPIC
from tests.cluster.stepped import TwoNodes, step, two_started
from tests.cluster.test_txn_verification_across_nodes import (
    produced,
    started_topic,
    txn_produce_body,
    verifier_of,
)
from tests.harness import WireClient
from tests.wire.test_transactions import add_body, committed_fetch, end_body, init_body, txn_batch
from tests.wire.test_txn_offsets import errors, fetched, stable_fetch_body, txn_body

ACLS = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",  # only the DENY rules below refuse anything
}
TOPIC, TRANSACTIONAL_ID = 2, 5  # ResourceType
LITERAL, WRITE, DENY = 3, 4, 2  # PatternType, AclOperation, AclPermissionType


async def until(check: Callable[[], Awaitable[bool]], seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "not reached in time"
        await asyncio.sleep(0.02)


@dataclasses.dataclass
class Begun:
    """A producer's transaction with the first partition the leader leads added."""

    tid: str
    coordinator: int
    leader: int
    led: list[int]
    pid: int
    epoch: int
    node: Broker  # the leader
    verifier: TxnVerifier  # the leader's


async def begun(both: TwoNodes) -> Begun:
    tid, coordinator, leader, led = await started_topic(both)
    init = await both.clients[coordinator].call(22, 4, init_body(tid))
    pid, epoch = init.producer_id, init.producer_epoch
    await both.clients[coordinator].call(24, 3, add_body(tid, pid, epoch, {"t": [led[0]]}))
    node = both.nodes[leader]
    return Begun(tid, coordinator, leader, led, pid, epoch, node, verifier_of(node))


def group_led_by(both: TwoNodes, node: int) -> str:
    """A group whose ``__consumer_offsets`` partition ``node`` leads."""
    one = both.nodes[1]
    assert one.cluster is not None
    return next(
        g
        for g in (f"g-{i}" for i in range(200))
        if one.cluster.leader(OFFSETS_TOPIC, one.coordinator.partition_for(g)) == node
    )


def add_offsets_body(b: Begun, group: str):  # type: ignore[no-untyped-def]
    """AddOffsetsToTxn v3: the group's offsets partition joins the producer's transaction."""
    return codec.make(
        codec.request_class(25, 3), transactional_id=b.tid, producer_id=b.pid, producer_epoch=b.epoch, group_id=group
    )


def test_an_abort_marker_landing_between_verification_and_append_refuses_the_batch(
    tmp_path: Path, postgresql_url: str
) -> None:
    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            b = await begun(both)
            tid, coordinator, leader, p, pid, epoch, node, verifier = (
                b.tid,
                b.coordinator,
                b.leader,
                b.led[0],
                b.pid,
                b.epoch,
                b.node,
                b.verifier,
            )
            real = verifier.verify
            answered, go_on = asyncio.Event(), asyncio.Event()

            async def held(*args, **kwargs):  # type: ignore[no-untyped-def]
                answer = await real(*args, **kwargs)
                answered.set()
                await go_on.wait()  # the coordinator has answered; the append waits for the test
                return answer

            verifier.verify = held  # type: ignore[method-assign]
            produce = asyncio.ensure_future(
                produced(both.clients[leader], tid, "t", p, txn_batch(pid, epoch, 0, [b"a"]))
            )
            await asyncio.wait_for(answered.wait(), 10)
            assert len(node.partitions.guards) == 1  # the verification under way holds its guard
            # the producer aborts meanwhile: the coordinator's abort marker reaches the leader's partition
            ended = await both.clients[coordinator].call(26, 3, end_body(tid, pid, epoch, False))
            assert ended.error_code == ErrorCode.none
            lg = node.partitions.get("t", p)
            assert lg is not None

            async def marked() -> bool:
                return lg.log_end_offset == 1

            await until(marked)
            assert len(node.partitions.guards) == 0  # the marker voided it
            go_on.set()
            # the verified answer came too late: refused, nothing appended, no transaction left open here
            assert await asyncio.wait_for(produce, 10) == (ErrorCode.invalid_txn_state, -1)
            assert lg.log_end_offset == 1
            txns = node.partitions.txn_state(("t", p))
            assert txns is None or not txns.has_open(pid)
            part = (await both.clients[leader].call(1, 11, committed_fetch("t", p, 0))).responses[0].partitions[0]
            assert part.last_stable_offset == part.high_watermark == 1
            # the producer's next transaction verifies again and is written
            verifier.verify = real  # type: ignore[method-assign]
            await both.clients[coordinator].call(24, 3, add_body(tid, pid, epoch, {"t": [p]}))
            assert await produced(both.clients[leader], tid, "t", p, txn_batch(pid, epoch, 0, [b"b"])) == (
                ErrorCode.none,
                1,
            )
            assert len(node.partitions.guards) == 0  # the first batch of the transaction took it away

    asyncio.run(scenario())


def _acl(resource_type: int, name: str):  # type: ignore[no-untyped-def]
    return codec.make(
        codec.nested(codec.request_class(30, 3), "AclCreation"),
        resource_type=resource_type,
        resource_name=name,
        resource_pattern_type=LITERAL,
        principal="User:ANONYMOUS",
        host="*",
        operation=WRITE,
        permission_type=DENY,
    )


def test_an_unauthorized_produce_asks_the_coordinator_nothing(tmp_path: Path, postgresql_url: str) -> None:
    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url, **ACLS) as both:
            tid, coordinator, leader, led = await started_topic(both)
            p = led[1]  # the coordinator knows no producer 77 for the id
            at_leader = both.clients[leader]
            verifier = verifier_of(both.nodes[leader])
            batch = txn_batch(77, 0, 0, [b"a"])
            sent = verifier.requests_sent
            assert (await produced(at_leader, tid, "t", p, batch))[0] == ErrorCode.invalid_producer_id_mapping
            assert verifier.requests_sent == sent + 1  # authorized: verified at the coordinator
            for resource_type, name, refused in (
                (TOPIC, "t", ErrorCode.topic_authorization_failed),
                (TRANSACTIONAL_ID, tid, ErrorCode.transactional_id_authorization_failed),
            ):
                created = await both.clients[1].call(30, 3, {"creations": (_acl(resource_type, name),)})
                assert [r.error_code for r in created.results] == [ErrorCode.none]
                await step(*both.nodes.values())  # the ACLs document followed at the leader
                sent = verifier.requests_sent
                assert (await produced(at_leader, tid, "t", p, batch))[0] == refused
                assert verifier.requests_sent == sent  # refused before any verification

    asyncio.run(scenario())


def test_verification_disabled_appends_without_asking(tmp_path: Path, postgresql_url: str) -> None:
    async def scenario() -> None:
        async with two_started(
            tmp_path, postgresql_url, **{"transaction.partition.verification.enable": "false"}
        ) as both:
            tid, coordinator, leader, led = await started_topic(both)
            verifier = verifier_of(both.nodes[leader])
            sent = verifier.requests_sent
            # a partition never added to any transaction: Kafka without verification writes it
            assert await produced(both.clients[leader], tid, "t", led[1], txn_batch(77, 0, 0, [b"a"])) == (
                ErrorCode.none,
                0,
            )
            assert verifier.requests_sent == sent

    asyncio.run(scenario())


def test_acks_zero_transactional_batches_are_verified_and_a_refusal_closes_the_connection(
    tmp_path: Path, postgresql_url: str
) -> None:
    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            b = await begun(both)
            tid, led, pid, epoch, node, verifier = b.tid, b.led, b.pid, b.epoch, b.node, b.verifier
            at_leader = both.clients[b.leader]
            # the added partition: verified at the coordinator, written, no answer; the connection goes on
            sent = verifier.requests_sent
            body = txn_produce_body(tid, "t", led[0], txn_batch(pid, epoch, 0, [b"a"]))
            at_leader.send(0, 9, dataclasses.replace(body, acks=0))
            at_leader._pending.pop()  # no response comes for it
            lg = node.partitions.get("t", led[0])
            assert lg is not None

            async def written() -> bool:
                return lg.log_end_offset == 1

            await until(written)
            assert verifier.requests_sent == sent + 1
            assert (
                await at_leader.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
            ).error_code == 0
            # a partition never added: verified, refused, nothing written, and the connection is closed
            other = await WireClient.connect(node.port)
            body = txn_produce_body(tid, "t", led[1], txn_batch(pid, epoch, 0, [b"x"]))
            other.send(0, 9, dataclasses.replace(body, acks=0))
            other._pending.pop()
            assert await asyncio.wait_for(other.reader.read(), 10) == b""  # closed by the broker
            await other.close()
            assert verifier.requests_sent == sent + 2
            assert node.partitions.get("t", led[1]).log_end_offset == 0  # type: ignore[union-attr]

    asyncio.run(scenario())


def test_a_batch_overtaking_one_whose_verification_failed_is_out_of_order(tmp_path: Path, postgresql_url: str) -> None:
    """Kafka's VerificationStateEntry keeps the lowest sequence whose verification started: batch 0-4's
    verification fails (retriable), batch 5-9's succeeds; 5-9 is refused OUT_OF_ORDER_SEQUENCE_NUMBER instead
    of opening the producer's sequence at 5 here. The retried 0-4, then 5-9, are written in order."""

    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            b = await begun(both)
            p, verifier, at_leader = b.led[0], b.verifier, both.clients[b.leader]
            real = verifier.verify
            failing = [True]

            async def first_fails(tid, producer_id, producer_epoch, tps):  # type: ignore[no-untyped-def]
                if failing.pop() if failing else False:
                    return dict.fromkeys(tps, ErrorCode.coordinator_load_in_progress)  # retried by the producer
                return await real(tid, producer_id, producer_epoch, tps)

            verifier.verify = first_fails  # type: ignore[method-assign]
            low, high = (
                txn_batch(b.pid, b.epoch, 0, [b"%d" % i for i in range(5)]),
                txn_batch(b.pid, b.epoch, 5, [b"5"]),
            )
            assert await produced(at_leader, b.tid, "t", p, low) == (ErrorCode.not_enough_replicas, -1)
            assert await produced(at_leader, b.tid, "t", p, high) == (ErrorCode.out_of_order_sequence_number, -1)
            assert await produced(at_leader, b.tid, "t", p, low) == (ErrorCode.none, 0)
            assert await produced(at_leader, b.tid, "t", p, high) == (ErrorCode.none, 5)
            assert len(b.node.partitions.guards) == 0

    asyncio.run(scenario())


def test_a_guard_no_append_followed_expires_after_producer_id_expiration_ms(
    tmp_path: Path, postgresql_url: str
) -> None:
    """Kafka's ProducerStateManager.removeExpiredProducers: a verification that failed and was never retried
    leaves a guard (refusing the producer's higher sequences) only until ``producer.id.expiration.ms`` has
    passed since it started, checked every ``producer.id.expiration.check.interval.ms``."""

    async def scenario() -> None:
        expiring = {"producer.id.expiration.ms": "300", "producer.id.expiration.check.interval.ms": "50"}
        async with two_started(tmp_path, postgresql_url, **expiring) as both:
            b = await begun(both)
            p, verifier, at_leader = b.led[0], b.verifier, both.clients[b.leader]
            real = verifier.verify

            async def unreachable(tid, producer_id, producer_epoch, tps):  # type: ignore[no-untyped-def]
                return dict.fromkeys(tps, ErrorCode.network_exception)

            verifier.verify = unreachable  # type: ignore[method-assign]
            low, high = (
                txn_batch(b.pid, b.epoch, 0, [b"%d" % i for i in range(5)]),
                txn_batch(b.pid, b.epoch, 5, [b"5"]),
            )
            assert await produced(at_leader, b.tid, "t", p, low) == (ErrorCode.not_enough_replicas, -1)
            assert len(b.node.partitions.guards) == 1  # left behind: the producer never retried
            verifier.verify = real  # type: ignore[method-assign]
            assert await produced(at_leader, b.tid, "t", p, high) == (ErrorCode.out_of_order_sequence_number, -1)

            async def expired() -> bool:
                return len(b.node.partitions.guards) == 0

            await until(expired, 5.0)
            assert await produced(at_leader, b.tid, "t", p, low) == (ErrorCode.none, 0)
            assert len(b.node.partitions.guards) == 0

    asyncio.run(scenario())


def test_a_txn_offset_commit_is_verified_at_the_transaction_coordinator_node(
    tmp_path: Path, postgresql_url: str
) -> None:
    """Kafka 4.x's group coordinator verifies a TxnOffsetCommit with the transactional id's coordinator (an
    AddPartitionsToTxn v5 ``verify_only`` naming ``__consumer_offsets``) before writing it: a foreign producer
    id is INVALID_PRODUCER_ID_MAPPING, an offsets partition never added INVALID_TXN_STATE (v3); once added
    the offsets are written, and the next commit of the same transaction is not verified again."""

    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            b = await begun(both)  # tid coordinated by b.coordinator; b.leader is the other node
            group = group_led_by(both, b.leader)
            at_group, at_txn = both.clients[b.leader], both.clients[b.coordinator]
            verifier = b.verifier  # the group coordinator's (b.leader)

            def commit(pid: int, offset: int):  # type: ignore[no-untyped-def]
                return txn_body(3, group, "t", [(0, offset)], producer_id=pid, epoch=b.epoch, transactional_id=b.tid)

            sent = verifier.requests_sent
            assert errors(await at_group.call(28, 3, commit(b.pid, 5))) == [("t", 0, ErrorCode.invalid_txn_state)]
            assert verifier.requests_sent == sent + 1
            assert (await at_txn.call(25, 3, add_offsets_body(b, group))).error_code == ErrorCode.none
            assert errors(await at_group.call(28, 3, commit(b.pid + 1, 5))) == [
                ("t", 0, ErrorCode.invalid_producer_id_mapping)
            ]
            assert errors(await at_group.call(28, 3, commit(b.pid, 5))) == [("t", 0, ErrorCode.none)]
            assert verifier.requests_sent == sent + 3
            assert errors(await at_group.call(28, 3, commit(b.pid, 6))) == [("t", 0, ErrorCode.none)]
            assert verifier.requests_sent == sent + 3  # open in the offsets partition now: not asked again
            assert (await at_txn.call(26, 3, end_body(b.tid, b.pid, b.epoch, True))).error_code == ErrorCode.none

            async def applied() -> bool:
                return fetched(await at_group.call(9, 7, stable_fetch_body(group, "t", [0]))) == [(6, 0)]

            await until(applied)

    asyncio.run(scenario())


def test_a_marker_landing_while_a_txn_offset_commit_is_verified_refuses_the_commit(
    tmp_path: Path, postgresql_url: str
) -> None:
    """Kafka's group coordinator appends a verified TxnOffsetCommit with the VerificationGuard it started
    before asking: the producer's abort marker reaching the offsets partition meanwhile (WriteTxnMarkers
    from the transaction coordinator's node) voids it, and the commit is INVALID_TXN_STATE rather than
    pending offsets that no marker will end."""

    async def scenario() -> None:
        async with two_started(tmp_path, postgresql_url) as both:
            b = await begun(both)
            group = group_led_by(both, b.leader)
            at_group, at_txn = both.clients[b.leader], both.clients[b.coordinator]
            assert (await at_txn.call(25, 3, add_offsets_body(b, group))).error_code == ErrorCode.none
            verifier, real = b.verifier, b.verifier.verify
            answered, go_on = asyncio.Event(), asyncio.Event()

            async def held(*args, **kwargs):  # type: ignore[no-untyped-def]
                answer = await real(*args, **kwargs)
                answered.set()
                await go_on.wait()  # the coordinator has answered NONE; the write waits for the test
                return answer

            verifier.verify = held  # type: ignore[method-assign]
            body = txn_body(3, group, "t", [(0, 7)], producer_id=b.pid, epoch=b.epoch, transactional_id=b.tid)
            commit = asyncio.ensure_future(at_group.call(28, 3, body))
            await asyncio.wait_for(answered.wait(), 10)
            guards = b.node.coordinator.txn_guards
            assert len(guards) == 1
            assert (await at_txn.call(26, 3, end_body(b.tid, b.pid, b.epoch, False))).error_code == ErrorCode.none

            async def voided() -> bool:
                return len(guards) == 0  # the abort marker's WriteTxnMarkers reached the group's node

            await until(voided)
            go_on.set()
            assert errors(await asyncio.wait_for(commit, 10)) == [("t", 0, ErrorCode.invalid_txn_state)]
            assert not b.node.coordinator.has_pending_transactional_offsets(group)
            assert fetched(await at_group.call(9, 7, stable_fetch_body(group, "t", [0]))) == [(-1, 0)]

    asyncio.run(scenario())
