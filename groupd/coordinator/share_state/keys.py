"""Share-partition keys as text, and which ``__share_group_state`` partition holds each (Kafka's
SharePartitionKey and ShareCoordinatorService.partitionFor).

The text form ``<group>:<topic id>:<partition>`` (``asCoordinatorKey``) names a share-partition in
FindCoordinator (key type 2) and places it: partition ``abs(javaHash(text)) %
share.coordinator.state.topic.num.partitions``, the topic id in Kafka's base64 form (Uuid.toString).
"""

from __future__ import annotations

import base64
import re
import uuid

from groupd.coordinator.partitioning import partition_for
from groupd.coordinator.share_state.persister import SharePartitionKey


def topic_id_string(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def coordinator_key(key: SharePartitionKey) -> str:
    return f"{key.group_id}:{topic_id_string(key.topic_id)}:{key.partition}"


def parse_coordinator_key(text: str) -> SharePartitionKey | None:
    """Kafka's SharePartitionKey.getInstance(String): ``group:topicId:partition``, the group id itself
    may hold colons; None where Kafka throws (FindCoordinator answers INVALID_REQUEST)."""
    tokens = text.split(":")
    while tokens and tokens[-1] == "":
        tokens.pop()  # Java's String.split drops trailing empty strings
    if len(tokens) < 3:
        return None
    group_id = ":".join(tokens[:-2])
    if not group_id.strip():
        return None
    raw = tokens[-2]
    if len(raw) > 24 or not re.fullmatch(r"[A-Za-z0-9_-]*={0,2}", raw):
        return None
    try:
        data = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
    except ValueError:
        return None
    if len(data) != 16:
        return None
    partition = _java_parse_int(tokens[-1])
    if partition is None:
        return None
    return SharePartitionKey(group_id, uuid.UUID(bytes=data), partition)


def _java_parse_int(s: str) -> int | None:
    """Integer.parseInt: an optional sign and ASCII digits, within 32 bits."""
    if not re.fullmatch(r"[+-]?[0-9]+", s):
        return None
    n = int(s)
    return n if -(2**31) <= n < 2**31 else None


def state_partition(key: SharePartitionKey, partitions: int) -> int:
    return partition_for(coordinator_key(key), partitions)
