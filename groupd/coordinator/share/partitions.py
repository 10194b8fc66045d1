"""A share group's share partitions (Kafka's ShareGroupStatePartitionMetadata): which are initializing,
initialized (the only assignable ones) and deleting, as pure rules over the group.

A heartbeat records the subscribed partitions without state as initializing and hands them to the shell
(``maybe_initialize``); the share coordinator's answer comes back as ``state_initialized``. DeleteGroups,
AlterShareGroupOffsets and DeleteShareGroupOffsets move partitions between the sets before and after the
shell changes their state in the share coordinator; deleted topics leave every set (``topics_deleted``).
Each change is one ShareGroupStatePartitionMetadata record, replayed as it is made.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from groupd.coordinator import errors as E
from groupd.coordinator.consumer.heartbeat import Topics
from groupd.coordinator.consumer.records import GroupKey
from groupd.coordinator.share import records as rec
from groupd.coordinator.share.api import (
    INITIALIZE_RETRY_INTERVAL_MS,
    AlterShareOffsets,
    AlterShareOffsetsPlan,
    DeleteShareOffsets,
    DeleteShareOffsetsPlan,
    Outcome,
    ShareInitialize,
    ShareStateInitialized,
    TopicPartitionList,
)
from groupd.coordinator.share.group import (
    INITIAL_EPOCH,
    InitTopic,
    Recorder,
    ShareGroup,
    ShareGroups,
    state_metadata,
)


def _to_initialize(group: ShareGroup, names: frozenset[str], topics: Topics, now: int) -> dict[uuid.UUID, InitTopic]:
    """Kafka's subscribedTopicsChangeMap: subscribed partitions neither initialized nor initializing for
    less than the retry interval."""
    known: dict[uuid.UUID, set[int]] = {t: set(i.partitions) for t, i in group.initialized.items()}
    for t, i in group.initializing.items():
        if now - i.timestamp < INITIALIZE_RETRY_INTERVAL_MS:
            known.setdefault(t, set()).update(i.partitions)
    out: dict[uuid.UUID, InitTopic] = {}
    for name in sorted(names):
        info = topics.get(name)
        if info is None:
            continue
        have = known.get(info.topic_id, set())
        if not have or len(have) < info.partitions:
            missing = frozenset(range(info.partitions)) - have
            if missing:
                out[info.topic_id] = InitTopic(name, missing, now)
    return out


def combine(base: dict[uuid.UUID, InitTopic], more: Mapping[uuid.UUID, InitTopic]) -> dict[uuid.UUID, InitTopic]:
    """Kafka's combineInitMaps: partitions united, name and timestamp from ``more`` where it has the topic."""
    out = dict(base)
    for t, info in more.items():
        old = out.get(t)
        out[t] = InitTopic(info.name, info.partitions | (old.partitions if old else frozenset()), info.timestamp)
    return out


def maybe_initialize(
    group: ShareGroup, names: frozenset[str], topics: Topics, now: int, out: Recorder
) -> ShareInitialize | None:
    if not names or not topics:
        return None
    new = _to_initialize(group, names, topics, now)
    if not new:
        return None
    deleting = {t: n for t, n in group.deleting.items() if t not in new}
    out.add(
        GroupKey(rec.STATE_PARTITION_METADATA, group.group_id),
        state_metadata(combine(group.initializing, new), group.initialized, deleting),
    )
    return ShareInitialize(
        group.group_id, group.epoch, tuple((t, tuple(sorted(i.partitions))) for t, i in sorted(new.items()))
    )


def state_initialized(groups: ShareGroups, topics: Topics, event: ShareStateInitialized, now: int) -> Outcome:
    """The share coordinator's answer to an initialization (Kafka's initializeShareGroupState and
    uninitializeShareGroupState): the partitions move to initialized, or leave initializing."""
    out = Recorder(groups, now)
    group = groups.get(event.group_id)
    if group is None or not event.topics:
        return out.outcome
    done = {t: frozenset(ps) for t, ps in event.topics}
    if event.ok:
        names = {info.topic_id: name for name, info in topics.items()}
        enriched = {t: InitTopic(names.get(t, "UNKNOWN"), ps, now) for t, ps in done.items()}
        initializing = {}
        for t, info in group.initializing.items():
            left = info.partitions - done.get(t, frozenset())
            if left:
                initializing[t] = InitTopic(info.name, left, info.timestamp)
        initialized = combine(group.initialized, enriched)
    else:
        if not group.initializing:
            return out.outcome
        initializing = {}
        for t, info in group.initializing.items():
            left = info.partitions - done.get(t, frozenset())
            if left:
                initializing[t] = InitTopic(info.name, left, info.timestamp)
        initialized = group.initialized
    out.add(
        GroupKey(rec.STATE_PARTITION_METADATA, group.group_id),
        state_metadata(initializing, initialized, group.deleting),
    )
    return out.outcome


def partitions_to_delete(
    groups: ShareGroups, group_id: str, out: Outcome, now: int, only: frozenset[uuid.UUID] | None = None
) -> TopicPartitionList:
    """The group's initializing and initialized partitions (of the topics ``only`` names, or all) move
    to deleting, recorded in ``out``; returns them (Kafka's sharePartitionDeleteRequests)."""
    group = groups[group_id]
    both = combine(group.initialized, group.initializing)
    chosen = {t: i for t, i in both.items() if only is None or t in only}
    if not chosen:
        return ()
    w = Recorder(groups, now)
    w.outcome = out
    w.add(
        GroupKey(rec.STATE_PARTITION_METADATA, group_id),
        state_metadata(
            {t: i for t, i in group.initializing.items() if t not in chosen},
            {t: i for t, i in group.initialized.items() if t not in chosen},
            {**group.deleting, **{t: i.name for t, i in chosen.items()}},
        ),
    )
    return tuple((t, tuple(sorted(i.partitions))) for t, i in sorted(chosen.items()))


def deleted(groups: ShareGroups, group_id: str, topics: frozenset[uuid.UUID], now: int) -> Outcome:
    """The share state of these deleting topics is gone: they leave the group's deleting set."""
    out = Recorder(groups, now)
    group = groups.get(group_id)
    if group is not None and topics & set(group.deleting):
        out.add(
            GroupKey(rec.STATE_PARTITION_METADATA, group_id),
            state_metadata(
                group.initializing,
                group.initialized,
                {t: n for t, n in group.deleting.items() if t not in topics},
            ),
        )
    return out.outcome


# ---------------------------------------------------------------- offsets admin and deleted topics


def alter_offsets(
    groups: ShareGroups, topics: Topics, request: AlterShareOffsets, now: int, other_type: bool
) -> Outcome:
    """Kafka's GroupMetadataManager.alterShareGroupOffsets: the group (made if missing) must be empty;
    known partitions are recorded initializing and handed to the shell to initialize at their new start
    offsets (StateEpoch = the group epoch); unknown topics or partitions are UNKNOWN_TOPIC_OR_PARTITION."""
    out = Recorder(groups, now)
    gid = request.group_id
    if not gid:
        out.outcome.plan = AlterShareOffsetsPlan(E.INVALID_GROUP_ID, "The group id is invalid.")
        return out.outcome
    group = groups.get(gid)
    if group is None and other_type:
        out.outcome.plan = AlterShareOffsetsPlan(E.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group.")
        return out.outcome
    if group is not None and group.members:
        out.outcome.plan = AlterShareOffsetsPlan(E.NON_EMPTY_GROUP, "The group is not empty.")
        return out.outcome
    results: list[tuple[str, uuid.UUID | None, tuple[tuple[int, int], ...]]] = []
    offsets: dict[uuid.UUID, dict[int, int]] = {}
    initializing: dict[uuid.UUID, InitTopic] = {}
    for name, parts in request.topics:
        info = topics.get(name)
        if info is None:
            results.append((name, None, tuple((p, E.UNKNOWN_TOPIC_OR_PARTITION) for p, _ in parts)))
            continue
        known = {p: o for p, o in parts if p < info.partitions}
        results.append(
            (name, info.topic_id, tuple((p, E.NONE if p in known else E.UNKNOWN_TOPIC_OR_PARTITION) for p, _ in parts))
        )
        offsets.setdefault(info.topic_id, {}).update(known)
        initializing[info.topic_id] = InitTopic(name, frozenset(known), now)
    epoch = group.epoch if group is not None else INITIAL_EPOCH
    initializing = {t: i for t, i in initializing.items() if i.partitions}
    if initializing:
        base = group if group is not None else ShareGroup(gid)
        out.add(
            GroupKey(rec.STATE_PARTITION_METADATA, gid),
            state_metadata(
                combine(base.initializing, initializing),
                base.initialized,
                {t: n for t, n in base.deleting.items() if t not in initializing},
            ),
        )
    out.outcome.plan = AlterShareOffsetsPlan(
        E.NONE,
        None,
        tuple(results),
        epoch,
        tuple((t, tuple(sorted(ps.items()))) for t, ps in sorted(offsets.items()) if ps),
    )
    return out.outcome


def delete_offsets(groups: ShareGroups, topics: Topics, request: DeleteShareOffsets, now: int) -> Outcome:
    """Kafka's initiateDeleteShareGroupOffsets: only an empty share group; each named topic's initialized
    partitions move to deleting (a topic already deleting is deleted again over all its partitions); a
    topic unknown or never initialized is UNKNOWN_TOPIC_OR_PARTITION."""
    out = Recorder(groups, now)
    gid = request.group_id
    group = groups.get(gid)
    if group is None:
        out.outcome.delete_plan = DeleteShareOffsetsPlan(E.GROUP_ID_NOT_FOUND, f"Share group {gid} not found.")
        return out.outcome
    if group.members:
        out.outcome.delete_plan = DeleteShareOffsetsPlan(E.NON_EMPTY_GROUP, "The group is not empty.")
        return out.outcome
    refused: list[tuple[str, int, str]] = []
    to_delete: list[tuple[str, uuid.UUID, tuple[int, ...]]] = []
    initialized = dict(group.initialized)
    deleting = dict(group.deleting)
    for name in request.topic_names:
        info = topics.get(name)
        if info is None:
            refused.append((name, E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."))
        elif info.topic_id in initialized:
            to_delete.append((name, info.topic_id, tuple(sorted(initialized.pop(info.topic_id).partitions))))
            deleting[info.topic_id] = name
        elif info.topic_id in deleting:
            to_delete.append((name, info.topic_id, tuple(range(info.partitions))))
        else:
            refused.append((name, E.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete."))
    if group.has_state_metadata:
        out.add(GroupKey(rec.STATE_PARTITION_METADATA, gid), state_metadata(group.initializing, initialized, deleting))
    out.outcome.delete_plan = DeleteShareOffsetsPlan(E.NONE, None, tuple(refused), tuple(to_delete))
    return out.outcome


def topics_deleted(groups: ShareGroups, topic_ids: frozenset[uuid.UUID], now: int) -> Outcome:
    """Kafka's maybeCleanupShareGroupState: deleted topics leave every share group's initializing,
    initialized and deleting sets (the share coordinator deletes their states on its own)."""
    out = Recorder(groups, now)
    for group in list(groups.values()):
        held = (set(group.initializing) | set(group.initialized) | set(group.deleting)) & topic_ids
        if held:
            out.add(
                GroupKey(rec.STATE_PARTITION_METADATA, group.group_id),
                state_metadata(
                    {t: i for t, i in group.initializing.items() if t not in held},
                    {t: i for t, i in group.initialized.items() if t not in held},
                    {t: n for t, n in group.deleting.items() if t not in held},
                ),
            )
    return out.outcome
