"""The retention check's rules for consumer-protocol (KIP-848) groups, as Kafka 4.x's periodic cleanup
(GroupCoordinatorShard.cleanupGroupMetadata) applies them to a ConsumerGroup:

- its offsets expire ``offsets.retention.minutes`` after their own commit (ConsumerGroup's
  offsetExpirationCondition has the commit timestamp as its base, in every state, members or not), or
  at their explicit expire timestamp (OffsetCommit v1); a topic the group subscribes to (by name or
  through a resolved regex: ModernGroup.isSubscribedToTopic) keeps its offsets;
- once every offset is gone (and no transaction of the group is open), a group that is Empty (no
  members: ConsumerGroup.isEmpty) is deleted (GroupMetadataManager.maybeDeleteGroup) with its own
  tombstones in Kafka's order (ConsumerGroup.createGroupTombstoneRecords), and no classic
  GroupMetadata tombstone, which Kafka never writes for it.

A consumer group's offsets are kept by id in the shard's offset store (coordinator/offsets/store.py);
coordinator/offsets/commits.py's ``expire_offsets`` runs the loop and asks the group's type
(coordinator/consumer/group_type.py), which asks here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groupd.coordinator.consumer.group import ConsumerGroup, consumer_groups, deletion_records, replay
from groupd.coordinator.consumer.heartbeat import subscribed_names

if TYPE_CHECKING:
    from groupd.coordinator.shard import ShardState

def subscribed_topics(group: ConsumerGroup) -> frozenset[str]:
    """The topic names the group's members subscribe to, by name or through a resolved regex."""
    return frozenset().union(*(subscribed_names(group, m) for m in group.members.values()))


def is_empty(group: ConsumerGroup) -> bool:
    """Kafka's ConsumerGroup.isEmpty: the group is in state Empty (it has no members)."""
    return not group.members


def drop_consumer_group(state: ShardState, group: ConsumerGroup, records: list[tuple[Any, None]]) -> None:
    """Append the group's tombstones to ``records`` and apply them now, as every consumer-group record is
    applied when made (the shard's runtime replay skips them for an expiry); its offsets, whose
    tombstones are already in ``records``, go with it. A failed write is the runtime's to roll back (the
    retention check runs under a snapshot of the whole shard)."""
    tombstones = deletion_records(group)
    for key, value in tombstones:
        replay(consumer_groups(state), key, value)
    records.extend(tombstones)
    state.offsets.drop(group.group_id)
