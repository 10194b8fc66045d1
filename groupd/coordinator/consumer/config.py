"""The consumer-group protocol's settings (Kafka's group.consumer.* keys, GroupCoordinatorConfig 4.3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Kafka's defaults name the assignor classes; the short names are what members send as ServerAssignor
ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


@dataclass(slots=True)
class ConsumerConfig:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")
    assignment_interval_ms: int = 1_000
    regex_refresh_interval_ms: int = 600_000
    enabled: bool = True  # "consumer" is in group.coordinator.rebalance.protocols
    # group.consumer.migration.policy: bidirectional, upgrade, downgrade or disabled (KIP-848 online migration)
    migration_policy: str = "bidirectional"

    def upgrade_enabled(self) -> bool:
        """A non-empty classic group may become a consumer group (ConsumerGroupMigrationPolicy.isUpgradeEnabled)."""
        return self.migration_policy in ("bidirectional", "upgrade")

    def downgrade_enabled(self) -> bool:
        """A consumer group left with only classic members may become a classic group."""
        return self.migration_policy in ("bidirectional", "downgrade")

    @classmethod
    def from_broker_config(cls, config: Any) -> ConsumerConfig:
        get = config.__getitem__
        assignors = tuple(ASSIGNOR_CLASSES.get(a, a) for a in get("group.consumer.assignors"))
        return cls(
            session_timeout_ms=get("group.consumer.session.timeout.ms"),
            heartbeat_interval_ms=get("group.consumer.heartbeat.interval.ms"),
            max_size=get("group.consumer.max.size"),
            assignors=assignors,
            assignment_interval_ms=get("group.consumer.assignment.interval.ms"),
            enabled="consumer" in get("group.coordinator.rebalance.protocols"),
            migration_policy=get("group.consumer.migration.policy"),
        )
