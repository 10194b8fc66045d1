"""The thread that runs the group-commit rounds' statements (durability.py), one long-lived thread per
durability instead of ``asyncio.to_thread``.

``to_thread`` goes through a ThreadPoolExecutor for every round: a context copy, an executor work item under
two locks, a concurrent Future chained to an asyncio one. A round's hand-off is on the hot path of every
acknowledged write (one per round, and a cluster node's rounds carry few writers each), so the rounds get a
thread of their own: a queue put to start one, a ``call_soon_threadsafe`` to answer it.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_Job = tuple[asyncio.AbstractEventLoop, asyncio.Future, Callable[[], object]]


class RoundThread:
    """Runs callables one at a time on its own daemon thread, started at the first call."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def call(self, work: Callable[[], T]) -> asyncio.Future[T]:
        """A future of ``work()``'s result (or exception), run on the thread."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()
        self._jobs.put((loop, future, work))
        return future

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            loop, future, work = job
            try:
                result = work()
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                _answer(loop, future, None, exc)
            else:
                _answer(loop, future, result, None)

    def stop(self) -> None:
        """End the thread after the calls already made (none may follow)."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread = None


def _answer(loop: asyncio.AbstractEventLoop, future: asyncio.Future, result: object, exc: BaseException | None) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
        loop.call_soon_threadsafe(_settle, future, result, exc)


def _settle(future: asyncio.Future, result: object, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is None:
        future.set_result(result)
    else:
        future.set_exception(exc)
