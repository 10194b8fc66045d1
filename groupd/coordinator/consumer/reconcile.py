"""Member reconciliation: Kafka's CurrentAssignmentBuilder (4.3).

A member moves towards its target one safe step at a time: it first gives up (revokes) what the target
takes from it, keeping its epoch, in UNREVOKED_PARTITIONS until its heartbeat no longer reports owning
any of them; only then does it take the target epoch and the partitions the target adds. A partition
still held by another member (its owner epoch is not -1) is not given yet: the member waits in
UNRELEASED_PARTITIONS. So a partition never has two owners.

Inputs: the member, the target epoch E and the member's target T, the partitions the member reports
owning (None: unknown, taken as "still owns everything"), the topic ids it subscribes to now, whether its
subscription just changed, and the group's owner-epoch map. Output: the new member, or ``FENCED`` for a
member in an unknown state that does not report owning nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from groupd.coordinator.consumer.group import (
    STABLE,
    UNKNOWN,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    Member,
    Partitions,
)

FENCED = "fenced"

Owned = Iterable[tuple[uuid.UUID, Iterable[int]]] | None


def owns_any(owned: Owned, parts: Partitions) -> bool:
    if owned is None:
        return True
    for topic, ps in owned:
        held = parts.get(topic)
        if held and any(p in held for p in ps):
            return True
    return False


def reconcile(
    member: Member,
    target_epoch: int,
    target: Mapping[uuid.UUID, frozenset[int]],
    owned: Owned,
    subscribed: frozenset[uuid.UUID],
    subscription_changed: bool,
    owner_epoch: Callable[[uuid.UUID, int], int],
) -> Member | str:
    """The member after one reconciliation step (the same object when nothing changes)."""
    owned = None if owned is None else [(t, tuple(ps)) for t, ps in owned]
    state, epoch = member.state, member.epoch
    if not subscription_changed and state == STABLE and epoch == target_epoch:
        return member

    def nxt(e: int) -> Member:
        return _next(member, e, target_epoch, target, owned, subscribed, owner_epoch)

    if state == STABLE:
        if epoch != target_epoch:
            return nxt(epoch)
        return _shrink(member, owned, subscribed)
    if state == UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            return _shrink(member, owned, subscribed) if subscription_changed else member
        return nxt(epoch)
    if state == UNRELEASED_PARTITIONS:
        return nxt(epoch)
    assert state == UNKNOWN
    if owned is None or any(ps for _, ps in owned):
        return FENCED
    return nxt(target_epoch)


def _with(member: Member, state: int, epoch: int, assigned: Partitions, pending: Partitions) -> Member:
    """Kafka's Builder.updateMemberEpoch: the previous epoch becomes the current one."""
    return replace(
        member, state=state, epoch=epoch, previous_epoch=member.epoch, assigned=assigned, pending_revocation=pending
    )


def _next(
    member: Member,
    epoch: int,
    target_epoch: int,
    target: Mapping[uuid.UUID, frozenset[int]],
    owned: Owned,
    subscribed: frozenset[uuid.UUID],
    owner_epoch: Callable[[uuid.UUID, int], int],
) -> Member:
    assigned: Partitions = {}
    revoke: Partitions = {}
    want: Partitions = {}
    unreleased = False
    for topic in set(target) | set(member.assigned):
        tgt = target.get(topic, frozenset()) if topic in subscribed else frozenset()
        current = member.assigned.get(topic, {})
        keep = {p: e for p, e in current.items() if p in tgt}
        gone = {p: e for p, e in current.items() if p not in tgt}
        mine_pending = member.pending_revocation.get(topic, {})
        adds: dict[int, int] = {}
        for p in tgt:
            if p in keep:
                continue
            if owner_epoch(topic, p) != -1 and p not in mine_pending:
                unreleased = True
                continue
            adds[p] = target_epoch
        if keep:
            assigned[topic] = keep
        if gone:
            revoke[topic] = gone
        if adds:
            want[topic] = adds
    if revoke and owns_any(owned, revoke):
        return _with(member, UNREVOKED_PARTITIONS, epoch, assigned, revoke)
    if want:
        for topic, adds in want.items():
            assigned.setdefault(topic, {}).update(adds)
        return _with(member, UNRELEASED_PARTITIONS if unreleased else STABLE, target_epoch, assigned, {})
    if unreleased:
        return _with(member, UNRELEASED_PARTITIONS, target_epoch, assigned, {})
    return _with(member, STABLE, target_epoch, assigned, {})


def _shrink(member: Member, owned: Owned, subscribed: frozenset[uuid.UUID]) -> Member:
    """A subscription change inside an epoch: topics no longer subscribed move to pending revocation."""
    moved = {t: ps for t, ps in member.assigned.items() if t not in subscribed}
    if not subscribed and not member.pending_revocation:
        moved = dict(member.assigned)
    if not moved:
        return member
    assigned = {t: ps for t, ps in member.assigned.items() if t not in moved}
    pending = {t: dict(ps) for t, ps in member.pending_revocation.items()}
    for t, ps in moved.items():
        pending.setdefault(t, {}).update(ps)
    if owns_any(owned, pending):
        return _with(member, UNREVOKED_PARTITIONS, member.epoch, assigned, pending)
    return replace(member, assigned=assigned)
