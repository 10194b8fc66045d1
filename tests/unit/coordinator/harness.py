"""A manual-clock driver of the real coordinator runtime (groupd/coordinator/runtime/runtime.py) over the pure
rules: tokens, timers, ordered delivery and replay are the runtime's own, with an in-memory log and a
clock the test moves, so tests read like the spec's scenarios."""

from __future__ import annotations

import itertools
from typing import Any

from groupd.coordinator import shard
from groupd.coordinator.api import (
    CommitPartition,
    EndTxnMarker,
    GroupConfig,
    Heartbeat,
    JoinGroup,
    JoinGroupResponse,
    LeaveGroup,
    LeavingMember,
    OffsetCommit,
    OffsetFetch,
    Protocol,
    Result,
    SyncAssignment,
    SyncGroup,
    TxnOffsetCommit,
)
from groupd.coordinator.group import Group
from groupd.coordinator.runtime.runtime import CoordinatorRuntime, Shard, WriteFailed
from groupd.protocol.topic_names import OFFSETS_TOPIC

RANGE = (Protocol("range", b"range-meta"),)


def subscription(*topics: str, user_data: bytes | None = None) -> bytes:
    """ConsumerProtocolSubscription v0 bytes (int16 version, topics, nullable user data)."""
    out = bytearray((0).to_bytes(2, "big"))
    out += len(topics).to_bytes(4, "big")
    for t in topics:
        b = t.encode()
        out += len(b).to_bytes(2, "big") + b
    out += (
        (-1).to_bytes(4, "big", signed=True)
        if user_data is None
        else len(user_data).to_bytes(4, "big") + user_data
    )
    return bytes(out)


class _Answer:
    """The waiter of one token: its payload lands in ``core.answers``; a refusal (a write never made
    durable and not answered by the rules) in ``core.refused``, leaving the token unanswered."""

    __slots__ = ("core", "token", "called", "outcome")

    def __init__(self, core: Core) -> None:
        self.core, self.token, self.called = core, 0, False
        self.outcome: tuple[bool, Any] | None = None

    def done(self) -> bool:
        return self.called

    def set_result(self, payload: Any) -> None:
        self.called = True
        self._file(True, payload)

    def set_exception(self, error: BaseException) -> None:
        self.called = True
        self._file(False, error)

    def _file(self, answered: bool, value: Any) -> None:
        """An answer may come before ``run`` returns the token (no write to wait for): kept until then."""
        if not self.token:
            self.outcome = (answered, value)
        elif answered:
            self.core.answers[self.token] = value
        else:
            self.core.refused[self.token] = value

    def learn_token(self, token: int) -> int:
        self.token = token
        if self.outcome is not None:
            self._file(*self.outcome)
        return token


class _MemoryLog:
    """The runtime's LogPort in memory: records land in ``core.log`` and are durable at once, unless
    ``core.fail_next_write`` names the error code the next write fails with."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def append(self, shard: Shard, result: Result) -> None:
        core = self.core
        if core.fail_next_write is not None:
            code, core.fail_next_write = core.fail_next_write, None
            raise WriteFailed("failed by the test", code)
        core.log.extend(result.records)
        if result.marker is not None:
            core.log.append(("marker", result.marker))
        core.appended(result)

    def when_durable(self, shard: Shard, done: Any) -> bool:
        return False


class _ManualWakeups:
    """No event loop: ``Core.advance`` moves the clock and fires what is due."""

    def soon(self, shard: Shard) -> None:
        pass

    def at(self, shard: Shard, delay_ms: int) -> None:
        pass

    def cancel(self, shard: Shard) -> None:
        pass


class Core:
    """The real coordinator runtime over one offsets partition, with a manual clock and an in-memory
    log: requests go through ``CoordinatorRuntime.run`` as the broker's do, timers through its heap."""

    def __init__(self, **cfg: Any) -> None:
        ids = itertools.count(1)
        extra = {"member_id_factory": lambda: f"u{next(ids)}"}
        self.cfg = GroupConfig(extra=extra, **cfg)
        self.now = 0
        self.answers: dict[int, Any] = {}
        self.refused: dict[int, BaseException] = {}
        self.log: list[tuple[Any, Any]] = []
        self.results: list[Result] = []
        self.fail_next_write: int | None = None
        self.runtime = CoordinatorRuntime(
            OFFSETS_TOPIC, shard.GroupShardRules(self.cfg), _MemoryLog(self), _ManualWakeups(),
            lambda: self.now, context=self.cfg,
        )
        self.runtime.on_result = self._seen
        self.shard = self.runtime.add_shard(0)
        self.shard.loaded = True
        self.state: shard.ShardState = self.shard.state

    # ------------------------------------------------------------ plumbing

    def _seen(self, r: Result) -> None:
        for tok, _payload in r.responses:
            assert tok not in self.answers, f"token {tok} answered twice"
        self.results.append(r)

    def token(self) -> int:
        """A token for a request the test hands to the rules itself (then ``apply`` their Result)."""
        waiter = _Answer(self)
        return waiter.learn_token(self.runtime.new_token(waiter))

    def run(self, handler: Any, request: Any, group: str) -> int:
        """A request through the runtime, as the broker's go: its token is the runtime's."""
        waiter = _Answer(self)
        return waiter.learn_token(self.runtime.run(self.shard, group, handler, request, waiter))

    def appended(self, r: Result) -> None:
        """Called for each Result whose records were written (a subclass may store them too)."""

    def expire(self) -> Result:
        """One retention check, run by the runtime as the broker's housekeeping runs it."""
        return self.runtime.run_task(self.shard, "", lambda state, now: shard.expire_offsets(state, now, self.cfg))

    def apply(self, r: Result) -> Result:
        self.runtime.process(self.shard, r)
        return r

    @property
    def timers(self) -> dict[tuple[Any, ...], int]:
        """Live timers: key -> deadline (ms)."""
        return {key: entry >> 64 for key, entry in self.shard.deadlines.items()}

    def advance(self, to: int) -> None:
        """Move the clock to ``to``, firing every due timer in deadline order."""
        for _ in range(10_000):
            deadline = self.runtime.next_deadline(self.shard)
            if deadline is None or deadline > to:
                break
            self.now = max(self.now, deadline)
            self.runtime.fire_due(self.shard, self.now)
        else:  # pragma: no cover
            raise AssertionError("timer loop did not settle")
        self.now = to

    def finish_join(self, group: str = "g") -> None:
        """Advance the clock through the join phase's timer(s) until the phase ends."""
        for _ in range(100):
            deadline = self.timers.get(("join", group))
            if deadline is None:
                return
            self.advance(deadline)
        raise AssertionError("join phase did not end")  # pragma: no cover

    def group(self, gid: str = "g") -> Group:
        return self.state.groups[gid]

    # ------------------------------------------------------------ requests

    def join(
        self,
        member_id: str = "",
        group: str = "g",
        instance: str | None = None,
        session: int = 10_000,
        rebalance: int | None = 30_000,
        protocols: tuple[Protocol, ...] = RANGE,
        ptype: str = "consumer",
        version: int = 5,
        client: str = "c",
    ) -> int:
        req = JoinGroup(
            group_id=group,
            member_id=member_id,
            group_instance_id=instance,
            session_timeout_ms=session,
            rebalance_timeout_ms=session if rebalance is None else rebalance,
            protocol_type=ptype,
            protocols=protocols,
            client_id=client,
            client_host="/127.0.0.1",
            version=version,
        )
        return self.run(shard.join_group, req, group)

    def new_member(self, group: str = "g", **kw: Any) -> tuple[str, int]:
        """A v4+ dynamic join including the MEMBER_ID_REQUIRED round trip: (member id, parked token)."""
        first = self.join(group=group, **kw)
        resp = self.answers[first]
        assert resp.error == 79, resp
        tok = self.join(member_id=resp.member_id, group=group, **kw)
        return resp.member_id, tok

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        group: str = "g",
        instance: str | None = None,
        version: int = 3,
        ptype: str | None = None,
        pname: str | None = None,
    ) -> int:
        req = SyncGroup(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
            protocol_type=ptype,
            protocol_name=pname,
            assignments=tuple(SyncAssignment(k, v) for k, v in (assignments or {}).items()),
            version=version,
        )
        return self.run(shard.sync_group, req, group)

    def heartbeat(
        self, member_id: str, generation: int, group: str = "g", instance: str | None = None
    ) -> int:
        tok = self.run(shard.heartbeat, Heartbeat(group, generation, member_id, instance, 3), group)
        return self.answers[tok].error

    def leave(self, *members: tuple[str, str | None], group: str = "g", version: int = 3) -> Any:
        req = LeaveGroup(group, tuple(LeavingMember(m, i) for m, i in members), version)
        return self.answers[self.run(shard.leave_group, req, group)]

    def commit(
        self,
        *parts: tuple[str, int, int] | tuple[str, int, int, str | None],
        group: str = "g",
        generation: int = -1,
        member_id: str = "",
        instance: str | None = None,
        retention: int = -1,
        version: int = 8,
        leader_epoch: int = -1,
    ) -> Any:
        cps = tuple(
            CommitPartition(p[0], p[1], p[2], leader_epoch, p[3] if len(p) > 3 else "")  # type: ignore[misc]
            for p in parts
        )
        req = OffsetCommit(group, generation, member_id, instance, retention, cps, version)
        return self.answers[self.run(shard.offset_commit, req, group)]

    def txn_commit(
        self,
        *parts: tuple[str, int, int] | tuple[str, int, int, str | None],
        producer: int = 1000,
        epoch: int = 0,
        group: str = "g",
        generation: int = -1,
        member_id: str = "",
        instance: str | None = None,
        version: int = 3,
    ) -> Any:
        cps = tuple(CommitPartition(p[0], p[1], p[2], -1, p[3] if len(p) > 3 else "") for p in parts)  # type: ignore[misc]
        req = TxnOffsetCommit("tx", group, producer, epoch, generation, member_id, instance, cps, version)
        return self.answers[self.run(shard.txn_offset_commit, req, group)]

    def end_txn(self, producer: int = 1000, commit: bool = True, epoch: int = 0) -> Any:
        tok = self.run(shard.end_transaction, EndTxnMarker(producer, epoch, commit), "")
        return self.answers.get(tok, "unanswered")

    def fetch(
        self, group: str = "g", topics: dict[str, tuple[int, ...]] | None = None, version: int = 8,
        require_stable: bool = False,
    ) -> Any:
        req = OffsetFetch(group, None if topics is None else tuple(topics.items()), require_stable, version)
        return shard.offset_fetch(self.state, req, self.now)

    def stable_group(self, n: int = 2, group: str = "g", **kw: Any) -> list[str]:
        """n members joined at t=now with the initial delay, synced by the leader: a Stable generation."""
        ids = []
        toks = []
        for _ in range(n):
            mid, tok = self.new_member(group=group, **kw)
            ids.append(mid)
            toks.append(tok)
        self.finish_join(group)
        resp = self.answers[toks[0]]
        assert resp.error == 0 and resp.leader == ids[0], resp
        gen = resp.generation_id
        for mid in ids[1:]:
            self.sync(mid, gen, group=group)
        self.sync(ids[0], gen, {m: m.encode() for m in ids}, group=group)
        assert self.state.groups[group].state == "Stable"
        return ids


def is_join(payload: Any, error: int) -> bool:
    return isinstance(payload, JoinGroupResponse) and payload.error == error
