"""The shell's timer heap: moved deadlines fire once at their latest value, cancelled ones never, and
the single event-loop wake-up always follows the earliest live deadline."""

import asyncio

from groupd.broker.config import default_config
from groupd.clock import wall_ms
from groupd.coordinator.api import TimerOp
from groupd.coordinator.service import GroupCoordinator
from groupd.storage.local import LocalEngine


async def started(tmp_path):
    c = GroupCoordinator(
        default_config(**{"log.dirs": str(tmp_path), "offsets.topic.num.partitions": "1"}), LocalEngine(tmp_path)
    )
    await c.start()
    fired: list[tuple[tuple, int]] = []
    c.runtime._fire = lambda shard, key, deadline: fired.append((key, deadline))  # the core is not under test
    return c, c.shards[0], fired


async def test_moved_cancelled_and_ordered(tmp_path):
    c, shard, fired = await started(tmp_path)
    now = wall_ms()
    for i in range(50):  # a member heartbeating: its session deadline moves on each time
        c.runtime.apply_timers(shard, [TimerOp(("hb", "g", "m1"), now + 40 + i)])
    c.runtime.apply_timers(shard, [TimerOp(("hb", "g", "m2"), now + 20), TimerOp(("join", "g"), now + 30)])
    c.runtime.apply_timers(shard, [TimerOp(("join", "g"), None)])  # cancelled
    await asyncio.sleep(0.2)
    assert fired == [(("hb", "g", "m2"), now + 20), (("hb", "g", "m1"), now + 89)]
    assert not shard.deadlines and shard.wakeup is None
    await c.stop()


async def test_an_earlier_deadline_rearms_the_wakeup(tmp_path):
    c, shard, fired = await started(tmp_path)
    now = wall_ms()
    c.runtime.apply_timers(shard, [TimerOp(("a",), now + 5_000)])
    c.runtime.apply_timers(shard, [TimerOp(("b",), now + 10)])
    assert shard.wakeup_at == now + 10
    await asyncio.sleep(0.1)
    assert fired == [(("b",), now + 10)] and shard.wakeup_at == now + 5_000
    await c.stop()


async def test_stale_entries_are_rebuilt_away(tmp_path):
    c, shard, _ = await started(tmp_path)
    now = wall_ms()
    for i in range(5_000):
        c.runtime.apply_timers(shard, [TimerOp(("hb", "g", "m"), now + 60_000 + i)])
    assert len(shard.heap) <= 2 * len(shard.deadlines) + 1025
    await c.stop()


async def test_a_due_deadline_fires_next_turn_and_leaves_the_armed_timer(tmp_path):
    """A 0 ms timer (initial join phase with delay 0) fires on the next loop turn, after what that turn
    already queued, without cancelling the later deadline's event-loop timer."""
    c, shard, fired = await started(tmp_path)
    now = wall_ms()
    c.runtime.apply_timers(shard, [TimerOp(("hb", "g", "m"), now + 5_000)])
    armed = shard.wakeup
    c.runtime.apply_timers(shard, [TimerOp(("join", "g"), now - 1), TimerOp(("join", "h"), now)])
    assert fired == [] and shard.wakeup is armed and shard.wakeup_at == now + 5_000
    c.runtime.apply_timers(shard, [TimerOp(("join", "k"), now)])  # one queued wake-up serves every due one
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert sorted(fired) == [(("join", "g"), now - 1), (("join", "h"), now), (("join", "k"), now)]
    assert shard.wakeup is armed and not shard.due_soon and list(shard.deadlines) == [("hb", "g", "m")]
    await c.stop()


async def test_a_moved_or_cancelled_timer_lets_go_of_its_old_key(tmp_path):
    """Heartbeats move a member's deadline thousands of times between collections: what the heap keeps
    for the old deadlines must be plain ints, or each would be a GC-tracked survivor (a rebalance left
    27 tracked tuples a group behind, and a gen-0 pass stalled every group in flight)."""
    import gc
    import sys

    c, shard, _ = await started(tmp_path)
    now = wall_ms()
    old = tuple(["hb", "g", "m"])  # built at run time: no constant shares it
    base = sys.getrefcount(old)
    c.runtime.apply_timers(shard, [TimerOp(old, now + 60_000)])
    assert sys.getrefcount(old) > base
    c.runtime.apply_timers(shard, [TimerOp(tuple(["hb", "g", "m"]), now + 60_001)])  # moved
    assert sys.getrefcount(old) == base
    cancelled = tuple(["join", "g"])
    base = sys.getrefcount(cancelled)
    c.runtime.apply_timers(shard, [TimerOp(cancelled, now + 30_000)])
    c.runtime.apply_timers(shard, [TimerOp(tuple(["join", "g"]), None)])
    assert sys.getrefcount(cancelled) == base
    assert shard.heap and not any(gc.is_tracked(entry) for entry in shard.heap)
    await c.stop()
