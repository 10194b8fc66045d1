"""The share groups' shell: what the pure share-group rules (groupd/coordinator/share/) hand back for the
broker to do asynchronously, and the group's settings.

- A heartbeat that found subscribed partitions without share state returns them; once the heartbeat is
  durable, each partition is initialized in the share coordinator (``broker.share_persister``, StateEpoch
  = the group epoch, StartOffset -1), and the answer comes back to the group's shard as an event: all
  succeeded, the partitions are initialized (assignable at the next heartbeat); any failed, they leave the
  initializing set to be tried again (Kafka's GroupCoordinatorService.persisterInitialize).
- ``config_for(group_id)``: the broker's group.share.* keys with the group's ``share.*`` overrides
  (``broker.group_configs.overrides`` when the group-config store is there).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from groupd.coordinator import errors as E
from groupd.coordinator import group_types
from groupd.coordinator.runtime.runtime import CoordinatorError
from groupd.coordinator.share import config as share_config
from groupd.coordinator.share.api import ShareInitialize, ShareStateInitialized
from groupd.coordinator.share.config import ShareGroupConfig
from groupd.coordinator.share_state.persister import SharePartitionKey
from groupd.coordinator.tasks import Tasks

if TYPE_CHECKING:
    from groupd.broker.app import Broker

log = logging.getLogger("groupd.coordinator")


class ShareGroupShell:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.defaults = share_config.from_broker_config(broker.config)
        self.enabled = broker.config["share.version"] >= 1
        self._tasks = Tasks()
        # group id -> (the overrides mapping the store handed out, the settings made from it): the store
        # hands out a new mapping when a group's configs change, so a heartbeat costs no rebuild
        self._configs: dict[str, tuple[Mapping[str, str], ShareGroupConfig]] = {}

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        await self._tasks.cancel_all()

    def config_for(self, group_id: str) -> ShareGroupConfig:
        store = getattr(self.broker, "group_configs", None)
        overrides: Mapping[str, str] = store.overrides(group_id) if store is not None else {}
        if not overrides:
            self._configs.pop(group_id, None)
            return self.defaults
        cached = self._configs.get(group_id)
        if cached is not None and cached[0] is overrides:
            return cached[1]
        made = share_config.with_overrides(self.defaults, overrides, self.broker.config)
        if len(self._configs) >= 100_000:
            self._configs.clear()
        self._configs[group_id] = (overrides, made)
        return made

    async def delete_state(self, group_id: str) -> int | None:
        """DeleteGroups' share step (Kafka's deleteShareGroups): None when ``group_id`` is no share group;
        else NON_EMPTY_GROUP while it has members, or the first error of deleting its partitions' share
        state (the group then stays), or 0: the caller deletes the group."""
        plan = await self.broker.coordinator.call(group_id, group_types.share_delete_prepare, group_id)
        if plan is None:
            return None
        if plan.error:
            return int(plan.error)
        return await self.delete_partitions(group_id, plan.topics)

    async def delete_partitions(self, group_id: str, topics: Iterable[tuple[uuid.UUID, Iterable[int]]]) -> int:
        """Delete these partitions' share state; 0, or the first error."""
        persister = self.broker.share_persister
        keys = [SharePartitionKey(group_id, t, p) for t, ps in topics for p in ps]
        answers: list[int | BaseException] = await asyncio.gather(
            *(persister.delete(k) for k in keys), return_exceptions=True
        )
        for key, answer in zip(keys, answers, strict=True):
            if answer != 0:
                log.error(
                    "share group %s: deleting the share state of %s-%d failed: %s",
                    group_id,
                    key.topic_id,
                    key.partition,
                    answer,
                )
                return int(answer) if isinstance(answer, int) else E.UNKNOWN_SERVER_ERROR
        return 0

    async def initialize_at(
        self, group_id: str, state_epoch: int, offsets: Sequence[tuple[uuid.UUID, Sequence[tuple[int, int]]]]
    ) -> int:
        """AlterShareGroupOffsets' second step (Kafka's persisterInitialize): initialize each partition at
        its new start offset, then record them initialized; any failure leaves them uninitialized and
        is the answer's error."""
        persister = self.broker.share_persister
        keys = [(SharePartitionKey(group_id, t, p), o) for t, pairs in offsets for p, o in pairs]
        answers: list[int | BaseException] = await asyncio.gather(
            *(persister.initialize(key, state_epoch, o) for key, o in keys), return_exceptions=True
        )
        failed = [a for a in answers if a != 0]
        topics = tuple((t, tuple(p for p, _ in pairs)) for t, pairs in offsets)
        await self.broker.coordinator.call(
            group_id, group_types.share_state_initialized, ShareStateInitialized(group_id, topics, not failed)
        )
        if failed:
            return failed[0] if isinstance(failed[0], int) else E.UNKNOWN_SERVER_ERROR
        return 0

    def initialize(self, ask: ShareInitialize) -> None:
        """Initialize the partitions a heartbeat asked for, after its answer (Kafka: a timer task)."""
        self._tasks.spawn(self._initialize(ask))

    async def _initialize(self, ask: ShareInitialize) -> None:
        persister = self.broker.share_persister
        keys = [SharePartitionKey(ask.group_id, t, p) for t, ps in ask.topics for p in ps]
        answers: list[int | BaseException] = await asyncio.gather(
            *(persister.initialize(key, ask.state_epoch, -1) for key in keys), return_exceptions=True
        )
        failed = [(k, a) for k, a in zip(keys, answers, strict=True) if a != 0]
        if failed:
            key, answer = failed[0]
            log.error(
                "share group %s: initializing %d share partitions failed (first: %s-%d: %s)",
                ask.group_id,
                len(failed),
                key.topic_id,
                key.partition,
                answer,
            )
        event = ShareStateInitialized(ask.group_id, ask.topics, not failed)
        try:
            await self.broker.coordinator.call(ask.group_id, group_types.share_state_initialized, event)
        except CoordinatorError as exc:  # the partition moved or failed: the next heartbeat asks again
            log.warning(
                "share group %s: recording initialized share partitions failed: error %d", ask.group_id, exc.code
            )
