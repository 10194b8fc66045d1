"""Background tasks of a service (timers, loads, unfinished transactions): kept, then cancelled and
awaited together when the service stops."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Iterator
from typing import Any


class Tasks:
    def __init__(self) -> None:
        self._tasks: dict[asyncio.Task, None] = {}  # in the order spawned

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks[task] = None
        task.add_done_callback(lambda t: self._tasks.pop(t, None))
        return task

    def __iter__(self) -> Iterator[asyncio.Task]:
        return iter(list(self._tasks))

    async def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
