"""The coordinators' own logs as clients see them: ``__consumer_offsets`` and ``__transaction_state``.

Kafka creates each at the first lookup of its coordinator (FindCoordinator key type 0 or 1), or when
Metadata asks for it by name with auto-creation on; here one also exists once its store holds a record
(after a restart). Until then Metadata does not list it. Listed, it is internal, with the partitions and
configs Kafka creates it with, and an id derived from the cluster id, the same across restarts.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from groupd.broker.dataplane.topics import Topic


@dataclass(slots=True)
class InternalTopic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str]
    has_records: Callable[[], bool]  # does its store hold anything yet?
    created: bool = False

    @classmethod
    def of(
        cls, cluster_id: str, name: str, partitions: int, configs: dict[str, str], has_records: Callable[[], bool]
    ) -> InternalTopic:
        topic_id = uuid.uuid5(uuid.NAMESPACE_URL, f"groupd:{cluster_id}:{name}")
        return cls(name, topic_id, partitions, configs, has_records)

    def exists(self, create: bool = False) -> bool:
        """Whether clients see it yet; ``create``: a lookup that makes Kafka create it."""
        if not self.created and (create or self.has_records()):
            self.created = True
        return self.created

    def topic(self) -> Topic | None:
        """The topic as Metadata and DescribeTopicPartitions list it, once it exists."""
        return Topic(self.name, self.topic_id, self.partitions, dict(self.configs)) if self.exists() else None
