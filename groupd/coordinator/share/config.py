"""A share group's settings: Kafka's broker keys (group.share.*) with the group's own overrides (the
``share.*`` group configs set through IncrementalAlterConfigs on a GROUP resource) applied.

One value per group, read by the group rules (sessions, size, assignment interval) and by the share
partitions (locks, delivery limit, in-flight cap, offset reset, isolation), so both see the same numbers.
Defaults are Kafka 4.3's (GroupCoordinatorConfig, ShareGroupConfig, GroupConfig).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from groupd.coordinator.values import value


@value
class ShareGroupConfig:
    session_timeout_ms: int = 45_000  # group.share.session.timeout.ms / share.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms / share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size
    assignment_interval_ms: int = 1_000  # group.share.assignment.interval.ms / share.assignment.interval.ms
    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms / share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit / share.delivery.count.limit
    partition_max_record_locks: int = 2_000  # group.share.partition.max.record.locks / share.partition.max.record.locks
    auto_offset_reset: str = "latest"  # share.auto.offset.reset: latest, earliest or by_duration:<ISO-8601>
    isolation_level: str = "read_uncommitted"  # share.isolation.level
    renew_acknowledge_enable: bool = True  # share.renew.acknowledge.enable


def _true(raw: str) -> bool:
    return raw.strip().lower() == "true"


# group config (``share.*``, set on a GROUP resource) -> (field, how the value is read)
_OVERRIDES: dict[str, tuple[str, Callable[[str], Any]]] = {
    "share.session.timeout.ms": ("session_timeout_ms", int),
    "share.heartbeat.interval.ms": ("heartbeat_interval_ms", int),
    "share.assignment.interval.ms": ("assignment_interval_ms", int),
    "share.record.lock.duration.ms": ("record_lock_duration_ms", int),
    "share.delivery.count.limit": ("delivery_count_limit", int),
    "share.partition.max.record.locks": ("partition_max_record_locks", int),
    "share.auto.offset.reset": ("auto_offset_reset", str),
    "share.isolation.level": ("isolation_level", str),
    "share.renew.acknowledge.enable": ("renew_acknowledge_enable", _true),
}


def from_broker_config(config: Mapping[str, Any]) -> ShareGroupConfig:
    """The broker's group.share.* keys (broker/config.py)."""
    return ShareGroupConfig(
        session_timeout_ms=config["group.share.session.timeout.ms"],
        heartbeat_interval_ms=config["group.share.heartbeat.interval.ms"],
        max_size=config["group.share.max.size"],
        assignment_interval_ms=config["group.share.assignment.interval.ms"],
        record_lock_duration_ms=config["group.share.record.lock.duration.ms"],
        delivery_count_limit=config["group.share.delivery.count.limit"],
        partition_max_record_locks=config["group.share.partition.max.record.locks"],
    )


def with_overrides(
    base: ShareGroupConfig, overrides: Mapping[str, str], config: Mapping[str, Any] | None = None
) -> ShareGroupConfig:
    """``base`` with a group's ``share.*`` configs applied. Values that do not parse are ignored (the
    store checked them when they were set); with the broker ``config``, the assignment interval is
    clamped to its broker bounds, as Kafka's GroupCoordinatorConfig clamps that dynamic key."""
    changes: dict[str, Any] = {}
    for key, raw in overrides.items():
        spec = _OVERRIDES.get(key)
        if spec is None:
            continue
        name, read = spec
        try:
            changes[name] = read(raw)
        except (TypeError, ValueError):
            continue
    if config is not None and "assignment_interval_ms" in changes:
        low, high = config["group.share.min.assignment.interval.ms"], config["group.share.max.assignment.interval.ms"]
        changes["assignment_interval_ms"] = min(max(changes["assignment_interval_ms"], low), high)
    return replace(base, **changes) if changes else base
