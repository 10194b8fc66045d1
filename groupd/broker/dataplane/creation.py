"""Creating topics and partitions once a request has been validated: open the partitions a slice at a time
(PartitionManager.prepare), then name them in the registry; a failure leaves nothing behind.

CreateTopics and CreatePartitions validate synchronously (names, counts, quotas, the partition limits,
which reserve what they admit) and hand their admitted creations here. Running out of descriptors
(EMFILE, ENFILE) or any other storage failure answers that creation KAFKA_STORAGE_ERROR with one
rate-limited log line, never a traceback; the broker goes on serving.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from groupd.broker.dataplane.partition_limits import PartitionLimits
from groupd.broker.dataplane.partitions import PartitionManager, out_of_descriptors
from groupd.broker.dataplane.topics import Topic, TopicError, TopicRegistry
from groupd.protocol.errors import ErrorCode
from groupd.storage.errors import StorageError

log = logging.getLogger("groupd.partitions")


@dataclass(slots=True)
class Creation:
    """One topic to create (``first`` 0) or to grow from ``first`` to ``last`` partitions; its outcome."""

    name: str
    first: int
    last: int
    configs: dict[str, str] = field(default_factory=dict)
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    topic_id: uuid.UUID | None = None


def storage_failure(partitions: PartitionManager, what: str, exc: BaseException) -> str:
    """Log one line (rate-limited) for a creation or deletion the storage refused; the answer's message."""
    if out_of_descriptors(exc):
        message = (
            f"Out of file descriptors ({exc}): raise the descriptor limit (ulimit -n) or lower max.broker.partitions"
        )
    else:
        message = f"Storage error: {exc}"
    partitions.descriptor_errors.error("%s failed: %s", what, message)
    return message


async def create_all(
    creations: list[Creation],
    partitions: PartitionManager,
    limits: PartitionLimits,
    topics: TopicRegistry,
    create_topic: Callable[[str, int, dict[str, str]], Topic],
) -> None:
    """Carry out each creation (reserved in ``limits`` by the caller, released here), one after another."""
    for c in creations:
        try:
            _check_still_there(topics, c)
            if c.first > 0 or topics.claim is None:
                await partitions.prepare(c.name, c.first, c.last, c.configs)
            # in a cluster a new topic's rows are cleared as its name is won and opened after (claim_topic):
            # rows opened before could be another node's, created under the same name at the same instant
            try:
                if c.first == 0:
                    c.topic_id = create_topic(c.name, c.last, c.configs).topic_id
                else:
                    _check_still_there(topics, c)  # a DeleteTopics may have run meanwhile
                    c.topic_id = topics.grow(c.name, c.last).topic_id
            finally:
                partitions.discard(c.name, c.first, c.last)  # whatever the registry did not adopt
            await partitions.opened(c.name)  # in a cluster they open off the loop after the claim: answered then
        except TopicError as exc:
            c.error, c.message = exc.code, exc.message
        except (StorageError, OSError) as exc:
            c.error = ErrorCode.kafka_storage_error
            c.message = storage_failure(partitions, f"creating partitions {c.first}-{c.last - 1} of {c.name}", exc)
        finally:
            limits.release(c.name, c.last - c.first)


def _check_still_there(topics: TopicRegistry, c: Creation) -> None:
    """Whether the creation still makes sense. In a cluster another node may have created the name or
    deleted the topic since this node's last heartbeat: the document is followed first, so that a name
    another node took is never treated as a crash's leftovers (its partitions are rows this node shares)."""
    topics.follow()
    if c.first == 0 and c.name in topics:
        raise TopicError(ErrorCode.topic_already_exists, f"Topic '{c.name}' already exists.")
    if c.first > 0 and c.name not in topics:
        raise TopicError(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")


def create_now(
    name: str,
    count: int,
    partitions: PartitionManager,
    limits: PartitionLimits,
    create_topic: Callable[[str, int, dict[str, str]], Topic],
) -> Topic:
    """Auto-creation (a Metadata request naming an unknown topic): ``num.partitions``, which the operator
    sized, created at once within the same limits; a TopicError with the code Metadata answers otherwise
    (LEADER_NOT_AVAILABLE, retriable, while another request is creating or removing that name)."""
    partitions.topics.follow()  # in a cluster another node may have created it since the last heartbeat
    known = partitions.topics.get(name)
    if known is not None:
        return known
    if limits.busy(name) or partitions.deleting(name):
        raise TopicError(ErrorCode.leader_not_available, f"Topic {name} is being created or deleted.")
    limits.check_request(count)
    limits.check_broker(count)
    try:
        if partitions.topics.claim is None:  # (in a cluster the creation's claim clears them: creation.py)
            for _, p in partitions.storage.partitions(name):  # a deletion a crash interrupted left these
                partitions.storage.delete_partition(name, p)
        return create_topic(name, count, {})
    except (StorageError, OSError) as exc:
        raise TopicError(
            ErrorCode.kafka_storage_error, storage_failure(partitions, f"auto-creating topic {name}", exc)
        ) from None
