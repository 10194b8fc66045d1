"""Logs that explain a rebalance (issue 30): why it began (who joined, who left, whose session expired and
after how long, whose metadata changed), the generation before and after; a refused join names its error;
the first join's MEMBER_ID_REQUIRED is an ordinary step, not an error."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging

from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from tests.harness import WireClient
from tests.wire.test_groups import join_body, join_with_id, start_broker, sync_body


def lines(caplog) -> list[str]:
    out = []
    for r in caplog.records:
        if r.name != "groupd.coordinator":
            continue
        fields = getattr(r, "fields", {}) or {}
        out.append(r.getMessage() + " " + " ".join(f"{k}={v}" for k, v in fields.items()))
    return out


def leave_body(member_id, group="g"):
    cls = codec.request_class(13, 3)
    m = codec.nested(cls, "MemberIdentity")
    return codec.make(cls, group_id=group, members=(m(member_id=member_id, group_instance_id=None),))


async def form(client, member_id, generation_hint=None):
    joined = await client.call(11, 5, join_body(5, member_id))
    assert joined.error_code == ErrorCode.none
    synced = await client.call(14, 3, sync_body(3, member_id, joined.generation_id, [(member_id, b"")]))
    assert synced.error_code == ErrorCode.none
    return joined.generation_id


async def test_rebalance_reasons_generations_and_error_names(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="groupd.coordinator")
    b = await start_broker(tmp_path, **{"group.min.session.timeout.ms": "100"})
    try:
        a = await WireClient.connect(b.port)
        first = await join_with_id(a)
        assert await form(a, first) == 1
        text = "\n".join(lines(caplog))
        assert "error=79" not in text and "error=MEMBER_ID_REQUIRED" not in text, (
            "the first join's MEMBER_ID_REQUIRED is not an error"
        )
        assert f"new member {first} is given its id and joins again" in text
        assert f"member {first} joined" in text and "generation_before=0" in text
        assert "PreparingRebalance -> CompletingRebalance" in text
        assert "-> Stable" in text and "generation=1" in text

        caplog.clear()
        c = await WireClient.connect(b.port)
        second = await join_with_id(c)
        pending = asyncio.ensure_future(c.call(11, 5, join_body(5, second)))
        await asyncio.sleep(0.2)
        text = "\n".join(lines(caplog))
        assert f"Stable -> PreparingRebalance: member {second} joined" in text, text
        assert "cause=join" in text and "generation_before=1" in text
        rejoined = await a.call(11, 5, join_body(5, first))
        assert (await pending).generation_id == rejoined.generation_id == 2

        caplog.clear()
        left = await c.call(13, 3, leave_body(second))
        assert left.error_code == ErrorCode.none
        await asyncio.sleep(0.05)
        text = "\n".join(lines(caplog))
        assert (
            f"member {second} left the group (LeaveGroup)" in text
            and "cause=leave" in text
            and "generation_before=2" in text
        ), text

        caplog.clear()
        bad = dataclasses.replace(join_body(5), session_timeout=datetime.timedelta(milliseconds=10))
        refused = await c.call(11, 5, bad)
        assert refused.error_code == ErrorCode.invalid_session_timeout
        await asyncio.sleep(0.05)
        assert any("error=INVALID_SESSION_TIMEOUT" in line for line in lines(caplog)), lines(caplog)
    finally:
        await b.stop()


async def test_session_expiry_names_the_member_and_how_long(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="groupd.coordinator")
    b = await start_broker(tmp_path, **{"group.min.session.timeout.ms": "100"})
    try:
        a, c = await WireClient.connect(b.port), await WireClient.connect(b.port)
        first = await join_with_id(a)
        await form(a, first)
        second = await join_with_id(c)
        short = dataclasses.replace(join_body(5, second), session_timeout=datetime.timedelta(milliseconds=300))
        parked = asyncio.ensure_future(c.call(11, 5, short))
        await asyncio.sleep(0.1)
        joined = await a.call(11, 5, join_body(5, first))
        other = await parked
        assert joined.generation_id == other.generation_id == 2
        await a.call(14, 3, sync_body(3, first, 2, [(first, b""), (second, b"")]))
        await c.call(14, 3, sync_body(3, second, 2))
        caplog.clear()
        await asyncio.sleep(1.0)  # `second` sends no heartbeat: its 300 ms session expires
        text = "\n".join(lines(caplog))
        assert (
            f"member {second} session expired: no heartbeat for " in text and "ms (session.timeout.ms=300)" in text
        ), text
        assert "cause=session_expiry" in text and "generation_before=2" in text
    finally:
        await b.stop()
