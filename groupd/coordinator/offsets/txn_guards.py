"""Verification guards of TxnOffsetCommit (Kafka's VerificationGuard, as its group coordinator hands one to
the append of a verified transactional offset commit): what keeps a producer's offsets out of an offsets
partition when its transaction ended while the commit was being verified.

The commit starts a guard for (offsets partition, producer) before asking the transaction coordinator, and
writes only if the guard is still there once the answer came: a marker of the producer reaching the
partition meanwhile (its EndTxn, or the WriteTxnMarkers of another node's coordinator) voids it, and the
commit is refused INVALID_TXN_STATE instead of leaving pending offsets no marker will ever end. Commits of
one producer verified at once share the guard; it lives only while one of them waits, in memory.
"""

from __future__ import annotations


class TxnOffsetGuard:
    """A token compared by identity, counting the commits waiting on it."""

    __slots__ = ("waiting",)

    def __init__(self) -> None:
        self.waiting = 0


class TxnOffsetGuards:
    def __init__(self) -> None:
        self._held: dict[tuple[int, int], TxnOffsetGuard] = {}  # (offsets partition, producer id) -> guard

    def start(self, partition: int, producer_id: int) -> TxnOffsetGuard:
        """The guard of a commit about to be verified (the one under way for the producer, or a new one)."""
        guard = self._held.get((partition, producer_id))
        if guard is None:
            guard = self._held[(partition, producer_id)] = TxnOffsetGuard()
        guard.waiting += 1
        return guard

    def finish(self, partition: int, producer_id: int, guard: TxnOffsetGuard) -> bool:
        """The commit's verification is over: was no marker of the producer written meanwhile? The guard goes
        with the last commit waiting on it."""
        guard.waiting -= 1
        held = self._held.get((partition, producer_id)) is guard
        if held and guard.waiting == 0:
            del self._held[(partition, producer_id)]
        return held

    def marker(self, partition: int, producer_id: int) -> None:
        """A marker of the producer is being written to the partition: its verifications under way are void."""
        self._held.pop((partition, producer_id), None)

    def __len__(self) -> int:
        return len(self._held)
