"""Property tests of the share-partition state machine (hypothesis): random members acquire, acknowledge
(any types, right or wrong member), release, let locks run out and see writes fail, and through all of it
a record is never held by two members, delivery counts are exactly the number of deliveries and never
pass the limit, a finished record is never delivered again, and once everyone drains the log every
record has ended ACKNOWLEDGED or ARCHIVED."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupd.broker.share.partition import ACCEPT, AckBatch, Limits, LogBatch, ShareError, SharePartition
from groupd.coordinator.share_state.persister import ACKNOWLEDGED, ACQUIRED, ARCHIVED

MEMBERS = ("A", "B", "C")
LOCK = 1_000


def log_of(sizes: list[int]) -> list[LogBatch]:
    out, off = [], 0
    for n in sizes:
        out.append(LogBatch(off, off + n - 1))
        off += n
    return out


def read(log: list[LogBatch], offset: int) -> list[LogBatch]:
    return [b for b in log if b.last_offset >= offset][:4]


ops = st.lists(
    st.one_of(
        st.tuples(st.just("acquire"), st.sampled_from(MEMBERS), st.integers(1, 12), st.integers(1, 8), st.booleans()),
        st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.integers(0, 40), st.integers(0, 6),
                  st.lists(st.integers(0, 3), min_size=1, max_size=3), st.booleans()),
        st.tuples(st.just("tick"), st.integers(1, 2 * LOCK)),
        st.tuples(st.just("release"), st.sampled_from(MEMBERS), st.booleans()),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=8), limit=st.integers(2, 5), cap=st.integers(5, 40),
       steps=ops)
def test_no_double_holding_exact_counts_and_everything_ends_terminal(sizes, limit, cap, steps):
    log = log_of(sizes)
    end = log[-1].last_offset + 1
    sp = SharePartition(Limits(delivery_count_limit=limit, max_in_flight=cap, lock_duration_ms=LOCK))
    sp.load(-1, 0, (), 0)
    delivered: dict[int, int] = {}  # offset -> deliveries so far
    finished: set[int] = set()
    now = 0

    def check() -> None:
        for off in sp.cached_offsets():
            state = sp.record_state(off)
            assert state is not None
            assert state[1] == delivered.get(off, 0), (off, state, delivered.get(off))
            assert state[1] <= limit
            if state[0] in (ACKNOWLEDGED, ARCHIVED):
                finished.add(off)
            if state[0] == ACQUIRED:
                assert state[2] in MEMBERS

    def do_acquire(member: str, max_records: int, batch_size: int, record_limit: bool) -> None:
        fetch = sp.next_fetch_offset()
        before = {o: sp.record_state(o) for o in sp.cached_offsets()}
        got, n = sp.acquire(member, read(log, fetch), fetch, max_records, batch_size, now, record_limit=record_limit)
        assert n >= sum(r.last_offset - r.first_offset + 1 for r in got) or got == []
        for r in got:
            for off in range(r.first_offset, r.last_offset + 1):
                assert off < end and off >= sp.start_offset or off in before
                assert off not in finished, off
                prior = before.get(off)
                assert prior is None or prior[0] != ACQUIRED, (off, prior)  # never held by two
                delivered[off] = delivered.get(off, 0) + 1
                assert r.delivery_count == delivered[off]
                assert sp.record_state(off) == (ACQUIRED, delivered[off], member)

    for step in steps:
        kind = step[0]
        if kind == "acquire":
            do_acquire(*step[1:])
        elif kind == "ack":
            _, member, first, width, types, ok = step
            if len(types) > 1:
                width = len(types) - 1
            try:
                update = sp.acknowledge(member, [AckBatch(first, first + width, tuple(types))], now)
            except ShareError:
                pass
            else:
                sp.complete(update, ok, now)
        elif kind == "tick":
            now += step[1]
            update = sp.expire_locks(now)
            if update is not None:
                sp.complete(update, True, now)
        else:
            _, member, ok = step
            sp.complete(sp.release(member), ok, now)
        check()

    # drain: every member takes and accepts what it gets, locks run out for what is stuck
    for _ in range(20 * (end + 1)):
        if sp.start_offset >= end:
            break
        now += LOCK
        update = sp.expire_locks(now)
        if update is not None:
            sp.complete(update, True, now)
        fetch = sp.next_fetch_offset()
        got, _n = sp.acquire("D", read(log, fetch), fetch, 500, 500, now)
        for r in got:
            for off in range(r.first_offset, r.last_offset + 1):
                assert off not in finished
                delivered[off] = delivered.get(off, 0) + 1
            sp.complete(sp.acknowledge("D", [AckBatch(r.first_offset, r.last_offset, (ACCEPT,))], now), True, now)
        check()
    assert sp.start_offset == end
    assert sp.cached_offsets() == []
    assert all(count <= limit for count in delivered.values())
