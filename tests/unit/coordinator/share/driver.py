"""A manual-clock driver for the share-group core: heartbeats, the session timer, initialization answers,
every record kept (and checked through its bytes) to replay from scratch."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from groupd.coordinator.consumer.heartbeat import TopicInfo
from groupd.coordinator.records import decode_key, decode_value, encode_key, encode_value
from groupd.coordinator.share.api import Outcome, ShareGroupHeartbeat, ShareStateInitialized
from groupd.coordinator.share.config import ShareGroupConfig
from groupd.coordinator.share.group import ShareGroup, ShareGroups, replay, share_groups
from groupd.coordinator.share.heartbeat import heartbeat, on_session_timeout, on_topics_changed
from groupd.coordinator.share.partitions import state_initialized

START = 1_000_000  # a non-zero clock: an assignment timestamp of 0 means "never computed"


def tid(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


@dataclass
class Driver:
    config: ShareGroupConfig = field(default_factory=ShareGroupConfig)
    now: int = START
    groups: ShareGroups = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    timers: dict[tuple, int] = field(default_factory=dict)
    log: list[tuple] = field(default_factory=list)
    asked: list = field(default_factory=list)  # ShareInitialize of every answer, in order

    def topic(self, name: str, partitions: int) -> uuid.UUID:
        self.topics[name] = TopicInfo(tid(name), partitions)
        on_topics_changed(self.groups, {name})
        return tid(name)

    def _apply(self, outcome: Outcome) -> Outcome:
        for key, value in outcome.records:  # each record must survive the wire format
            assert decode_key(encode_key(key)) == key
            assert decode_value(key, encode_value(value)) == value
        self.log.extend(outcome.records)
        for op in outcome.timers:
            if op.deadline_ms is None:
                self.timers.pop(op.key, None)
            else:
                self.timers[op.key] = op.deadline_ms
        if outcome.response is not None and outcome.response.initialize is not None:
            self.asked.append(outcome.response.initialize)
        return outcome

    def hb(self, member_id: str, epoch: int, group: str = "g", **kw) -> Outcome:
        req = ShareGroupHeartbeat(group, member_id, epoch, client_id="c", client_host="/127.0.0.1", **kw)
        return self._apply(heartbeat(self.groups, self.topics, req, self.now, self.config))

    def join(self, member_id: str, names=("T",), group: str = "g", **kw) -> Outcome:
        return self.hb(member_id, 0, group, subscribed_topic_names=tuple(names), **kw)

    def initialized(self, ok: bool = True, group: str = "g") -> Outcome:
        """The share coordinator answers every initialization asked so far."""
        topics: dict[uuid.UUID, set[int]] = {}
        for ask in self.asked:
            if ask.group_id == group:
                for t, ps in ask.topics:
                    topics.setdefault(t, set()).update(ps)
        self.asked = [a for a in self.asked if a.group_id != group]
        event = ShareStateInitialized(group, tuple((t, tuple(sorted(ps))) for t, ps in topics.items()), ok)
        return self._apply(state_initialized(self.groups, self.topics, event, self.now))

    def advance(self, ms: int) -> list[Outcome]:
        """Move the clock, firing due session timers in deadline order."""
        end = self.now + ms
        fired = []
        while True:
            due = sorted((d, k) for k, d in self.timers.items() if d <= end)
            if not due:
                break
            deadline, key = due[0]
            del self.timers[key]
            self.now = deadline
            _, group, member = key
            fired.append(self._apply(on_session_timeout(self.groups, self.topics, group, member, self.now)))
        self.now = end
        return fired

    def group(self, name: str = "g") -> ShareGroup:
        return self.groups[name]

    def replayed(self) -> ShareGroups:
        fresh: ShareGroups = {}
        for key, value in self.log:
            replay(fresh, key, value, self.now)
        return fresh


def kinds(outcome: Outcome) -> list[tuple[int, bool]]:
    """(record type, is tombstone) of each record, in order."""
    return [(k.kind, v is None) for k, v in outcome.records]


def assigned(outcome: Outcome) -> set:
    a = outcome.response.assignment
    assert a is not None, "no assignment in the response"
    return {(t, p) for t, ps in a for p in ps}


def in_shard(topic_partitions: int = 2):
    """A shard with a Driver over its share groups and topic T of ``topic_partitions`` partitions."""
    from groupd.coordinator import shard as core

    state = core.ShardState(0)
    d = Driver(groups=share_groups(state))
    state.topics = d.topics
    d.topic("T", topic_partitions)
    return state, d


def call(state, handler, req, now=1000):
    """A token-carrying shard handler: its Result and its one answer."""
    from groupd.coordinator.api import GroupConfig

    result = handler(state, req, 1, now, GroupConfig())
    ((_, payload),) = result.responses
    return result, payload
