"""``make bench`` says what it is doing: one line per step, when the step starts, with its number of
the whole run, the time so far and what it measures (the run takes about a quarter of an hour, and
used to print nothing until its table). Lines go to stderr, so stdout stays the results table."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None, clock=time.monotonic) -> None:
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.started = clock()

    def step(self, what: str) -> None:
        """A step begins: ``[bench  3/40, 0:42] groupd-fsync: commits, 8 committers for 4 s``."""
        self.done += 1
        elapsed = int(self.clock() - self.started)
        width = len(str(self.total))
        self.stream.write(f"[bench {self.done:>{width}}/{self.total}, {elapsed // 60}:{elapsed % 60:02d}] {what}\n")
        self.stream.flush()

    def skip(self, steps: int, why: str) -> None:
        """Steps that will not run (a peer that is not available): the total shrinks, and says why."""
        self.total -= steps
        self.stream.write(f"[bench] skipping {steps} steps: {why}\n")
        self.stream.flush()
