"""``groupd-groups --describe --status``: the broker's live consumer status, read from its /metrics.

The Kafka protocol has no request for it (operators run Burrow beside Kafka), so the tool reads the
series the broker exports: ``groupd_consumergroup_partition_status`` (Burrow's constant per partition)
and ``kafka_consumergroup_lag``."""

from __future__ import annotations

import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from groupd.broker.ops.consumer_status import NAMES


def fetch_status(url: str, group: str, timeout: float = 5.0) -> list[dict[str, Any]]:
    """One row a committed partition of ``group``: topic, partition, status name, lag."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            text = resp.read().decode()
    except OSError as exc:
        raise ConnectionError(f"cannot read the broker's metrics at {url} ({exc}); give --metrics-url") from None
    statuses: dict[tuple[str, int], int] = {}
    lags: dict[tuple[str, int], int] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if labels.get("consumergroup") != group or "partition" not in labels:
                continue
            key = (labels["topic"], int(labels["partition"]))
            if sample.name == "groupd_consumergroup_partition_status":
                statuses[key] = int(sample.value)
            elif sample.name == "kafka_consumergroup_lag":
                lags[key] = int(sample.value)
    return [
        {"topic": t, "partition": p, "status": NAMES[s], "lag": lags.get((t, p))}
        for (t, p), s in sorted(statuses.items())
    ]
