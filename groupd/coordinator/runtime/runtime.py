"""The coordinator runtime: shards, tokens, ordered delivery once records are durable, and the timer heap.

Kafka 4's ``CoordinatorRuntime`` keeps these apart from the rules of any group type, and so does this
module: it knows nothing of groups, offsets or transactions, and nothing of asyncio. A shard (one per
partition of the coordinator's log) holds the rules' state; an operation is a handler of the rules,
applied to the state at once, in arrival order, returning a ``Result`` (records to append, answers,
timers). The runtime appends the records through its ``LogPort``, is told by the port when they are
durable, and only then delivers the answers, in the order the rules made them: an answer whose records
were durable first still waits for every earlier Result of its shard (Kafka's runtime does the same).

Three narrow ports connect it to the world, so that tests drive it with a manual clock and an in-memory
log (tests/unit/coordinator/harness.py) and the broker with the event loop and the group committer
(coordinator/runtime/loop.py):

- ``LogPort``: append a Result's records; say whether (and later when) they are durable.
- ``Wakeups``: arm the one wake-up per shard that fires its earliest timer.
- ``ShardRules``: the state machine of a shard (fresh state, timers, snapshots, failed writes, replay).

A failed write is rolled back by the runtime, as Kafka's runtime reverts its ``SnapshotRegistry``: before
an operation runs, the rules hand it a ``Snapshot`` of what the operation can touch; if the operation's
records cannot be written, the runtime restores that snapshot and puts the timers the operation moved
back where they were, then asks the rules for the answers Kafka gives to a failed write
(``on_write_failed``: answers and follow-ups such as a new rebalance, never undo). An append that fails
is rolled back at once, as Kafka's is. A write whose flush round fails later is rolled back together
with the writes behind it whose rounds failed too (a refused round fails all its writes), newest first,
as Kafka reverts to the snapshot before a failed batch: it waits for the open rounds of later writes of
its subject, and it must have been the shard's one write in flight when it was made (an earlier write
replayed since would be erased). Under a later write of its subject made durable it is only answered:
restoring would erase durable state (Kafka, appending in order, never has that case).
"""

from __future__ import annotations

import collections
import heapq
import itertools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from groupd.coordinator import errors as E
from groupd.coordinator.api import Result, TimerOp, Token

log = logging.getLogger("groupd.coordinator")

TimerKey = tuple[Any, ...]
TIMER_RETRY_BACKOFF_MS = 500  # Kafka's CoordinatorTimer: a timer operation whose write failed runs again


class CoordinatorError(Exception):
    """A request answered without the rules (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS), or whose
    records could not be made durable (KAFKA_STORAGE_ERROR)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class WriteFailed(Exception):
    """What a ``LogPort`` raises (or reports) for records it could not append or make durable, with the
    error code the rules map into their answers (Kafka's KAFKA_STORAGE_ERROR unless a test says else)."""

    def __init__(self, message: str, code: int = E.KAFKA_STORAGE_ERROR) -> None:
        super().__init__(message)
        self.code = code


class Waiter(Protocol):
    """Who waits for a token's payload: an asyncio future fits, so does ``Then``."""

    def done(self) -> bool: ...

    def set_result(self, payload: Any) -> None: ...

    def set_exception(self, error: BaseException) -> None: ...


class LogPort(Protocol):
    def append(self, shard: Shard, result: Result) -> None:
        """Append the Result's records (or its marker) to the shard's log; raise WriteFailed (after
        logging why) if not."""

    def when_durable(self, shard: Shard, done: Callable[[BaseException | None], None]) -> bool:
        """Have ``done(None)`` (or ``done(error)``) called once what was appended is durable; False,
        and no call, when it already is (or the policy does not wait)."""


class Wakeups(Protocol):
    def soon(self, shard: Shard) -> None:
        """Call ``runtime.wake_soon(shard)`` once what is running now is over."""

    def at(self, shard: Shard, delay_ms: int) -> None:
        """Call ``runtime.wake(shard)`` in ``delay_ms``, replacing the shard's armed wake-up."""

    def cancel(self, shard: Shard) -> None:
        """Disarm the shard's wake-up."""


class Snapshot(Protocol):
    """What an operation could change, as it was before the operation ran (the rules' own structure)."""

    @property
    def subject(self) -> str | None:
        """What it covers (a group id), for telling overlapping snapshots apart; None: anything."""

    def restore(self) -> None:
        """Put the state back as it was when the snapshot was taken."""


SnapshotTaker = Callable[[Any, str, Any], "Snapshot | None"]  # (state, subject, request)


class ShardRules(Protocol):
    """The state machine of one shard: what the runtime calls besides the request handlers."""

    # The snapshot of a request, by its class, taken with one lookup on the hot path: a taker, or None for
    # a request that changes nothing the runtime should restore. A class not in it goes to ``snapshot``.
    snapshots: Mapping[type, SnapshotTaker | None]

    def new_state(self, partition: int) -> Any: ...

    def snapshot(self, state: Any, subject: str, request: object) -> Snapshot | None:
        """A snapshot of what the operation on ``request`` (about ``subject``, e.g. a group id; a firing
        timer's key for a timer) can change before its records are durable; None when it changes nothing
        the runtime should restore."""

    def on_timer(self, state: Any, key: tuple[Any, ...], now: int) -> Result: ...

    def on_write_failed(self, state: Any, write_ref: object, error: int, now: int) -> Result: ...

    def replay(self, state: Any, result: Result, now: int) -> None: ...

    def timer_subject(self, key: tuple[Any, ...]) -> str | None:
        """What a timer belongs to (a group id), for the observer; None when nothing."""


class Observer(Protocol):
    """Told of every operation's subject before and after it runs (metrics, state-change logs)."""

    def before(self, state: Any, subject: str) -> Any: ...

    def after(self, shard: Shard, subject: str, before: Any) -> None: ...


@dataclass(eq=False)
class Shard:
    partition: int
    state: Any
    log: Any = None  # the partition's log: the LogPort's business, never read by the runtime
    loaded: bool = False
    failed: str | None = None  # why its load failed: it then answers NOT_COORDINATOR, as Kafka's FAILED
    # Results waiting to be delivered, in the order the rules made them: each waits for its own flush
    # round and for every Result before it (see _Waiting)
    queue: collections.deque[_Waiting] = field(default_factory=collections.deque)
    # The rules' timers. Each live one has an entry, an int: its deadline << 64 | a sequence number, so
    # entries sort by deadline and are unique. ``deadlines`` maps key -> entry and ``keys`` entry -> key;
    # the heap holds entries, stale ones (moved or cancelled: no longer in ``keys``) skipped when popped,
    # and one wake-up is armed for the earliest (a deadline already due is fired by a ``Wakeups.soon``
    # instead, leaving that wake-up armed). A heartbeat re-arms its member's session timer: two dict
    # writes and a heappush instead of cancelling and creating an event-loop timer. Entries are ints,
    # not tuples, so that a stale one is no GC-tracked survivor and holds no old key: with tuples, a
    # rebalance left 27 tracked tuples a group behind and gen-0 passes came twice as often.
    deadlines: dict[tuple[Any, ...], int] = field(default_factory=dict)
    keys: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    heap: list[int] = field(default_factory=list)
    wakeup: Any = None  # the armed wake-up's handle (the Wakeups port's)
    wakeup_at: int | None = None
    due_soon: bool = False  # a Wakeups.soon is queued for deadlines already due (the armed one stays)
    phase_started: dict[str, float] = field(default_factory=dict)  # the observer's rebalance phases


FAILED_WRITE_LOG_EVERY_MS = 10_000


class _Waiting:
    """A Result whose records are appended and not yet known durable. Called by the LogPort when its
    round is over (with None or the round's error), from the code that learns it: delivery then takes
    no loop turn of its own, where a future per Result and a callback per link took two.

    It also holds how to put the shard back as it was before the operation if the write fails (one
    object per write, not two: a commit's path is counted in instructions): the rules' ``snapshot``, the
    deadline (or absence) of each timer the operation set or cancelled (``moved``, kept raw: TimerOps are
    made only for a rollback), the timer that ran the operation (``retry``: set again after a backoff),
    and whether no earlier Result of the shard was waiting (``alone``: none can be replayed under it)."""

    __slots__ = ("runtime", "shard", "result", "flushed", "error", "snapshot", "moved", "retry", "alone")

    def __init__(self, runtime: CoordinatorRuntime, shard: Shard, result: Result) -> None:
        self.runtime, self.shard, self.result = runtime, shard, result
        self.flushed = False
        self.error: BaseException | None = None
        self.snapshot: Snapshot | None = None
        self.moved: Sequence[tuple[TimerKey, int | None]] = ()
        self.retry: TimerKey | None = None
        self.alone = False

    def __call__(self, error: BaseException | None) -> None:
        self.flushed, self.error = True, error
        self.runtime._drain(self.shard)


def _covered(writes: Iterable[_Waiting], subject: str | None) -> bool:
    """One of ``writes`` may have changed what a snapshot of ``subject`` holds."""
    for later in writes:
        if later.snapshot is not None and (subject is None or later.snapshot.subject in (subject, None)):
            return True
    return False


def _awaits_later_round(queue: collections.deque[_Waiting]) -> bool:
    """The failed write at the front would be rolled back, but a write behind it whose round is still
    open may have changed the same subject: wait for that round (the answers wait anyway, in order)."""
    first = queue[0]
    if first.snapshot is None or not first.alone:
        return False
    return _covered((w for w in itertools.islice(queue, 1, None) if not w.flushed), first.snapshot.subject)


class Then:
    """A callback standing where a future would wait: ``then(payload, None)`` or ``then(None, error)``."""

    __slots__ = ("then", "called")

    def __init__(self, then: Callable[[Any, BaseException | None], None]) -> None:
        self.then, self.called = then, False

    def done(self) -> bool:
        return self.called

    def set_result(self, payload: Any) -> None:
        self.called = True
        self.then(payload, None)

    def set_exception(self, error: BaseException) -> None:
        self.called = True
        self.then(None, error)


class CoordinatorRuntime:
    """Shards of one coordinator log (``topic``), the operations on them and their timers."""

    def __init__(
        self,
        topic: str,
        rules: ShardRules,
        port: LogPort,
        wakeups: Wakeups,
        now: Callable[[], int],
        context: Any = None,
        observer: Observer | None = None,
    ) -> None:
        self.topic = topic
        self.rules = rules
        self.port = port
        self.wakeups = wakeups
        self.now = now
        self.context = context  # handed to every handler after ``now`` (the group coordinator's GroupConfig)
        self.observer = observer
        self.on_result: Callable[[Result], None] | None = None  # sees every Result (tests)
        self.shards: dict[int, Shard] = {}
        self._snapshots = rules.snapshots
        self._snapshot_other = rules.snapshot  # bound once: a request class not in ``snapshots``
        self._waiting: dict[Token, Waiter] = {}
        self._failed_lines: dict[int, tuple[int, int]] = {}  # partition -> (last line's time, lines held back)
        self._tokens = itertools.count(1)
        self._timer_seq = itertools.count()

    def add_shard(self, partition: int, shard_log: Any = None) -> Shard:
        shard = self.shards[partition] = Shard(partition, self.rules.new_state(partition), shard_log)
        return shard

    # ------------------------------------------------------------ operations

    def run(self, shard: Shard, subject: str, handler: Callable[..., Result], request: Any, waiter: Waiter) -> Token:
        """Apply ``handler(state, request, token, now, context)`` under a new token whose payload goes to
        ``waiter`` once the records of its Result (and of every Result before it) are durable."""
        token = next(self._tokens)
        self._waiting[token] = waiter
        try:
            observer = self.observer
            before = observer.before(shard.state, subject) if observer is not None else None
            take = self._snapshots.get(request.__class__, self._snapshot_other)
            snapshot = take(shard.state, subject, request) if take is not None else None
            result = handler(shard.state, request, token, self.now(), self.context)
            if observer is not None:
                observer.after(shard, subject, before)
            self.process(shard, result, snapshot)
        except BaseException:
            self._waiting.pop(token, None)
            raise
        return token

    def run_task(self, shard: Shard, subject: str, task: Callable[[Any, int], Result]) -> Result:
        """An operation of the coordinator's own (the retention check, a deleted topic): ``task(state,
        now)`` under the rules' snapshot for ``subject`` ("" for none in particular), its Result processed
        as a request's, rolled back the same way if its records are not written."""
        snapshot = self.rules.snapshot(shard.state, subject, task)
        result = task(shard.state, self.now())
        self.process(shard, result, snapshot)
        return result

    def new_token(self, waiter: Waiter) -> Token:
        """A token for a Result made outside ``run`` (the harness's own calls of the rules)."""
        token = next(self._tokens)
        self._waiting[token] = waiter
        return token

    def abandon(self, token: Token) -> None:
        """Nobody waits for this token's payload any more (its connection closed)."""
        self._waiting.pop(token, None)

    def waiting(self) -> int:
        return len(self._waiting)

    def process(
        self, shard: Shard, result: Result, snapshot: Snapshot | None = None, retry: TimerKey | None = None
    ) -> None:
        """Set the Result's timers, append its records, and deliver its answers once durable, in order.
        ``snapshot``: what the operation that made the Result could change, as it was before; ``retry``:
        the key of the timer that made it, set again if it is rolled back."""
        if self.on_result is not None:
            self.on_result(result)
        writes = result.records or result.marker is not None
        if not writes:
            if result.timers:
                self.apply_timers(shard, result.timers)
        else:
            waiting = _Waiting(self, shard, result)
            if snapshot is not None:
                waiting.snapshot, waiting.retry, waiting.alone = snapshot, retry, not shard.queue
                if result.timers:
                    get = shard.deadlines.get
                    waiting.moved = [(op.key, get(op.key)) for op in result.timers]
            if result.timers:
                self.apply_timers(shard, result.timers)
            try:
                self.port.append(shard, result)
            except WriteFailed as exc:  # the port has said why in the log
                if waiting.snapshot is not None:
                    self._restore(shard, waiting)
                self._failed(shard, result, exc.code)
                return
            if self.port.when_durable(shard, waiting):
                shard.queue.append(waiting)
                return
        if not shard.queue:
            self._deliver(shard, result)
            return
        waiting = _Waiting(self, shard, result)
        waiting.flushed = True
        shard.queue.append(waiting)

    def _drain(self, shard: Shard) -> None:
        """Deliver the shard's Results from the front while their rounds are over: in the order the
        rules made them. Delivery may queue more (a failed write's follow-up): they wait their turn."""
        queue = shard.queue
        while queue and queue[0].flushed:
            if queue[0].error is not None and _awaits_later_round(queue):
                return  # its rollback waits for the later writes of its subject: failed too, they go back with it
            w = queue.popleft()
            try:
                self._settled(shard, w)
            except Exception:
                log.exception("delivering answers of %s-%d failed", self.topic, shard.partition)

    def _settled(self, shard: Shard, done: _Waiting) -> None:
        """Every earlier Result of the shard is answered and this one's flush round is over."""
        error, result = done.error, done.result
        if error is not None:
            self._log_failed_write(shard, error)
            if done.snapshot is not None and done.alone:
                self._roll_back(shard, done)
            self._failed(shard, result, error.code if isinstance(error, WriteFailed) else E.KAFKA_STORAGE_ERROR)
            return
        self._deliver(shard, result)

    def _log_failed_write(self, shard: Shard, error: BaseException) -> None:
        """One ERROR line per shard per FAILED_WRITE_LOG_EVERY_MS while its writes fail (a full disk
        refuses every commit of a round, and each is a Result of its own), counting the ones held back."""
        now = self.now()
        last, held = self._failed_lines.get(shard.partition, (None, 0))
        if last is not None and now - last < FAILED_WRITE_LOG_EVERY_MS:
            self._failed_lines[shard.partition] = (last, held + 1)
            return
        self._failed_lines[shard.partition] = (now, 0)
        more = f" ({held} more since the last such line)" if held else ""
        log.error("write of %s-%d failed: %s%s", self.topic, shard.partition, error, more)

    def _roll_back(self, shard: Shard, done: _Waiting) -> None:
        """``done``'s round failed and nothing was waiting when it was made: put back what it and the
        writes behind it whose rounds failed too (a refused round fails all its writes) changed, newest
        first, as Kafka reverts to the snapshot before a failed batch. A write's snapshot is restored only
        if no write still queued behind them (durable, or in flight and of another subject) covers its
        subject: restoring it would erase that write's state. Each snapshot is used here or never."""
        members = [done]
        for w in shard.queue:
            if not w.flushed or (w.error is None and (w.result.records or w.result.marker is not None)):
                break  # a round still open, or a durable write
            members.append(w)  # failed too, or an answer without records waiting its turn
        rest = list(itertools.islice(shard.queue, len(members) - 1, None))
        for w in reversed(members):
            snapshot = w.snapshot
            if snapshot is None:
                continue
            if not _covered(rest, snapshot.subject):
                self._restore(shard, w)
            w.snapshot = None

    def _restore(self, shard: Shard, undo: _Waiting) -> None:
        """The state as it was before ``undo``'s operation: its snapshot, the timers it moved, and the timer
        that ran it set again after a backoff."""
        assert undo.snapshot is not None
        undo.snapshot.restore()
        ops = [TimerOp(key, entry >> 64 if entry is not None else None) for key, entry in reversed(undo.moved)]
        if undo.retry is not None:
            ops.append(TimerOp(undo.retry, self.now() + TIMER_RETRY_BACKOFF_MS))
        if ops:
            self.apply_timers(shard, ops)

    def _failed(self, shard: Shard, result: Result, code: int) -> None:
        """Never acknowledge what is not durable: the rules map the failure (``code``, Kafka's append
        error) into each answer (the runtime has put the state back where it could)."""
        follow_up = self.rules.on_write_failed(shard.state, result.write_ref, code, self.now())
        if self.on_result is not None:
            self.on_result(follow_up)
        if follow_up.responses or follow_up.records or follow_up.timers:
            self._process_unordered(shard, follow_up)
        # anything the rules did not answer must not hang with a success it never got
        for token, _payload in result.responses:
            if any(t == token for t, _ in follow_up.responses):
                continue
            waiter = self._waiting.pop(token, None)
            if waiter is not None and not waiter.done():
                waiter.set_exception(CoordinatorError(code))

    def _process_unordered(self, shard: Shard, result: Result) -> None:
        if result.timers:
            self.apply_timers(shard, result.timers)
        if result.records:
            self.process(shard, Result(records=result.records, timers=(), replay=result.replay))
        self._deliver(shard, Result(responses=result.responses, replay=False))

    def _deliver(self, shard: Shard, result: Result) -> None:
        if result.replay and (result.records or result.marker is not None):
            self.rules.replay(shard.state, result, self.now())
        for token, payload in result.responses:
            waiter = self._waiting.pop(token, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(payload)

    # ------------------------------------------------------------ timers

    def apply_timers(self, shard: Shard, ops: Iterable[TimerOp]) -> None:
        deadlines, keys, heap, seq = shard.deadlines, shard.keys, shard.heap, self._timer_seq
        earliest = shard.wakeup_at
        for op in ops:
            key, deadline = op.key, op.deadline_ms
            old = deadlines.pop(key, None)
            if old is not None:
                del keys[old]  # its heap entry goes stale
            if deadline is None:
                continue
            entry = deadline << 64 | next(seq)  # a count that 64 bits hold for ever: no two alike
            deadlines[key] = entry
            keys[entry] = key
            heapq.heappush(heap, entry)
            if earliest is None or deadline < earliest:
                earliest = deadline
        if len(heap) > 2 * len(keys) + 1024:  # mostly stale entries: rebuild from the live ones
            shard.heap = heap = list(keys)
            heapq.heapify(heap)
        if earliest is not None and earliest != shard.wakeup_at:
            self._arm_wakeup(shard, earliest)

    def _arm_wakeup(self, shard: Shard, deadline: int) -> None:
        delay = deadline - self.now()
        if delay <= 0:
            # due already (a 0 ms initial join phase): fire next turn, keeping any later wake-up armed
            if not shard.due_soon:
                shard.due_soon = True
                self.wakeups.soon(shard)
            return
        shard.wakeup_at = deadline
        self.wakeups.at(shard, delay)

    def wake(self, shard: Shard) -> None:
        """The armed wake-up: fire every due timer of the shard, in deadline order, then re-arm."""
        # an event loop may run a timer up to one clock tick early; what it was armed for is due regardless
        now = max(self.now(), shard.wakeup_at or 0)
        shard.wakeup = shard.wakeup_at = None
        self.fire_due(shard, now)

    def wake_soon(self, shard: Shard) -> None:
        shard.due_soon = False
        self.fire_due(shard, self.now())

    def next_deadline(self, shard: Shard) -> int | None:
        """The earliest live deadline of the shard (a manual clock advances to it)."""
        heap, keys = shard.heap, shard.keys
        while heap and heap[0] not in keys:
            heapq.heappop(heap)
        return heap[0] >> 64 if heap else None

    def fire_due(self, shard: Shard, now: int) -> None:
        heap, keys = shard.heap, shard.keys
        bound = (now + 1) << 64  # every entry of a deadline <= now is below it
        while heap and heap[0] < bound:
            entry = heapq.heappop(heap)
            key = keys.pop(entry, None)
            if key is None:
                continue  # cancelled or moved since
            del shard.deadlines[key]
            self._fire(shard, key, entry >> 64)
            heap = shard.heap  # a firing may have rebuilt it
        while heap and heap[0] not in keys:
            heapq.heappop(heap)  # drop stale entries at the top before choosing the next wake-up
        if heap and (shard.wakeup_at is None or heap[0] >> 64 < shard.wakeup_at):
            self._arm_wakeup(shard, heap[0] >> 64)  # firings above may have armed it for a later one

    def _fire(self, shard: Shard, key: tuple[Any, ...], deadline_ms: int) -> None:
        # the rules must see their deadline reached, or they would take the firing for a stale one
        now = max(self.now(), deadline_ms)
        subject = self.rules.timer_subject(key)
        observer = self.observer if subject is not None else None
        before = observer.before(shard.state, subject) if observer is not None and subject is not None else None
        snapshot = self.rules.snapshot(shard.state, subject, key) if subject is not None else None
        try:
            result = self.rules.on_timer(shard.state, key, now)
        except Exception:
            log.exception("timer %s failed", key)
            return
        if observer is not None and subject is not None:
            observer.after(shard, subject, before)
        # rolled back, the timer's work is still to do: it fires again after a backoff, as Kafka's
        # coordinator timers retry an operation whose write failed
        self.process(shard, result, snapshot, key)

    def clear_timers(self) -> None:
        for shard in self.shards.values():
            self.wakeups.cancel(shard)
            shard.wakeup = shard.wakeup_at = None
            shard.deadlines.clear()
            shard.keys.clear()
            shard.heap.clear()
