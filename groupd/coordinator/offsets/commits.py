"""Committed offsets: OffsetCommit / OffsetFetch / OffsetDelete, DeleteGroups and retention (spec §7, §8),
following Kafka 4.x's OffsetMetadataManager and ClassicGroup.validateOffsetCommit.

Offsets change only through ``shard.replay`` of the records returned here (``Result.replay`` is True):
the handlers validate and produce records, the replay applies them once durable.
"""

from __future__ import annotations

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
from groupd.coordinator.classic.rules import validate_member
from groupd.coordinator.consumer import offsets as consumer_offsets
from groupd.coordinator.group import COMPLETING, CONSUMER, DEAD, EMPTY, PREPARING, STABLE, Group
from groupd.coordinator.offsets.consumer_expiry import drop_consumer_group, is_empty, subscribed_topics
from groupd.coordinator.records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue

if TYPE_CHECKING:
    from groupd.coordinator.shard import ShardState


def utf16_length(s: str) -> int:
    """Java's String.length(): UTF-16 code units (characters beyond the BMP count twice)."""
    n = len(s)
    if s.isascii():
        return n
    return n + sum(1 for c in s if ord(c) > 0xFFFF)


def _commit_error(state: ShardState, req: OffsetCommit, now: int) -> tuple[int, Group | None]:
    if req.group_id in state.share_groups:
        return E.GROUP_ID_NOT_FOUND, None  # a share group has no consumer offsets (ShareGroup.validateOffsetCommit)
    g = state.groups.get(req.group_id)
    gen = req.generation_id
    cg = state.consumer_groups.get(req.group_id)
    if cg is not None and (g is None or not g.members):
        # a consumer-protocol group: the member epoch is checked; the offsets live in a simple group
        err = consumer_offsets.commit_error(
            cg, req.member_id, gen, req.version, ((p.topic, p.partition) for p in req.partitions), state.topics
        )
        if err:
            return err, None
        if g is None:
            g = state.groups[req.group_id] = Group(req.group_id, now)
        return E.NONE, g
    if g is None:
        if gen < 0:
            # Admin tools and consumers without group management: a "simple" group holds the offsets.
            g = Group(req.group_id, now)
            state.groups[req.group_id] = g
            return E.NONE, g
        # Kafka answers GROUP_ID_NOT_FOUND from OffsetCommit v9; older clients keep ILLEGAL_GENERATION.
        return (E.GROUP_ID_NOT_FOUND if req.version >= 9 else E.ILLEGAL_GENERATION), None
    err = validate_offset_commit(g, req.member_id, req.group_instance_id, gen, transactional=False)
    return (err, None) if err else (E.NONE, g)


def validate_offset_commit(g: Group, member_id: str, instance_id: str | None, generation: int, *, transactional: bool) -> int:
    """Kafka's ClassicGroup.validateOffsetCommit: a TxnOffsetCommit (``transactional``) skips the rule
    that a commit without member and generation needs an Empty group, and the CompletingRebalance one."""
    if g.state == DEAD:
        return E.COORDINATOR_NOT_AVAILABLE
    if generation < 0 and g.state == EMPTY:
        return E.NONE
    if generation >= 0 or member_id or instance_id is not None:
        err = validate_member(g, member_id, instance_id)
        if err:
            return err
        if generation != g.generation:
            return E.ILLEGAL_GENERATION
    elif not transactional:
        return E.UNKNOWN_MEMBER_ID
    if not transactional and g.state == COMPLETING:
        return E.REBALANCE_IN_PROGRESS
    return E.NONE


def commit_records(gid: str, partitions: tuple[CommitPartition, ...], now: int, expire: int, cfg: GroupConfig) -> tuple[list[tuple[OffsetCommitKey, OffsetCommitValue]], tuple[PartitionError, ...]]:
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
        records.append((OffsetCommitKey(gid, p.topic, p.partition), OffsetCommitValue(p.offset, meta, ts, p.leader_epoch, expire)))
        parts_out.append(PartitionError(p.topic, p.partition, E.NONE))
    return records, tuple(parts_out)


def offset_commit(state: ShardState, req: OffsetCommit, token: Token, now: int, cfg: GroupConfig) -> Result:
    err, g = _commit_error(state, req, now)
    if err or g is None:
        parts = tuple(PartitionError(p.topic, p.partition, err) for p in req.partitions)
        return Result(responses=((token, OffsetCommitResponse(parts)),), replay=False)
    timers: tuple[TimerOp, ...] = ()
    if g.state == STABLE or g.state == PREPARING:
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
    g.pending_commits += len(records)
    return Result(
        records=tuple(records), responses=response, timers=timers,
        write_ref=OffsetsWrite(token, parts),
    )


def commit_failed(ref: OffsetsWrite, error: int) -> Result:
    """Every partition written answers the mapped error (the runtime has put the group back as it was)."""
    err = E.offset_write_error(error)
    mapped = tuple(PartitionError(p.topic, p.partition, err) for p in ref.partitions)
    return Result(responses=((ref.token, OffsetCommitResponse(mapped)),), replay=False)


def has_pending(state: ShardState, group_id: str, topic: str, partition: int) -> bool:
    """Kafka's hasPendingTransactionalOffsets: an open transaction holds an offset of this partition."""
    tp = (topic, partition)
    for pid in state.open_txns.get(group_id, ()):
        offsets = state.pending_txn.get(pid, {}).get(group_id)
        if offsets is not None and tp in offsets:
            return True
    return False


def pending_partitions(state: ShardState, group_id: str) -> set[tuple[str, int]]:
    out: set[tuple[str, int]] = set()
    for pid in state.open_txns.get(group_id, ()):
        out.update(state.pending_txn.get(pid, {}).get(group_id, {}))
    return out


def offset_fetch(state: ShardState, req: OffsetFetch, now: int) -> OffsetFetchResponse:
    """Offsets are served in every state; what was never committed reads as offset -1, metadata "".
    ``require_stable`` (v7+): a partition an open transaction holds an offset of answers
    UNSTABLE_OFFSET_COMMIT instead (Kafka 4.x counts only open transactional offsets). A share group has
    no consumer offsets: GROUP_ID_NOT_FOUND."""
    if req.group_id in state.share_groups:
        return OffsetFetchResponse(E.GROUP_ID_NOT_FOUND)
    g = state.groups.get(req.group_id)
    cg = state.consumer_groups.get(req.group_id)
    if cg is not None and req.version >= 9:
        err = consumer_offsets.fetch_error(cg, req.member_id, req.member_epoch)
        if err:
            return OffsetFetchResponse(err)
    offsets = g.offsets if g is not None else {}
    stable = req.require_stable and req.group_id in state.open_txns
    if req.topics is None:
        return OffsetFetchResponse(
            E.NONE,
            tuple(
                _unstable(t, p) if stable and has_pending(state, req.group_id, t, p)
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
    cg = state.consumer_groups.get(req.group_id)
    if req.group_id in state.share_groups:
        return Result(responses=((token, OffsetDeleteResponse(E.GROUP_ID_NOT_FOUND)),), replay=False)
    subscribed: frozenset[str] | None = None
    if cg is not None and (g is None or not g.members):
        # a consumer-protocol group (its offsets, if any, live in a member-less simple group): Kafka's
        # ConsumerGroup.validateOffsetDelete allows it in every state, and isSubscribedToTopic is the
        # group's subscribed topic names, by name or through a resolved regex
        subscribed = subscribed_topics(cg)
    elif g is None or g.state == DEAD:
        return Result(responses=((token, OffsetDeleteResponse(E.GROUP_ID_NOT_FOUND)),), replay=False)
    elif g.state != EMPTY and g.protocol_type != CONSUMER:
        return Result(responses=((token, OffsetDeleteResponse(E.NON_EMPTY_GROUP)),), replay=False)
    records = []
    parts = []
    for topic, partition in req.partitions:
        if topic in subscribed if subscribed is not None else g is not None and g.is_subscribed(topic):
            parts.append(PartitionError(topic, partition, E.GROUP_SUBSCRIBED_TO_TOPIC))
            continue
        ps = g.offsets.get(topic) if g is not None else None
        # an offset an open transaction holds is deleted too (Kafka 4.x's deleteOffsets)
        if (ps is not None and partition in ps) or has_pending(state, req.group_id, topic, partition):
            records.append((OffsetCommitKey(req.group_id, topic, partition), None))
        parts.append(PartitionError(topic, partition, E.NONE))
    response = ((token, OffsetDeleteResponse(E.NONE, tuple(parts))),)
    if not records:
        return Result(responses=response, replay=False)
    return Result(records=tuple(records), responses=response, write_ref=OffsetDeleteWrite(token))


def _tombstones(state: ShardState, g: Group) -> list[tuple[Any, None]]:
    """Every committed offset's tombstone, and one for each partition only open transactions hold
    (Kafka 4.x's deleteAllOffsets)."""
    gid = g.group_id
    out: list[tuple[Any, None]] = [(OffsetCommitKey(gid, t, p), None) for t, ps in g.offsets.items() for p in ps]
    for t, p in sorted(pending_partitions(state, gid)):
        if p not in g.offsets.get(t, ()):
            out.append((OffsetCommitKey(gid, t, p), None))
    return out


def delete_group(state: ShardState, group_id: str, token: Token, now: int) -> Result:
    """DeleteGroups for one group: only an Empty group goes; its offsets and the group become tombstones."""
    g = state.groups.get(group_id)
    if g is None or g.state == DEAD:
        return Result(responses=((token, DeleteGroupResponse(E.GROUP_ID_NOT_FOUND)),), replay=False)
    if g.state != EMPTY:
        return Result(responses=((token, DeleteGroupResponse(E.NON_EMPTY_GROUP)),), replay=False)
    records = _tombstones(state, g)
    records.append((GroupMetadataKey(group_id), None))
    _drop_group(state, g)
    return Result(
        records=tuple(records), responses=((token, DeleteGroupResponse(E.NONE)),), timers=_cancel_pending(g),
        write_ref=GroupDeleteWrite(token),
    )


def _drop_group(state: ShardState, g: Group) -> None:
    """The group dies now; its tombstone is still to be written, and its runtime replay must not remove a
    group recreated with the same id meanwhile (``ShardState.dropping`` counts tombstones in flight)."""
    del state.groups[g.group_id]
    g.state = DEAD
    state.dropping[g.group_id] = state.dropping.get(g.group_id, 0) + 1


def undrop(state: ShardState, group_id: str) -> None:
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
    expired offsets and groups left Empty without offsets become tombstones. A consumer-protocol group's
    offsets (held by a member-less group of the same id) follow its own rules, coordinator/offsets/
    consumer_expiry.py: commit time as the base in every state, its subscribed topics kept, and once it
    is Empty with no offsets left the group goes with its own tombstones."""
    retention = cfg.offsets_retention_ms
    records: list[tuple[Any, None]] = []
    timers: list[TimerOp] = []
    open_txns = state.open_txns
    consumer_groups = state.consumer_groups
    for g in list(state.groups.values()):
        if g.pending_commits:
            continue  # never expire under a commit still being written
        gid = g.group_id
        cg = consumer_groups.get(gid) if consumer_groups and not g.members else None
        subscribed = subscribed_topics(cg) if cg is not None else None
        all_expired = True
        if g.offsets:
            base = _expiry_base(g) if cg is None else None
            if base is False:
                all_expired = False
            else:
                for topic, ps in g.offsets.items():
                    if g.is_subscribed(topic) if subscribed is None else topic in subscribed:
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
        if not all_expired:
            continue
        if cg is not None:
            if is_empty(cg):
                drop_consumer_group(state, cg, records)
        elif g.state == EMPTY:
            records.append((GroupMetadataKey(gid), None))
            timers.extend(_cancel_pending(g))
            _drop_group(state, g)
    for cg in [cg for gid, cg in consumer_groups.items() if gid not in state.groups and is_empty(cg)]:
        drop_consumer_group(state, cg, records)  # no offsets at all: Kafka deletes it if Empty
    if not records:
        return Result(timers=tuple(timers), replay=False)
    # a failed write is only logged by Kafka, whose rollback brings the groups back: so does the runtime's
    return Result(records=tuple(records), timers=tuple(timers), write_ref=ExpiryWrite())


def _expiry_base(g: Group) -> int | None | bool:
    """When each eligible offset's clock starts: an int (the time the group became Empty), None (its own
    commit timestamp), or False (nothing is eligible in this state)."""
    if g.protocol_type:
        if g.state == EMPTY:
            return g.state_ts
        if g.protocol_type == CONSUMER and g.subscribed is not None and g.state == STABLE:
            return None
        return False
    return None


def remove_topic_offsets(state: ShardState, topics: frozenset[str] | set[str]) -> Result:
    """A deleted topic takes every group's offsets for it along (tombstones, replayed once durable)."""
    keys = {
        OffsetCommitKey(g.group_id, t, p): None
        for g in state.groups.values()
        for t, ps in g.offsets.items()
        if t in topics
        for p in ps
    }
    for by_group in state.pending_txn.values():  # and the offsets open transactions hold
        for gid, offsets in by_group.items():
            for t, p in offsets:
                if t in topics:
                    keys.setdefault(OffsetCommitKey(gid, t, p), None)
    records = list(keys.items())
    if not records:
        return Result(replay=False)
    return Result(records=tuple(records), write_ref=TopicOffsetsWrite())
