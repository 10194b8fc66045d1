"""The classic group and its members as plain mutable objects (Kafka's ClassicGroup / ClassicGroupMember).

Everything here is bookkeeping without policy: the rules live in ``coordinator/classic/rules.py``. Objects use
``__slots__`` because a shard holds many groups and the join/sync path touches them on every request.
"""

from __future__ import annotations

import struct

from groupd.coordinator.api import Protocol, Token
from groupd.coordinator.records import GroupMetadataValue, MemberMetadata

EMPTY = "Empty"
PREPARING = "PreparingRebalance"
COMPLETING = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

CONSUMER = "consumer"


class Member:
    """One member of a classic group; ``join_token``/``sync_token`` are its parked requests, if any."""

    __slots__ = (
        "member_id",
        "instance_id",
        "client_id",
        "client_host",
        "rebalance_timeout",
        "session_timeout",
        "protocol_type",
        "protocols",
        "assignment",
        "join_token",
        "join_version",
        "sync_token",
        "is_new",
        "hb_deadline",
    )

    def __init__(
        self,
        member_id: str,
        instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout: int,
        session_timeout: int,
        protocol_type: str,
        protocols: tuple[Protocol, ...],
    ) -> None:
        self.member_id = member_id
        self.instance_id = instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout = rebalance_timeout
        self.session_timeout = session_timeout
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = b""
        self.join_token: Token | None = None
        self.join_version = 0
        self.sync_token: Token | None = None
        self.is_new = False
        self.hb_deadline: int | None = None

    def metadata(self, protocol: str | None) -> bytes:
        """The member's metadata for ``protocol`` (empty if it does not offer it)."""
        for p in self.protocols:
            if p.name == protocol:
                return p.metadata
        return b""

    def same_protocols(self, protocols: tuple[Protocol, ...]) -> bool:
        return self.protocols == protocols


class Group:
    """A classic group: persisted part (generation, leader, protocol, members' assignments) plus
    the transient part Kafka keeps only in memory (parked requests, pending ids, timers' deadlines)."""

    group_type = "classic"  # the key of its rules in coordinator/shard.py's GROUP_TYPES

    __slots__ = (
        "group_id",
        "state",
        "prev_state",
        "state_ts",
        "protocol_type",
        "protocol",
        "generation",
        "leader",
        "members",
        "static",
        "pending",
        "pending_sync",
        "support",
        "n_awaiting_join",
        "new_member_added",
        "join_deadline",
        "initial_delay",
        "initial_remaining",
        "sync_deadline",
        "sync_generation",
        "subscribed",
        "rebalance_cause",
        "rebalance_reason",
        "rebalance_generation",
    )

    def __init__(self, group_id: str, now: int | None) -> None:
        self.group_id = group_id
        self.state = EMPTY
        self.prev_state = EMPTY
        self.state_ts = now  # None: unknown (loaded from an old record)
        self.protocol_type: str | None = None
        self.protocol: str | None = None
        self.generation = 0
        self.leader: str | None = None
        self.members: dict[str, Member] = {}
        self.static: dict[str, str] = {}  # group.instance.id -> member id
        self.pending: dict[str, int] = {}  # pending (MEMBER_ID_REQUIRED) member id -> expiry deadline
        # members whose SyncGroup is awaited; a dict used as a set: an empty one is 64 bytes, a set 216, and
        # a held group keeps it empty for its whole life
        self.pending_sync: dict[str, None] = {}
        self.support: dict[str, int] = {}  # protocol name -> number of members offering it
        self.n_awaiting_join = 0
        self.new_member_added = False
        self.join_deadline: int | None = None
        self.initial_delay: int | None = None  # set while the initial-delay phase runs
        self.initial_remaining = 0
        self.sync_deadline: int | None = None
        self.sync_generation = -1
        self.subscribed: frozenset[str] | None = None  # None: unknown
        self.rebalance_cause = ""  # why the last rebalance started (for metrics)
        self.rebalance_reason = ""  # the same in words, naming the member (for the log line)
        self.rebalance_generation = 0  # the generation the last rebalance started from

    # ------------------------------------------------------------ state

    def transition(self, state: str, now: int) -> None:
        self.prev_state = self.state
        self.state = state
        self.state_ts = now

    # ------------------------------------------------------------ members

    def add(self, m: Member) -> None:
        if not self.members:
            self.protocol_type = m.protocol_type
        self.members[m.member_id] = m
        if m.instance_id is not None:
            self.static[m.instance_id] = m.member_id
        self._count(m.protocols, 1)
        if m.join_token is not None:
            self.n_awaiting_join += 1
        if self.leader is None:
            self.leader = m.member_id

    def remove(self, member_id: str) -> Member | None:
        m = self.members.pop(member_id, None)
        if m is not None:
            self._count(m.protocols, -1)
            if m.join_token is not None:
                self.n_awaiting_join -= 1
            if m.instance_id is not None and self.static.get(m.instance_id) == member_id:
                del self.static[m.instance_id]
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)
        self.pending.pop(member_id, None)
        self.pending_sync.pop(member_id, None)
        return m

    def set_protocols(self, m: Member, protocols: tuple[Protocol, ...]) -> None:
        self._count(m.protocols, -1)
        m.protocols = protocols
        self._count(protocols, 1)

    def _count(self, protocols: tuple[Protocol, ...], delta: int) -> None:
        s = self.support
        seen: set[str] = set()
        for p in protocols:  # noqa: SIM110 - a plain loop: no generator per join
            name = p.name
            if name in seen:
                continue
            seen.add(name)
            c = s.get(name, 0) + delta
            if c:
                s[name] = c
            else:
                s.pop(name, None)

    def park_join(self, m: Member, token: Token, version: int) -> None:
        if m.join_token is None:
            self.n_awaiting_join += 1
        m.join_token = token
        m.join_version = version

    def take_join(self, m: Member) -> Token | None:
        token = m.join_token
        if token is not None:
            self.n_awaiting_join -= 1
            m.join_token = None
        return token

    def all_joined(self) -> bool:
        return self.n_awaiting_join == len(self.members) and not self.pending

    def rebalance_timeout(self) -> int:
        """Kafka's group rebalance timeout: the largest of the members' (0 without members)."""
        t = 0
        for m in self.members.values():
            if m.rebalance_timeout > t:
                t = m.rebalance_timeout
        return t

    # ------------------------------------------------------------ protocols

    def supports(self, protocol_type: str, protocols: tuple[Protocol, ...]) -> bool:
        if self.state == EMPTY:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        n = len(self.members)
        s = self.support
        for p in protocols:  # noqa: SIM110 - a plain loop: no generator per join
            if s.get(p.name, 0) == n:
                return True
        return False

    def select_protocol(self) -> str | None:
        """Vote: each member votes for its first protocol that every member supports; most votes wins
        (ties go to the candidate voted first, Kafka leaves them to hash order)."""
        n = len(self.members)
        s = self.support
        votes: dict[str, int] = {}
        for m in self.members.values():
            for p in m.protocols:
                if s.get(p.name, 0) == n:
                    votes[p.name] = votes.get(p.name, 0) + 1
                    break
        if not votes:
            return None
        return max(votes, key=votes.__getitem__)

    def compute_subscribed(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER:
            return None
        if not self.members:
            return frozenset()
        if self.protocol is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = parse_subscription_topics(m.metadata(self.protocol))
            if parsed is None:
                return None
            topics.update(parsed)
        return frozenset(topics)

    def is_subscribed(self, topic: str) -> bool:
        """Kafka's isSubscribedToTopic: unknown subscription protects every topic of a consumer group."""
        if self.subscribed is None:
            return self.protocol_type == CONSUMER
        return topic in self.subscribed

    # ------------------------------------------------------------ records

    def metadata_value(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        """The GroupMetadataValue Kafka writes for this group (assignments override the stored ones)."""
        proto = self.protocol
        members = tuple(
            [  # by position, in MemberMetadata's field order (a keyword call of a slotted class builds a dict)
                MemberMetadata(
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout,
                    m.session_timeout,
                    m.metadata(proto),  # subscription
                    m.assignment if assignments is None else assignments.get(m.member_id, b""),
                )
                for m in self.members.values()
            ]
        )
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=proto,
            leader=self.leader,
            current_state_timestamp=-1 if self.state_ts is None else self.state_ts,
            members=members,
        )


_H = struct.Struct(">h")
_I = struct.Struct(">i")


def parse_subscription_topics(data: bytes) -> list[str] | None:
    """Topics of a ConsumerProtocolSubscription (any version: later versions only append fields after
    ``topics``); None when the bytes do not parse, like Kafka's 'unknown subscription'."""
    try:
        pos = 2  # int16 version
        (n,) = _I.unpack_from(data, pos)
        pos += 4
        if n < 0 or n > len(data):
            return None
        topics: list[str] = []
        for _ in range(n):
            (ln,) = _H.unpack_from(data, pos)
            pos += 2
            if ln < 0 or pos + ln > len(data):
                return None
            topics.append(data[pos : pos + ln].decode())
            pos += ln
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
