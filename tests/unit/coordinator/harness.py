"""A manual-clock driver for the pure coordinator core: it plays the shell's part (timers, tokens,
replay of durable records) so tests read like the spec's scenarios."""

from __future__ import annotations

import itertools
from typing import Any

from coordinator import shard
from coordinator.api import (
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
from coordinator.group import Group

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


class Core:
    """State + clock + timers + answered tokens for one offsets partition."""

    def __init__(self, **cfg: Any) -> None:
        ids = itertools.count(1)
        extra = {"member_id_factory": lambda: f"u{next(ids)}"}
        self.cfg = GroupConfig(extra=extra, **cfg)
        self.state = shard.ShardState(0)
        self.now = 0
        self.timers: dict[tuple[Any, ...], int] = {}
        self.answers: dict[int, Any] = {}
        self.log: list[tuple[Any, Any]] = []
        self.results: list[Result] = []
        self._tokens = itertools.count(1)
        self.fail_next_write: int | None = None

    # ------------------------------------------------------------ plumbing

    def token(self) -> int:
        return next(self._tokens)

    def apply(self, r: Result) -> Result:
        self.results.append(r)
        for op in r.timers:
            if op.deadline_ms is None:
                self.timers.pop(op.key, None)
            else:
                self.timers[op.key] = op.deadline_ms
        if (r.records or r.marker is not None) and self.fail_next_write is not None:
            err, self.fail_next_write = self.fail_next_write, None
            return self.apply(shard.on_write_failed(self.state, r.write_ref, err, self.now, self.cfg))
        self.log.extend(r.records)
        if r.marker is not None:
            self.log.append(("marker", r.marker))
        if r.replay:
            shard.replay_result(self.state, r, self.now)
        for tok, payload in r.responses:
            assert tok not in self.answers, f"token {tok} answered twice"
            self.answers[tok] = payload
        return r

    def advance(self, to: int) -> None:
        """Move the clock to ``to``, firing every due timer in deadline order."""
        for _ in range(10_000):
            due = [(d, k) for k, d in self.timers.items() if d <= to]
            if not due:
                break
            d, k = min(due, key=lambda x: x[0])
            del self.timers[k]
            self.now = max(self.now, d)
            self.apply(shard.on_timer(self.state, k, self.now, self.cfg))
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
        tok = self.token()
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
        self.apply(shard.join_group(self.state, req, tok, self.now, self.cfg))
        return tok

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
        tok = self.token()
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
        self.apply(shard.sync_group(self.state, req, tok, self.now, self.cfg))
        return tok

    def heartbeat(
        self, member_id: str, generation: int, group: str = "g", instance: str | None = None
    ) -> int:
        tok = self.token()
        req = Heartbeat(group, generation, member_id, instance, 3)
        self.apply(shard.heartbeat(self.state, req, tok, self.now, self.cfg))
        return self.answers[tok].error

    def leave(self, *members: tuple[str, str | None], group: str = "g", version: int = 3) -> Any:
        tok = self.token()
        req = LeaveGroup(group, tuple(LeavingMember(m, i) for m, i in members), version)
        self.apply(shard.leave_group(self.state, req, tok, self.now, self.cfg))
        return self.answers[tok]

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
        tok = self.token()
        cps = tuple(
            CommitPartition(p[0], p[1], p[2], leader_epoch, p[3] if len(p) > 3 else "")  # type: ignore[misc]
            for p in parts
        )
        req = OffsetCommit(group, generation, member_id, instance, retention, cps, version)
        self.apply(shard.offset_commit(self.state, req, tok, self.now, self.cfg))
        return self.answers[tok]

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
        tok = self.token()
        cps = tuple(CommitPartition(p[0], p[1], p[2], -1, p[3] if len(p) > 3 else "") for p in parts)  # type: ignore[misc]
        req = TxnOffsetCommit("tx", group, producer, epoch, generation, member_id, instance, cps, version)
        self.apply(shard.txn_offset_commit(self.state, req, tok, self.now, self.cfg))
        return self.answers[tok]

    def end_txn(self, producer: int = 1000, commit: bool = True, epoch: int = 0) -> Any:
        tok = self.token()
        self.apply(shard.end_transaction(self.state, EndTxnMarker(producer, epoch, commit), tok, self.now, self.cfg))
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
