"""The offsets of one offsets partition, keyed by group id (the data of Kafka's OffsetMetadataManager).

Offsets belong to a group id, not to a group object: a consumer group's committed offsets survive its
conversion to a classic group and back, and a commit is validated against whichever group type owns the
id (coordinator/offsets/commits.py asks that type through coordinator/group_type.py). Committed offsets
change by replay (coordinator/offsets/replay.py), and leave at once with a group that is dropped (their
tombstones in its write; a failed write is rolled back by the runtime); ``pending_commits`` counts the
commits written but not yet durable, so that the retention check never expires under them.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from groupd.coordinator.records import OffsetCommitValue

if TYPE_CHECKING:
    from groupd.coordinator.offsets.transactional import PendingOffset

# a group's committed offsets: topic -> partition -> value
GroupOffsets = dict[str, dict[int, OffsetCommitValue]]

_NONE: Mapping[str, dict[int, OffsetCommitValue]] = MappingProxyType({})


class OffsetStore:
    """Committed offsets, commits in flight and transactional offsets not yet ended by a marker."""

    __slots__ = ("committed", "pending_commits", "pending_txn", "open_txns", "txn_seq")

    def __init__(self) -> None:
        self.committed: dict[str, GroupOffsets] = {}
        self.pending_commits: dict[str, int] = {}  # group id -> OffsetCommit records being written
        # Transactional offsets (coordinator/offsets/transactional.py): producer id -> group ->
        # (topic, partition) -> PendingOffset, and group -> producer ids with such offsets (Kafka's
        # pendingTransactionalOffsets and openTransactionsByGroup).
        self.pending_txn: dict[int, dict[str, dict[tuple[str, int], PendingOffset]]] = {}
        self.open_txns: dict[str, set[int]] = {}
        self.txn_seq = 0  # write order of transactional offsets

    def of(self, group_id: str) -> Mapping[str, dict[int, OffsetCommitValue]]:
        """The group's committed offsets (read only; empty when it has none)."""
        return self.committed.get(group_id, _NONE)

    def has(self, group_id: str) -> bool:
        return group_id in self.committed

    def writing(self, group_id: str) -> int:
        """How many of the group's commits are written but not yet durable."""
        return self.pending_commits.get(group_id, 0)

    def start_writing(self, group_id: str, n: int) -> None:
        self.pending_commits[group_id] = self.pending_commits.get(group_id, 0) + n

    def done_writing(self, group_id: str, n: int = 1) -> None:
        left = self.pending_commits.get(group_id, 0) - n
        if left > 0:
            self.pending_commits[group_id] = left
        else:
            self.pending_commits.pop(group_id, None)

    def set(self, group_id: str, topic: str, partition: int, value: OffsetCommitValue) -> None:
        by_topic = self.committed.get(group_id)
        if by_topic is None:
            by_topic = self.committed[group_id] = {}
        ps = by_topic.get(topic)
        if ps is None:
            ps = by_topic[topic] = {}
        ps[partition] = value

    def remove(self, group_id: str, topic: str, partition: int) -> None:
        by_topic = self.committed.get(group_id)
        if by_topic is None:
            return
        ps = by_topic.get(topic)
        if ps is not None:
            ps.pop(partition, None)
            if not ps:
                del by_topic[topic]
                if not by_topic:
                    del self.committed[group_id]

    def clear(self) -> None:
        """Unload: a later load brings them back from the log."""
        self.committed.clear()
        self.pending_commits.clear()
        self.pending_txn.clear()
        self.open_txns.clear()

    def drop(self, group_id: str) -> None:
        """A group is dropped with all its offsets tombstoned: they leave now, as the group does (if the
        write fails, the runtime restores its snapshot of them, coordinator/snapshots.py)."""
        self.committed.pop(group_id, None)
