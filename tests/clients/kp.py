"""Helpers for kafka-python scenarios: consumers polled in their own threads, bounded waits."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class PollingConsumer:
    """A KafkaConsumer polled continuously by its own thread (as an application would)."""

    def __init__(self, consumer: Any, commit_each_poll: bool = False) -> None:
        self.consumer = consumer
        self.records: list[Any] = []
        self.assignment: set[int] = set()
        self.commit_each_poll = commit_each_poll
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                batch = self.consumer.poll(timeout_ms=100)
                with self._lock:
                    for recs in batch.values():
                        self.records.extend(recs)
                    self.assignment = {tp.partition for tp in self.consumer.assignment()}
                if batch and self.commit_each_poll:
                    self.consumer.commit()
        except BaseException as exc:  # surfaced by the test
            self.error = exc

    def values(self) -> list[bytes]:
        with self._lock:
            return [r.value for r in self.records]

    def stop(self, close: bool = True) -> None:
        self._stop.set()
        self.thread.join(15)
        if close:
            self.consumer.close()
