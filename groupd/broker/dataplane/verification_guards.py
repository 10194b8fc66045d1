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
"""

from __future__ import annotations

TopicPartition = tuple[str, int]


class VerificationGuard:
    """A token compared by identity: two verifications never share one unless they overlapped."""

    __slots__ = ()


class VerificationGuards:
    def __init__(self) -> None:
        self._held: dict[TopicPartition, dict[int, VerificationGuard]] = {}

    def start(self, tp: TopicPartition, producer_id: int) -> VerificationGuard:
        """The guard of the producer's verification on ``tp``: the one under way, or a new one."""
        held = self._held.setdefault(tp, {})
        guard = held.get(producer_id)
        if guard is None:
            guard = held[producer_id] = VerificationGuard()
        return guard

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

    def __len__(self) -> int:
        return sum(len(h) for h in self._held.values())
