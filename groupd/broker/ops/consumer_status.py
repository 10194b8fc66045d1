"""Live consumer status: Burrow's evaluation rules, computed in the broker for each group and partition.

Operators run LinkedIn's Burrow beside Kafka to tell a consumer that keeps up from one that is slow,
stuck or gone, without lag thresholds. The broker sees every commit, so it keeps Burrow's window itself:
for each group and partition the last ``WINDOW`` commits (offset, time, lag at that time), a commit
closer than ``MIN_DISTANCE_MS`` to the one before replacing it (Burrow's storage ``intervals`` = 10 and
``min-distance`` = 1 s). At evaluation, with the partition's lag now (log end minus committed offset):

1. the lag was zero at some commit of the window, or is zero now: OK;
2. else an offset went backwards between two commits: REWIND;
3. else the time since the last commit exceeds the time the window spans: STOP;
4. else every commit of the window has the same offset: STALL;
5. else the lag never went down from one commit to the next: WARN;
6. else OK.

A group's status is its worst partition's, with STOP, STALL and REWIND counted as ERR (Burrow's group
rule). Numbers are Burrow's constants: NOTFOUND 0, OK 1, WARN 2, ERR 3, STOP 4, STALL 5, REWIND 6.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

WINDOW = 10
MIN_DISTANCE_MS = 1000
NOTFOUND, OK, WARN, ERR, STOP, STALL, REWIND = range(7)
NAMES = ("NOTFOUND", "OK", "WARN", "ERR", "STOP", "STALL", "REWIND")


@dataclass(frozen=True, slots=True)
class Commit:
    offset: int
    timestamp_ms: int
    lag: int


def partition_status(window: Iterable[Commit], current_lag: int, now_ms: int) -> int:
    """Burrow's rules 1-5 over one partition's window (see the module text)."""
    commits = list(window)
    if not commits or current_lag <= 0 or any(c.lag == 0 for c in commits):
        return OK
    pairs = list(zip(commits, commits[1:], strict=False))
    if any(b.offset < a.offset for a, b in pairs):
        return REWIND
    if now_ms - commits[-1].timestamp_ms > commits[-1].timestamp_ms - commits[0].timestamp_ms:
        return STOP
    if all(b.offset == a.offset for a, b in pairs):
        return STALL
    if all(b.lag >= a.lag for a, b in pairs):
        return WARN
    return OK


def group_status(statuses: Iterable[int]) -> int:
    """The worst partition's status, STOP/STALL/REWIND as ERR; a group with no partition is OK."""
    worst = OK
    for s in statuses:
        worst = max(worst, min(s, ERR))
    return worst


class ConsumerStatus:
    """The commit windows of every tracked group (the broker's event loop owns it: no locks)."""

    def __init__(self, window: int = WINDOW, min_distance_ms: int = MIN_DISTANCE_MS) -> None:
        self.window = window
        self.min_distance_ms = min_distance_ms
        self._windows: dict[str, dict[tuple[str, int], deque[Commit]]] = {}

    def committed(self, group: str, topic: str, partition: int, offset: int, now_ms: int, log_end: int | None) -> None:
        """One committed offset (made durable); ``log_end`` is the partition's end now (None: unknown)."""
        lag = max(0, log_end - offset) if log_end is not None else 0
        parts = self._windows.setdefault(group, {})
        ring = parts.get((topic, partition))
        if ring is None:
            ring = parts[(topic, partition)] = deque(maxlen=self.window)
        commit = Commit(offset, now_ms, lag)
        if ring and now_ms - ring[-1].timestamp_ms < self.min_distance_ms:
            ring[-1] = commit
        else:
            ring.append(commit)

    def forget(self, group: str) -> None:
        self._windows.pop(group, None)

    def evaluate(self, group: str, committed: Mapping[tuple[str, int], int], log_ends: Mapping[tuple[str, int], int],
                 now_ms: int) -> tuple[int, dict[tuple[str, int], tuple[int, int]]]:
        """The group's status and each committed partition's (status, lag now)."""
        windows = self._windows.get(group, {})
        out: dict[tuple[str, int], tuple[int, int]] = {}
        for tp, offset in committed.items():
            end = log_ends.get(tp)
            lag = max(0, end - offset) if end is not None and offset >= 0 else 0
            out[tp] = (partition_status(windows.get(tp, ()), lag, now_ms), lag)
        return group_status(s for s, _ in out.values()), out
