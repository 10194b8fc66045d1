"""What the group coordinator tells metrics and logs: group state changes (rebalance phases and their
durations), and members joining, syncing and leaving as structured events.

The runtime calls ``before``/``after`` around every operation and timer of a group (coordinator/runtime/
runtime.py's Observer port); the facade wraps the answers of joins, syncs and leaves with ``member_event``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from groupd.coordinator import errors as E
from groupd.coordinator.group import COMPLETING, PREPARING, STABLE
from groupd.coordinator.group_type import Observed
from groupd.coordinator.group_types import BY_CLASS
from groupd.coordinator.logfields import group_event, log_member_event, log_transition
from groupd.coordinator.runtime.runtime import Shard

log = logging.getLogger("groupd.coordinator")

INITIAL_EPOCH = 1  # a new group's first epoch (a group epoch above it after a call is a rebalance)

MEMBER_EVENTS = {
    "join_group": "member joined", "sync_group": "member synced", "leave_group": "members left",
    "consumer_group_heartbeat": "",  # joins, leaves and refusals only (see _consumer_heartbeat)
    "share_group_heartbeat": "",  # the same for share groups
}
_CONSUMER_EPOCHS = {0: "consumer member joined", -1: "consumer member left", -2: "static consumer member left"}
_CONSUMER_REFUSALS = frozenset(
    (
        E.FENCED_MEMBER_EPOCH,
        E.UNKNOWN_MEMBER_ID,
        E.UNRELEASED_INSTANCE_ID,
        E.FENCED_INSTANCE_ID,
        E.GROUP_MAX_SIZE_REACHED,
    )
)


class GroupObserver:
    def __init__(self, metrics: Any = None) -> None:
        self.metrics = metrics

    def before(self, state: Any, group_id: str) -> Observed:
        """What the group's type says to follow of it (``GroupType.observe``), for ``after`` to compare."""
        group = state.groups.get(group_id)
        return None if group is None else BY_CLASS[group.__class__].observe(group)

    def after(self, shard: Shard, group_id: str, before: Observed) -> None:
        group = shard.state.groups.get(group_id)
        seen = None if group is None else BY_CLASS[group.__class__].observe(group)
        if seen == before:
            return  # most requests: nothing to tell
        was: str | None
        phase: str | None
        if isinstance(seen, tuple) or isinstance(before, tuple):
            was = self._epoch_after(seen[1:] if isinstance(seen, tuple) else None, before)
            phase = None if isinstance(seen, tuple) else seen
        else:
            was, phase = before, seen
        if phase is None:
            group = None  # no phases to follow: as no group
        if group is None and was is None:
            return  # no classic group before or after (a consumer-protocol group's request)
        after = phase if phase is not None else "Dead"
        if after == was:
            return
        now = time.perf_counter()
        metrics = self.metrics
        if metrics is not None:
            metrics.group_state_changed(group_id, was, after)
        if after == PREPARING:
            shard.phase_started[group_id] = now
            if metrics is not None:
                metrics.rebalance_started(group_id, (group.rebalance_cause if group else "") or "join")
        elif after == COMPLETING:
            started = shard.phase_started.get(group_id)
            if metrics is not None and started is not None:
                metrics.join_phase(now - started)
            shard.phase_started[group_id + "\0sync"] = now
        elif after == STABLE and group is not None:
            started = shard.phase_started.pop(group_id + "\0sync", None)
            began = shard.phase_started.pop(group_id, None)
            if metrics is not None:
                if started is not None:
                    metrics.sync_phase(now - started)
                metrics.rebalance_completed(group_id, group.generation, None if began is None else now - began)
        if after in ("Dead", "Empty"):
            shard.phase_started.pop(group_id, None)
            shard.phase_started.pop(group_id + "\0sync", None)
            if after == "Dead" and metrics is not None:
                metrics.group_removed(group_id)
        if log.isEnabledFor(logging.INFO):
            log_transition(log, group_id, was, after, group)

    def _epoch_after(self, now_epoch: tuple[int, int] | None, before: Observed) -> str | None:
        """Kafka's consumer-group-rebalance sensor: a group epoch bumped by a heartbeat (a member joined,
        a subscription or the subscribed topics' metadata changed) or a regex resolution; not a bump
        that removes a member (Kafka's consumerGroupFenceMember does not record it). A new group starts
        at epoch 1 (INITIAL_EPOCH). Returns the classic part of ``before``."""
        if isinstance(before, tuple):
            classic, epoch, members = before
        else:
            classic, epoch, members = before, INITIAL_EPOCH, 0
        if now_epoch is not None and self.metrics is not None and now_epoch[0] > epoch and now_epoch[1] >= members:
            self.metrics.consumer_group_rebalance()
        return classic


def logs_member_event(handler: Callable[..., Any]) -> bool:
    """Whether a handler's answers are logged: joins, syncs and leaves at INFO, anything at DEBUG."""
    return log.isEnabledFor(logging.INFO) and (
        getattr(handler, "__name__", "") in MEMBER_EVENTS or log.isEnabledFor(logging.DEBUG)
    )


def member_event(handler: Callable[..., Any], group_id: str, request: Any, payload: Any) -> None:
    """Join, sync and leave as structured events: group, member, generation, error."""
    name = getattr(handler, "__name__", "")
    event = MEMBER_EVENTS.get(name)
    if event is None:
        if log.isEnabledFor(logging.DEBUG):
            group_event(
                log,
                name,
                group_id,
                getattr(request, "member_id", None),
                level=logging.DEBUG,
                error=getattr(payload, "error", None),
            )
        return
    if not log.isEnabledFor(logging.INFO):
        return
    if name == "consumer_group_heartbeat":
        _consumer_heartbeat(group_id, request, payload)
        return
    if name == "share_group_heartbeat":
        _consumer_heartbeat(group_id, request, payload, "share")
        return
    if name == "leave_group":
        for m in getattr(payload, "members", ()) or getattr(request, "members", ()):
            log_member_event(log, event, group_id, m.member_id, None, getattr(m, "error", 0), m.group_instance_id)
        return
    member = getattr(payload, "member_id", None) or getattr(request, "member_id", None)
    generation = getattr(payload, "generation_id", None)
    if generation is None:
        generation = getattr(request, "generation_id", None)
    log_member_event(
        log, event, group_id, member, generation, payload.error, getattr(request, "group_instance_id", None)
    )


def _consumer_heartbeat(group_id: str, request: Any, payload: Any, kind: str = "consumer") -> None:
    """A consumer-protocol (or share) heartbeat is an event when it joins, leaves or is refused as stale."""
    event = _CONSUMER_EPOCHS.get(request.member_epoch)
    if payload.error in _CONSUMER_REFUSALS:
        event = "consumer member refused"
    if event is None:
        return
    group_event(
        log,
        event.replace("consumer", kind, 1),
        group_id,
        payload.member_id or request.member_id,
        error=payload.error or None,
        epoch=payload.member_epoch,
        request_epoch=request.member_epoch,
        instance=getattr(request, "instance_id", None),
    )
