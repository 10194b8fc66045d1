"""The one registration of group types: adding a type (streams, say) is its package's ``group_type``
module (a GroupType, coordinator/group_type.py) plus one line in ``GROUP_TYPES`` here, and, if it has
APIs of its own that are not per-group dispatches, their names in the export list below.

The shard (coordinator/shard.py) dispatches through the tables built here and never names a type; the
broker's handlers reach a type's own APIs (ConsumerGroupHeartbeat, ShareGroupDescribe, ...) through
this module, the coordinator's seam, rather than through the type's package.
"""

from __future__ import annotations

from groupd.coordinator.classic.group_type import CLASSIC
from groupd.coordinator.consumer.group_type import CONSUMER
from groupd.coordinator.consumer.rules import consumer_group_describe, consumer_group_heartbeat
from groupd.coordinator.group_type import FailHandler, GroupType, Handler, TimerHandler
from groupd.coordinator.share.group_type import SHARE
from groupd.coordinator.share.rules import (
    share_alter_offsets,
    share_delete_offsets,
    share_delete_prepare,
    share_group_describe,
    share_group_heartbeat,
    share_initialized_partitions,
    share_state_deleted,
    share_state_initialized,
    share_topics_deleted,
)

GROUP_TYPES: tuple[GroupType, ...] = (CLASSIC, CONSUMER, SHARE)

# offsets committed for an id no group holds make a group of this type (Kafka: a simple classic group)
DEFAULT = CLASSIC

BY_CLASS: dict[type, GroupType] = {t.group_class: t for t in GROUP_TYPES}
# the type that serves an API for an id no group of a serving type holds
CREATORS: dict[str, GroupType] = {api: t for t in GROUP_TYPES for api in sorted(t.creates)}
TIMERS: dict[str, TimerHandler] = {kind: h for t in GROUP_TYPES for kind, h in t.timers.items()}
WRITE_REFS: dict[type, FailHandler] = {kind: h for t in GROUP_TYPES for kind, h in t.write_refs.items()}
API: dict[str, dict[type, Handler]] = {}
for _t in GROUP_TYPES:
    for _name, _handler in _t.api.items():
        API.setdefault(_name, {})[_t.group_class] = _handler

__all__ = [
    "API", "BY_CLASS", "CREATORS", "DEFAULT", "GROUP_TYPES", "TIMERS", "WRITE_REFS",
    # the types' own APIs
    "consumer_group_describe", "consumer_group_heartbeat", "share_alter_offsets", "share_delete_offsets",
    "share_delete_prepare", "share_group_describe", "share_group_heartbeat", "share_initialized_partitions",
    "share_state_deleted", "share_state_initialized", "share_topics_deleted",
]
