"""Merging state batches, as Kafka's ``PersisterStateBatchCombiner`` does.

The batches stored so far and the batches of a write become one list of batches that do not overlap:
- batches wholly below the start offset are dropped and one that straddles it is cut at it (no pruning
  when the start offset is -1, "unchanged");
- where batches overlap, each offset takes the state of the batch of the highest priority covering it:
  the higher delivery count, then the higher delivery state (Kafka's order, so a later write normally
  wins: a share-partition only ever raises an offset's count or moves it to a later state);
- contiguous batches of the same state and count are joined.

Kafka reaches this by repeatedly merging the first overlapping (or joinable) pair of a sorted set; the
result is the same function of the input, computed here in one sweep over the batches' boundaries.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from groupd.coordinator.share_state.persister import StateBatch


def combine(so_far: Iterable[StateBatch], new: Iterable[StateBatch], start_offset: int) -> tuple[StateBatch, ...]:
    batches = [*so_far, *new]
    if start_offset != -1:
        batches = [
            b
            if b.first_offset >= start_offset
            else StateBatch(start_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in batches
            if b.last_offset >= start_offset
        ]
    if not batches:
        return ()
    batches.sort(key=lambda b: b.first_offset)
    bounds = sorted({b.first_offset for b in batches} | {b.last_offset + 1 for b in batches})
    out: list[StateBatch] = []
    active: list[tuple[int, int, int]] = []  # (-count, -state, last offset): the best batch on top
    i = 0
    for start, end in zip(bounds, bounds[1:], strict=False):  # each elementary range [start, end - 1]
        while i < len(batches) and batches[i].first_offset <= start:
            b = batches[i]
            heapq.heappush(active, (-b.delivery_count, -b.delivery_state, b.last_offset))
            i += 1
        while active and active[0][2] < start:
            heapq.heappop(active)
        if not active:
            continue  # a gap between batches
        count, state = -active[0][0], -active[0][1]
        last = out[-1] if out else None
        if (
            last is not None
            and last.last_offset == start - 1
            and (last.delivery_state, last.delivery_count) == (state, count)
        ):
            out[-1] = StateBatch(last.first_offset, end - 1, state, count)
        else:
            out.append(StateBatch(start, end - 1, state, count))
    return tuple(out)
