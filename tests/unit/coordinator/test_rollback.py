"""The runtime rolls a failed write back (issue 36): for every API that writes, a write that fails leaves
the shard as it was before the request (a structural dump of the state and the live timers), and the
caller hears the error Kafka gives. The rules write no undo: the runtime restores the snapshot the rules
gave it before the request ran, and the rules only answer (and, for a leader's SyncGroup, rebalance)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from groupd.coordinator import errors as E
from groupd.coordinator import group_types, shard
from groupd.coordinator.api import (
    CommitPartition,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    LeavingMember,
    OffsetCommit,
    OffsetDelete,
    SyncGroup,
)
from groupd.coordinator.consumer.api import ConsumerGroupHeartbeat
from groupd.coordinator.consumer.group import ConsumerGroup, consumer_groups
from groupd.coordinator.consumer.group import Member as ConsumerMember
from groupd.coordinator.group import Group
from groupd.coordinator.group_types import BY_CLASS
from groupd.coordinator.runtime.runtime import TIMER_RETRY_BACKOFF_MS, CoordinatorError, WriteFailed
from groupd.coordinator.share.api import ShareGroupHeartbeat
from groupd.coordinator.share.group import ShareGroup, ShareMember
from groupd.coordinator.share_state import rules as share_state
from groupd.coordinator.share_state.persister import SharePartitionKey
from groupd.coordinator.snapshots import GroupSnapshot

from .consumer.driver import TopicInfo, tid
from .harness import Core
from .share_state.driver import TOPIC
from .share_state.driver import Driver as StateDriver
from .test_static import static_group


def dump(obj: Any, seen: frozenset[int] = frozenset()) -> Any:
    """Every value reachable from ``obj``, as plain data: objects by their slots, containers by content."""
    if id(obj) in seen:
        return "<cycle>"
    seen = seen | {id(obj)}
    if isinstance(obj, dict):
        return {repr(k): dump(v, seen) for k, v in obj.items()}
    if isinstance(obj, (set, frozenset)):
        return sorted(repr(dump(v, seen)) for v in obj)
    if isinstance(obj, (list, tuple)):
        return [dump(v, seen) for v in obj]
    slots = [n for c in type(obj).__mro__ for n in getattr(c, "__slots__", ())]
    if slots and not isinstance(obj, (str, bytes, int)):
        return (type(obj).__name__, {n: dump(getattr(obj, n, None), seen) for n in slots if n != "topics"})
    return obj


def snapshot(c: Core) -> tuple[Any, dict[tuple[Any, ...], int]]:
    return dump(c.state), dict(c.timers)


def failing(c: Core, code: int = E.KAFKA_STORAGE_ERROR) -> None:
    c.fail_next_write = code


def test_offset_commit_of_a_member():
    c = Core()
    a, b = c.stable_group(2)
    c.commit(("t", 0, 1), generation=1, member_id=a)
    c.now += 1000
    before = snapshot(c)
    failing(c)
    resp = c.commit(("t", 0, 2), ("t", 1, 2), generation=1, member_id=a)
    assert [p.error for p in resp.partitions] == [E.NOT_COORDINATOR] * 2
    assert snapshot(c) == before


def test_offset_commit_of_a_new_simple_group_leaves_no_group():
    c = Core()
    before = snapshot(c)
    failing(c, E.MESSAGE_TOO_LARGE)
    assert [p.error for p in c.commit(("t", 0, 1)).partitions] == [E.UNKNOWN_SERVER_ERROR]
    assert snapshot(c) == before


def test_txn_offset_commit():
    c = Core()
    c.commit(("t", 0, 1))
    c.txn_commit(("t", 0, 2), producer=7, epoch=1)
    before = snapshot(c)
    failing(c)
    assert [p.error for p in c.txn_commit(("t", 1, 3), producer=8, epoch=4).partitions] == [E.NOT_COORDINATOR]
    assert snapshot(c) == before


@pytest.mark.parametrize("handler, request_", [
    (lambda state, req, token, now, cfg: shard.offset_delete(state, req, token, now), OffsetDelete("g", (("t", 0),))),
    (lambda state, gid, token, now, cfg: shard.delete_group(state, gid, token, now), "g"),
], ids=["OffsetDelete", "DeleteGroups"])
def test_offset_delete_and_delete_groups(handler: Any, request_: Any) -> None:
    c = Core()
    c.commit(("t", 0, 1))
    before = snapshot(c)
    failing(c)
    tok = c.run(handler, request_, "g")
    assert c.answers[tok].error == E.NOT_COORDINATOR
    assert snapshot(c) == before


def test_leave_group_of_the_last_member():
    c = Core()
    (a,) = c.stable_group(1)
    before = snapshot(c)
    failing(c)
    tok = c.run(shard.leave_group, _leave(a), "g")
    assert isinstance(c.refused[tok], CoordinatorError) and c.refused[tok].code == E.KAFKA_STORAGE_ERROR
    assert snapshot(c) == before


def _leave(member_id: str) -> LeaveGroup:
    return LeaveGroup("g", (LeavingMember(member_id, None),), 3)


def test_static_member_rejoining_under_a_new_id():
    c = Core()
    a, b = static_group(c)
    before = snapshot(c)
    failing(c, E.REQUEST_TIMED_OUT)
    resp = c.answers[c.join(instance="i2", version=9)]
    assert (resp.error, resp.generation_id, resp.leader) == (E.COORDINATOR_NOT_AVAILABLE, 1, a)
    assert snapshot(c) == before


def test_leader_sync_is_rolled_back_to_completing_then_rebalances():
    """Kafka never makes the group Stable before the assignment is written: the rollback gives the group
    as the leader found it, the parked syncs hear the error and a new rebalance starts."""
    c = Core()
    ids = []
    toks = []
    for _ in range(2):
        mid, tok = c.new_member()
        ids.append(mid)
        toks.append(tok)
    c.finish_join()
    gen = c.answers[toks[0]].generation_id
    follower = c.sync(ids[1], gen)
    failing(c)
    leader = c.sync(ids[0], gen, {m: m.encode() for m in ids})
    assert c.answers[leader].error == c.answers[follower].error == E.NOT_COORDINATOR
    g = c.group()
    assert g.state == "PreparingRebalance" and g.prev_state == "CompletingRebalance"
    assert all(m.assignment == b"" and m.sync_token is None for m in g.members.values())


def _consumer_core() -> Core:
    c = Core()
    c.state.topics = {"T": TopicInfo(tid("T"), 4)}
    return c


def _consumer_hb(c: Core, member: str, epoch: int, **kw: Any) -> int:
    req = ConsumerGroupHeartbeat("g", member, epoch, client_id="c", client_host="/h", **kw)
    return c.run(group_types.consumer_group_heartbeat, req, "g")


def test_consumer_group_heartbeat():
    c = _consumer_core()
    _consumer_hb(c, "m1", 0, subscribed_topic_names=("T",), rebalance_timeout_ms=5000, owned=())
    before = snapshot(c)
    failing(c)
    tok = _consumer_hb(c, "m2", 0, subscribed_topic_names=("T",), rebalance_timeout_ms=5000, owned=())
    assert tok in c.refused or c.answers[tok].error
    assert snapshot(c) == before


def test_share_group_heartbeat():
    c = _consumer_core()
    req = ShareGroupHeartbeat("g", "s1", 0, client_id="c", client_host="/h", subscribed_topic_names=("T",))
    c.run(group_types.share_group_heartbeat, req, "g")
    before = snapshot(c)
    failing(c)
    req = ShareGroupHeartbeat("g", "s2", 0, client_id="c", client_host="/h", subscribed_topic_names=("T",))
    tok = c.run(group_types.share_group_heartbeat, req, "g")
    assert tok in c.refused or c.answers[tok].error
    assert snapshot(c) == before


def test_share_state_writes():
    d = StateDriver()
    key = SharePartitionKey("g", TOPIC, 0)
    d.initialize(key, 0, 5)
    d.write(key, start_offset=6)
    for attempt in (
        lambda: d.initialize(key, 1, 7),
        lambda: d.write(key, state_epoch=0, leader_epoch=2, start_offset=9),
        lambda: d.read(key, leader_epoch=3),
        lambda: d.delete(key),
    ):
        before = dump(d.state)
        d.log.fail_with = E.KAFKA_STORAGE_ERROR
        assert attempt().error_code == share_state.write_error(E.KAFKA_STORAGE_ERROR)
        d.log.fail_with = None
        assert dump(d.state) == before


def test_offsets_expiry():
    c = Core()
    (a,) = c.stable_group(1)
    c.commit(("t", 0, 1), generation=1, member_id=a)
    c.leave((a, None))
    c.commit(("t", 0, 1), group="simple")
    c.now += 10080 * 60_000
    before = snapshot(c)
    failing(c)
    c.expire()
    assert snapshot(c) == before
    c.expire()
    assert not c.state.groups


def test_consumer_group_expiry_brings_back_the_group_and_its_offsets_in_the_store():
    """An empty consumer group whose offsets all expired goes with them; the write fails: the group and
    its offsets (kept by id in the shard's offset store) are back."""
    c = _consumer_core()
    _consumer_hb(c, "m1", 0, subscribed_topic_names=("T",), rebalance_timeout_ms=5000, owned=())
    _consumer_hb(c, "m1", -1)
    c.commit(("T", 0, 1))
    c.now += 10080 * 60_000
    before = snapshot(c)
    assert c.state.offsets.of("g")
    failing(c)
    c.expire()
    assert snapshot(c) == before
    c.expire()
    assert not c.state.groups and not c.state.offsets.of("g")


def test_a_failed_delete_groups_brings_back_the_offsets_it_dropped():
    """DeleteGroups drops the group's offsets with it (their tombstones are in its write); failing, they
    are back as committed and no tombstone is counted in flight."""
    c = Core()
    c.commit(("t", 0, 1), ("t", 1, 2))
    before = snapshot(c)
    failing(c)
    tok = c.run(lambda state, g, token, now, cfg: shard.delete_group(state, g, token, now), "g", "g")
    assert c.answers[tok].error == E.NOT_COORDINATOR
    assert snapshot(c) == before
    assert not c.state.dropping and c.state.offsets.of("g")["t"][1].offset == 2


def test_snapshots_copy_every_container_the_group_types_hold():
    """A container a group or member type gains must be copied by its snapshot: each type's snapshot
    shapes (GroupType.shape) list them by name."""
    c = Core()
    c.stable_group(1)
    classic = BY_CLASS[Group].shape
    for shape, obj in ((classic.group, c.group()), (classic.member, next(iter(c.group().members.values())))):
        held = {n for n in shape.names if isinstance(getattr(obj, n), (dict, set, list))}
        assert held == {shape.names[i] for i in shape.containers}
    consumer, share = BY_CLASS[ConsumerGroup].shape, BY_CLASS[ShareGroup].shape
    for shape, cls in (
        (consumer.group, ConsumerGroup),
        (consumer.member, ConsumerMember),
        (share.group, ShareGroup),
        (share.member, ShareMember),
    ):
        held = {f.name for f in dataclasses.fields(cls) if f.default_factory is not dataclasses.MISSING}
        assert held == {shape.names[i] for i in shape.containers}, cls


def test_join_group_converting_an_empty_consumer_group():
    c = _consumer_core()
    _consumer_hb(c, "m1", 0, subscribed_topic_names=("T",), rebalance_timeout_ms=5000, owned=())
    _consumer_hb(c, "m1", -1)  # leaves: the consumer group is empty
    assert "g" in consumer_groups(c.state) and not consumer_groups(c.state)["g"].members
    before = snapshot(c)
    failing(c)
    tok = c.join()
    assert tok in c.refused or c.answers[tok].error
    assert snapshot(c) == before


def test_a_timer_whose_write_fails_is_rolled_back_and_fires_again():
    """A consumer member's session ends: its records fail, the member is back and the session timer is
    set again after Kafka's retry backoff, when the member goes."""
    c = _consumer_core()
    _consumer_hb(c, "m1", 0, subscribed_topic_names=("T",), rebalance_timeout_ms=5000, owned=())
    ((key, deadline),) = [(k, d) for k, d in c.timers.items() if "m1" in k]
    state_before = dump(c.state)
    failing(c)
    c.advance(deadline)
    assert dump(c.state) == state_before and c.timers[key] == deadline + TIMER_RETRY_BACKOFF_MS
    c.advance(deadline + TIMER_RETRY_BACKOFF_MS)
    assert not consumer_groups(c.state)["g"].members


def test_which_requests_take_a_snapshot():
    """The runtime looks a request's snapshot up by its class (``GroupShardRules.snapshots``): a
    heartbeat takes none; a JoinGroup or SyncGroup takes none when it finds no group (a new classic group
    writes nothing before its leader syncs) or when the group's type says it writes nothing (a dynamic
    member's join, a follower's sync); a leader's sync takes its group; any other request on a missing
    group (a LeaveGroup) takes its id's, through ``snapshot``."""
    c = Core()
    a, b = c.stable_group(2)
    rules = shard.GroupShardRules(c.cfg)
    state = c.state

    def take(subject: str, request: object) -> object:
        taker = rules.snapshots.get(request.__class__, rules.snapshot)
        return taker(state, subject, request) if taker is not None else None

    def join(gid: str, instance: str | None = None) -> JoinGroup:
        return JoinGroup(gid, "", instance, 10_000, 10_000, "consumer", (), "c", "h", 5)

    def sync(gid: str, member: str) -> SyncGroup:
        return SyncGroup(gid, 1, member, None, None, None, (), 3)

    gid = next(iter(state.groups))
    leader = state.groups[gid].leader
    follower = b if leader == a else a
    assert take(gid, Heartbeat(gid, 1, a, None, 4)) is None
    assert take("new", join("new")) is None and take("new", sync("new", "m")) is None
    assert take(gid, join(gid)) is None and take(gid, sync(gid, follower)) is None
    assert isinstance(take(gid, join(gid, "static-1")), GroupSnapshot)
    assert isinstance(take(gid, sync(gid, leader)), GroupSnapshot)
    left = take("gone", LeaveGroup("gone", (LeavingMember("m", None),), 3))
    assert isinstance(left, GroupSnapshot) and left.subject == "gone"


def test_commits_of_one_group_in_a_refused_round_all_go_back():
    """A full disk refuses a whole round: every commit of one group in it fails, and the group's commits
    in flight go back to none (a count left behind would hold the group's expiry and deletion for ever)."""
    c = Core()
    a, b = c.stable_group(2)
    c.commit(("t", 0, 1), generation=1, member_id=a)
    before = snapshot(c)
    rounds: list[Any] = []
    c.runtime.port.when_durable = lambda shard, done: rounds.append(done) or True  # type: ignore[method-assign]
    reqs = [OffsetCommit("g", 1, a, None, -1, (CommitPartition("t", 0, n, -1, ""),), 8) for n in (2, 3, 4)]
    tokens = [c.run(shard.offset_commit, req, "g") for req in reqs]
    assert c.state.offsets.pending_commits == {"g": 3}
    for done in rounds:
        done(WriteFailed("no room", E.NOT_COORDINATOR))
    assert snapshot(c) == before and not c.state.offsets.pending_commits
    assert [[p.error for p in c.answers[t].partitions] for t in tokens] == [[E.NOT_COORDINATOR]] * 3
