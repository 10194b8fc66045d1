"""The broker's one wall clock: Kafka timestamps are wall-clock milliseconds since the epoch.

Record batches, segment times, transaction and quota bookkeeping all read it here, so that one formula
serves them all and a test can replace it in one place. Deadlines use ``time.monotonic`` (the
coordinator's timer heap takes ``now`` from its shell; the pure core never reads a clock).
"""

from __future__ import annotations

import time


def wall_ms() -> int:
    """Milliseconds since the epoch, truncated (Kafka's ``System.currentTimeMillis``)."""
    return time.time_ns() // 1_000_000
