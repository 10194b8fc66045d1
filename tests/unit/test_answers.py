"""A handler's answer that waits: ``later_of`` and ``waits`` turn a coroutine or a future into a Later."""

from __future__ import annotations

import asyncio

from groupd.broker.dispatch import Later, later_of, waits


class Heard:
    """Stands for the connection: what the Later tells its listener."""

    def __init__(self, later: Later) -> None:
        self.answers: list[object] = []
        self.errors: list[BaseException] = []
        later.listener = self.heard

    def heard(self, later: Later) -> None:
        try:
            self.answers.append(later.answer())
        except BaseException as exc:  # noqa: BLE001  (a cancellation too)
            self.errors.append(exc)


async def test_a_coroutine_answer_settles_when_its_task_ends():
    gate = asyncio.get_running_loop().create_future()

    async def handler() -> str:
        return f"answer {await gate}"

    later = later_of(handler())
    heard = Heard(later)
    await asyncio.sleep(0)
    assert not later.done()
    gate.set_result(1)
    for _ in range(3):
        await asyncio.sleep(0)
    assert heard.answers == ["answer 1"]


async def test_a_future_answer_goes_through_then_without_a_task():
    future = asyncio.get_running_loop().create_future()
    later = later_of(future, lambda payload: f"built from {payload}")
    heard = Heard(later)
    future.set_result("payload")
    await asyncio.sleep(0)
    assert heard.answers == ["built from payload"]


async def test_a_failing_handler_reaches_the_connection_as_its_error():
    async def handler() -> str:
        raise ValueError("broken")

    heard = Heard(later_of(handler()))
    for _ in range(3):
        await asyncio.sleep(0)
    assert [type(e) for e in heard.errors] == [ValueError]


async def test_abandoning_cancels_the_wait():
    """The connection went away: the handler unwinds at its await, as a cancelled task does."""
    unwound = []
    gate = asyncio.get_running_loop().create_future()

    async def handler() -> str:
        try:
            return await gate
        except asyncio.CancelledError:
            unwound.append(True)
            raise

    later = later_of(handler())
    heard = Heard(later)
    await asyncio.sleep(0)
    assert later.abandon is not None
    later.abandon()
    for _ in range(3):
        await asyncio.sleep(0)
    assert unwound == [True]
    assert gate.cancelled()
    assert [type(e) for e in heard.errors] == [asyncio.CancelledError]


async def test_waits_makes_a_coroutine_handler_a_plain_one():
    @waits
    async def handler(broker: object, ctx: object, req: int) -> str:
        await asyncio.sleep(0)
        return f"req {req}"

    answer = handler(None, None, 7)
    assert isinstance(answer, Later)
    heard = Heard(answer)
    for _ in range(4):
        await asyncio.sleep(0)
    assert heard.answers == ["req 7"]


def test_a_later_settled_twice_keeps_the_first():
    later = Later(lambda payload, error: payload)
    later.set_result(1)
    later.set_result(2)
    assert later.answer() == 1
