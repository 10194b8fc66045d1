"""One share-partition's in-flight records (Kafka's SharePartition, InFlightBatch and InFlightState):
which records of a topic partition a share group has handed out, to whom, how often, and until when.

Pure: no I/O, no clock; ``now`` (ms) comes in. The async shell (``groupd/broker/share/manager.py``) reads the
log, persists the state batches this module hands it, and drives the lock timers.

The model is Kafka's: a sorted cache of in-flight batches, each either one state for the whole batch or,
once a request touched part of it, one state per offset; the share-partition start offset (SPSO) and end
offset bound the window. A change that must be persisted first (acknowledge, release) is a *transition*:
the states change at once (nobody else may acquire or acknowledge them meanwhile) and keep what they
were, so a failed write rolls them back; ``complete`` ends it either way. Lock expiry and the archiving
of aborted or stale records change the state outright, as Kafka does.

Deviation: a persisted state with holes below its last batch (records fetched but never acknowledged
before a restart) is loaded with the holes as AVAILABLE batches of delivery count 0, instead of Kafka's
"gap window" that fetches them again as new records; both deliver them next with count 1.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from groupd.coordinator.share_state.persister import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, StateBatch
from groupd.coordinator.values import value

STATE_NAMES = {AVAILABLE: "AVAILABLE", ACQUIRED: "ACQUIRED", ACKNOWLEDGED: "ACKNOWLEDGED", ARCHIVED: "ARCHIVED"}

# AcknowledgeType ids (ShareFetch/ShareAcknowledge): 0 is a gap in the fetched data (the record is archived)
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
ACK_TO_STATE = {GAP: ARCHIVED, ACCEPT: ACKNOWLEDGED, RELEASE: AVAILABLE, REJECT: ARCHIVED}

INVALID_REQUEST = 42
INVALID_RECORD_STATE = 121

NO_MEMBER = ""  # Kafka's EMPTY_MEMBER_ID: the record is held by nobody
MIN_THROTTLE_DELIVERY_LIMIT = 2  # SharePartition.MINIMUM_THROTTLE_RECORDS_DELIVERY_LIMIT


class ShareError(Exception):
    """An acknowledgement Kafka refuses: ``code`` is INVALID_RECORD_STATE or INVALID_REQUEST."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@value
class AcquiredRecords:
    first_offset: int
    last_offset: int
    delivery_count: int


@value
class LogBatch:
    """What acquisition needs of one fetched log batch (its header only)."""

    base_offset: int
    last_offset: int
    producer_id: int = -1
    transactional: bool = False
    abort_marker: bool = False  # a control batch holding an ABORT marker


@value
class AckBatch:
    """One AcknowledgementBatch of a request: one type for the range, or one per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


@value
class Limits:
    """The group's settings a share-partition applies (from ShareGroupConfig)."""

    delivery_count_limit: int = 5
    max_in_flight: int = 2_000
    lock_duration_ms: int = 30_000
    renew_enabled: bool = True


class _State:
    """One record's (or a whole batch's) delivery state; ``rollback`` is set while a transition waits
    for its write (Kafka's ongoing state transition)."""

    __slots__ = ("state", "count", "member", "deadline", "rollback", "terminal_started")

    def __init__(self, state: int, count: int, member: str = NO_MEMBER, deadline: int | None = None) -> None:
        self.state = state
        self.count = count
        self.member = member
        self.deadline = deadline  # lock expiry (ms) while ACQUIRED
        self.rollback: tuple[int, int, str, int | None] | None = None
        self.terminal_started = False

    def copy(self) -> _State:
        s = _State(self.state, self.count, self.member, self.deadline)
        s.rollback, s.terminal_started = self.rollback, self.terminal_started
        return s

    @property
    def moving(self) -> bool:
        return self.rollback is not None

    def try_update(self, new: int, increase: bool, limit: int, member: str) -> bool:
        """InFlightState.tryUpdateState: going back to AVAILABLE at the limit archives instead."""
        if self.moving:
            return False
        if new == AVAILABLE and self.count >= limit:
            new = ARCHIVED
        if not _legal(self.state, new):
            return False
        self.state = new
        if new != ARCHIVED and increase:
            self.count += 1
        self.member = member
        if new != ACQUIRED:
            self.deadline = None
        return True

    def start(self, new: int, limit: int) -> bool:
        before = (self.state, self.count, self.member, self.deadline)
        if not self.try_update(new, False, limit, NO_MEMBER):
            return False
        self.rollback = before
        self.terminal_started = self.state in (ACKNOWLEDGED, ARCHIVED)
        return True

    def complete(self, commit: bool, now: int, limit: int) -> None:
        """InFlightState.completeStateTransition: a failed write restores ACQUIRED, unless the lock ran
        out meanwhile (then AVAILABLE, or ARCHIVED at the limit)."""
        if self.rollback is None:
            return
        before, self.rollback, self.terminal_started = self.rollback, None, False
        if commit:
            return
        state, count, member, deadline = before
        if deadline is not None and deadline <= now:
            self.state, self.member, self.deadline = (ARCHIVED if count >= limit else AVAILABLE), NO_MEMBER, None
        else:
            self.state, self.member, self.deadline = state, member, deadline


def _legal(old: int, new: int) -> bool:
    """RecordState.validateTransition: AVAILABLE -> ACQUIRED; ACQUIRED -> anything but itself; the terminal
    states stay."""
    if old == AVAILABLE:
        return new in (ACQUIRED, ARCHIVED)  # archive() of AVAILABLE records (log start moved, aborted, stale)
    if old == ACQUIRED:
        return new in (AVAILABLE, ACKNOWLEDGED, ARCHIVED)
    return False


def _terminal(state: int) -> bool:
    return state in (ACKNOWLEDGED, ARCHIVED)


@dataclass(slots=True)
class _Batch:
    first: int
    last: int
    whole: _State | None
    offsets: dict[int, _State] | None = None  # per-offset states, in offset order

    def explode(self) -> dict[int, _State]:
        """InFlightBatch.maybeInitializeOffsetStateUpdate: from now on one state per offset."""
        if self.offsets is None:
            assert self.whole is not None
            self.offsets = {o: self.whole.copy() for o in range(self.first, self.last + 1)}
            self.whole = None
        return self.offsets

    def states(self) -> Iterable[tuple[int, int, _State]]:
        """(first, last, state) runs: the whole batch, or each offset."""
        if self.offsets is None:
            assert self.whole is not None
            yield self.first, self.last, self.whole
        else:
            for off, s in self.offsets.items():
                yield off, off, s


@dataclass(slots=True)
class Update:
    """State batches to write (WriteShareGroupState) before the change is answered, with the start offset
    and delivery-complete count Kafka sends alongside; ``complete`` ends it once the write answered."""

    batches: tuple[StateBatch, ...]
    start_offset: int
    delivery_complete_count: int
    transitions: list[_State] = field(default_factory=list)  # rolled back if the write fails
    released: bool = False  # records went back to AVAILABLE: waiting fetches may now acquire them


class SharePartition:
    """The in-flight window of one (group, topic, partition)."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.start_offset = 0  # SPSO
        self.end_offset = 0  # SPEO: the last offset in flight (the next to fetch when the cache is empty)
        self.state_epoch = 0
        self._keys: list[int] = []  # first offsets of the cached batches, sorted
        self._cache: dict[int, _Batch] = {}
        self._find_next = False  # Kafka's findNextFetchOffset: some cached record may be AVAILABLE

    # ------------------------------------------------------------------ load

    def load(self, start_offset: int, state_epoch: int, batches: Sequence[StateBatch], reset_offset: int) -> None:
        """From ReadShareGroupState: start offset -1 means none yet, so ``reset_offset`` (the log offset
        that share.auto.offset.reset picks) applies. Persisted batches load unowned, as they were."""
        start = start_offset if start_offset >= 0 else reset_offset
        self.start_offset, self.state_epoch = start, state_epoch
        self._keys, self._cache = [], {}
        expected = start
        for b in sorted(batches, key=lambda b: b.first_offset):
            if b.first_offset < start or b.last_offset < b.first_offset:
                raise ValueError(f"invalid persisted batch {b} for start offset {start}")
            if b.first_offset > expected:  # a hole: records fetched before but never written
                self._put(_Batch(expected, b.first_offset - 1, _State(AVAILABLE, 0)))
            state = b.delivery_state if b.delivery_state != ACQUIRED else AVAILABLE
            self._put(_Batch(b.first_offset, b.last_offset, _State(state, b.delivery_count)))
            expected = b.last_offset + 1
        if self._keys:
            self._find_next = True
            self.end_offset = self._cache[self._keys[-1]].last
            self._advance_start()
        else:
            self.end_offset = start

    # ------------------------------------------------------------------ reading

    def next_fetch_offset(self) -> int:
        """Where the next log read starts: the first AVAILABLE cached record, else past the window."""
        empty_or_behind = not self._keys or self.start_offset > self._cache[self._keys[-1]].last
        if not self._find_next:
            return self.end_offset if empty_or_behind else self.end_offset + 1
        if empty_or_behind:
            self._find_next = False
            return self.end_offset
        for k in self._keys:
            for first, _last, s in self._cache[k].states():
                if s.state == AVAILABLE and not s.moving:
                    return first
        self._find_next = False
        return self.end_offset + 1

    def in_flight_count(self) -> int:
        """Kafka's numInFlightRecords: the window's width while anything is cached."""
        return self.end_offset - self.start_offset + 1 if self._keys else 0

    def can_acquire(self) -> bool:
        """SharePartition.canAcquireRecords: something to re-acquire, or room under the in-flight cap."""
        if self.next_fetch_offset() != self.end_offset + 1:
            return True
        return self.in_flight_count() < self.limits.max_in_flight

    def delivery_complete_count(self) -> int:
        """Records at or past SPSO that are ACKNOWLEDGED or ARCHIVED."""
        n = 0
        for k in self._keys:
            for first, last, s in self._cache[k].states():
                if _terminal(s.state) and last >= self.start_offset:
                    n += last - max(first, self.start_offset) + 1
        return n

    def record_state(self, offset: int) -> tuple[int, int, str] | None:
        """(state, delivery count, member) of a cached offset; None when it is not in flight."""
        b = self._floor(offset)
        if b is None or b.last < offset:
            return None
        s = b.whole if b.offsets is None else b.offsets[offset]
        assert s is not None
        return s.state, s.count, s.member

    def cached_offsets(self) -> list[int]:
        return [o for k in self._keys for o in range(self._cache[k].first, self._cache[k].last + 1)]

    def next_deadline(self) -> int | None:
        """The earliest lock expiry among ACQUIRED records, for the shell's timer."""
        best: int | None = None
        for k in self._keys:
            for _f, _l, s in self._cache[k].states():
                if s.state == ACQUIRED and s.deadline is not None and (best is None or s.deadline < best):
                    best = s.deadline
        return best

    # ------------------------------------------------------------------ acquire

    def acquire(
        self,
        member: str,
        batches: Sequence[LogBatch],
        fetch_offset: int,
        max_records: int,
        batch_size: int,
        now: int,
        record_limit: bool = False,
        aborted: Sequence[tuple[int, int]] | None = None,
    ) -> tuple[list[AcquiredRecords], int]:
        """SharePartition.acquire over the log batches read from ``fetch_offset``: new records whole log
        batches at a time up to the MaxRecords soft limit (hard in record_limit mode), split into
        AcquiredRecords at batch boundaries past ``batch_size``; cached AVAILABLE records again with one
        more delivery. ``aborted`` (read_committed): (producer id, first offset) of aborted transactions,
        whose batches are archived. Returns the acquired ranges and their record count."""
        if max_records <= 0 or not batches:
            return [], 0
        last_batch, first_batch = batches[-1], batches[0]
        if last_batch.last_offset < self.start_offset:
            return [], 0
        max_acquire, last_to_acquire = self._room(fetch_offset, max_records, last_batch.last_offset)
        if max_acquire <= 0:
            return [], 0
        lock_until = now + self.limits.lock_duration_ms
        base = first_batch.base_offset
        self._archive_stale(fetch_offset, base)
        floor = self._floor(base)
        if floor is None:
            base = max(base, self.start_offset)
        elif floor.last >= base:
            base = floor.first
        sub = self._sub(min(first_batch.base_offset, base), last_to_acquire)
        if not sub:
            fresh, n = self._acquire_new(
                member, batches, record_limit, base, last_to_acquire, batch_size, max_acquire, lock_until
            )
            return self._filter_aborted(batches, fresh, aborted), n
        result: list[AcquiredRecords] = []
        count = 0
        limit = self.limits.delivery_count_limit
        for b in sub:
            if count >= max_acquire:
                break
            full = b.first >= first_batch.base_offset and b.last <= last_to_acquire
            remaining = max_acquire - count
            subset_limit = record_limit and (b.last - b.first + 1) > remaining
            throttle = self._should_throttle(b, first_batch.base_offset, last_to_acquire)
            if throttle and count > 0:
                max_acquire = 0
                break
            if not full or b.offsets is not None or subset_limit or throttle:
                if b.offsets is None:
                    assert b.whole is not None
                    if b.whole.state != AVAILABLE or b.whole.moving:
                        continue
                    b.explode()
                got = self._acquire_offsets(
                    member, record_limit, remaining, first_batch.base_offset, last_to_acquire, b, result, lock_until
                )
                count += got
                if throttle and got > 0:
                    max_acquire = 0
                    break
                continue
            assert b.whole is not None
            if b.whole.state != AVAILABLE or b.whole.moving:
                continue
            if not b.whole.try_update(ACQUIRED, True, limit, member):
                continue
            b.whole.deadline = lock_until
            result.append(AcquiredRecords(b.first, b.last, b.whole.count))
            count += b.last - b.first + 1
        if count < max_acquire and sub[-1].last < last_to_acquire:
            fresh, n = self._acquire_new(
                member,
                batches,
                record_limit,
                sub[-1].last + 1,
                last_to_acquire,
                batch_size,
                max_acquire - count,
                lock_until,
            )
            result.extend(fresh)
            count += n
        if result:
            result = self._filter_aborted(batches, result, aborted)
        return result, count

    def _room(self, fetch_offset: int, max_records: int, last_offset: int) -> tuple[int, int]:
        """lastOffsetAndMaxRecordsToAcquire: the in-flight cap bounds new records; at the cap only the
        records inside the window can be re-acquired."""
        n = min(max_records, self.limits.max_in_flight - self.in_flight_count())
        last = last_offset
        if n <= 0 and fetch_offset <= self.end_offset:
            n = min(max_records, self.end_offset - fetch_offset + 1)
            last = min(last_offset, self.end_offset)
        return n, last

    def _acquire_new(
        self,
        member: str,
        batches: Sequence[LogBatch],
        record_limit: bool,
        first: int,
        last: int,
        batch_size: int,
        max_records: int,
        lock_until: int,
    ) -> tuple[list[AcquiredRecords], int]:
        if not self._keys and self.end_offset > first:
            first = self.end_offset
        if first > last:
            return [], 0
        if max_records < last - first + 1:
            last = _last_of_batch_holding(batches, first + max_records - 1)
        ranges: list[tuple[int, int]] = []
        current = first
        if not record_limit and last - first + 1 > batch_size:
            for lb in batches:
                if lb.base_offset > last:
                    break
                if lb.base_offset - current >= batch_size:
                    ranges.append((current, lb.base_offset - 1))
                    current = lb.base_offset
        ranges.append((current, last))
        if record_limit and ranges[0][1] - ranges[0][0] + 1 > max_records:
            # the cached batch keeps the whole log batch; only its first max_records are acquired
            lo, hi = ranges[0]
            b = _Batch(lo, hi, _State(ACQUIRED, 1, member, lock_until))
            offsets = b.explode()
            for off in range(lo + max_records, hi + 1):
                offsets[off] = _State(AVAILABLE, 0)
            self._put(b)
            self._find_next = True
            acquired = [AcquiredRecords(lo, lo + max_records - 1, 1)]
            self._after_new(lo, hi)
            return acquired, max_records
        for lo, hi in ranges:
            self._put(_Batch(lo, hi, _State(ACQUIRED, 1, member, lock_until)))
        self._after_new(first, last)
        got = [AcquiredRecords(lo, hi, 1) for lo, hi in ranges]
        return got, last - first + 1

    def _after_new(self, first: int, last: int) -> None:
        if self._keys and self._keys[0] == first:
            self.start_offset = first
        if last > self.end_offset:
            self.end_offset = last

    def _should_throttle(self, b: _Batch, first: int, last: int) -> bool:
        threshold = _throttle_limit(self.limits.delivery_count_limit)
        if b.offsets is None:
            assert b.whole is not None
            return b.whole.state == AVAILABLE and not b.whole.moving and b.whole.count >= threshold
        counts = [s.count for o, s in b.offsets.items() if first <= o <= last and s.state == AVAILABLE and not s.moving]
        return max(counts, default=0) >= threshold

    def _acquire_offsets(
        self,
        member: str,
        record_limit: bool,
        max_records: int,
        first: int,
        last: int,
        b: _Batch,
        result: list[AcquiredRecords],
        lock_until: int,
    ) -> int:
        """acquireSubsetBatchRecords: offset by offset, throttled near the delivery limit."""
        assert b.offsets is not None
        limit = self.limits.delivery_count_limit
        threshold = _throttle_limit(limit)
        throttled_max = -1
        count = 0
        got: list[AcquiredRecords] = []
        for off, s in b.offsets.items():
            if off < first:
                continue
            if off > last:
                break
            if s.state != AVAILABLE or s.moving:
                continue
            if limit > 2 and s.count == limit - 1 and count > 0:
                break  # its last attempt: delivered alone, next time
            if s.count >= threshold and throttled_max < 0:
                throttled_max = max(1, len(b.offsets) >> (s.count - threshold + 1))
            if not s.try_update(ACQUIRED, True, limit, member):
                continue
            s.deadline = lock_until
            got.append(AcquiredRecords(off, off, s.count))
            count += 1
            if s.count == limit and limit > 2:
                break
            if record_limit and count == max_records:
                break
            if throttled_max > 0 and count == throttled_max:
                break
        result.extend(_accumulate(got))
        return count

    def _filter_aborted(
        self, batches: Sequence[LogBatch], acquired: list[AcquiredRecords], aborted: Sequence[tuple[int, int]] | None
    ) -> list[AcquiredRecords]:
        """read_committed: archive the acquired records of aborted transactions and leave them out."""
        if not aborted or not acquired:
            return acquired
        ranges = aborted_batches(batches, aborted)
        if not ranges:
            return acquired
        for lo, hi in ranges:
            self._archive(lo, hi, ACQUIRED)
        out: list[AcquiredRecords] = []
        for a in acquired:
            pieces = [(a.first_offset, a.last_offset)]
            for lo, hi in ranges:
                nxt: list[tuple[int, int]] = []
                for pf, pl in pieces:
                    if pl < lo or pf > hi:
                        nxt.append((pf, pl))
                        continue
                    if pf < lo:
                        nxt.append((pf, lo - 1))
                    if pl > hi:
                        nxt.append((hi + 1, pl))
                pieces = nxt
            out.extend(AcquiredRecords(pf, pl, a.delivery_count) for pf, pl in pieces)
        return out

    # ------------------------------------------------------------------ acknowledge

    def acknowledge(self, member: str, acks: Sequence[AckBatch], now: int) -> Update:
        """SharePartition.acknowledge: validates every batch, starts the transitions and returns what to
        write; raises ShareError (rolling back what it started) when Kafka refuses the request."""
        update = Update((), self.start_offset, 0)
        pieces: list[StateBatch] = []
        try:
            for ack in acks:
                for t in ack.types:
                    if t not in (GAP, ACCEPT, RELEASE, REJECT, RENEW):
                        raise ShareError(INVALID_REQUEST, f"Invalid acknowledge type: {list(ack.types)}")
                if ack.last_offset < self.start_offset:
                    continue  # already past SPSO: ignored
                sub = self._sub_for_ack(ack)
                self._ack_batches(member, ack, sub, pieces, update, now)
        except ShareError:
            for s in update.transitions:
                s.complete(False, now, self.limits.delivery_count_limit)
            raise
        update.batches = tuple(pieces)
        update.start_offset = self.start_offset
        update.delivery_complete_count = self.delivery_complete_count()
        return update

    def _sub_for_ack(self, ack: AckBatch) -> list[_Batch]:
        floor = self._floor(ack.first_offset)
        if floor is None:
            if ack.first_offset < self.start_offset <= ack.last_offset:
                floor = self._floor(self.start_offset)
            if floor is None:
                raise ShareError(
                    INVALID_RECORD_STATE,
                    "Batch record not found. The request batch offsets are not found in the cache.",
                )
        sub = self._sub(floor.first, ack.last_offset)
        if sub[-1].last < ack.first_offset:
            raise ShareError(
                INVALID_REQUEST, "Batch record not found. The first offset in request is past acquired records."
            )
        if ack.last_offset > sub[-1].last:
            raise ShareError(
                INVALID_REQUEST, "Batch record not found. The last offset in request is past acquired records."
            )
        return sub

    def _ack_batches(
        self, member: str, ack: AckBatch, sub: list[_Batch], pieces: list[StateBatch], update: Update, now: int
    ) -> None:
        limit = self.limits.delivery_count_limit
        for b in sub:
            if b.last < self.start_offset:
                continue
            if b.offsets is None:
                assert b.whole is not None
                if b.whole.member == NO_MEMBER:
                    raise ShareError(
                        INVALID_RECORD_STATE,
                        "The batch cannot be acknowledged. The batch is not in the acquired state.",
                    )
                if b.whole.member != member:
                    raise ShareError(INVALID_RECORD_STATE, "Member is not the owner of batch record")
                if b.whole.moving:
                    raise ShareError(
                        INVALID_RECORD_STATE,
                        "The record state is invalid. The acknowledgement of delivery could not be completed.",
                    )
            full = b.first >= ack.first_offset and b.last <= ack.last_offset
            per_offset = len(ack.types) > 1
            start_inside = b.first < self.start_offset <= b.last
            if not full or b.offsets is not None or per_offset or start_inside:
                if b.offsets is None:
                    assert b.whole is not None
                    if b.whole.state != ACQUIRED:
                        raise ShareError(
                            INVALID_RECORD_STATE,
                            "The batch cannot be acknowledged. The subset batch is not in the acquired state.",
                        )
                    b.explode()
                assert b.offsets is not None
                for off, s in b.offsets.items():
                    if off < ack.first_offset or off < self.start_offset:
                        continue
                    if off > ack.last_offset:
                        break
                    if s.state != ACQUIRED:
                        raise ShareError(
                            INVALID_RECORD_STATE, "The offset cannot be acknowledged. The offset is not acquired."
                        )
                    if s.moving:
                        raise ShareError(
                            INVALID_RECORD_STATE,
                            "The record state is invalid. The acknowledgement of delivery could not be completed.",
                        )
                    if s.member != member:
                        raise ShareError(INVALID_RECORD_STATE, "Member is not the owner of offset")
                    t = ack.types[off - ack.first_offset] if per_offset else ack.types[0]
                    self._apply(s, t, off, off, member, pieces, update, now, limit)
            else:
                assert b.whole is not None
                if b.whole.state != ACQUIRED:
                    raise ShareError(
                        INVALID_RECORD_STATE,
                        "The batch cannot be acknowledged. The batch is not in the acquired state.",
                    )
                self._apply(b.whole, ack.types[0], b.first, b.last, member, pieces, update, now, limit)

    def _apply(
        self,
        s: _State,
        t: int,
        first: int,
        last: int,
        member: str,
        pieces: list[StateBatch],
        update: Update,
        now: int,
        limit: int,
    ) -> None:
        if t == RENEW:
            if not self.limits.renew_enabled:
                raise ShareError(INVALID_RECORD_STATE, "Renewing acquisition locks is not enabled for the group.")
            s.deadline = now + self.limits.lock_duration_ms
            return
        if not s.start(ACK_TO_STATE[t], limit):
            raise ShareError(INVALID_RECORD_STATE, "Unable to acknowledge records for the batch")
        update.transitions.append(s)
        if s.state == AVAILABLE:
            update.released = True
        pieces.append(StateBatch(first, last, s.state, s.count))

    # ------------------------------------------------------------------ release, expiry, log start

    def release(self, member: str) -> Update:
        """releaseAcquiredRecords: a session closed; the member's ACQUIRED records go back (ARCHIVED at the
        limit or below SPSO), as one transition to persist."""
        limit = self.limits.delivery_count_limit
        update = Update((), self.start_offset, 0)
        pieces: list[StateBatch] = []
        for k in self._keys:
            b = self._cache[k]
            if (
                b.offsets is None
                and b.whole is not None
                and b.whole.state == ACQUIRED
                and b.whole.member == member
                and b.first < self.start_offset <= b.last
            ):
                b.explode()
            for first, last, s in b.states():
                if s.member != member or s.state != ACQUIRED:
                    continue
                target = ARCHIVED if last < self.start_offset else AVAILABLE
                if s.start(target, limit):
                    update.transitions.append(s)
                    update.released = update.released or s.state == AVAILABLE
                    pieces.append(StateBatch(first, last, s.state, s.count))
        update.batches = tuple(pieces)
        update.start_offset = self.start_offset
        update.delivery_complete_count = self.delivery_complete_count()
        return update

    def expire_locks(self, now: int) -> Update | None:
        """Acquisition locks past their deadline: ACQUIRED -> AVAILABLE (ARCHIVED at the limit or below
        SPSO), changed outright; the batches are written and the window moves whatever the write says."""
        limit = self.limits.delivery_count_limit
        pieces: list[StateBatch] = []
        released = False
        for k in self._keys:
            b = self._cache[k]
            if b.offsets is None:
                s = b.whole
                assert s is not None
                if s.state != ACQUIRED or s.deadline is None or s.deadline > now or s.moving:
                    continue
                if b.first < self.start_offset <= b.last:
                    b.explode()
            for first, last, s in list(b.states()):
                if s.state != ACQUIRED or s.deadline is None or s.deadline > now or s.moving:
                    continue
                target = ARCHIVED if last < self.start_offset else AVAILABLE
                if s.try_update(target, False, limit, NO_MEMBER):
                    pieces.append(StateBatch(first, last, s.state, s.count))
                    released = released or s.state == AVAILABLE
        if not pieces:
            return None
        if released:
            self._find_next = True
        return Update(tuple(pieces), self.start_offset, self.delivery_complete_count(), released=released)

    def complete(self, update: Update, ok: bool, now: int) -> bool:
        """The write of ``update`` answered: commit or roll back its transitions, then move SPSO over the
        terminal run. Returns whether the cache changed (waiting fetches may proceed)."""
        limit = self.limits.delivery_count_limit
        for s in update.transitions:
            s.complete(ok, now, limit)
            if s.state == AVAILABLE:
                self._find_next = True
        if not ok and update.transitions:
            return False
        return self._advance_start() or update.released

    def log_start_moved(self, log_start: int) -> None:
        """updateCacheAndOffsets: the log's start passed SPSO (retention, DeleteRecords): AVAILABLE
        records below it are archived (not persisted: the next write carries the new start offset)."""
        if log_start <= self.start_offset:
            return
        if not self._keys:
            self.start_offset = self.end_offset = log_start
            return
        if self._archive(self.start_offset, log_start - 1, AVAILABLE):
            self._find_next = True
        self.start_offset = log_start
        if self.end_offset < self.start_offset:
            self.end_offset = self.start_offset

    # ------------------------------------------------------------------ the window

    def _advance_start(self) -> bool:
        """maybeUpdateCachedStateAndOffsets: SPSO jumps past the contiguous terminal run at its start;
        wholly terminal batches below it leave the cache; all terminal -> the cache is emptied."""
        if not self._keys:
            return False
        b = self._floor(self.start_offset)
        if b is None or b.last < self.start_offset:
            return False
        s = b.whole if b.offsets is None else b.offsets.get(self.start_offset)
        if s is None or s.moving or not _terminal(s.state):
            return False
        last_acked = -1
        for k in self._keys:
            stop = False
            for _first, last, st in self._cache[k].states():
                if st.moving or not _terminal(st.state):
                    stop = True
                    break
                last_acked = last
            if stop:
                break
        if last_acked == -1:
            return False
        last_cached = self._cache[self._keys[-1]].last
        if last_acked == last_cached:
            self.start_offset = self.end_offset = last_cached + 1
            self._keys, self._cache = [], {}
            return True
        i = bisect.bisect_right(self._keys, last_acked) - 1
        entry = self._cache[self._keys[i]]
        if last_acked == entry.last:
            higher = self._keys[i + 1]
            self.start_offset = max(self.start_offset, higher)
            drop = i + 1
        else:
            self.start_offset = max(self.start_offset, last_acked + 1)
            drop = i
        for k in self._keys[:drop]:
            del self._cache[k]
        self._keys = self._keys[drop:]
        return True

    def _archive(self, first: int, last: int, initial: int) -> bool:
        """archiveRecords: records in [first, last] still in ``initial`` become ARCHIVED."""
        changed = False
        for b in self._sub(first, last):
            if b.first > last:
                break
            full = b.first >= first and b.last <= last
            if not full or b.offsets is not None:
                if b.offsets is None:
                    assert b.whole is not None
                    if b.whole.state != initial:
                        continue
                    b.explode()
                assert b.offsets is not None
                for off, s in b.offsets.items():
                    if first <= off <= last and s.state == initial:
                        s.state, s.member, s.deadline = ARCHIVED, NO_MEMBER, None
                        changed = True
                continue
            assert b.whole is not None
            if b.whole.state == initial:
                b.whole.state, b.whole.member, b.whole.deadline = ARCHIVED, NO_MEMBER, None
                changed = True
        return changed

    def _archive_stale(self, fetch_offset: int, base_offset: int) -> None:
        """maybeArchiveStaleBatches: AVAILABLE cached records the log no longer has (compaction) between
        the fetch offset and the first fetched batch."""
        if not self._keys or fetch_offset >= base_offset:
            return
        if self._archive(fetch_offset, base_offset - 1, AVAILABLE):
            self._find_next = True

    # ------------------------------------------------------------------ the sorted cache

    def _put(self, b: _Batch) -> None:
        if b.first not in self._cache:
            bisect.insort(self._keys, b.first)
        self._cache[b.first] = b

    def _floor(self, offset: int) -> _Batch | None:
        i = bisect.bisect_right(self._keys, offset) - 1
        return self._cache[self._keys[i]] if i >= 0 else None

    def _sub(self, first: int, last: int) -> list[_Batch]:
        """Cached batches whose first offset is in [first, last] (Kafka's subMap), plus the floor batch
        that holds ``first``."""
        lo = bisect.bisect_left(self._keys, first)
        if lo > 0 and self._cache[self._keys[lo - 1]].last >= first:
            lo -= 1
        hi = bisect.bisect_right(self._keys, last)
        return [self._cache[k] for k in self._keys[lo:hi]]


def _throttle_limit(limit: int) -> int:
    """Records delivered this often come in shrinking chunks: max(2, ceil(limit / 2))."""
    return max(MIN_THROTTLE_DELIVERY_LIMIT, math.ceil(limit / 2))


def _last_of_batch_holding(batches: Sequence[LogBatch], offset: int) -> int:
    """The last offset of the log batch holding ``offset`` (MaxRecords ends at a batch boundary)."""
    previous = None
    for b in batches:
        if offset >= b.base_offset:
            previous = b
            continue
        break
    if previous is not None and offset <= previous.last_offset:
        return previous.last_offset
    return offset


def _accumulate(records: list[AcquiredRecords]) -> list[AcquiredRecords]:
    """ShareFetchUtils.accumulateAcquiredRecords: adjacent offsets with one delivery count merge."""
    out: list[AcquiredRecords] = []
    for r in records:
        if out and out[-1].last_offset + 1 == r.first_offset and out[-1].delivery_count == r.delivery_count:
            out[-1] = AcquiredRecords(out[-1].first_offset, r.last_offset, r.delivery_count)
        else:
            out.append(r)
    return out


def aborted_batches(batches: Sequence[LogBatch], aborted: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """fetchAbortedTransactionRecordBatches: the (first, last) of the fetched transactional batches that
    belong to an aborted transaction, given (producer id, first offset) of the aborted ones."""
    queue = sorted(aborted, key=lambda a: a[1])
    active: set[int] = set()
    out: list[tuple[int, int]] = []
    i = 0
    for b in batches:
        if b.producer_id < 0:
            continue
        while i < len(queue) and queue[i][1] <= b.last_offset:
            active.add(queue[i][0])
            i += 1
        if b.abort_marker:
            active.discard(b.producer_id)
        elif b.transactional and b.producer_id in active:
            out.append((b.base_offset, b.last_offset))
    return out
