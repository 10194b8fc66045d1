"""Segment files opened on demand and closed when idle, so descriptors grow with the partitions in use.

Kafka keeps every segment of every partition open (and needs a ``ulimit -n`` to match); groupd keeps at
most ``log.max.open.files`` segment files open (a groupd key: Kafka has none), by default half the
process's own descriptor limit, leaving the rest for sockets. A segment's index side file, read through
a descriptor of its own (storage/segment_index.py), counts as one more file of that segment, closed with
it. A segment's descriptor is opened at its
first use and, once more are open than the bound, the least recently used ones are closed, down to
three quarters of it.

Only a file nobody can be using is closed: its log's locks are taken without waiting (a flush or a
write-out holding them keeps the file open), and a log with appends not yet written or synced keeps
all its files. Closing is done only by the thread that configured the bound (the event loop's), which
is also the only thread that reads and appends, so no descriptor closes under a reader; a log opened on
a worker thread (partition creation) closes its own files before anyone else sees it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import resource
import threading
from typing import Protocol

# the smallest bound: a handful of partitions must fit whatever the limit says
_FLOOR = 16


class _File(Protocol):
    handle: int
    used: int
    files: OpenFiles

    def evict(self) -> bool:
        """Close the file if nothing is using it; True when it was closed."""
        ...


tick = itertools.count()  # each use stamps the segment; the smallest stamps are closed first
lock = threading.Lock()  # a segment's descriptor is set or taken under it


class OpenFiles:
    """One engine's open segment files, and their bound (None: unbounded). Each broker's local engine
    has its own, closed from its own event loop's thread: brokers that share a process (tests, or
    ``groupd.testing`` in threads) never close each other's files."""

    def __init__(self) -> None:
        self.limit: int | None = None
        self.owner: int | None = None  # the thread that closes idle files
        self.files: dict[int, _File] = {}  # id -> segment, while its descriptor is open
        self.closed_idle = 0

    def configure(self, limit: int) -> None:
        """Bound the open segment files from the calling thread on; ``limit`` < 1: half of RLIMIT_NOFILE."""
        if limit < 1:
            soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            limit = soft // 2 if soft != resource.RLIM_INFINITY else 1 << 20
        self.limit = max(limit, _FLOOR)
        self.owner = threading.get_ident()

    @property
    def over(self) -> bool:
        return self.limit is not None and len(self.files) > self.limit

    def opened(self, seg: _File) -> None:
        """``seg`` holds a descriptor now (set under ``lock``, with its entry in ``files``)."""
        if self.over and threading.get_ident() == self.owner:
            self.shrink()

    def shrink(self) -> None:
        """Close the least recently used idle files until three quarters of the bound are open."""
        limit = self.limit
        if limit is None:
            return
        target = limit * 3 // 4
        with lock:
            by_age = sorted(self.files.values(), key=lambda f: f.used)
        for f in by_age:
            if len(self.files) <= target:
                break
            if f.evict():
                self.closed_idle += 1


UNBOUNDED = OpenFiles()  # logs opened outside an engine (tools, tests): every file stays open


def close_handle(seg: _File) -> None:
    """Close ``seg``'s descriptor if it has one (a segment deleted, compacted or its log closed)."""
    with lock:
        fd, seg.handle = seg.handle, -1
        seg.files.files.pop(id(seg), None)
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)
