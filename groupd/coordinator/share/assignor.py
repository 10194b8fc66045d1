"""The ``simple`` share-group assignor (Kafka's SimpleAssignor, its homogeneous and heterogeneous builders).

Partitions of a share group can be shared: with M members and T assignable partitions each partition
goes to ``sharing = ceil(M / T)`` members, and member i (in member order) gets ``ceil(f * (i + 1)) -
ceil(f * i)`` partitions, ``f = sharing * T / M``. From the previous target it keeps what is still
subscribed and assignable, takes away from members over their count and from partitions over their
sharing, then hands partitions short of sharers to members short of partitions that do not hold them
yet. When every member subscribes to the same topics this runs once over all their partitions; otherwise
once per topic, over that topic's subscribers.

Only assignable partitions are assigned: for share groups, those whose share state is initialized.
Members are taken in sorted id order (Kafka's order is a hash map's), so the result is deterministic.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping

from groupd.coordinator.share.group import Assignment

Partition = tuple[uuid.UUID, int]


def desired_counts(members: int, partitions: int) -> list[int]:
    """How many partitions each member (by index) should get: Kafka's formula."""
    if members == 0 or partitions == 0:
        return [0] * members
    sharing = -(-members // partitions)
    f = sharing * partitions / members
    return [math.ceil(f * (i + 1)) - math.ceil(f * i) for i in range(members)]


def _build(
    member_ids: list[str], targets: list[Partition], old: Mapping[str, set[Partition]]
) -> dict[str, set[Partition]]:
    """One run of the homogeneous builder: ``old`` holds each member's previous partitions among these."""
    n, t = len(member_ids), len(targets)
    if n == 0:
        return {}
    sharing = -(-n // t) if t else 0
    counts = desired_counts(n, t)
    target_set = set(targets)
    by_member: dict[int, list[Partition]] = {}
    by_partition: dict[Partition, list[int]] = {p: [] for p in targets}
    unfilled: list[int] = []
    for i, mid in enumerate(member_ids):
        kept = sorted(p for p in old.get(mid, ()) if p in target_set)
        # revoke from an over-filled member
        kept = kept[: counts[i]]
        by_member[i] = kept
        for p in kept:
            by_partition[p].append(i)
    # revoke over-shared partitions
    for p, holders in by_partition.items():
        while len(holders) > sharing:
            i = holders.pop()
            by_member[i].remove(p)
    unfilled = [i for i in range(n) if len(by_member[i]) < counts[i]]
    # give partitions short of sharers to members short of partitions
    if unfilled:
        cursor = 0
        for p in targets:
            holders = by_partition[p]
            tried = 0
            while len(holders) < sharing and unfilled and tried < len(unfilled):
                i = unfilled[cursor % len(unfilled)]
                if i in holders:
                    cursor += 1
                    tried += 1
                    continue
                holders.append(i)
                by_member[i].append(p)
                tried = 0
                if len(by_member[i]) >= counts[i]:
                    unfilled.remove(i)
                else:
                    cursor += 1
            if not unfilled:
                break
    return {member_ids[i]: set(ps) for i, ps in by_member.items()}


def assign(
    subscriptions: Mapping[str, frozenset[uuid.UUID]],
    assignable: Mapping[uuid.UUID, frozenset[int]],
    previous: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """The new target of every member: ``subscriptions`` member -> subscribed topic ids, ``assignable``
    topic -> its assignable partitions, ``previous`` the current target."""
    member_ids = sorted(subscriptions)
    old = {m: {(t, p) for t, ps in previous.get(m, {}).items() for p in ps} for m in member_ids}
    result: dict[str, set[Partition]] = {m: set() for m in member_ids}
    subs = {subscriptions[m] for m in member_ids}
    if len(subs) <= 1:
        topics = sorted(next(iter(subs)), key=str) if subs else []
        targets = [(t, p) for t in topics for p in sorted(assignable.get(t, ()))]
        for m, ps in _build(member_ids, targets, old).items():
            result[m] |= ps
    else:
        topics = sorted({t for s in subs for t in s}, key=str)
        for topic in topics:
            subscribers = [m for m in member_ids if topic in subscriptions[m]]
            targets = [(topic, p) for p in sorted(assignable.get(topic, ()))]
            topic_old = {m: {tp for tp in old[m] if tp[0] == topic} for m in subscribers}
            for m, ps in _build(subscribers, targets, topic_old).items():
                result[m] |= ps
    out: dict[str, Assignment] = {}
    for m, ps in result.items():
        parts: dict[uuid.UUID, set[int]] = {}
        for t, p in ps:
            parts.setdefault(t, set()).add(p)
        out[m] = {t: frozenset(v) for t, v in parts.items()}
    return out
