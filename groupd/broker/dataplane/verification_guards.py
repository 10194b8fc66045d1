"""Verification guards (KIP-890, Kafka's VerificationGuard and VerificationStateEntry): what keeps a
transactional batch out of a partition when the transaction it was verified for ended while the
verification was under way.

A leader that asks the producer's transaction coordinator (another node) whether a partition is in the
producer's transaction first starts a guard for (partition, producer): a fresh token, or the one already
under way. The append after the answer must present that token and find it still held. Any transactional
batch of the producer appended there (its transaction is then open on the partition, and from then on
that is what lets its batches in) or any marker of its (the transaction ended) takes the guard away, so an
answer that comes back after an abort marker landed no longer matches, and the batch is refused
INVALID_TXN_STATE, as Kafka's UnifiedLog refuses it ("Record was not part of an ongoing transaction"); the
producer's retry verifies again. Guards live in memory only, as Kafka keeps them, and go with the
partition when this node reopens or stops leading it.

A guard whose verification never led to an append (the coordinator could not be reached and the producer
gave up, or went away) would otherwise stay for ever and keep refusing that producer's higher sequences
on the partition. Kafka's ProducerStateManager.removeExpiredProducers drops such entries once
``producer.id.expiration.ms`` has passed since they were created, on the wall clock of its periodic
producer-expiration check (``producer.id.expiration.check.interval.ms``); ``expire`` is that rule.
"""

from __future__ import annotations

TopicPartition = tuple[str, int]


class VerificationGuard:
    """A token compared by identity: two verifications never share one unless they overlapped. It also
    keeps the lowest sequence (of the newest epoch) whose verification started (Kafka's
    VerificationStateEntry): while the guard is held, a batch of a higher sequence is refused
    OUT_OF_ORDER_SEQUENCE_NUMBER, so a batch that overtook a lower one whose verification failed (and is
    retried) cannot open the producer's sequence here with a gap."""

    __slots__ = ("lowest_sequence", "epoch", "started_ms")

    def __init__(self, sequence: int, epoch: int, started_ms: int) -> None:
        self.lowest_sequence = sequence
        self.epoch = epoch
        self.started_ms = started_ms  # wall clock at creation; a later verification joining it keeps it

    def saw(self, sequence: int, epoch: int) -> None:
        """Kafka's maybeUpdateLowestSequenceAndEpoch: a lower sequence of the same epoch, or a newer epoch."""
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch, self.lowest_sequence = epoch, sequence


class VerificationGuards:
    def __init__(self) -> None:
        self._held: dict[TopicPartition, dict[int, VerificationGuard]] = {}

    def start(self, tp: TopicPartition, producer_id: int, sequence: int, epoch: int, now_ms: int) -> VerificationGuard:
        """The guard of the producer's verification on ``tp`` (the one under way, or a new one started at
        ``now_ms``, wall clock), having seen the first sequence and epoch of the batch to verify."""
        held = self._held.setdefault(tp, {})
        guard = held.get(producer_id)
        if guard is None:
            guard = held[producer_id] = VerificationGuard(sequence, epoch, now_ms)
        else:
            guard.saw(sequence, epoch)
        return guard

    def overtakes(self, tp: TopicPartition, producer_id: int, sequence: int) -> bool:
        """A batch from a client whose first sequence is above the lowest one still being verified (Kafka's
        ProducerAppendInfo.checkSequence: OUT_OF_ORDER_SEQUENCE_NUMBER)."""
        held = self._held.get(tp)
        if held is None:  # the common case: nothing being verified on the partition
            return False
        guard = held.get(producer_id)
        return guard is not None and sequence > guard.lowest_sequence

    def holds(self, tp: TopicPartition, producer_id: int, guard: VerificationGuard | None) -> bool:
        """Does ``tp`` still hold ``guard`` for the producer (nothing of its transaction landed since)?"""
        return guard is not None and self._held.get(tp, {}).get(producer_id) is guard

    def clear(self, tp: TopicPartition, producer_id: int) -> None:
        """A transactional batch or a marker of the producer was appended to ``tp``."""
        held = self._held.get(tp)
        if held is not None and held.pop(producer_id, None) is not None and not held:
            del self._held[tp]

    def drop(self, tp: TopicPartition) -> None:
        """The partition was reopened or deleted here: verifications under way for it are void."""
        self._held.pop(tp, None)

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Drop every guard started ``expiration_ms`` or more before ``now_ms`` (Kafka's rule for lingering
        verification state entries; a guard's age counts from its creation, not from its last use). How many
        went."""
        gone = 0
        for tp in list(self._held):
            held = self._held[tp]
            for producer_id in [pid for pid, g in held.items() if now_ms - g.started_ms >= expiration_ms]:
                del held[producer_id]
                gone += 1
            if not held:
                del self._held[tp]
        return gone

    def __len__(self) -> int:
        return sum(len(h) for h in self._held.values())
