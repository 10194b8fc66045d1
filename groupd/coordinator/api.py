"""The coordinator core's vocabulary: plain requests in, plain results out.

The shell (broker/handlers + coordinator/service.py) turns kio entities of any API version into these
version-free requests, calls a pure handler, and turns the payloads back into kio responses. The core
never sees sockets, asyncio or a clock: ``now`` (wall-clock ms) comes in as an argument.

A request carries a ``token`` chosen by the shell. Every payload the core produces is addressed to a
token: the caller's own, or the token of a request the core parked earlier (a JoinGroup waiting for the
join phase to end, a SyncGroup waiting for the leader). A request whose token gets no payload in its
Result stays parked until a later Result answers it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from groupd.coordinator.consumer.config import ConsumerConfig
from groupd.coordinator.records import Key, Value
from groupd.coordinator.share.config import ShareGroupConfig
from groupd.coordinator.values import value

Token = int

# Requests, payloads and Results are values (coordinator/values.py): never changed once made, equal
# and hashed by their fields.

# ---------------------------------------------------------------- requests (version-free)


@value
class Protocol:
    name: str
    metadata: bytes


@value
class JoinGroup:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int  # v0 has none: the shell passes session_timeout_ms (KAFKA-8653)
    protocol_type: str
    protocols: tuple[Protocol, ...]
    client_id: str
    client_host: str
    version: int
    reason: str | None = None


@value
class SyncAssignment:
    member_id: str
    assignment: bytes


@value
class SyncGroup:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None  # v5+
    protocol_name: str | None  # v5+
    assignments: tuple[SyncAssignment, ...]
    version: int


@value
class Heartbeat:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    version: int


@value
class LeavingMember:
    member_id: str
    group_instance_id: str | None
    reason: str | None = None


@value
class LeaveGroup:
    group_id: str
    members: tuple[LeavingMember, ...]  # v0-2: one member built from the top-level member_id
    version: int


@value
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp: int = -1  # v1 only; -1 = the broker's now


@value
class OffsetCommit:
    group_id: str
    generation_id: int  # -1 for simple (non-group) commits
    member_id: str
    group_instance_id: str | None
    retention_time_ms: int  # v2-4; -1 = broker default
    partitions: tuple[CommitPartition, ...]
    version: int


@value
class OffsetFetch:
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...] | None  # None = every committed partition
    require_stable: bool
    version: int
    member_id: str | None = None  # v9 (KIP-848 members); classic clients send null
    member_epoch: int = -1


@value
class TxnOffsetCommit:
    """TxnOffsetCommit (api 28): OffsetCommit's partitions, written as the producer's transactional batch.
    v0-2 carry no member: generation -1, member "" and no instance id."""

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int
    member_id: str
    group_instance_id: str | None
    partitions: tuple[CommitPartition, ...]
    version: int


@value
class EndTxnMarker:
    """A transaction marker for this offsets partition: the producer's pending offsets are applied
    (commit) or dropped (abort) once it is durable."""

    producer_id: int
    producer_epoch: int
    commit: bool


@value
class OffsetDelete:
    group_id: str
    partitions: tuple[tuple[str, int], ...]


# ---------------------------------------------------------------- payloads (what a token is answered with)


@value
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@value
class JoinGroupResponse:
    error: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = ""
    members: tuple[JoinMember, ...] = ()


@value
class SyncGroupResponse:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@value
class HeartbeatResponse:
    error: int


@value
class LeftMember:
    member_id: str
    group_instance_id: str | None
    error: int


@value
class LeaveGroupResponse:
    error: int
    members: tuple[LeftMember, ...] = ()


@value
class PartitionError:
    topic: str
    partition: int
    error: int


@value
class OffsetCommitResponse:
    partitions: tuple[PartitionError, ...]
    error: int = 0  # used only where a version has a top-level error


@value
class FetchedOffset:
    topic: str
    partition: int
    offset: int  # -1 when nothing is committed
    leader_epoch: int
    metadata: str | None
    error: int


@value
class OffsetFetchResponse:
    error: int
    partitions: tuple[FetchedOffset, ...] = ()


@value
class OffsetDeleteResponse:
    error: int
    partitions: tuple[PartitionError, ...] = ()


@value
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # the member's metadata for the selected protocol (empty unless Stable/Completing)
    assignment: bytes


@value
class GroupDescription:
    error: int
    group_id: str
    state: str  # Kafka's wire names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    protocol_type: str
    protocol: str
    members: tuple[DescribedMember, ...] = ()


@value
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@value
class DeleteGroupResponse:
    error: int


# ---------------------------------------------------------------- what a handler returns


@value
class TimerOp:
    """Set (deadline_ms) or cancel (deadline_ms None) the timer named ``key``; a set replaces."""

    key: tuple[Any, ...]
    deadline_ms: int | None


# ---------------------------------------------------------------- write refs
# What a Result tells the rules' failed-write follow-up about itself: a small closed set of typed refs,
# one per kind of write whose failure Kafka maps into answers (or undoes) itself.


@value
class OffsetsWrite:
    """OffsetCommit or TxnOffsetCommit: every partition written is answered with the mapped error."""

    token: Token
    partitions: tuple[PartitionError, ...]


@value
class OffsetDeleteWrite:
    token: Token


@value
class GroupDeleteWrite:
    token: Token


@value
class ExpiryWrite:
    """The retention check's tombstones: Kafka only logs the failure."""


@value
class MarkerWrite:
    token: Token


@value
class TopicOffsetsWrite:
    """Offsets of deleted topics: Kafka only logs the failure."""


@value
class SyncWrite:
    """A leader's SyncGroup: the group's assignment of ``generation``; ``tokens`` are the syncs it answered."""

    group_id: str
    generation: int
    tokens: tuple[Token, ...]


@value
class StaticRejoinWrite:
    """A known static member rejoined a Stable group under a new member id (``old_id`` before)."""

    group_id: str
    old_id: str
    token: Token
    previous_leader: str


WriteRef = (
    OffsetsWrite | OffsetDeleteWrite | GroupDeleteWrite | ExpiryWrite | MarkerWrite | TopicOffsetsWrite
    | SyncWrite | StaticRejoinWrite
)


@dataclass(slots=True, unsafe_hash=True)
class Result:
    """What a handler returns; built by keyword (the fields are many and mostly defaulted), except on the
    hottest paths (the classic rules' ``Out.result`` for every Result of a classic rebalance, a steady
    member's heartbeat, an offset commit), which build it by position: a keyword call of a slotted
    dataclass gathers its arguments into a dict first (CPython 3.11), 350 ns more a Result."""

    records: tuple[tuple[Key, Value | None], ...] = ()  # appended to the shard's partition, in order
    responses: tuple[tuple[Token, Any], ...] = ()  # sent once ``records`` are durable
    timers: tuple[TimerOp, ...] = ()
    # When records are written and the write fails, the shell calls core ``on_write_failed(state, write_ref,
    # error, now)`` instead of sending ``responses``: Kafka maps the failure into each answer itself.
    write_ref: object = None
    replay: bool = True  # offsets records are replayed after the write; classic group metadata is not
    # (producer id, producer epoch): ``records`` are one transactional batch of that producer (TxnOffsetCommit)
    producer: tuple[int, int] | None = None
    # (producer id, producer epoch, commit): a transaction marker is written instead of records
    marker: tuple[int, int, bool] | None = None


EMPTY = Result()
_SHARE_DEFAULTS = ShareGroupConfig()


@dataclass(slots=True)
class GroupConfig:
    """Kafka's names and defaults (broker/config.py holds the keys)."""

    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    new_member_join_timeout_ms: int = 300_000  # KAFKA-7610
    offsets_retention_ms: int = 10080 * 60_000
    offset_metadata_max_bytes: int = 4096
    consumer: ConsumerConfig = field(default_factory=ConsumerConfig)  # the consumer protocol's (KIP-848)
    # a share group's settings (KIP-932): the broker's group.share.* keys with the group's overrides
    share_config: Callable[[str], ShareGroupConfig] = field(default=lambda _group_id: _SHARE_DEFAULTS)
    extra: dict[str, Any] = field(default_factory=dict)
    # a group's own configs (GROUP resources: only the keys set, already within the broker's bounds; a new
    # mapping whenever they change); the shell passes the broker's store, so the core reads them without
    # knowing where they are kept
    group_overrides: Callable[[str], Mapping[str, str]] = field(default=lambda _group_id: {})
    # group id -> (the overrides it was made from, its ConsumerConfig): one heartbeat of a configured group
    # then costs a lookup, not a new ConsumerConfig
    _consumer_of: dict[str, tuple[Mapping[str, str], ConsumerConfig]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def consumer_for(self, group_id: str) -> ConsumerConfig:
        """The consumer-protocol settings of one group: the broker's, with the group's consumer.* configs
        applied, as GroupMetadataManager reads its session timeout, heartbeat interval and assignment
        interval per group."""
        overrides = self.group_overrides(group_id)
        if not overrides:
            if self._consumer_of:
                self._consumer_of.pop(group_id, None)
            return self.consumer
        cached = self._consumer_of.get(group_id)
        if cached is not None and cached[0] is overrides:
            return cached[1]
        base = self.consumer
        config = base
        if any(key.startswith("consumer.") for key in overrides):
            config = replace(
                base,
                session_timeout_ms=int(overrides.get("consumer.session.timeout.ms", base.session_timeout_ms)),
                heartbeat_interval_ms=int(overrides.get("consumer.heartbeat.interval.ms", base.heartbeat_interval_ms)),
                assignment_interval_ms=int(
                    overrides.get("consumer.assignment.interval.ms", base.assignment_interval_ms)
                ),
            )
        self._consumer_of[group_id] = (overrides, config)
        return config

    @classmethod
    def from_broker_config(cls, config: Any) -> GroupConfig:
        return cls(
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            max_size=config["group.max.size"],
            offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
            offset_metadata_max_bytes=config["offset.metadata.max.bytes"],
            consumer=ConsumerConfig.from_broker_config(config),
        )
