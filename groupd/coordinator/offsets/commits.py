"""Committed offsets: OffsetCommit / OffsetFetch / OffsetDelete, DeleteGroups and retention (spec §7, §8),
following Kafka 4.x's OffsetMetadataManager: each request is validated by the type of the group that
owns the id (``ShardState.type_of``, coordinator/group_type.py); a commit naming no group makes a
simple classic group, the default type, as Kafka does.

Offsets change only through ``shard.replay`` of the records returned here (``Result.replay`` is True):
the handlers validate and produce records, the replay applies them once durable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from groupd.coordinator import errors as E
from groupd.coordinator.api import (
    CommitPartition,
    DeleteGroupResponse,
    ExpiryWrite,
    FetchedOffset,
    GroupConfig,
    GroupDeleteWrite,
    OffsetCommit,
    OffsetCommitResponse,
    OffsetDelete,
    OffsetDeleteResponse,
    OffsetDeleteWrite,
    OffsetFetch,
    OffsetFetchResponse,
    OffsetsWrite,
    PartitionError,
    Result,
    TimerOp,
    Token,
    TopicOffsetsWrite,
)
from groupd.coordinator.group import DEAD, EMPTY, PREPARING, STABLE, Group
from groupd.coordinator.records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue

if TYPE_CHECKING:
    from groupd.coordinator.shard import ShardState


def utf16_length(s: str) -> int:
    """Java's String.length(): UTF-16 code units (characters beyond the BMP count twice)."""
    n = len(s)
    if s.isascii():
        return n
    return n + sum(1 for c in s if ord(c) > 0xFFFF)


def _commit_error(state: ShardState, req: OffsetCommit, now: int) -> tuple[int, Any]:
    """The group that owns the id validates the commit (Kafka's validateOffsetCommit of its type); no
    group: a commit without generation makes a simple classic group to hold the offsets."""
    g = state.groups.get(req.group_id)
    if g is None:
        if req.generation_id < 0:
            # Admin tools and consumers without group management: a "simple" group holds the offsets.
            g = state.groups[req.group_id] = Group(req.group_id, now)
            return E.NONE, g
        # Kafka answers GROUP_ID_NOT_FOUND from OffsetCommit v9; older clients keep ILLEGAL_GENERATION.
        return (E.GROUP_ID_NOT_FOUND if req.version >= 9 else E.ILLEGAL_GENERATION), None
    return state.types[g.__class__].validate_offset_commit(state, g, req), g


def commit_records(
    gid: str, partitions: tuple[CommitPartition, ...], now: int, expire: int, cfg: GroupConfig
) -> tuple[list[tuple[OffsetCommitKey, OffsetCommitValue]], tuple[PartitionError, ...]]:
    """One OffsetCommit record per partition whose metadata fits ``offset.metadata.max.bytes`` (Java
    String.length(), null stored as ""), and each partition's answer."""
    limit = cfg.offset_metadata_max_bytes
    records = []
    parts_out = []
    for p in partitions:
        meta = p.metadata if p.metadata is not None else ""
        if len(meta) > limit // 2 and utf16_length(meta) > limit:
            parts_out.append(PartitionError(p.topic, p.partition, E.OFFSET_METADATA_TOO_LARGE))
            continue
        ts = now if p.commit_timestamp == -1 else p.commit_timestamp
        records.append(
            (OffsetCommitKey(gid, p.topic, p.partition), OffsetCommitValue(p.offset, meta, ts, p.leader_epoch, expire))
        )
        parts_out.append(PartitionError(p.topic, p.partition, E.NONE))
    return records, tuple(parts_out)


def offset_commit(state: ShardState, req: OffsetCommit, token: Token, now: int, cfg: GroupConfig) -> Result:
    err, g = _commit_error(state, req, now)
    if err:
        parts = tuple(PartitionError(p.topic, p.partition, err) for p in req.partitions)
        return Result(responses=((token, OffsetCommitResponse(parts)),), replay=False)
    timers: tuple[TimerOp, ...] = ()
    if g.__class__ is Group and (g.state == STABLE or g.state == PREPARING):
        # A classic member's commit keeps its session alive in these states.
        m = g.members.get(req.member_id)
        if m is not None:
            m.hb_deadline = now + m.session_timeout
            timers = (TimerOp(("hb", g.group_id, m.member_id), m.hb_deadline),)
    expire = now + req.retention_time_ms if req.retention_time_ms != -1 else -1
    records, parts = commit_records(req.group_id, req.partitions, now, expire, cfg)
    response = ((token, OffsetCommitResponse(parts)),)
    if not records:
        return Result(responses=response, timers=timers, replay=False)
    writing = state.offsets.pending_commits
    writing[req.group_id] = writing.get(req.group_id, 0) + len(records)  # OffsetStore.start_writing, inlined
    return Result(tuple(records), response, timers, OffsetsWrite(token, parts))  # by position: every commit


def commit_failed(ref: OffsetsWrite, error: int) -> Result:
    """Every partition written answers the mapped error (the runtime has put the group and its commits
    in flight back as they were)."""
    err = E.offset_write_error(error)
    mapped = tuple(PartitionError(p.topic, p.partition, err) for p in ref.partitions)
    return Result(responses=((ref.token, OffsetCommitResponse(mapped)),), replay=False)


def has_pending(state: ShardState, group_id: str, topic: str, partition: int) -> bool:
    """Kafka's hasPendingTransactionalOffsets: an open transaction holds an offset of this partition."""
    tp = (topic, partition)
    for pid in state.offsets.open_txns.get(group_id, ()):
        offsets = state.offsets.pending_txn.get(pid, {}).get(group_id)
        if offsets is not None and tp in offsets:
            return True
    return False


def pending_partitions(state: ShardState, group_id: str) -> set[tuple[str, int]]:
    out: set[tuple[str, int]] = set()
    for pid in state.offsets.open_txns.get(group_id, ()):
        out.update(state.offsets.pending_txn.get(pid, {}).get(group_id, {}))
    return out


def offset_fetch(state: ShardState, req: OffsetFetch, now: int) -> OffsetFetchResponse:
    """Offsets are served in every state; what was never committed reads as offset -1, metadata "".
    ``require_stable`` (v7+): a partition an open transaction holds an offset of answers
    UNSTABLE_OFFSET_COMMIT instead (Kafka 4.x counts only open transactional offsets). A share group has
    no consumer offsets: GROUP_ID_NOT_FOUND (the group's type validates the fetch)."""
    g = state.groups.get(req.group_id)
    if g is not None:
        err = state.type_of(g).validate_offset_fetch(state, g, req)
        if err:
            return OffsetFetchResponse(err)
    offsets = state.offsets.of(req.group_id)
    stable = req.require_stable and req.group_id in state.offsets.open_txns
    if req.topics is None:
        return OffsetFetchResponse(
            E.NONE,
            tuple(
                _unstable(t, p)
                if stable and has_pending(state, req.group_id, t, p)
                else FetchedOffset(t, p, v.offset, v.leader_epoch, v.metadata, E.NONE)
                for t, ps in offsets.items()
                for p, v in ps.items()
            ),
        )
    out = []
    for topic, partitions in req.topics:
        ps = offsets.get(topic)
        for p in partitions:
            v = ps.get(p) if ps is not None else None
            if stable and has_pending(state, req.group_id, topic, p):
                out.append(_unstable(topic, p))
            elif v is None:
                out.append(FetchedOffset(topic, p, -1, -1, "", E.NONE))
            else:
                out.append(FetchedOffset(topic, p, v.offset, v.leader_epoch, v.metadata, E.NONE))
    return OffsetFetchResponse(E.NONE, tuple(out))


def _unstable(topic: str, partition: int) -> FetchedOffset:
    return FetchedOffset(topic, partition, -1, -1, "", E.UNSTABLE_OFFSET_COMMIT)


def offset_delete(state: ShardState, req: OffsetDelete, token: Token, now: int) -> Result:
    if not req.group_id:
        return Result(responses=((token, OffsetDeleteResponse(E.INVALID_GROUP_ID)),), replay=False)
    g = state.groups.get(req.group_id)
    if g is None:
        return Result(responses=((token, OffsetDeleteResponse(E.GROUP_ID_NOT_FOUND)),), replay=False)
    group_type = state.type_of(g)
    err = group_type.validate_offset_delete(g)
    if err:
        return Result(responses=((token, OffsetDeleteResponse(err)),), replay=False)
    is_subscribed = group_type.subscribed_to(g)  # Kafka's isSubscribedToTopic
    records = []
    parts = []
    committed = state.offsets.of(req.group_id)
    for topic, partition in req.partitions:
        if is_subscribed(topic):
            parts.append(PartitionError(topic, partition, E.GROUP_SUBSCRIBED_TO_TOPIC))
            continue
        ps = committed.get(topic)
        # an offset an open transaction holds is deleted too (Kafka 4.x's deleteOffsets)
        if (ps is not None and partition in ps) or has_pending(state, req.group_id, topic, partition):
            records.append((OffsetCommitKey(req.group_id, topic, partition), None))
        parts.append(PartitionError(topic, partition, E.NONE))
    response = ((token, OffsetDeleteResponse(E.NONE, tuple(parts))),)
    if not records:
        return Result(responses=response, replay=False)
    return Result(records=tuple(records), responses=response, write_ref=OffsetDeleteWrite(token))


def offset_tombstones(state: ShardState, gid: str) -> list[tuple[Any, None]]:
    """Every committed offset's tombstone, and one for each partition only open transactions hold
    (Kafka 4.x's deleteAllOffsets)."""
    committed = state.offsets.of(gid)
    out: list[tuple[Any, None]] = [(OffsetCommitKey(gid, t, p), None) for t, ps in committed.items() for p in ps]
    for t, p in sorted(pending_partitions(state, gid)):
        if p not in committed.get(t, ()):
            out.append((OffsetCommitKey(gid, t, p), None))
    return out


def delete_group(state: ShardState, group_id: str, token: Token, now: int) -> Result:
    """DeleteGroups for one group: only an Empty group goes; its offsets and the group become tombstones."""
    g = state.groups.get(group_id)
    if g is None or g.state == DEAD:
        return Result(responses=((token, DeleteGroupResponse(E.GROUP_ID_NOT_FOUND)),), replay=False)
    if g.state != EMPTY:
        return Result(responses=((token, DeleteGroupResponse(E.NON_EMPTY_GROUP)),), replay=False)
    records = offset_tombstones(state, group_id)
    records.append((GroupMetadataKey(group_id), None))
    drop_group(state, g)
    return Result(
        records=tuple(records),
        responses=((token, DeleteGroupResponse(E.NONE)),),
        timers=_cancel_pending(g),
        write_ref=GroupDeleteWrite(token),
    )


def drop_group(state: ShardState, g: Group) -> None:
    """The group dies now; its tombstone is still to be written, and its runtime replay must not remove a
    group recreated with the same id meanwhile (``ShardState.dropping`` counts tombstones in flight).
    Its offsets (all of them tombstoned in the same write) go with it."""
    del state.groups[g.group_id]
    g.state = DEAD
    state.dropping[g.group_id] = state.dropping.get(g.group_id, 0) + 1
    state.offsets.drop(g.group_id)


def undrop(state: ShardState, group_id: str) -> None:
    """A group tombstone is durable: its count in flight goes down. A failed write never comes here: the
    runtime restores the snapshot it took before the drop."""
    n = state.dropping.get(group_id, 0) - 1
    if n > 0:
        state.dropping[group_id] = n
    else:
        state.dropping.pop(group_id, None)


def _cancel_pending(g: Group) -> tuple[TimerOp, ...]:
    return tuple(TimerOp(("pend", g.group_id, mid), None) for mid in g.pending)


def delete_failed(ref: GroupDeleteWrite, error: int) -> Result:
    """The group stays (the runtime has put it back); the caller hears the mapped error."""
    return Result(responses=((ref.token, DeleteGroupResponse(E.offset_write_error(error))),), replay=False)


def expire_offsets(state: ShardState, now: int, cfg: GroupConfig) -> Result:
    """The periodic retention check (KIP-211; Kafka 4.x's GroupCoordinatorShard.cleanupGroupMetadata):
    each group's type expires its offsets by its own rules (``expire_group_offsets`` with its base and
    subscribed topics) and drops the group when it is left Empty without offsets."""
    retention = cfg.offsets_retention_ms
    records: list[tuple[Any, None]] = []
    store = state.offsets
    timers: list[TimerOp] = []
    for g in list(state.groups.values()):
        if store.writing(g.group_id):
            continue  # never expire under a commit still being written
        gone = state.type_of(g).expiry(state, g, now, retention, records)
        if isinstance(gone, Group):
            timers.extend(_cancel_pending(gone))
    if not records:
        return Result(timers=tuple(timers), replay=False)
    # a failed write is only logged by Kafka, whose rollback brings the groups back: so does the runtime's
    return Result(records=tuple(records), timers=tuple(timers), write_ref=ExpiryWrite())


def expire_group_offsets(
    state: ShardState,
    gid: str,
    base: int | None,
    is_subscribed: Callable[[str], bool],
    now: int,
    retention: int,
    records: list[tuple[Any, None]],
) -> bool:
    """Tombstones for the group's expired offsets (``base``: when each one's clock starts, None for its
    own commit timestamp) into ``records``; whether every offset of it expired (no transaction open)."""
    all_expired = True
    offsets = state.offsets.of(gid)
    if not offsets:
        return True
    open_txns = state.offsets.open_txns
    for topic, ps in offsets.items():
        if is_subscribed(topic):
            all_expired = False
            continue
        for p, v in ps.items():
            if open_txns and has_pending(state, gid, topic, p):
                all_expired = False  # not while a transaction holds an offset of it
                continue
            if v.expire_timestamp != -1:
                expired = now >= v.expire_timestamp
            else:
                start = v.commit_timestamp if base is None else base
                expired = now - start >= retention
            if expired:
                records.append((OffsetCommitKey(gid, topic, p), None))
            else:
                all_expired = False
    if open_txns and gid in open_txns:
        all_expired = False  # Kafka 4.x keeps a group with committed offsets during a transaction
    return all_expired


def remove_topic_offsets(state: ShardState, topics: frozenset[str] | set[str]) -> Result:
    """A deleted topic takes every group's offsets for it along (tombstones, replayed once durable)."""
    keys = {
        OffsetCommitKey(gid, t, p): None
        for gid, offsets in state.offsets.committed.items()
        for t, ps in offsets.items()
        if t in topics
        for p in ps
    }
    for by_group in state.offsets.pending_txn.values():  # and the offsets open transactions hold
        for gid, offsets in by_group.items():
            for t, p in offsets:
                if t in topics:
                    keys.setdefault(OffsetCommitKey(gid, t, p), None)
    records = list(keys.items())
    if not records:
        return Result(replay=False)
    return Result(records=tuple(records), write_ref=TopicOffsetsWrite())
