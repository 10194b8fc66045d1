"""Per-topic configuration keys a topic may carry, with Kafka's defaults and validation.

CreateTopics refuses a key not listed here with INVALID_CONFIG, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Callable


def _long(low: int) -> Callable[[str], None]:
    def check(value: str) -> None:
        if int(value) < low:
            raise ValueError(f"must be >= {low}")

    return check


def _policy(value: str) -> None:
    parts = {p.strip() for p in value.split(",") if p.strip()}
    if not parts or not parts <= {"delete", "compact"}:
        raise ValueError("expected delete, compact or both")


def _any(value: str) -> None:
    return None


TOPIC_CONFIGS: dict[str, tuple[str, Callable[[str], None]]] = {
    "cleanup.policy": ("delete", _policy),
    "retention.ms": ("604800000", _long(-1)),
    "retention.bytes": ("-1", _long(-1)),
    "segment.bytes": ("1073741824", _long(14)),
    "segment.ms": ("604800000", _long(1)),
    "max.message.bytes": ("1048588", _long(0)),
    "delete.retention.ms": ("86400000", _long(0)),
    "min.insync.replicas": ("1", _long(1)),
    "compression.type": ("producer", _any),
    "message.timestamp.type": ("CreateTime", _any),
    "min.compaction.lag.ms": ("0", _long(0)),
    "flush.messages": ("9223372036854775807", _long(1)),
    "flush.ms": ("9223372036854775807", _long(0)),
}


# the broker-wide key a topic config falls back to (Kafka's synonyms), where groupd has one
BROKER_SYNONYMS: dict[str, str] = {
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "max.message.bytes": "message.max.bytes",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
}


def effective_topic_config(broker_config, topic_configs: dict[str, str], key: str) -> tuple[str, bool]:
    """(value, is_topic_override): the topic's own value, else the broker's, else Kafka's default."""
    if key in topic_configs:
        return topic_configs[key], True
    synonym = BROKER_SYNONYMS.get(key)
    if synonym is not None:
        return str(broker_config[synonym]), False
    return TOPIC_CONFIGS[key][0], False


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
            spec[1](value)
        except ValueError as exc:
            raise InvalidConfig(f"Invalid value {value} for configuration {key}: {exc}") from None
        out[key] = value
    return out
