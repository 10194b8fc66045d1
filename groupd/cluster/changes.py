"""What other nodes change, as PostgreSQL tells of it (LISTEN/NOTIFY), so a node follows a new topic, ACL,
SCRAM user, group config or quota, and a lease that changed hands, within milliseconds instead of at its
next heartbeat.

Two triggers (schema.py, migration 5) notify: every write of ``groupd_metadata`` on channel
``groupd_metadata`` with the key it wrote, and every lease whose owner or epoch changed on channel
``groupd_lease``. A notification is sent when, and only if, the writing transaction commits, so a node
never follows a change that was rolled back. Each node listens on a connection of its own, on a daemon
thread (psycopg blocks while it waits), and hands each notification to the event loop. One can still be
lost (the listening connection broke, the database restarted): after every (re)connection the node is
told that anything may have changed (``changed(None, None)``), and its heartbeat follows everything anyway
(docs/cluster.md, "How fresh what is shared is").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import select
import threading
from collections.abc import Callable

import psycopg

from groupd.storage.postgresql.connection import describe

log = logging.getLogger("groupd.cluster")

METADATA = "groupd_metadata"  # a metadata key was written; the payload: the key
LEASES = "groupd_lease"  # a lease changed hands or epoch
POLL_S = 0.25  # how often the thread looks whether it should stop (a stop waits for it)
RETRY_S = 1.0  # between connection attempts while the database cannot be reached


class ClusterChanges:
    """Calls ``changed(channel, payload)`` on the event loop for every notification (whichever node wrote,
    this one included), and ``changed(None, None)`` after every (re)connection: follow everything."""

    def __init__(self, url: str, name: str, changed: Callable[[str | None, str | None], None]) -> None:
        self.url = url
        self.name = name
        self.changed = changed
        self.notified = 0  # notifications received (metrics, tests)
        self.connections = 0  # successful LISTENs
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end (within POLL_S); ``join`` waits for it."""
        self._stop.set()

    def join(self, timeout: float = 5.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        failing = False
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True) as conn:
                    conn.execute(f"LISTEN {METADATA}; LISTEN {LEASES}")
                    self.connections += 1
                    if failing:
                        log.info("%s: following the metadata's changes again", self.name)
                    failing = False
                    self._post(None, None)  # whatever changed before the LISTEN (or while disconnected)
                    while not self._stop.is_set():
                        # wait here, not in notifies(timeout=...): psycopg's wait polls in steps of a whole
                        # millisecond and spins (poll with a zero timeout) through the fraction left of each
                        # step, about a thousand system calls a second while nothing happens
                        select.select([conn.fileno()], [], [], POLL_S)
                        for notification in conn.notifies(timeout=0):
                            self.notified += 1
                            self._post(notification.channel, notification.payload)
            except psycopg.Error as exc:
                if not failing:
                    log.warning(
                        "%s: cannot follow the metadata's changes at %s (the heartbeat still follows them; "
                        "retrying): %s",
                        self.name,
                        describe(self.url),
                        str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                    )
                failing = True
                self._stop.wait(RETRY_S)

    def _post(self, channel: str | None, payload: str | None) -> None:
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the node has stopped
                loop.call_soon_threadsafe(self.changed, channel, payload)
