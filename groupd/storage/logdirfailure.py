"""Kafka's LogDirFailureChannel: where a failed write or sync takes the log directory offline.

A write the disk has no room for is not such a failure: it leaves nothing behind, so it is refused
(``DiskFull``) and the log stays usable (docs/operations.md); what comes here is a failed fsync, or a
write that failed for another reason.

After a write or an fsync of a log fails, its in-memory state and its file no longer agree (and after
a failed fsync the kernel may have dropped the dirty pages, so no later fsync can vouch for them): the
log refuses every later append and flush. In Kafka the failure goes to the LogDirFailureChannel, the
log directory goes offline, and when no live log directory is left the broker halts with exit status 1
(``LogManager.handleLogDirFailure``: "Shutdown broker because all log dirs ... have failed"). groupd has
one log directory, so it does the same: a refused log left serving would answer every commit of its
offsets partition with an error that no retry can heal, while FindCoordinator keeps naming this
broker. A supervisor restarts the broker; start-up recovers (the journal, a torn tail truncated) once
the disk takes writes again, and refuses to start with one line and exit status 1 while it does not.

The storage layer only reports here; what happens next is the process's choice (``server.py``
installs the halt). Without a handler, as in tests that run brokers in-process, a failure is only
logged and the log stays offline.
"""

from __future__ import annotations

from collections.abc import Callable

# (what failed, e.g. "fsync of /data/t-0", the error): called from whichever thread saw it
Handler = Callable[[str, BaseException], None]


class LogDirFailureChannel:
    def __init__(self) -> None:
        self.handler: Handler | None = None
        self.reported = 0

    def report(self, what: str, exc: BaseException) -> None:
        """A write or sync under the log directory failed: the directory is offline. The caller has
        logged the failure and refuses the log's later writes whatever the handler does."""
        self.reported += 1
        handler = self.handler
        if handler is not None:
            handler(what, exc)


channel = LogDirFailureChannel()
