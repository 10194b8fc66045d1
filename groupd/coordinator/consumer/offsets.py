"""Offset commits and fetches of consumer-protocol groups: the member-epoch checks of Kafka 4.3's
ConsumerGroup.validateOffsetCommit / validateOffsetFetch (KIP-848, KIP-1251).

A commit carries the member's epoch. The member's current epoch is accepted; a higher one is
STALE_MEMBER_EPOCH; a lower one is accepted only when every committed partition is assigned to the
member (or pending its revocation) since an epoch no later than the one committed with (KIP-1251:
a member still committing with its previous epoch after a rebalance that kept its partitions). Commits
with a negative epoch are accepted while the group has no members (admin tools).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from groupd.coordinator import errors as E
from groupd.coordinator.consumer.group import ConsumerGroup, Member


def commit_error(
    group: ConsumerGroup,
    member_id: str,
    epoch: int,
    version: int,
    partitions: Iterable[tuple[str, int]],
    topics: Mapping[str, Any],
    *,
    transactional: bool = False,
) -> int:
    if epoch < 0 and not group.members:
        return E.NONE
    member = group.members.get(member_id)
    if member is None:
        return E.UNKNOWN_MEMBER_ID
    if not transactional and version < 9 and member.classic is None:
        return E.UNSUPPORTED_VERSION  # a consumer-protocol member must commit with v9+
    if epoch == member.epoch:
        return E.NONE
    stale = _stale(member)
    if epoch > member.epoch:
        return stale
    for topic, partition in partitions:
        info = topics.get(topic)
        if info is None:
            return stale
        assigned = member.assigned.get(info.topic_id, {}).get(partition)
        if assigned is None:
            assigned = member.pending_revocation.get(info.topic_id, {}).get(partition)
        if assigned is None or assigned > epoch:
            return stale
    return E.NONE


def _stale(member: Member) -> int:
    """A wrong epoch: STALE_MEMBER_EPOCH, or ILLEGAL_GENERATION for a member using the classic protocol
    (its epoch is its generation; ConsumerGroup.throwIfMemberEpochIsInvalid)."""
    return E.ILLEGAL_GENERATION if member.classic is not None else E.STALE_MEMBER_EPOCH


def fetch_error(group: ConsumerGroup, member_id: str | None, epoch: int) -> int:
    if member_id is None and epoch < 0:
        return E.NONE
    member = group.members.get(member_id or "")
    if member is None:
        return E.UNKNOWN_MEMBER_ID
    if epoch != member.epoch:
        return _stale(member)
    return E.NONE
