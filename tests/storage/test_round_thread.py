"""The group-commit rounds' own thread (groupd/storage/postgresql/round_thread.py): it answers each call's
future on the caller's loop with the result or the exception, runs the calls in order one at a time, and
starts again after a stop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from groupd.storage.postgresql.round_thread import RoundThread


def test_results_and_exceptions_reach_the_awaiting_coroutine_in_call_order_on_another_thread() -> None:
    async def scenario() -> None:
        rounds = RoundThread("test-rounds")
        ran: list[tuple[int, str]] = []

        def work(i: int) -> int:
            ran.append((i, threading.current_thread().name))
            if i == 3:
                raise ValueError("round 3 failed")
            return i * 10

        futures = [rounds.call(lambda i=i: work(i)) for i in range(6)]
        outcomes = await asyncio.gather(*futures, return_exceptions=True)
        assert outcomes[:3] == [0, 10, 20] and outcomes[4:] == [40, 50]
        assert isinstance(outcomes[3], ValueError) and str(outcomes[3]) == "round 3 failed"
        assert [i for i, _ in ran] == list(range(6))  # one at a time, in the order called
        assert {name for _, name in ran} == {"test-rounds"}
        rounds.stop()
        assert await rounds.call(lambda: threading.current_thread().name) == "test-rounds"  # started again
        rounds.stop()

    asyncio.run(scenario())


def test_a_call_whose_loop_closed_meanwhile_is_dropped_without_an_error() -> None:
    rounds = RoundThread("test-rounds")
    release = threading.Event()
    finished = threading.Event()

    async def start() -> None:
        rounds.call(lambda: (release.wait(5), finished.set()))

    asyncio.run(start())  # the loop closes with the call still running
    release.set()
    assert finished.wait(5)
    assert asyncio.run(_one(rounds)) == 7
    rounds.stop()


async def _one(rounds: RoundThread) -> int:
    return await rounds.call(lambda: 7)


@pytest.mark.parametrize("calls", [1, 50])
def test_stop_lets_the_calls_already_made_finish(calls: int) -> None:
    async def scenario() -> list[int]:
        rounds = RoundThread("test-rounds")
        futures = [rounds.call(lambda i=i: i) for i in range(calls)]
        rounds.stop()
        return list(await asyncio.gather(*futures))

    assert asyncio.run(scenario()) == list(range(calls))
