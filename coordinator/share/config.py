"""A share group's settings: Kafka's broker keys (group.share.*) with the group's own overrides (the
``share.*`` group configs set through IncrementalAlterConfigs on a GROUP resource) applied.

One value per group, read by the group rules (sessions, size, assignment interval) and by the share
partitions (locks, delivery limit, in-flight cap, offset reset, isolation), so both see the same numbers.
Defaults are Kafka 4.3's (GroupCoordinatorConfig, ShareGroupConfig, GroupConfig).
"""

from __future__ import annotations

from coordinator.values import value


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
