"""Kafka's PersisterStateBatchCombiner: cases from its PersisterStateBatchCombinerTest (4.3), and its
properties over random histories."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupd.coordinator.share_state.combiner import combine
from groupd.coordinator.share_state.persister import StateBatch


def B(first, last, state, count):  # noqa: N802 - reads like Kafka's test's singleBatch(first, last, state, count)
    return StateBatch(first, last, state, count)


KAFKA_CASES = [
    # (so far, new, start offset, expected): PersisterStateBatchCombinerTest's generators (its argument
    # order: first, last, state, count)
    ([B(100, 110, 0, 1)], [B(100, 110, 0, 1)], -1, [B(100, 110, 0, 1)]),
    ([B(100, 110, 0, 1)], [B(100, 105, 0, 1)], -1, [B(100, 110, 0, 1)]),
    ([B(100, 110, 0, 1)], [B(100, 115, 0, 1)], -1, [B(100, 115, 0, 1)]),
    ([B(100, 110, 0, 1)], [B(105, 108, 0, 1)], -1, [B(100, 110, 0, 1)]),
    ([B(100, 110, 0, 1)], [B(105, 115, 0, 1)], -1, [B(100, 115, 0, 1)]),
    ([B(100, 110, 0, 1)], [B(111, 115, 0, 1)], -1, [B(100, 115, 0, 1)]),  # contiguous, same state: joined
    ([B(100, 110, 0, 1)], [B(100, 110, 0, 2)], -1, [B(100, 110, 0, 2)]),
    ([B(100, 110, 0, 3)], [B(100, 110, 0, 1)], -1, [B(100, 110, 0, 3)]),  # a lower count loses, even when newer
    ([B(100, 110, 0, 1)], [B(100, 105, 0, 2)], -1, [B(100, 105, 0, 2), B(106, 110, 0, 1)]),
    ([B(100, 110, 0, 3)], [B(100, 105, 0, 1)], -1, [B(100, 110, 0, 3)]),
    ([B(100, 110, 0, 1)], [B(100, 115, 0, 2)], -1, [B(100, 115, 0, 2)]),
    ([B(100, 110, 0, 3)], [B(100, 115, 0, 1)], -1, [B(100, 110, 0, 3), B(111, 115, 0, 1)]),
    ([B(100, 115, 0, 1)], [B(105, 110, 1, 1)], -1, [B(100, 104, 0, 1), B(105, 110, 1, 1), B(111, 115, 0, 1)]),
    # Kafka's test expects [100-110, 111-123] here, but that case never runs there (shouldRun false, as
    # for all but one case): its combiner keeps 124-130, which nothing overrides, and so does this one
    ([B(100, 110, 0, 1), B(121, 130, 0, 1)], [B(111, 119, 2, 2), B(116, 123, 2, 2)], -1,
     [B(100, 110, 0, 1), B(111, 123, 2, 2), B(124, 130, 0, 1)]),
    ([B(100, 110, 0, 1)], [B(101, 105, 1, 2), B(101, 115, 2, 2), B(101, 120, 3, 2)], -1,
     [B(100, 100, 0, 1), B(101, 120, 3, 2)]),
    ([B(100, 110, 0, 1), B(121, 130, 0, 1)], [B(111, 119, 2, 2), B(116, 123, 2, 2)], 120,
     [B(120, 123, 2, 2), B(124, 130, 0, 1)]),  # pruned below 120
    ([B(111, 120, 0, 1)], [B(111, 113, 0, 2), B(114, 114, 2, 1), B(115, 119, 0, 2)], -1,
     [B(111, 113, 0, 2), B(114, 114, 2, 1), B(115, 119, 0, 2), B(120, 120, 0, 1)]),
    ([], [], 120, []),
    ([B(100, 110, 0, 1)], [], 105, [B(105, 110, 0, 1)]),
    ([B(100, 110, 0, 1)], [], 111, []),
]


@pytest.mark.parametrize(("so_far", "new", "start", "expected"), KAFKA_CASES)
def test_kafkas_cases(so_far, new, start, expected):
    assert combine(so_far, new, start) == tuple(expected)


def per_offset(batches, start):
    """The reference: each offset's best (count, state) among the batches covering it, at or after start."""
    best: dict[int, tuple[int, int]] = {}
    for b in batches:
        for off in range(b.first_offset, b.last_offset + 1):
            if start != -1 and off < start:
                continue
            rank = (b.delivery_count, b.delivery_state)
            if off not in best or rank > best[off]:
                best[off] = rank
    return best


def flatten(batches):
    return {
        off: (b.delivery_count, b.delivery_state) for b in batches for off in range(b.first_offset, b.last_offset + 1)
    }


def canonical(batches):
    """Sorted, not overlapping, and no two contiguous batches of the same state and count."""
    for a, b in zip(batches, batches[1:], strict=False):
        assert a.last_offset < b.first_offset
        assert not (
            a.last_offset + 1 == b.first_offset
            and (a.delivery_state, a.delivery_count) == (b.delivery_state, b.delivery_count)
        )
    return True


batch = st.builds(
    lambda first, length, state, count: StateBatch(first, first + length, state, count),
    st.integers(0, 60),
    st.integers(0, 12),
    st.sampled_from([0, 2, 4]),
    st.integers(1, 5),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(batch, max_size=8), st.lists(batch, max_size=8), st.sampled_from([-1, 0, 10, 30, 80]))
def test_each_offset_takes_the_highest_priority_batch(so_far, new, start):
    out = combine(so_far, new, start)
    assert canonical(out)
    assert flatten(out) == per_offset(so_far + new, start)


def monotonic_history():
    """Writes as a share-partition makes them: each offset's count never falls, and a later write of
    an offset is a later delivery (higher count) or a terminal state after AVAILABLE."""
    step = st.tuples(st.integers(0, 40), st.integers(0, 6), st.sampled_from(["deliver", "ack", "archive"]))
    return st.lists(st.lists(step, min_size=1, max_size=4), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(monotonic_history(), st.integers(-1, 20))
def test_merged_writes_equal_the_writes_applied_in_order_offset_by_offset(history, start):
    """With writes as a share-partition makes them, the combiner is newest-wins: merging every write
    into the stored batches gives each offset the state of the last write that named it."""
    counts: dict[int, int] = {}
    states: dict[int, int] = {}
    stored: tuple[StateBatch, ...] = ()
    for write in history:
        batches = []
        for first, length, action in write:
            for off in range(first, first + length + 1):
                if states.get(off) in (2, 4):
                    continue  # terminal: a share-partition never writes it again
                if action == "deliver":
                    counts[off] = counts.get(off, 0) + 1
                    states[off] = 0
                else:
                    counts.setdefault(off, 1)
                    states[off] = 2 if action == "ack" else 4
                batches.append(StateBatch(off, off, states[off], counts[off]))
        stored = combine(stored, batches, -1)
    expected = {off: (counts[off], states[off]) for off in states}
    assert flatten(stored) == expected
    pruned = combine(stored, (), start)
    assert flatten(pruned) == {o: v for o, v in expected.items() if start == -1 or o >= start}
