"""ShareGroupDescribe (api 77) as a pure read of the share groups (Kafka's
GroupMetadataManager.shareGroupDescribe and ShareGroup.asDescribedGroup): state, group and assignment
epochs, the assignor's name, and each member with its subscription and assigned partitions (named by id
and name, leaving out topics the metadata no longer has)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from groupd.coordinator import errors as E
from groupd.coordinator.consumer.describe import named_partitions
from groupd.coordinator.share.api import ASSIGNOR, DescribedShareGroup, DescribedShareMember
from groupd.coordinator.share.group import ShareGroups


def describe(
    groups: ShareGroups,
    group_ids: list[str],
    topic_names: Mapping[uuid.UUID, str],
    other_type: frozenset[str] = frozenset(),
) -> list[DescribedShareGroup]:
    """``other_type``: ids held by groups of another type (answered "not a share group")."""
    out = []
    for group_id in group_ids:
        if not group_id:  # GroupCoordinatorService.isGroupIdNotEmpty: no message
            out.append(DescribedShareGroup(E.INVALID_GROUP_ID, group_id))
            continue
        group = groups.get(group_id)
        if group is None:
            message = (
                f"Group {group_id} is not a share group."
                if group_id in other_type
                else f"Share group {group_id} not found."
            )
            out.append(DescribedShareGroup(E.GROUP_ID_NOT_FOUND, group_id, message))
            continue
        members = tuple(
            DescribedShareMember(
                m.member_id,
                m.rack_id,
                m.epoch,
                m.client_id,
                m.client_host,
                m.subscribed_topic_names,
                named_partitions(m.assigned, topic_names),
            )
            for m in group.members.values()
        )
        out.append(
            DescribedShareGroup(
                E.NONE,
                group_id,
                None,
                group.state(),
                group.epoch,
                group.assignment_epoch,
                ASSIGNOR,
                members,
            )
        )
    return out
