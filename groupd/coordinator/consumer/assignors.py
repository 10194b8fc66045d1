"""Server-side assignors of consumer groups: ``uniform`` (the default) and ``range``.

An assignor maps each member's spec (its subscribed topic ids, instance id, rack and its current target)
and the partition counts of the subscribed topics to a new target: member id -> {topic id: partitions}.
Kafka's rules (group-coordinator assignor package, 4.x):

- ``uniform`` puts balance before stickiness. When every member subscribes to the same topics
  (homogeneous) the P partitions are split into quotas of P div M, the first P mod M members (in member
  order) getting one more; each member keeps what it already has up to its quota, and the rest is
  handed out. Otherwise (heterogeneous) each member keeps its still-subscribed partitions, free
  partitions go to the least-loaded subscriber topic by topic (topics by partitions per subscriber
  descending, then subscriber count ascending, then id), and up to 16 passes move partitions from the
  most- to the least-loaded subscribers of a topic until their loads differ by at most one.
- ``range`` is not sticky: members sorted static first (by instance id) then by member id; per topic
  with N partitions and S subscribers, each gets N div S contiguous partitions from partition 0, the
  first N mod S one more.
- Neither looks at racks: Kafka 4.x's server-side assignors take the rack in the spec but never use it.
- A subscribed topic missing from the metadata is an error (Kafka's PartitionAssignorException), which
  the heartbeat answers with UNKNOWN_SERVER_ERROR.

Kafka walks members in hash-map order; here it is the order of ``members`` (insertion order of the
group's member map), so layouts are deterministic but not Kafka's to the byte. Tests check the
properties instead (balance, stickiness, every partition owned exactly once).
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

Assignment = dict[uuid.UUID, frozenset[int]]

UNIFORM = "uniform"
RANGE = "range"
MAX_BALANCE_PASSES = 16


@dataclass(slots=True)
class MemberSpec:
    topics: frozenset[uuid.UUID]
    instance_id: str | None = None
    rack: str | None = None
    current: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)


class AssignorError(Exception):
    """Kafka's PartitionAssignorException: the heartbeat answers UNKNOWN_SERVER_ERROR."""


def is_homogeneous(members: Mapping[str, MemberSpec]) -> bool:
    subs = {m.topics for m in members.values()}
    return len(subs) <= 1


def assign(name: str, members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    """The target assignment by the assignor ``name`` (``uniform`` or ``range``)."""
    for spec in members.values():
        for topic in spec.topics:
            if topic not in partitions:
                raise AssignorError(f"members are subscribed to topic {topic} which is not in the metadata")
    if name == RANGE:
        return range_assign(members, partitions)
    if name == UNIFORM:
        if is_homogeneous(members):
            return uniform_homogeneous(members, partitions)
        return uniform_heterogeneous(members, partitions)
    raise AssignorError(f"unknown assignor {name!r}")


# ---------------------------------------------------------------- range


def range_order(members: Mapping[str, MemberSpec]) -> list[str]:
    """Static members first, by instance id; then dynamic ones by member id."""
    return sorted(
        members,
        key=lambda m: (0, members[m].instance_id, "") if members[m].instance_id is not None else (1, "", m),
    )


def range_assign(members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]) -> dict[str, Assignment]:
    order = range_order(members)
    subscribers: dict[uuid.UUID, list[str]] = {}
    for m in order:
        for topic in members[m].topics:
            subscribers.setdefault(topic, []).append(m)
    out: dict[str, Assignment] = {m: {} for m in order}
    for topic, subs in subscribers.items():
        n = partitions[topic]
        quota, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            end = min(start + quota + (1 if i < extra else 0), n)
            if start < end:
                out[m][topic] = frozenset(range(start, end))
            start = end
    return out


# ---------------------------------------------------------------- uniform, homogeneous


def uniform_homogeneous(
    members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    if not members:
        return {}
    topics = next(iter(members.values())).topics
    if not topics:
        return {m: {} for m in members}
    owned: set[tuple[uuid.UUID, int]] = set()
    total = 0
    for topic in topics:
        total += partitions[topic]
    n_members = len(members)
    quota_min, extra = divmod(total, n_members)
    kept: dict[str, dict[uuid.UUID, set[int]]] = {}
    room: dict[str, int] = {}
    for i, (member_id, spec) in enumerate(members.items()):
        quota = quota_min + (1 if extra > 0 else 0)
        has_extra = extra > 0
        if has_extra:
            extra -= 1
        mine: dict[uuid.UUID, set[int]] = {}
        for topic in sorted(spec.current):
            if topic not in topics:
                continue
            for p in sorted(spec.current[topic]):
                if p >= partitions[topic] or (topic, p) in owned:
                    continue
                if quota > 0:  # over the quota: revoked, so it is found below as not owned
                    quota -= 1
                    mine.setdefault(topic, set()).add(p)
                    owned.add((topic, p))
        # A member that cannot fill its extra slot from what it holds gives the slot back, so that a
        # later member holding one more than the minimum keeps it; unless every member left must get one.
        if has_extra and quota > 0 and n_members - i > extra + 1:
            quota -= 1
            extra += 1
        kept[member_id] = mine
        room[member_id] = quota
    unassigned = [(t, p) for t in sorted(topics) for p in range(partitions[t]) if (t, p) not in owned]
    it = iter(unassigned)
    for member_id in members:
        mine = kept[member_id]
        for _ in range(room[member_id]):
            nxt = next(it, None)
            if nxt is None:
                break
            mine.setdefault(nxt[0], set()).add(nxt[1])
    if next(it, None) is not None:
        raise AssignorError("partitions were left unassigned")
    return {m: {t: frozenset(ps) for t, ps in kept[m].items()} for m in members}


# ---------------------------------------------------------------- uniform, heterogeneous


def uniform_heterogeneous(
    members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    ids = list(members)
    index = {m: i for i, m in enumerate(ids)}
    subscribers: dict[uuid.UUID, list[int]] = {}
    for i, m in enumerate(ids):
        for topic in members[m].topics:
            subscribers.setdefault(topic, []).append(i)
    owner: dict[uuid.UUID, list[int]] = {t: [-1] * partitions[t] for t in subscribers}
    load = [0] * len(ids)
    for m, spec in members.items():
        i = index[m]
        for topic, ps in spec.current.items():
            if topic not in spec.topics:
                continue  # no longer subscribed: revoked
            owners = owner[topic]
            for p in ps:
                if p < len(owners) and owners[p] == -1:
                    owners[p] = i
                    load[i] += 1

    def topic_order(topic: uuid.UUID) -> tuple[float, int, uuid.UUID]:
        n_subs = len(subscribers[topic])
        return (-partitions[topic] / n_subs, n_subs, topic)

    topics = sorted(subscribers, key=topic_order)
    for topic in topics:
        owners = owner[topic]
        free = [p for p, o in enumerate(owners) if o == -1]
        if not free:
            continue
        # the least-loaded subscriber takes each free partition; only this topic's loop changes loads
        heap = [(load[i], i) for i in subscribers[topic]]
        heapq.heapify(heap)
        for p in free:
            n, target = heap[0]
            owners[p] = target
            load[target] = n + 1
            heapq.heapreplace(heap, (n + 1, target))

    balanced = [t for t in topics if len(subscribers[t]) >= 2]
    for _ in range(MAX_BALANCE_PASSES):
        moved = 0
        for topic in balanced:
            moved += _balance_topic(owner[topic], subscribers[topic], load)
        if not moved:
            break

    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in ids}
    for topic, owners in owner.items():
        for p, o in enumerate(owners):
            out[ids[o]].setdefault(topic, set()).add(p)
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}


def _balance_topic(owners: list[int], subs: list[int], load: list[int]) -> int:
    """Move this topic's partitions from its most- to its least-loaded subscriber while they differ by
    more than one; returns how many moved. Two heaps with lazy entries: an entry whose load is stale
    is dropped when it comes up."""
    held: dict[int, list[int]] = {}
    for p, o in enumerate(owners):
        held.setdefault(o, []).append(p)
    least_heap = [(load[i], i) for i in subs]
    most_heap = [(-load[i], i) for i in subs if held.get(i)]
    heapq.heapify(least_heap)
    heapq.heapify(most_heap)
    moved = 0
    while most_heap and least_heap:
        neg, most = most_heap[0]
        if -neg != load[most] or not held.get(most):
            heapq.heappop(most_heap)
            continue
        n, least = least_heap[0]
        if n != load[least]:
            heapq.heappop(least_heap)
            continue
        if load[most] - load[least] <= 1:
            break
        p = held[most].pop()
        owners[p] = least
        held.setdefault(least, []).append(p)
        load[most] -= 1
        load[least] += 1
        moved += 1
        heapq.heapreplace(most_heap, (-load[most], most))
        heapq.heapreplace(least_heap, (load[least], least))
        heapq.heappush(most_heap, (-load[least], least))
    return moved
