"""How many partitions one request may create and this broker may hold, checked before anything is created.

Every partition costs descriptors, memory and start-up time, so a request that asks for too many is
refused with Kafka's error codes instead of being attempted until the process runs out of descriptors:

- per request (CreateTopics, CreatePartitions): Kafka's controller refuses a CreateTopics whose topics
  ask for more than 10,000 partitions in all, every topic answered POLICY_VIOLATION "Excessively large
  number of partitions per request." (ReplicationControlManager.MAX_PARTITIONS_PER_BATCH); groupd makes
  the number ``max.partitions.per.request`` and counts CreatePartitions' new partitions the same way;
- per broker: KIP-578's ``max.broker.partitions`` (proposed, never shipped by Kafka), counted over the
  data topics' partitions (the internal topics' are sized by their own keys), INVALID_PARTITIONS.

Creations still being opened hold a reservation, so two requests running at once cannot both pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from groupd.broker.dataplane.topics import TopicError, TopicRegistry
from groupd.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from groupd.broker.config import Config

PER_REQUEST_KEY = "max.partitions.per.request"
PER_BROKER_KEY = "max.broker.partitions"
KAFKA_PER_REQUEST = "Excessively large number of partitions per request."


class PartitionLimits:
    """The two caps, the partitions the registry holds and the ones reserved by creations in flight."""

    def __init__(self, config: Config, topics: TopicRegistry) -> None:
        self.config = config
        self.topics = topics
        self.reserved = 0
        self.names: set[str] = set()  # topics whose creation is in flight

    @property
    def per_request(self) -> int:
        return int(self.config[PER_REQUEST_KEY])

    @property
    def per_broker(self) -> int:
        return int(self.config[PER_BROKER_KEY])

    def held(self) -> int:
        """Data partitions held or being created."""
        return sum(t.partitions for t in self.topics.all()) + self.reserved

    def check_request(self, total: int) -> None:
        """Raise POLICY_VIOLATION when one request asks for more than the per-request cap."""
        if total > self.per_request:
            raise TopicError(
                ErrorCode.policy_violation,
                f"{KAFKA_PER_REQUEST} {total} requested, {PER_REQUEST_KEY} is {self.per_request}.",
            )

    def check_broker(self, count: int) -> None:
        """Raise INVALID_PARTITIONS when ``count`` more partitions would pass the broker's cap."""
        held = self.held()
        if held + count > self.per_broker:
            raise TopicError(
                ErrorCode.invalid_partitions,
                f"Adding {count} partitions would bring this broker to {held + count}, "
                f"over {PER_BROKER_KEY}={self.per_broker}.",
            )

    def reserve(self, name: str, count: int) -> None:
        """Hold ``count`` new partitions of ``name`` until ``release`` (``check_broker`` first)."""
        self.check_broker(count)
        self.reserved += count
        self.names.add(name)

    def busy(self, name: str) -> bool:
        """Whether another request is creating ``name`` or adding to it right now."""
        return name in self.names

    def release(self, name: str, count: int) -> None:
        self.reserved -= count
        self.names.discard(name)
