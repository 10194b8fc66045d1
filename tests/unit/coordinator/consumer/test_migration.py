"""Online migration between classic and consumer groups (KIP-848, ``group.consumer.migration.policy``),
through the real coordinator runtime on a manual clock: spec §1.13 and scenarios 27-31, every refusal,
and the replay of what each conversion writes (a restart mid-migration keeps the group).

Facts from Kafka 4.3's GroupMetadataManager / ConsumerGroup / ClassicGroup each test relies on:
- upgrade (validateOnlineUpgrade, convertToConsumerGroup, ConsumerGroup.fromClassicGroup): epoch 0 to a
  non-empty classic group; refused with GROUP_ID_NOT_FOUND by policy, protocol type, size, user data or
  malformed metadata; parked Join/Sync answered REBALANCE_IN_PROGRESS; classic tombstone first, then
  member metadata, group epoch = generation, targets, target epoch = generation, current assignments;
  members STABLE at epoch = generation with their last assignment and ClassicMemberMetadata;
- classic members in a consumer group (classicGroup{Join,Sync,Heartbeat,Leave}ToConsumerGroup): 23 under
  policy disabled, 79 for an unknown v4+ dynamic member, GenerationId = member epoch, SyncGroup's
  assignment in the member's ConsumerProtocol version, Heartbeat 27 while catching up, join and sync
  timers, the member's own session timeout, LeaveGroup 25/82 per member then one epoch bump;
- downgrade (validateOnlineDowngradeWith{FencedMember,ReplacedMemberId}, convertToClassicGroup,
  ClassicGroup.fromConsumerGroup): only classic members left, policy, group.max.size; consumer
  tombstones then GroupMetadata (Stable, generation = group epoch, target assignments); PreparingRebalance
  after a leave, Stable after a static replacement.
"""

from __future__ import annotations

from typing import Any

import pytest

from groupd.coordinator import errors as E
from groupd.coordinator import group_types, shard
from groupd.coordinator.api import OffsetFetch, Protocol
from groupd.coordinator.consumer import records as rec
from groupd.coordinator.consumer.api import ConsumerGroupHeartbeat
from groupd.coordinator.consumer.config import ConsumerConfig
from groupd.coordinator.consumer.embedded import assignment_bytes, parse_assignment
from groupd.coordinator.consumer.group import STABLE, UNRELEASED_PARTITIONS, consumer_groups
from groupd.coordinator.consumer.heartbeat import TopicInfo
from groupd.coordinator.group import Group
from groupd.coordinator.records import GroupMetadataKey, encode_key, encode_value
from groupd.storage.batch import TxnWalk

from ..harness import Core, subscription
from .driver import tid

T = tid("T")
SESSION = 10_000  # the classic members' session timeout (the harness's JoinGroup default)


def proto(*topics: str, name: str = "range", version: int = 0, owned: tuple = ()) -> tuple[Protocol, ...]:
    """The protocols a classic consumer sends: its ConsumerProtocolSubscription under ``name``."""
    if version == 0:
        return (Protocol(name, subscription(*topics)),)
    from kio.schema.consumer_protocol_subscription.v1 import ConsumerProtocolSubscription as V1
    from kio.schema.consumer_protocol_subscription.v1.data import TopicPartition

    from groupd.protocol.codec import encode

    body = encode(V1(topics=topics, user_data=None, owned_partitions=tuple(
        TopicPartition(topic=t, partitions=ps) for t, ps in owned)))
    return (Protocol(name, version.to_bytes(2, "big") + body),)


def core(policy: str = "bidirectional", **kw: Any) -> Core:
    consumer = ConsumerConfig(assignment_interval_ms=0, migration_policy=policy, **kw.pop("consumer", {}))
    c = Core(consumer=consumer, **kw)
    c.state.topics = {"T": TopicInfo(T, 6)}
    return c


def classic_group(c: Core, n: int = 2, protocols: tuple[Protocol, ...] | None = None, ptype: str = "consumer",
                  user_data: bytes | None = None) -> list[str]:
    """A Stable classic group of ``n`` members sharing T's six partitions round-robin."""
    protocols = protocols or proto("T")
    ids, toks = [], []
    for _ in range(n):
        mid, tok = c.new_member(protocols=protocols, ptype=ptype)
        ids.append(mid)
        toks.append(tok)
    c.finish_join()
    gen = c.answers[toks[0]].generation_id
    assignments = {}
    for i, mid in enumerate(ids):
        raw = assignment_bytes((("T", tuple(range(i, 6, n))),), 0)
        if user_data is not None:  # a custom assignor's user data after the partitions
            raw = raw[:-4] + len(user_data).to_bytes(4, "big") + user_data
        assignments[mid] = raw
    for mid in ids[1:]:
        c.sync(mid, gen)
    c.sync(ids[0], gen, assignments)
    assert c.group().state == "Stable"
    return ids


def hb(c: Core, member: str, epoch: int, **kw: Any) -> Any:
    if epoch == 0:
        kw.setdefault("rebalance_timeout_ms", 5000)
        kw.setdefault("subscribed_topic_names", ("T",))
        kw.setdefault("owned", ())
    req = ConsumerGroupHeartbeat("g", member, epoch, client_id="c", client_host="/127.0.0.1", **kw)
    return c.answers[c.run(group_types.consumer_group_heartbeat, req, "g")]


def owned(*ps: int) -> tuple:
    return ((T, ps),)


def cg(c: Core) -> Any:
    return consumer_groups(c.state)["g"]


def classic_join(
    c: Core, member_id: str = "", version: int = 5, protocols: tuple[Protocol, ...] | None = None, **kw: Any
) -> Any:
    return c.answers[c.join(member_id=member_id, version=version, protocols=protocols or proto("T"), **kw)]


def synced(c: Core, member_id: str, generation: int, **kw: Any) -> Any:
    return c.answers[c.sync(member_id, generation, **kw)]


def partitions(assignment: bytes) -> dict[str, tuple[int, ...]]:
    parts, user_data = parse_assignment(assignment)
    assert user_data is None
    return dict(parts)


# ---------------------------------------------------------------- 27, 28: upgrade


def test_s27_a_consumer_heartbeat_upgrades_a_stable_classic_group():
    c = core()
    a, b = classic_group(c)
    gen = c.group().generation
    start = len(c.log)
    resp = hb(c, "c1", 0)
    assert resp.error == 0 and resp.member_epoch == gen + 1
    written = c.log[start:]
    assert written[0] == (GroupMetadataKey("g"), None)  # the classic group's tombstone goes first
    kinds = [k.kind for k, _ in written[1:8]]
    assert kinds == [
        rec.MEMBER_METADATA,
        rec.MEMBER_METADATA,
        rec.GROUP_METADATA,
        rec.TARGET_ASSIGNMENT_MEMBER,
        rec.TARGET_ASSIGNMENT_MEMBER,
        rec.TARGET_ASSIGNMENT_METADATA,
        rec.CURRENT_MEMBER_ASSIGNMENT,
    ]
    assert written[3][1].epoch == gen and written[6][1] == rec.TargetAssignmentMetadata(gen, 0)
    group = cg(c)
    assert group.epoch == gen + 1 and group.assignment_epoch == gen + 1  # the joiner's subscription bumps it
    for i, mid in enumerate((a, b)):
        m = group.members[mid]
        assert (m.epoch, m.state) == (gen, STABLE)  # reconciles when it rejoins
        assert sorted(m.assigned[T]) == list(range(i, 6, 2))
        assert m.classic == rec.ClassicMemberMetadata(SESSION, (rec.ClassicProtocol("range", subscription("T")),))
        assert m.rebalance_timeout_ms == 30_000 and m.subscribed_topic_names == ("T",)
        assert c.timers[("consumer-session", "g", mid)] == c.now + SESSION
        assert ("hb", "g", mid) not in c.timers
    assert "g" not in c.state.view(Group) or not c.state.groups["g"].members
    # the joiner waits for partitions the classic members still hold
    assert group.members["c1"].state == UNRELEASED_PARTITIONS and resp.assignment == ()


def test_s27_upgrade_answers_parked_join_and_sync_with_rebalance_in_progress():
    c = core()
    a, b = classic_group(c)
    gen = c.group().generation
    parked = c.join(member_id=a, protocols=proto("T", "U"))  # new metadata: PreparingRebalance, a parked
    assert c.group().state == "PreparingRebalance" and parked not in c.answers
    assert hb(c, "c1", 0).error == 0
    assert c.answers[parked].error == E.REBALANCE_IN_PROGRESS
    assert cg(c).members[a].epoch == gen


def test_s27_upgrade_keeps_offsets_and_members_reconcile_through_join_and_sync():
    c = core()
    a, b = classic_group(c)
    gen = c.group().generation
    assert c.commit(("T", 0, 42), generation=gen, member_id=a).partitions[0].error == 0
    hb(c, "c1", 0)
    epoch = gen + 1
    assert c.heartbeat(a, gen) == E.REBALANCE_IN_PROGRESS  # a newer target: rejoin
    assert c.timers[("consumer-join", "g", a)] == c.now + 30_000
    # eager clients revoke everything before rejoining (v0 subscription: owns nothing)
    joined = classic_join(c, a)
    assert (
        joined.error,
        joined.generation_id,
        joined.protocol_type,
        joined.protocol_name,
        joined.leader,
        joined.members,
    ) == (0, epoch, "consumer", "range", "", ())
    assert ("consumer-join", "g", a) not in c.timers
    assert c.timers[("consumer-sync", "g", a)] == c.now + 30_000
    got = synced(c, a, epoch)
    assert got.error == 0 and set(partitions(got.assignment)["T"]) == set(cg(c).targets[a][T])
    assert ("consumer-sync", "g", a) not in c.timers
    assert c.heartbeat(a, epoch) == 0
    # offsets survive the upgrade; the classic member commits with its epoch as generation
    assert c.fetch(topics={"T": (0,)}).partitions[0].offset == 42
    assert c.commit(("T", 0, 43), generation=epoch, member_id=a, version=8).partitions[0].error == 0
    assert (
        c.commit(("T", 0, 43), generation=epoch + 1, member_id=a, version=8).partitions[0].error == E.ILLEGAL_GENERATION
    )
    fetched = shard.offset_fetch(c.state, OffsetFetch("g", None, False, 9, a, epoch + 1), c.now)
    assert fetched.error == E.ILLEGAL_GENERATION  # a classic member's wrong epoch is a wrong generation
    assert shard.offset_fetch(c.state, OffsetFetch("g", None, False, 9, a, epoch), c.now).error == 0


@pytest.mark.parametrize("policy", ["downgrade", "disabled"])
def test_s28_upgrade_refused_by_policy(policy):
    c = core(policy)
    classic_group(c)
    start = len(c.log)
    resp = hb(c, "c1", 0)
    assert resp.error == E.GROUP_ID_NOT_FOUND and resp.message == "Group g is not a consumer group."
    assert c.log[start:] == [] and "g" not in consumer_groups(c.state) and c.group().state == "Stable"


@pytest.mark.parametrize(
    ("why", "setup"),
    [
        ("protocol type", lambda c: classic_group(c, ptype="connect")),
        ("size", lambda c: classic_group(c, 3)),
        ("user data", lambda c: classic_group(c, user_data=b"sticky")),
        ("malformed", lambda c: classic_group(c, protocols=(Protocol("range", b"\x00"),))),
    ],
)
def test_s28_upgrade_refused_when_the_group_cannot_be_read_as_a_consumer_group(why, setup):
    c = core(consumer={"max_size": 2})
    setup(c)
    start = len(c.log)
    resp = hb(c, "c1", 0)
    assert resp.error == E.GROUP_ID_NOT_FOUND, why
    if why == "malformed":
        assert "malformed" in resp.message
    elif why == "user data":
        assert "custom assignor" in resp.message
    assert c.log[start:] == [] and "g" not in consumer_groups(c.state) and len(c.group().members) >= 2


def test_s28_heartbeats_other_than_a_join_to_a_classic_group_are_group_id_not_found():
    c = core()
    classic_group(c)
    assert hb(c, "c1", 3).error == E.GROUP_ID_NOT_FOUND
    assert hb(c, "c1", -1).error == E.GROUP_ID_NOT_FOUND
    assert hb(c, "", 0).error == E.INVALID_REQUEST  # the request is checked first


def test_s28_a_failed_join_leaves_the_classic_group_as_it_was():
    c = core()
    classic_group(c)
    resp = hb(c, "c1", 0, subscribed_topic_names=None, subscribed_topic_regex="(")
    assert resp.error == E.INVALID_REGULAR_EXPRESSION
    assert "g" not in consumer_groups(c.state) and c.group().state == "Stable" and len(c.group().members) == 2


@pytest.mark.parametrize("policy", ["bidirectional", "upgrade", "downgrade", "disabled"])
def test_s28_empty_classic_groups_convert_under_any_policy(policy):
    c = core(policy)
    (a,) = classic_group(c, 1)
    c.leave((a, None))
    assert c.group().state == "Empty"
    c.commit(("T", 0, 7))
    start = len(c.log)
    assert hb(c, "c1", 0).error == 0
    assert cg(c).members["c1"].epoch == 2
    assert c.log[start] == (GroupMetadataKey("g"), None)  # maybeDeleteEmptyClassicGroup: its tombstone first
    assert c.fetch(topics={"T": (0,)}).partitions[0].offset == 7  # offsets stay


# ---------------------------------------------------------------- 29, 30: classic members in a consumer group


def consumer_group_with_classic_member(c: Core) -> tuple[str, int]:
    """c1 (consumer protocol) owns T; a classic member joins: (its id, its generation)."""
    assert hb(c, "c1", 0).error == 0
    first = classic_join(c)
    assert first.error == E.MEMBER_ID_REQUIRED and first.member_id
    joined = classic_join(c, first.member_id)
    assert joined.error == 0
    return first.member_id, joined.generation_id


def test_s29_classic_join_member_id_required_then_generation_is_the_member_epoch():
    c = core()
    mid, gen = consumer_group_with_classic_member(c)
    m = cg(c).members[mid]
    assert gen == m.epoch == cg(c).epoch == 3
    assert m.classic is not None and m.classic.session_timeout_ms == SESSION
    assert c.timers[("consumer-session", "g", mid)] == c.now + SESSION
    # c1 must give up half before the classic member gets anything
    assert synced(c, mid, gen).assignment == assignment_bytes((), 0)
    assert c.heartbeat(mid, gen) == 0  # waiting on partitions c1 still holds: nothing to rejoin for
    keep = tuple(sorted(cg(c).targets["c1"][T]))
    assert hb(c, "c1", 2, owned=owned(*range(6))).member_epoch == 2  # revoking
    assert hb(c, "c1", 2, owned=owned(*keep)).member_epoch == 3
    assert c.heartbeat(mid, gen) == E.REBALANCE_IN_PROGRESS  # released partitions are waiting for it
    rejoined = classic_join(c, mid)
    assert rejoined.generation_id == 3
    got = synced(c, mid, 3)
    assert set(partitions(got.assignment)["T"]) == set(range(6)) - set(keep)
    assert cg(c).state() == "Stable"


def test_s29_assignment_comes_in_the_members_consumer_protocol_version():
    c = core()
    assert hb(c, "c1", 0).error == 0
    first = classic_join(c, protocols=proto("T", version=1))
    joined = classic_join(c, first.member_id, protocols=proto("T", version=1))
    raw = synced(c, first.member_id, joined.generation_id).assignment
    assert raw[:2] == b"\x00\x01"


def test_s29_owned_partitions_of_a_cooperative_member_keep_it_revoking():
    c = core()
    mid, gen = consumer_group_with_classic_member(c)
    hb(c, "c1", 2, owned=owned(*range(6)))
    hb(c, "c1", 2, owned=owned(*sorted(cg(c).targets["c1"][T])))
    classic_join(c, mid)
    mine = tuple(sorted(cg(c).members[mid].assigned[T]))
    # a second consumer member joins: the classic member must give some partitions up
    hb(c, "c2", 0)
    assert c.heartbeat(mid, 3) == E.REBALANCE_IN_PROGRESS
    rejoined = classic_join(c, mid, protocols=proto("T", version=1, owned=(("T", mine),)))
    m = cg(c).members[mid]
    assert m.pending_revocation and m.state == 1 and rejoined.generation_id == 3  # UNREVOKED at its old epoch
    assert c.heartbeat(mid, 3) == E.REBALANCE_IN_PROGRESS
    assert synced(c, mid, 3).error == 0  # revoking: SyncGroup still answers
    # it rejoins owning only what it keeps: the revocation is done
    kept = tuple(sorted(m.assigned[T]))
    assert classic_join(c, mid, protocols=proto("T", version=1, owned=(("T", kept),))).generation_id == 4
    assert ("consumer-rebalance", "g", mid) not in c.timers  # classic members have no rebalance timer


def test_s29_sync_and_heartbeat_refusals():
    c = core()
    mid, gen = consumer_group_with_classic_member(c)
    assert synced(c, mid, gen + 1).error == E.ILLEGAL_GENERATION
    assert synced(c, "nobody", gen).error == E.UNKNOWN_MEMBER_ID
    assert synced(c, "c1", 2).error == E.UNKNOWN_MEMBER_ID  # a consumer-protocol member
    assert synced(c, mid, gen, version=5, ptype="consumer", pname="roundrobin").error == E.INCONSISTENT_GROUP_PROTOCOL
    assert synced(c, mid, gen, version=5, ptype="connect", pname="range").error == E.INCONSISTENT_GROUP_PROTOCOL
    assert synced(c, mid, gen, version=5, ptype="consumer", pname="range").error == 0
    assert c.heartbeat(mid, gen + 1) == E.ILLEGAL_GENERATION
    assert c.heartbeat("nobody", gen) == E.UNKNOWN_MEMBER_ID
    assert c.heartbeat("c1", 2) == E.UNKNOWN_MEMBER_ID


def test_s29_join_refusals():
    c = core(consumer={"max_size": 2})
    mid, gen = consumer_group_with_classic_member(c)
    assert classic_join(c, "x", ptype="connect").error == E.GROUP_MAX_SIZE_REACHED  # size first
    c2 = core()
    mid, gen = consumer_group_with_classic_member(c2)
    assert classic_join(c2, "x", ptype="connect").error == E.INCONSISTENT_GROUP_PROTOCOL
    assert classic_join(c2, "x", protocols=proto("T", name="roundrobin")).error == E.INCONSISTENT_GROUP_PROTOCOL
    assert classic_join(c2, "x", protocols=(Protocol("range", b"\x00\x00\x00"),)).error == E.INCONSISTENT_GROUP_PROTOCOL
    assert classic_join(c2, "x", instance="i9").error == E.UNKNOWN_MEMBER_ID  # a known id for an unknown instance
    assert classic_join(c2, "x", session=1000).error == E.INVALID_SESSION_TIMEOUT  # below group.min.session.timeout.ms
    assert classic_join(c2, version=3).error == 0  # before v4 a member gets its id with the answer


def test_s29_classic_member_timers():
    c = core()
    mid, gen = consumer_group_with_classic_member(c)
    sync_deadline = c.timers[("consumer-sync", "g", mid)]
    c.advance(sync_deadline)  # never sent SyncGroup
    assert mid not in cg(c).members and cg(c).epoch == 4
    mid, gen = consumer_group_with_classic_member(c)
    synced(c, mid, gen)
    c.advance(c.now + SESSION - 1)
    hb(c, "c1", cg(c).members["c1"].epoch)
    assert mid in cg(c).members
    c.advance(c.now + 1)  # its own session timeout, not the consumer protocol's 45 s
    assert mid not in cg(c).members


def test_s29_join_timer_fences_a_member_that_does_not_rejoin():
    c = core()
    mid, gen = consumer_group_with_classic_member(c)
    synced(c, mid, gen)
    hb(c, "c2", 0)  # a new target: the classic member must rejoin
    assert c.heartbeat(mid, gen) == E.REBALANCE_IN_PROGRESS
    deadline = c.timers[("consumer-join", "g", mid)]
    assert c.heartbeat(mid, gen) == E.REBALANCE_IN_PROGRESS
    assert c.timers[("consumer-join", "g", mid)] == deadline  # armed only if absent
    while c.now + 5000 < deadline:  # it keeps heartbeating (its session holds) but never rejoins
        c.advance(c.now + 5000)
        assert c.heartbeat(mid, gen) == E.REBALANCE_IN_PROGRESS
    c.advance(deadline - 1)
    assert mid in cg(c).members
    c.advance(deadline)
    assert mid not in cg(c).members


def test_s29_leave_group():
    c = core()
    mid, gen = consumer_group_with_classic_member(c)
    epoch = cg(c).epoch
    resp = c.leave((mid, None), ("nobody", None), ("c1", None))
    assert [(m.member_id, m.error) for m in resp.members] == [
        (mid, 0),
        ("nobody", E.UNKNOWN_MEMBER_ID),
        ("c1", E.UNKNOWN_MEMBER_ID),
    ]
    assert mid not in cg(c).members and cg(c).epoch == epoch + 1
    assert ("consumer-session", "g", mid) not in c.timers and ("consumer-sync", "g", mid) not in c.timers
    # static classic members: fenced by another id (82), removed by instance id alone
    first = classic_join(c, instance="i1")
    assert first.error == 0
    assert c.leave(("other", "i1")).members[0].error == E.FENCED_INSTANCE_ID
    left = c.leave(("", "i1"))
    assert (left.members[0].member_id, left.members[0].error) == (first.member_id, 0)
    assert c.leave(("", "i2"), version=2).error == E.UNKNOWN_MEMBER_ID


def test_s29_classic_members_alone_catch_up_after_one_leaves():
    c = core("upgrade")
    mid, gen = consumer_group_with_classic_member(c)
    synced(c, mid, gen)
    hb(c, "c1", -1)  # policy upgrade: a consumer group of one classic member, its epoch moved on
    assert cg(c).epoch == gen + 1 and cg(c).assignment_epoch == gen
    # nobody sends ConsumerGroupHeartbeat: the classic member's heartbeat computes the new target
    assert c.heartbeat(mid, gen) == E.REBALANCE_IN_PROGRESS
    assert cg(c).assignment_epoch == gen + 1
    joined = classic_join(c, mid)
    assert joined.generation_id == gen + 1
    assert set(partitions(synced(c, mid, gen + 1).assignment)["T"]) == set(range(6))


def test_s29_a_classic_static_member_replaces_itself():
    c = core()
    hb(c, "c1", 0)
    first = classic_join(c, instance="i1")
    again = classic_join(c, instance="i1")  # restarted: a new member id takes the old one's place
    assert again.error == 0 and again.member_id != first.member_id
    assert first.member_id not in cg(c).members and cg(c).static_members["i1"] == again.member_id


def test_s30_policy_disabled_refuses_classic_joins_into_a_consumer_group():
    c = core("disabled")
    hb(c, "c1", 0)
    assert classic_join(c).error == E.INCONSISTENT_GROUP_PROTOCOL


# ---------------------------------------------------------------- 31: downgrade


def test_s31_last_consumer_member_leaving_downgrades_to_a_classic_group():
    c = core()
    mid, gen = consumer_group_with_classic_member(c)
    keep = tuple(sorted(cg(c).targets["c1"][T]))
    hb(c, "c1", 2, owned=owned(*range(6)))
    hb(c, "c1", 2, owned=owned(*keep))
    classic_join(c, mid)
    synced(c, mid, 3)
    epoch = cg(c).epoch
    start = len(c.log)
    resp = hb(c, "c1", -1)
    assert (resp.error, resp.member_epoch) == (0, -1)
    assert "g" not in consumer_groups(c.state)
    written = c.log[start:]
    assert all(v is None for _, v in written[:-1]) and written[-1][0] == GroupMetadataKey("g")
    value = written[-1][1]
    assert (value.protocol_type, value.generation, value.protocol, value.leader) == ("consumer", epoch, "range", mid)
    (member,) = value.members
    assert (member.member_id, member.session_timeout, member.rebalance_timeout) == (mid, SESSION, 30_000)
    assert set(partitions(member.assignment)["T"]) == set(range(6)) - set(keep)
    g = c.group()
    assert g.state == "PreparingRebalance" and g.generation == epoch
    assert ("consumer-session", "g", mid) not in c.timers and ("hb", "g", mid) in c.timers
    # the classic member rejoins and the classic group carries on
    assert c.heartbeat(mid, epoch) == E.REBALANCE_IN_PROGRESS
    tok = c.join(member_id=mid, protocols=proto("T"))
    assert c.answers[tok].generation_id == epoch + 1 and g.state == "CompletingRebalance"


def test_s31_a_session_timeout_of_the_last_consumer_member_downgrades_too():
    c = core()
    mid, gen = consumer_group_with_classic_member(c)
    synced(c, mid, gen)
    for _ in range(10):  # c1 goes silent; the classic member keeps its own session alive
        c.advance(c.now + 5000)
        c.heartbeat(mid, gen)
    assert "g" not in consumer_groups(c.state) and mid in c.group().members


def test_s31_under_policy_upgrade_the_group_stays_a_consumer_group():
    c = core("upgrade")
    mid, gen = consumer_group_with_classic_member(c)
    hb(c, "c1", -1)
    assert list(cg(c).members) == [mid]
    assert "g" not in c.state.view(Group) or not c.group().members


def test_s31_downgrade_refused_above_group_max_size():
    c = core(max_size=1)
    mid, gen = consumer_group_with_classic_member(c)
    second = classic_join(c, version=3)
    assert second.error == 0
    hb(c, "c1", -1)
    assert set(cg(c).members) == {mid, second.member_id}


def test_s31_a_classic_static_member_replacing_the_last_consumer_member_downgrades():
    c = core()
    assert hb(c, "c1", 0, instance_id="i1").error == 0
    mid, gen = consumer_group_with_classic_member(c)
    target = set(cg(c).targets["c1"][T])
    joined = classic_join(c, instance="i1")
    assert joined.error == 0
    assert "g" not in consumer_groups(c.state)
    g = c.group()
    assert g.state == "Stable" and set(g.members) == {mid, joined.member_id}
    assert g.static == {"i1": joined.member_id}
    assert set(partitions(g.members[joined.member_id].assignment)["T"]) == target


# ---------------------------------------------------------------- replay: a restart mid-migration


def reloaded(c: Core) -> shard.ShardState:
    """What a load rebuilds from the log: the last value of every key, keys in first-written order."""
    latest: dict[bytes, bytes | None] = {}
    for key, value in c.log:
        latest[encode_key(key)] = encode_value(value)
    state = shard.ShardState(0)
    state.topics = c.state.topics
    shard.replay_walked(state, latest, TxnWalk(), c.now)
    return state


def consumer_view(state: shard.ShardState) -> dict:
    return {
        gid: (
            g.epoch,
            g.assignment_epoch,
            dict(g.targets),
            {
                mid: (
                    m.epoch,
                    m.previous_epoch,
                    m.state,
                    m.assigned,
                    m.pending_revocation,
                    m.classic,
                    m.instance_id,
                    m.subscribed_topic_names,
                    m.rebalance_timeout_ms,
                )
                for mid, m in g.members.items()
            },
        )
        for gid, g in consumer_groups(state).items()
    }


def classic_view(state: shard.ShardState) -> dict:
    return {
        gid: (
            g.generation,
            g.protocol,
            g.protocol_type,
            g.leader,
            {
                mid: (m.assignment, m.session_timeout, m.rebalance_timeout, m.instance_id)
                for mid, m in g.members.items()
            },
            dict(state.offsets.of(gid)),
        )
        for gid, g in state.view(Group).items()
    }


def test_s32_replay_after_upgrade_and_after_downgrade_rebuilds_the_same_groups():
    c = core()
    a, b = classic_group(c)
    c.commit(("T", 0, 42), generation=c.group().generation, member_id=a)
    hb(c, "c1", 0)
    again = reloaded(c)
    assert consumer_view(again) == consumer_view(c.state)
    assert again.offsets.committed == c.state.offsets.committed
    assert all(not g.members for g in again.view(Group).values())
    # after a load, classic members' sessions run on their own session timeout again
    rearmed = {op.key: op.deadline_ms for op in shard.on_loaded(again, 7, c.cfg).timers}
    assert rearmed[("consumer-session", "g", a)] == 7 + SESSION
    assert rearmed[("consumer-session", "g", "c1")] == 7 + 45_000
    # classic members rejoin, the consumer member leaves: back to a classic group
    for mid in (a, b):
        classic_join(c, mid)
    hb(c, "c1", -1)
    assert "g" not in consumer_groups(c.state)
    again = reloaded(c)
    assert consumer_groups(again) == {}
    assert classic_view(again) == classic_view(c.state)
    assert again.groups["g"].state == "Stable"  # loaded Stable: its members' sessions restart
