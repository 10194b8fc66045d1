"""The coordinator runtime on its own, through its ports: rules of a toy shard, a log whose rounds end
when the test says, and wake-ups the test fires. What it promises any rules: answers leave in the order
the rules made them and only once durable; a failed write is mapped by the rules, never acknowledged;
timers fire in deadline order, moved ones once, cancelled ones never."""

from __future__ import annotations

from typing import Any

from groupd.coordinator import errors as E
from groupd.coordinator.api import Result, TimerOp
from groupd.coordinator.runtime.runtime import (
    FAILED_WRITE_LOG_EVERY_MS,
    CoordinatorError,
    CoordinatorRuntime,
    Shard,
    Then,
    WriteFailed,
)


class Truncate:
    """The toy rules' snapshot: the list as long as it was."""

    subject = None

    def __init__(self, state: list[Any]) -> None:
        self.state, self.length = state, len(state)

    def restore(self) -> None:
        del self.state[self.length:]


class Counter:
    """Toy rules: the state is a list of the values replayed; timers record their firing."""

    def __init__(self) -> None:
        self.fired: list[tuple[tuple[Any, ...], int]] = []
        self.failures: list[tuple[Any, int]] = []
        self.snapshots: dict[type, Any] = {}  # every request goes to snapshot()

    def new_state(self, partition: int) -> list[Any]:
        return []

    def on_timer(self, state: list[Any], key: tuple[Any, ...], now: int) -> Result:
        self.fired.append((key, now))
        return Result()

    def snapshot(self, state: list[Any], subject: str, request: object) -> Truncate:
        return Truncate(state)

    def on_write_failed(self, state: list[Any], write_ref: Any, error: int, now: int) -> Result:
        self.failures.append((write_ref, error))
        return Result(responses=((write_ref, ("failed", error)),), replay=False)

    def replay(self, state: list[Any], result: Result, now: int) -> None:
        state.extend(value for _key, value in result.records)

    def timer_subject(self, key: tuple[Any, ...]) -> str | None:
        return None


class HeldLog:
    """Appends are remembered; each waits for the test to end its round."""

    def __init__(self) -> None:
        self.appended: list[Result] = []
        self.rounds: list[Any] = []
        self.fail_append: int | None = None

    def append(self, shard: Shard, result: Result) -> None:
        if self.fail_append is not None:
            raise WriteFailed("disk full", self.fail_append)
        self.appended.append(result)

    def when_durable(self, shard: Shard, done: Any) -> bool:
        self.rounds.append(done)
        return True


class Wakeups:
    def __init__(self) -> None:
        self.armed: dict[int, int] = {}
        self.soon_for: list[int] = []

    def soon(self, shard: Shard) -> None:
        self.soon_for.append(shard.partition)

    def at(self, shard: Shard, delay_ms: int) -> None:
        self.armed[shard.partition] = delay_ms

    def cancel(self, shard: Shard) -> None:
        self.armed.pop(shard.partition, None)


def write(value: Any, answer: Any) -> Any:
    def handler(state: list[Any], request: Any, token: int, now: int, context: Any) -> Result:
        if value is None:
            return Result(responses=((token, answer),))
        return Result(records=((("k",), value),), responses=((token, answer),), write_ref=token)

    return handler


def runtime() -> tuple[CoordinatorRuntime, Shard, Counter, HeldLog, Wakeups, list[int]]:
    clock = [1_000]
    rules, port, wakeups = Counter(), HeldLog(), Wakeups()
    rt = CoordinatorRuntime("__toy", rules, port, wakeups, lambda: clock[0])
    return rt, rt.add_shard(0), rules, port, wakeups, clock


def test_answers_wait_for_their_round_and_for_every_earlier_answer():
    rt, shard, _, port, _, _ = runtime()
    heard: list[Any] = []
    rt.run(shard, "g", write(1, "first"), None, Then(lambda p, e: heard.append(p)))
    rt.run(shard, "g", write(None, "read"), None, Then(lambda p, e: heard.append(p)))  # no record
    rt.run(shard, "g", write(2, "second"), None, Then(lambda p, e: heard.append(p)))
    assert heard == [] and len(port.rounds) == 2
    port.rounds[1](None)  # the second write is durable first: it still waits
    assert heard == [] and shard.state == []
    port.rounds[0](None)
    assert heard == ["first", "read", "second"] and shard.state == [1, 2] and not shard.queue


def test_a_failed_round_is_mapped_by_the_rules_and_never_acknowledged():
    rt, shard, rules, port, _, _ = runtime()
    heard: list[Any] = []
    token = rt.run(shard, "g", write(1, "ok"), None, Then(lambda p, e: heard.append((p, e))))
    port.rounds[0](WriteFailed("fsync failed", E.NOT_COORDINATOR))
    assert rules.failures == [(token, E.NOT_COORDINATOR)]
    assert heard == [(("failed", E.NOT_COORDINATOR), None)] and shard.state == []


def test_an_append_that_fails_answers_unmapped_tokens_with_a_storage_error():
    rt, shard, _, port, _, _ = runtime()
    port.fail_append = E.KAFKA_STORAGE_ERROR
    heard: list[Any] = []

    def two_answers(state: list[Any], request: Any, token: int, now: int, context: Any) -> Result:
        other = rt.new_token(Then(lambda p, e: heard.append(("other", p, e))))
        return Result(records=((("k",), 1),), responses=((token, "mine"), (other, "theirs")), write_ref=token)

    rt.run(shard, "g", two_answers, None, Then(lambda p, e: heard.append(("mine", p, e))))
    assert heard[0] == ("mine", ("failed", E.KAFKA_STORAGE_ERROR), None)
    assert heard[1][0] == "other" and isinstance(heard[1][2], CoordinatorError)
    assert heard[1][2].code == E.KAFKA_STORAGE_ERROR
    assert rt.waiting() == 0


def test_timers_fire_in_deadline_order_moved_once_cancelled_never():
    rt, shard, rules, _, wakeups, clock = runtime()
    rt.apply_timers(shard, [TimerOp(("a",), 1_050), TimerOp(("b",), 1_020), TimerOp(("c",), 1_030)])
    assert wakeups.armed == {0: 20} and shard.wakeup_at == 1_020
    rt.apply_timers(shard, [TimerOp(("a",), 1_010), TimerOp(("c",), None)])  # a moved earlier, c cancelled
    assert wakeups.armed == {0: 10}
    clock[0] = 1_025
    rt.wake(shard)
    assert rules.fired == [(("a",), 1_025), (("b",), 1_025)] and rt.next_deadline(shard) is None


def test_a_due_timer_waits_for_the_next_turn_and_keeps_the_armed_wakeup():
    rt, shard, rules, _, wakeups, _ = runtime()
    rt.apply_timers(shard, [TimerOp(("later",), 5_000)])
    rt.apply_timers(shard, [TimerOp(("now",), 1_000), TimerOp(("past",), 999)])
    assert rules.fired == [] and wakeups.soon_for == [0] and shard.wakeup_at == 5_000
    rt.wake_soon(shard)
    assert [key for key, _ in rules.fired] == [("past",), ("now",)] and shard.wakeup_at == 5_000


def applied_at_once(value: Any, timer: TimerOp | None = None) -> Any:
    """A handler whose record changes the state when made (as consumer records do), moving a timer."""

    def handler(state: list[Any], request: Any, token: int, now: int, context: Any) -> Result:
        state.append(value)
        return Result(
            records=((("k",), value),),
            responses=((token, "ok"),),
            timers=(timer,) if timer else (),
            write_ref=token,
            replay=False,
        )

    return handler


def test_a_failed_append_restores_the_rules_snapshot_and_the_timers_it_moved():
    rt, shard, rules, port, _, _ = runtime()
    rt.apply_timers(shard, (TimerOp(("t",), 5_000),))
    port.fail_append = E.KAFKA_STORAGE_ERROR
    heard: list[Any] = []
    rt.run(shard, "g", applied_at_once(1, TimerOp(("t",), 9_000)), None, Then(lambda p, e: heard.append(p)))
    rt.run(shard, "g", applied_at_once(2, TimerOp(("u",), 9_000)), None, Then(lambda p, e: heard.append(p)))
    assert shard.state == [] and rt.next_deadline(shard) == 5_000 and set(shard.deadlines) == {("t",)}
    assert heard == [("failed", E.KAFKA_STORAGE_ERROR)] * 2


def test_a_failed_round_is_rolled_back_with_the_failed_writes_behind_it():
    """A write whose round failed waits for the later rounds of its subject: if they fail too, every one
    is rolled back, newest first (the state as before the first, as Kafka reverts to the snapshot
    before a failed batch); answers go out in order all the same."""
    rt, shard, _, port, _, _ = runtime()
    heard: list[Any] = []
    rt.run(shard, "g", applied_at_once(1), None, Then(lambda p, e: heard.append(p)))
    port.rounds[0](WriteFailed("fsync failed", E.NOT_COORDINATOR))
    assert shard.state == []
    rt.run(shard, "g", applied_at_once(2), None, Then(lambda p, e: heard.append(p)))
    rt.run(shard, "g", applied_at_once(3), None, Then(lambda p, e: heard.append(p)))
    port.rounds[1](WriteFailed("fsync failed", E.NOT_COORDINATOR))
    assert shard.state == [2, 3] and len(heard) == 1  # 2 waits: restoring before it now would erase 3
    port.rounds[2](WriteFailed("fsync failed", E.NOT_COORDINATOR))
    assert shard.state == [] and heard == [("failed", E.NOT_COORDINATOR)] * 3


def test_a_failed_write_under_a_durable_later_write_of_its_subject_is_not_rolled_back():
    """A later write of the same subject made durable: restoring the failed one's snapshot would erase
    the durable one's state, so the failed write is only answered (Kafka never has a durable write on
    top of a failed one: its appends are made in order and a failed one fails what follows)."""
    rt, shard, _, port, _, _ = runtime()
    rt.run(shard, "g", applied_at_once(2), None, Then(lambda p, e: None))
    rt.run(shard, "g", applied_at_once(3), None, Then(lambda p, e: None))
    port.rounds[0](WriteFailed("fsync failed", E.NOT_COORDINATOR))
    port.rounds[1](None)
    assert shard.state == [2, 3] and not shard.queue


def test_failed_writes_are_logged_once_per_interval_per_shard(caplog):
    """A full disk refuses every commit of a round, each a Result of its own: one ERROR line per shard
    per FAILED_WRITE_LOG_EVERY_MS, the next one counting those held back, never a line per request."""
    rt, shard, _, port, _, clock = runtime()
    caplog.set_level("ERROR", logger="groupd")
    for _ in range(5):
        rt.run(shard, "g", write(1, "ok"), None, Then(lambda p, e: None))
    for done in list(port.rounds):
        done(WriteFailed("no room", E.NOT_COORDINATOR))
    lines = [r.getMessage() for r in caplog.records if "write of __toy-0 failed" in r.getMessage()]
    assert lines == ["write of __toy-0 failed: no room"]
    clock[0] += FAILED_WRITE_LOG_EVERY_MS
    rt.run(shard, "g", write(1, "ok"), None, Then(lambda p, e: None))
    port.rounds[-1](WriteFailed("no room", E.NOT_COORDINATOR))
    lines = [r.getMessage() for r in caplog.records if "write of __toy-0 failed" in r.getMessage()]
    assert lines[1:] == ["write of __toy-0 failed: no room (4 more since the last such line)"]
