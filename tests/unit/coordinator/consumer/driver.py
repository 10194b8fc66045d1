"""A manual-clock driver for the consumer-group core: heartbeats, timers fired in deadline order, every
record kept (to replay from scratch) and the group invariants checked after every call."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from groupd.coordinator.consumer import records as rec
from groupd.coordinator.consumer.api import ConsumerGroupHeartbeat, Outcome
from groupd.coordinator.consumer.config import ConsumerConfig
from groupd.coordinator.consumer.group import ConsumerGroup, ConsumerGroups, replay
from groupd.coordinator.consumer.heartbeat import (
    TopicInfo,
    heartbeat,
    on_rebalance_timeout,
    on_session_timeout,
    on_topics_changed,
    resolve_regexes,
)

START = 1_000_000  # a non-zero clock: an assignment timestamp of 0 means "never computed"


def tid(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


@dataclass
class Driver:
    config: ConsumerConfig = field(default_factory=lambda: ConsumerConfig(assignment_interval_ms=0))
    now: int = START
    groups: ConsumerGroups = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    timers: dict[tuple, int] = field(default_factory=dict)
    log: list[tuple[rec.ConsumerKey, rec.ConsumerValue | None]] = field(default_factory=list)
    metadata_version: int = 1

    def topic(self, name: str, partitions: int) -> uuid.UUID:
        self.topics[name] = TopicInfo(tid(name), partitions)
        self.metadata_version += 1
        on_topics_changed(self.groups, {name})
        return tid(name)

    def _apply(self, outcome: Outcome) -> Outcome:
        for key, value in outcome.records:  # each record must survive the wire format
            raw = rec.encode_consumer_value(value)
            assert rec.decode_consumer_key(rec.encode_consumer_key(key)) == key
            assert rec.decode_consumer_value(key, raw) == value
        self.log.extend(outcome.records)
        for op in outcome.timers:
            if op.deadline_ms is None:
                self.timers.pop(op.key, None)
            else:
                self.timers[op.key] = op.deadline_ms
        check_invariants(self.groups)
        return outcome

    def hb(self, member_id: str, epoch: int, group: str = "g", **kw) -> Outcome:
        req = ConsumerGroupHeartbeat(group, member_id, epoch, client_id="c", client_host="/127.0.0.1", **kw)
        return self._apply(heartbeat(self.groups, self.topics, req, self.now, self.config))

    def join(self, member_id: str, names=("T",), group: str = "g", **kw) -> Outcome:
        kw.setdefault("rebalance_timeout_ms", 5000)
        return self.hb(member_id, 0, group, subscribed_topic_names=tuple(names), owned=(), **kw)

    def resolve(self, group: str = "g") -> Outcome:
        return self._apply(resolve_regexes(self.groups, self.topics, group, self.metadata_version, self.now))

    def advance(self, ms: int) -> list[Outcome]:
        """Move the clock, firing due timers in deadline order."""
        end = self.now + ms
        fired = []
        while True:
            due = sorted((d, k) for k, d in self.timers.items() if d <= end)
            if not due:
                break
            deadline, key = due[0]
            del self.timers[key]
            self.now = deadline
            kind, group, member = key
            fn = on_session_timeout if kind == "consumer-session" else on_rebalance_timeout
            fired.append(self._apply(fn(self.groups, self.topics, group, member, self.now)))
        self.now = end
        return fired

    def group(self, name: str = "g") -> ConsumerGroup:
        return self.groups[name]

    def replayed(self) -> ConsumerGroups:
        fresh: ConsumerGroups = {}
        for key, value in self.log:
            replay(fresh, key, value)
        return fresh


def kinds(outcome: Outcome) -> list[tuple[int, bool]]:
    """(record type, is tombstone) of each record, in order."""
    return [(rec.key_kind(k), v is None) for k, v in outcome.records]


def partitions(outcome: Outcome, topic: uuid.UUID | None = None) -> set:
    a = outcome.response.assignment
    assert a is not None, "no assignment in the response"
    return {(t, p) for t, ps in a for p in ps if topic is None or t == topic}


def check_invariants(groups: ConsumerGroups) -> None:
    for group in groups.values():
        held: dict[tuple, str] = {}
        for m in group.members.values():
            for parts in (m.assigned, m.pending_revocation):
                for t, ps in parts.items():
                    for p in ps:
                        assert (t, p) not in held, f"{t}:{p} owned by {held[(t, p)]} and {m.member_id}"
                        held[(t, p)] = m.member_id
                        assert group.owners[(t, p)] == m.epoch
        assert set(held) == set(group.owners), "owner map out of step with the members"
        for instance, member_id in group.static_members.items():
            assert group.members[member_id].instance_id == instance
