"""Helpers for kafka-python scenarios: group members in child processes, bounded waits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from tests.harness import ROOT


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class ChildConsumer:
    """A KafkaConsumer polled by its own process; its assignment and records come back as JSON lines."""

    def __init__(self, bootstrap: str, topic: str, commit: bool = False, **config: Any) -> None:
        spec = {"topic": topic, "commit": commit, "config": {"bootstrap_servers": bootstrap, **config}}
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests/clients/consumer_child.py"), json.dumps(spec)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self.assignment: set[int] = set()
        self.records: list[tuple[int, int, str]] = []
        self.closed = False
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                if "assigned" in event:
                    self.assignment = set(event["assigned"])
                elif "record" in event:
                    self.records.append(tuple(event["record"]))
                elif "revoked" in event:
                    self.revoked.extend(event["revoked"])
                elif "closed" in event:
                    self.closed = True

    def values(self) -> list[str]:
        with self._lock:
            return [r[2] for r in self.records]

    def stop(self, timeout: float = 20) -> None:
        """Graceful: close() sends LeaveGroup."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)

    def kill(self) -> None:
        """No LeaveGroup: only the session timeout removes this member."""
        self.proc.kill()
        self.proc.wait()
        self._reader.join(5)


class ChildMember(ChildConsumer):
    """A member of any Python client (kafka-python, confluent-kafka, aiokafka) in its own process."""

    def __init__(
        self, client: str, bootstrap: str, topic: str, group: str, session_ms: int = 3000, instance: str | None = None,
        assignor: str | None = None,
    ) -> None:
        spec = {"client": client, "bootstrap": bootstrap, "topic": topic, "group": group, "session_ms": session_ms,
                "instance": instance, "assignor": assignor}
        self.revoked: list[int] = []
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests/clients/member_child.py"), json.dumps(spec)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self.assignment = set()
        self.records = []
        self.closed = False
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
