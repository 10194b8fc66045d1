"""Per-topic configuration keys: Kafka 4.2's whole catalogue, with its defaults, types and validation.

CreateTopics, AlterConfigs and IncrementalAlterConfigs refuse a key not listed here, or a value its
validator refuses, with INVALID_CONFIG, as Kafka does; DescribeConfigs lists every key. groupd acts on
the keys its storage has a use for (segment.bytes, segment.ms, retention.ms, retention.bytes,
cleanup.policy, delete.retention.ms, max.message.bytes); the others are kept and described, as a
single node without tiered storage, throttling or a log cleaner's tuning would hold them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# DescribeConfigs' config types
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7
LONG_MAX = str((1 << 63) - 1)


@dataclass(frozen=True, slots=True)
class TopicConfigSpec:
    default: str
    type: int
    check: Callable[[str], None]


def _number(kind: int, low: float | None = None, high: float | None = None) -> Callable[[str], None]:
    bits = {INT: 31, LONG: 63}.get(kind)

    def check(value: str) -> None:
        number: float = float(value.strip()) if kind == DOUBLE else int(value.strip())
        if bits is not None and not -(1 << bits) <= number < (1 << bits):
            raise ValueError("out of range")
        if low is not None and number < low:
            raise ValueError(f"Value must be at least {low:g}")
        if high is not None and number > high:
            raise ValueError(f"Value must be no more than {high:g}")

    return check


def _level(default: int, low: int, high: int) -> Callable[[str], None]:
    """A compression level: the codec's own range, or its default."""

    def check(value: str) -> None:
        level = int(value.strip())
        if level != default and not low <= level <= high:
            raise ValueError(f"Value must be between {low} and {high}")

    return check


def _one_of(*options: str) -> Callable[[str], None]:
    def check(value: str) -> None:
        if value not in options:
            raise ValueError(f"String must be one of: {', '.join(options)}")

    return check


def _boolean(value: str) -> None:
    if value.strip().lower() not in ("true", "false"):
        raise ValueError("Expected value to be either true or false")


def _policy(value: str) -> None:
    """A list of delete and compact; Kafka 4 also takes an empty one: keep every record."""
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if not set(parts) <= {"delete", "compact"}:
        raise ValueError("Invalid value: expected delete, compact, both or none")


def _throttled(value: str) -> None:
    """Empty, ``*``, or partition:broker pairs (Kafka's ThrottledReplicaListValidator)."""
    text = value.strip()
    if text in ("", "*"):
        return
    if not all(re.fullmatch(r"\d+:\d+", p.strip()) for p in text.split(",")):
        raise ValueError("must be the literal '*' or a list of replicas in the format [PartitionId]:[BrokerId],...")


def _local_only(value: str) -> None:
    if value.strip().lower() == "true":
        raise ValueError("Tiered Storage functionality is disabled in the broker.")
    _boolean(value)


TOPIC_CONFIGS: dict[str, TopicConfigSpec] = {
    "cleanup.policy": TopicConfigSpec("delete", LIST, _policy),
    "compression.gzip.level": TopicConfigSpec("-1", INT, _level(-1, 1, 9)),
    "compression.lz4.level": TopicConfigSpec("9", INT, _level(9, 1, 17)),
    "compression.type": TopicConfigSpec(
        "producer", STRING, _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
    ),
    "compression.zstd.level": TopicConfigSpec("3", INT, _level(3, -131072, 22)),
    "delete.retention.ms": TopicConfigSpec("86400000", LONG, _number(LONG, 0)),
    "file.delete.delay.ms": TopicConfigSpec("60000", LONG, _number(LONG, 0)),
    "flush.messages": TopicConfigSpec(LONG_MAX, LONG, _number(LONG, 1)),
    "flush.ms": TopicConfigSpec(LONG_MAX, LONG, _number(LONG, 0)),
    "follower.replication.throttled.replicas": TopicConfigSpec("", LIST, _throttled),
    "index.interval.bytes": TopicConfigSpec("4096", INT, _number(INT, 0)),
    "leader.replication.throttled.replicas": TopicConfigSpec("", LIST, _throttled),
    "local.retention.bytes": TopicConfigSpec("-2", LONG, _number(LONG, -2)),
    "local.retention.ms": TopicConfigSpec("-2", LONG, _number(LONG, -2)),
    "max.compaction.lag.ms": TopicConfigSpec(LONG_MAX, LONG, _number(LONG, 1)),
    "max.message.bytes": TopicConfigSpec("1048588", INT, _number(INT, 0)),
    # Kafka 3.9's (gone in 4.0, with the Fetch versions it governs): whether Fetch v0-3 get converted records
    "message.downconversion.enable": TopicConfigSpec("true", BOOLEAN, _boolean),
    "message.timestamp.after.max.ms": TopicConfigSpec("3600000", LONG, _number(LONG, 0)),
    "message.timestamp.before.max.ms": TopicConfigSpec(LONG_MAX, LONG, _number(LONG, 0)),
    "message.timestamp.type": TopicConfigSpec("CreateTime", STRING, _one_of("CreateTime", "LogAppendTime")),
    "min.cleanable.dirty.ratio": TopicConfigSpec("0.5", DOUBLE, _number(DOUBLE, 0, 1)),
    "min.compaction.lag.ms": TopicConfigSpec("0", LONG, _number(LONG, 0)),
    "min.insync.replicas": TopicConfigSpec("1", INT, _number(INT, 1)),
    "preallocate": TopicConfigSpec("false", BOOLEAN, _boolean),
    "remote.log.copy.disable": TopicConfigSpec("false", BOOLEAN, _boolean),
    "remote.log.delete.on.disable": TopicConfigSpec("false", BOOLEAN, _boolean),
    "remote.storage.enable": TopicConfigSpec("false", BOOLEAN, _local_only),
    "retention.bytes": TopicConfigSpec("-1", LONG, _number(LONG)),
    "retention.ms": TopicConfigSpec("604800000", LONG, _number(LONG, -1)),
    "segment.bytes": TopicConfigSpec("1073741824", INT, _number(INT, 1 << 20)),  # at least 1 MiB since Kafka 4.0
    "segment.index.bytes": TopicConfigSpec("10485760", INT, _number(INT, 4)),
    "segment.jitter.ms": TopicConfigSpec("0", LONG, _number(LONG, 0)),
    "segment.ms": TopicConfigSpec("604800000", LONG, _number(LONG, 1)),
    "unclean.leader.election.enable": TopicConfigSpec("false", BOOLEAN, _boolean),
}

# Kafka 4.1+ (KIP-966) writes a cluster-wide min.insync.replicas at controller activation: topics
# without their own value report it as a dynamic broker default, not as the built-in default
DYNAMIC_BROKER_DEFAULTS: dict[str, str] = {"min.insync.replicas": "1"}

# the broker-wide key a topic config falls back to (Kafka's synonyms), where groupd has one
BROKER_SYNONYMS: dict[str, str] = {
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "segment.bytes": "log.segment.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "segment.ms": "log.roll.ms",
    "max.message.bytes": "message.max.bytes",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "message.downconversion.enable": "log.message.downconversion.enable",
}


def effective_topic_config(broker_config, topic_configs: dict[str, str], key: str) -> tuple[str, bool]:
    """(value, is_topic_override): the topic's own value, else the broker's, else Kafka's default."""
    if key in topic_configs:
        return topic_configs[key], True
    synonym = BROKER_SYNONYMS.get(key)
    if synonym is not None:
        value = broker_config[synonym]
        return (str(value).lower() if isinstance(value, bool) else str(value)), False
    return DYNAMIC_BROKER_DEFAULTS.get(key, TOPIC_CONFIGS[key].default), False


class InvalidConfig(ValueError):
    pass


def validate_topic_configs(configs: dict[str, str | None]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in configs.items():
        spec = TOPIC_CONFIGS.get(key)
        if spec is None:
            raise InvalidConfig(f"Unknown topic config name: {key}")
        if value is None:
            raise InvalidConfig(f"Null value not supported for topic configs: {key}")
        try:
            spec.check(value)
        except ValueError as exc:
            raise InvalidConfig(f"Invalid value {value} for configuration {key}: {exc}") from None
        out[key] = value
    return out
