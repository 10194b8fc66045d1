"""ConsumerGroupDescribe (api 69) as a pure read of the consumer groups (Kafka's
GroupMetadataManager.consumerGroupDescribe and ConsumerGroup.asDescribedGroup).

A member's ``assignment`` is what it holds (assigned plus pending revocation), its ``target`` what the
last target assignment gives it; both name topics by id and name, leaving out topics the metadata no
longer has. ``member_type`` is 1 for a consumer-protocol member and 0 for a classic one (v1).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from groupd.coordinator import errors as E
from groupd.coordinator.consumer.api import DescribedConsumerGroup, DescribedConsumerMember, DescribedPartitions
from groupd.coordinator.consumer.config import ConsumerConfig
from groupd.coordinator.consumer.group import ConsumerGroup, ConsumerGroups, Member
from groupd.coordinator.consumer.heartbeat import preferred_assignor

CONSUMER_MEMBER = 1
CLASSIC_MEMBER = 0


def named_partitions(parts: Mapping[uuid.UUID, Iterable[int]], names: Mapping[uuid.UUID, str]) -> DescribedPartitions:
    present = sorted((names[t], t) for t in parts if t in names)
    return tuple((t, name, tuple(sorted(parts[t]))) for name, t in present if parts[t])


def _member(group: ConsumerGroup, m: Member, names: Mapping[uuid.UUID, str]) -> DescribedConsumerMember:
    held: dict[uuid.UUID, set[int]] = {}
    for parts in (m.assigned, m.pending_revocation):
        for t, ps in parts.items():
            held.setdefault(t, set()).update(ps)
    return DescribedConsumerMember(
        m.member_id,
        m.instance_id,
        m.rack_id,
        m.epoch,
        m.client_id,
        m.client_host,
        m.subscribed_topic_names,
        m.subscribed_topic_regex,
        named_partitions(held, names),
        named_partitions(group.targets.get(m.member_id, {}), names),
        CLASSIC_MEMBER if m.classic is not None else CONSUMER_MEMBER,
    )


def describe(
    groups: ConsumerGroups, group_ids: list[str], topic_names: Mapping[uuid.UUID, str], config: ConsumerConfig
) -> list[DescribedConsumerGroup]:
    out = []
    for group_id in group_ids:
        if not group_id.strip():
            out.append(DescribedConsumerGroup(E.INVALID_GROUP_ID, group_id, "Group id can't be empty."))
            continue
        group = groups.get(group_id)
        if group is None:
            out.append(DescribedConsumerGroup(E.GROUP_ID_NOT_FOUND, group_id, f"Group {group_id} not found."))
            continue
        out.append(
            DescribedConsumerGroup(
                E.NONE,
                group_id,
                None,
                group.state(),
                group.epoch,
                group.assignment_epoch,
                preferred_assignor(group, config),
                tuple(_member(group, m, topic_names) for m in group.members.values()),
            )
        )
    return out
