"""A shard answers in the order its core decided, whatever each answer waits for.

Each Result whose records were appended waits for its flush round; one without records waits only for
the Results before it. Rounds are released here by hand, out of order and with failures, through the
committer's ``when_durable`` callbacks (the syncfs helper calls them the same way)."""

import asyncio

from groupd.broker.config import default_config
from groupd.coordinator import errors as E
from groupd.coordinator import shard as core
from groupd.coordinator.api import CommitPartition, Heartbeat, OffsetCommit
from groupd.coordinator.service import GroupCoordinator
from groupd.storage.errors import StorageError
from groupd.storage.local import LocalEngine


def commit(group: str, offset: int) -> OffsetCommit:
    return OffsetCommit(group, -1, "", None, -1, (CommitPartition("t", 0, offset, -1, ""),), 8)


async def started(tmp_path) -> tuple[GroupCoordinator, list]:
    c = GroupCoordinator(
        default_config(**{"log.dirs": str(tmp_path), "offsets.topic.num.partitions": "1"}), LocalEngine(tmp_path)
    )
    await c.start()
    while not c.is_loaded():
        await asyncio.sleep(0.01)
    held: list = []

    def hold(log, callback) -> bool:
        held.append(callback)
        return True

    c.committer.when_durable = hold  # type: ignore[method-assign]
    return c, held


async def test_answers_leave_in_the_cores_order_when_rounds_end_out_of_order(tmp_path):
    c, held = await started(tmp_path)
    try:
        first = asyncio.ensure_future(c.call("g", core.offset_commit, commit("g", 1)))
        beat = asyncio.ensure_future(c.call("g", core.heartbeat, Heartbeat("g", 1, "nobody", None, 4)))
        second = asyncio.ensure_future(c.call("g", core.offset_commit, commit("g", 2)))
        await asyncio.sleep(0.01)
        assert len(held) == 2 and not (first.done() or beat.done() or second.done())
        held[1](None)  # the second commit's round ends first: it still waits for the first
        await asyncio.sleep(0.01)
        assert not (first.done() or beat.done() or second.done())
        held[0](None)
        await asyncio.sleep(0.01)
        assert [p.error for p in first.result().partitions] == [E.NONE]
        assert beat.result().error == E.UNKNOWN_MEMBER_ID  # no record, yet answered after the commit before it
        assert [p.error for p in second.result().partitions] == [E.NONE]
        assert c.shards[0].state.offsets.of("g")["t"][0].offset == 2
        assert not c.shards[0].queue
    finally:
        await c.stop()


async def test_a_failed_round_fails_its_own_answers_only(tmp_path):
    c, held = await started(tmp_path)
    try:
        first = asyncio.ensure_future(c.call("g", core.offset_commit, commit("g", 1)))
        second = asyncio.ensure_future(c.call("g", core.offset_commit, commit("g", 2)))
        await asyncio.sleep(0.01)
        held[0](StorageError("syncfs failed: [Errno 5] Input/output error"))
        held[1](None)
        await asyncio.sleep(0.01)
        assert [p.error for p in first.result().partitions] != [E.NONE]  # never acknowledged
        assert [p.error for p in second.result().partitions] == [E.NONE]
        assert c.shards[0].state.offsets.of("g")["t"][0].offset == 2
    finally:
        await c.stop()


async def test_a_waiter_that_raises_does_not_stop_the_shard(tmp_path, monkeypatch):
    c, held = await started(tmp_path)
    try:
        first = asyncio.ensure_future(c.call("g", core.offset_commit, commit("g", 1)))
        second = asyncio.ensure_future(c.call("g", core.offset_commit, commit("g", 2)))
        await asyncio.sleep(0.01)
        real = c.runtime._settled
        calls = []

        def flaky(shard, done):
            calls.append(done.result)
            if len(calls) == 1:
                raise RuntimeError("boom")
            real(shard, done)

        monkeypatch.setattr(c.runtime, "_settled", flaky)
        held[0](None)
        held[1](None)
        await asyncio.sleep(0.01)
        assert len(calls) == 2 and second.done() and not c.shards[0].queue
        first.cancel()  # its answer was lost with the exception (logged); the connection would time out
    finally:
        await c.stop()


async def test_callbacks_are_answered_in_the_cores_order_too(tmp_path):
    """call_then (commits and heartbeats): no future, the payload goes to a callback from the delivery."""
    c, held = await started(tmp_path)
    heard: list = []
    try:
        c.call_then("g", core.offset_commit, commit("g", 1), lambda p, e: heard.append(("first", p, e)))
        c.call_then(
            "g", core.heartbeat, Heartbeat("g", 1, "nobody", None, 4), lambda p, e: heard.append(("beat", p, e))
        )
        c.call_then("g", core.offset_commit, commit("g", 2), lambda p, e: heard.append(("second", p, e)))
        assert heard == [] and len(held) == 2
        held[1](None)
        assert heard == []  # the second commit waits for the first
        held[0](StorageError("syncfs failed: [Errno 5] Input/output error"))
        assert [name for name, _, _ in heard] == ["first", "beat", "second"]
        first, beat, second = heard
        assert first[2] is None and [p.error for p in first[1].partitions] != [E.NONE]  # never acknowledged
        assert beat[1].error == E.UNKNOWN_MEMBER_ID and beat[2] is None
        assert [p.error for p in second[1].partitions] == [E.NONE]
        # nothing queued: a heartbeat's answer comes before call_then returns
        c.call_then("g", core.heartbeat, Heartbeat("g", 1, "nobody", None, 4), lambda p, e: heard.append(("now", p, e)))
        assert heard[-1][0] == "now"
    finally:
        await c.stop()
