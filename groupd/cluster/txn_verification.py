"""Produce-time verification of transactions across nodes (KIP-890), as Kafka's AddPartitionsToTxnManager
makes it: a partition leader that does not coordinate a producer's transactional id asks the node that
does (the holder of the id's ``__transaction_state`` partition) whether the partition was added to the
producer's open transaction, in an AddPartitionsToTxn v5 request with ``verify_only``.

Verifications bound for one node while a request to it is in flight wait and go together in the next one
(one request per node at a time, any number of transactional ids in it), so a burst of first batches
costs one round trip per coordinator node, not one per batch. The answers are translated as Kafka's
manager translates them for the produce path (``produce_error``), so a client hears what it would hear
from a Kafka leader.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kio.schema.add_partitions_to_txn.v5.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from kio.schema.add_partitions_to_txn.v5.response import AddPartitionsToTxnResponse
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import i16, i32

from groupd.cluster.peers import Peers, PeerUnavailable
from groupd.coordinator.transactions.rules import TopicPartition
from groupd.protocol.api_table import ApiKey
from groupd.protocol.errors import ErrorCode

log = logging.getLogger("groupd.cluster")

VERIFY_VERSION = 5  # the first AddPartitionsToTxn version whose coordinator may answer TRANSACTION_ABORTABLE
# Produce versions up to 10 are Kafka's "defaultError" clients: they do not know TRANSACTION_ABORTABLE
LAST_DEFAULT_ERROR_PRODUCE_VERSION = 10
# Kafka's leader answers these as NOT_ENOUGH_REPLICAS, which every client retries without a metadata refresh
_RETRIED = frozenset(
    {
        ErrorCode.network_exception,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.concurrent_transactions,
    }
)


def coordinator_error(
    code: ErrorCode, version: int, last_default_error_version: int = LAST_DEFAULT_ERROR_PRODUCE_VERSION
) -> ErrorCode:
    """A coordinator's per-partition answer as Kafka's AddPartitionsToTxnManager passes it on: PRODUCER_FENCED
    becomes INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE for a request up to
    ``last_default_error_version`` (of Produce by default; TxnOffsetCommit has its own)."""
    if code == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    if code == ErrorCode.transaction_abortable and version <= last_default_error_version:
        return ErrorCode.invalid_txn_state
    return code


def produce_error(code: ErrorCode) -> ErrorCode:
    """What the Produce answer says for a verification that failed (Kafka's ReplicaManager): a coordinator
    that moved, loads, is unreachable or is ending the transaction becomes NOT_ENOUGH_REPLICAS (retried)."""
    return ErrorCode.not_enough_replicas if code in _RETRIED else code


@dataclass
class _Ask:
    producer_id: int
    producer_epoch: int
    partitions: set[TopicPartition]
    answer: asyncio.Future[dict[TopicPartition, ErrorCode]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class TxnVerifier:
    """Batches verifications per coordinator node; ``coordinator(tid)`` names the node (None: nobody)."""

    def __init__(self, peers: Peers, coordinator: Callable[[str], int | None]) -> None:
        self.peers = peers
        self.coordinator = coordinator
        self._waiting: dict[int, dict[str, list[_Ask]]] = {}  # node -> transactional id -> asks
        self._sending: set[int] = set()
        self.requests_sent = 0  # how many AddPartitionsToTxn requests went out (tests and metrics)

    async def verify(
        self, tid: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """Each partition's raw coordinator answer (``coordinator_error`` and ``produce_error`` translate)."""
        wanted = set(partitions)
        node = self.coordinator(tid)
        if node is None:
            return dict.fromkeys(wanted, ErrorCode.coordinator_not_available)
        ask = _Ask(producer_id, producer_epoch, wanted)
        self._waiting.setdefault(node, {}).setdefault(tid, []).append(ask)
        if node not in self._sending:
            self._sending.add(node)
            asyncio.get_running_loop().create_task(self._send_all(node))
        return await asyncio.shield(ask.answer)

    async def _send_all(self, node: int) -> None:
        try:
            while batch := self._waiting.pop(node, None):
                try:
                    await self._send(node, batch)
                except Exception as exc:  # an answer that could not be read: nobody may wait for ever
                    log.warning("transaction verification at node %d failed: %r", node, exc)
                    for asks in batch.values():
                        for ask in asks:
                            _settle(ask, dict.fromkeys(ask.partitions, ErrorCode.network_exception))
        finally:
            self._sending.discard(node)

    async def _send(self, node: int, batch: dict[str, list[_Ask]]) -> None:
        # one entry per transactional id, as Kafka keeps: an older epoch's ask is answered at once
        sent: dict[str, tuple[_Ask, set[TopicPartition]]] = {}
        for tid, asks in batch.items():
            newest = max(asks, key=lambda a: (a.producer_epoch, a.producer_id))
            wanted: set[TopicPartition] = set()
            for ask in asks:
                if (ask.producer_id, ask.producer_epoch) != (newest.producer_id, newest.producer_epoch):
                    _settle(ask, dict.fromkeys(ask.partitions, ErrorCode.invalid_producer_epoch))
                else:
                    wanted |= ask.partitions
            sent[tid] = (newest, wanted)
        request = AddPartitionsToTxnRequest(
            transactions=tuple(
                AddPartitionsToTxnTransaction(
                    transactional_id=TransactionalId(tid),
                    producer_id=ProducerId(ask.producer_id),
                    producer_epoch=i16(ask.producer_epoch),
                    verify_only=True,
                    topics=_topics(wanted),
                )
                for tid, (ask, wanted) in sent.items()
            )
        )
        self.requests_sent += 1
        try:
            response: AddPartitionsToTxnResponse = await self.peers.call(
                node, ApiKey.ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, request
            )
        except PeerUnavailable as exc:
            log.info("transaction verification at node %d failed: %s", node, exc)
            answers = {tid: dict.fromkeys(wanted, ErrorCode.network_exception) for tid, (_, wanted) in sent.items()}
        else:
            answers = _answers(response, {tid: wanted for tid, (_, wanted) in sent.items()})
        for tid, asks in batch.items():
            for ask in asks:
                if not ask.answer.done():  # an older epoch's was answered before the request
                    _settle(ask, {tp: answers[tid][tp] for tp in ask.partitions})


def _topics(partitions: set[TopicPartition]) -> tuple[AddPartitionsToTxnTopic, ...]:
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(partitions):
        by_topic.setdefault(topic, []).append(index)
    return tuple(
        AddPartitionsToTxnTopic(name=TopicName(t), partitions=tuple(i32(p) for p in ps)) for t, ps in by_topic.items()
    )


def _answers(
    response: AddPartitionsToTxnResponse, sent: dict[str, set[TopicPartition]]
) -> dict[str, dict[TopicPartition, ErrorCode]]:
    """Every partition asked gets an answer: NONE unless the coordinator named an error for it (Kafka's
    manager: only the errors are listed as unverified); a top-level error applies to all of them, where
    CLUSTER_AUTHORIZATION_FAILED means INVALID_TXN_STATE to the producer."""
    top = ErrorCode(response.error_code)
    if top != ErrorCode.none:
        top = ErrorCode.invalid_txn_state if top == ErrorCode.cluster_authorization_failed else top
        return {tid: dict.fromkeys(wanted, top) for tid, wanted in sent.items()}
    answers = {tid: dict.fromkeys(wanted, ErrorCode.none) for tid, wanted in sent.items()}
    for result in response.results_by_transaction:
        mine = answers.get(result.transactional_id)
        if mine is None:
            continue
        for topic in result.topic_results:
            for p in topic.results_by_partition:
                tp = (topic.name, int(p.partition_index))
                if tp in mine:
                    mine[tp] = ErrorCode(p.partition_error_code)
    return answers


def _settle(ask: _Ask, errors: dict[TopicPartition, ErrorCode]) -> None:
    if not ask.answer.done():
        ask.answer.set_result(errors)
