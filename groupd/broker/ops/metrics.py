"""Broker metrics: cheap hooks on the hot path, Prometheus exposition at scrape time.

Every hook updates plain Python numbers (no locks, no label lookups in prometheus_client); one custom
collector turns them into metric families when ``/metrics`` is scraped, on the broker's own event loop
(see ``groupd/broker/ops/metrics_http.py``), so it may also read loop-owned coordinator and partition state safely.

Hooks, by caller (all optional to call; each is O(1)):

connection layer (``groupd/broker/network/connection.py``)
    ``request_started(api_key) -> token``, ``request_finished(api_key, token, response)``,
    ``bytes_in(n)``, ``bytes_out(n)``. Errors are read from the response's top-level ``error_code`` and,
    for OffsetCommit/Produce/TxnOffsetCommit (no top-level code), from their topics -> partitions lists.
coordinator shell (``groupd/coordinator/``)
    ``group_state_changed(group, old, new)``: Kafka state names (Empty, PreparingRebalance,
        CompletingRebalance, Stable, Dead); ``old`` is None for a new group.
    ``rebalance_started(group, cause)``: the group entered PreparingRebalance; ``cause`` in
        ``REBALANCE_CAUSES`` (join, leave, session_expiry, metadata_change). Kafka: classic-group-rebalance.
    ``rebalance_completed(group, generation, duration_s=None, cause=None)``: the group reached Stable at
        ``generation``; duration and cause default to what ``rebalance_started`` recorded.
    ``join_phase(duration_s)``, ``sync_phase(duration_s)``: PreparingRebalance and CompletingRebalance
        durations. ``heartbeat()``. ``commit(n, duration_s=None)``: one commit of ``n`` offsets, made
        durable in ``duration_s``. ``offsets_expired(n)``. ``group_removed(group)``: frees its series.
    ``consumer_group_rebalance()``: a consumer-protocol group's epoch was bumped by a heartbeat (or a
        regex resolution), not by a member's removal: Kafka's consumer-group-rebalance sensor.
    ``offsets_durable(group, rows, now_ms, log_end)``: (topic, partition, offset) rows of a commit made
        durable, for the live consumer status (``groupd/broker/ops/consumer_status.py``, Burrow's rules).
data plane (``groupd/broker/handlers/data.py``)
    ``topic_in(topic, records, nbytes)``, ``topic_out(topic, records, nbytes)``: produced and fetched
        records and bytes per topic (Kafka's per-topic MessagesInPerSec, BytesInPerSec, BytesOutPerSec).
storage (``groupd/storage/``)
    ``store_append(seconds, batch_records)``, ``store_fsync(seconds)``.
SASL connections (``groupd/broker/network/secure_connection.py``)
    ``authentication(listener, mechanism, result)``: result is success or failure.
share coordinator (``groupd/coordinator/share_state/service.py``)
    ``share_state_write(seconds)``: a WriteShareGroupState (or a Read persisting a leader epoch) made
        durable; scrape time reads ``broker.share_coordinator.states()`` and ``.last_pruned``.
transaction coordinator (``groupd/coordinator/transactions/service.py``)
    ``transaction_ended(result)``: markers written; ``result`` in ``TXN_RESULTS`` (commit, abort by the
        producer, abort of a timed-out transaction, abort fencing an older producer).
    ``throttled(quota, ms)``: a response over a client quota (``producer_byte_rate``, ``consumer_byte_rate``).

Scrape-time sources (duck-typed; absent ones are skipped):
    ``broker.coordinator.metrics_snapshot()`` -> iterable of objects (or tuples) with ``group_id``,
        ``state`` (Kafka state name), ``members`` (int), ``offsets`` (mapping (topic, partition) ->
        committed offset), and optionally ``protocol`` (``classic``, the default, or ``consumer``).
    ``broker.coordinator.is_loaded()`` (or ``loaded()``/``loaded``): every owned offsets partition loaded.
    ``broker.transactions.all()`` -> transactions with a ``state_name``: open ones counted by state.
    ``broker.partition_metrics()`` -> iterable of (topic, partition, log_start_offset, high_watermark,
        size_bytes) for data partitions.

Per-group series are capped at ``metrics.max.group.series`` groups; further groups are summed under
``group="__overflow__"`` (``consumergroup`` for kafka_exporter names), so 100,000 groups scrape small.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from groupd.broker.ops.consumer_status import NOTFOUND, ConsumerStatus
from groupd.clock import wall_ms
from groupd.protocol.topic_names import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_STATE_TOPIC

if TYPE_CHECKING:
    from groupd.broker.share.manager import SharePartitionManager

OVERFLOW = "__overflow__"
GROUP_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
CONSUMER_GROUP_STATES = ("Empty", "Assigning", "Reconciling", "Stable", "Dead")  # Kafka's ConsumerGroupState
GROUP_PROTOCOLS = ("classic", "consumer")  # Kafka's group-count protocol tag values
REBALANCE_CAUSES = ("join", "leave", "session_expiry", "metadata_change")
TXN_RESULTS = ("commit", "abort", "timeout", "fenced")

LATENCY_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
)
REBALANCE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10000)

# responses without a top-level error_code whose errors live in <list>[].<list>[].error_code
_NESTED_ERRORS = {
    0: ("responses", "partition_responses"),
    8: ("topics", "partitions"),
    23: ("topics", "partitions"),
    28: ("topics", "partitions"),
}


class Histogram:
    """A fixed-bucket histogram over plain ints (single-threaded: the event loop)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def buckets(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        total = 0
        for bound, n in zip(self.bounds, self.counts, strict=False):
            total += n
            out.append((_float_label(bound), total))
        out.append(("+Inf", total + self.counts[-1]))
        return out


def _float_label(bound: float) -> str:
    return repr(float(bound))


class _ApiStats:
    __slots__ = ("name", "count", "latency", "errors")

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.latency = Histogram(LATENCY_BUCKETS)
        self.errors: dict[int, int] = {}


def api_name(api_key: int) -> str:
    from groupd.protocol.api_table import API_TABLE

    spec = API_TABLE.get(api_key)
    return spec.name if spec is not None else f"api{api_key}"


def _error_name(code: int) -> str:
    try:
        from groupd.protocol.errors import ErrorCode

        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)


def response_error(api_key: int, response: Any) -> int:
    """The response's error code: top-level, else the first non-zero one two lists down (cheap)."""
    code = getattr(response, "error_code", None)
    if code is not None:
        return int(code)
    path = _NESTED_ERRORS.get(api_key)
    if path is None or response is None:
        return 0
    for outer in getattr(response, path[0], ()):
        for inner in getattr(outer, path[1], ()):
            code = getattr(inner, "error_code", 0)
            if code:
                return int(code)
    return 0


class Metrics:
    """All broker metrics. One instance per broker, with its own registry (tests run many brokers)."""

    def __init__(self, max_group_series: int = 1000) -> None:
        self.max_group_series = max_group_series
        self.broker: Any = None
        self._apis: dict[int, _ApiStats] = {}
        self._error_names: dict[int, str] = {}
        self._bytes_in = 0
        self._bytes_out = 0
        self._group_slots: set[str] = set()
        self._transitions: dict[tuple[str, str], int] = {}
        self._rebalances_started: dict[str, int] = dict.fromkeys(REBALANCE_CAUSES, 0)
        self._rebalances: dict[tuple[str, str], int] = {}
        self._rebalance_seconds = {cause: Histogram(REBALANCE_BUCKETS) for cause in REBALANCE_CAUSES}
        self._in_rebalance: dict[str, tuple[float, str]] = {}
        self._join_phase = Histogram(REBALANCE_BUCKETS)
        self._sync_phase = Histogram(REBALANCE_BUCKETS)
        self._heartbeats = 0
        self._commits = 0
        self._offsets_committed = 0
        self._commit_seconds = Histogram(LATENCY_BUCKETS)
        self._offsets_expired = 0
        self._consumer_rebalances = 0
        self._down_converted = 0  # records converted to magic 0/1 for Fetch v0-3
        self._up_converted = 0  # records converted from magic 0/1 by Produce v0-2
        self._store_append = Histogram(LATENCY_BUCKETS)
        self._store_batch = Histogram(BATCH_BUCKETS)
        self._store_fsync = Histogram(LATENCY_BUCKETS)
        self._txns_ended: dict[str, int] = dict.fromkeys(TXN_RESULTS, 0)
        self._share_state_writes = Histogram(LATENCY_BUCKETS)
        self._throttled: dict[str, list[float]] = {}  # quota key -> [responses throttled, seconds muted]
        self._authentications: dict[tuple[str, str, str], int] = {}
        self._topics_in: dict[str, list[int]] = {}  # topic -> [records, bytes]
        self._topics_out: dict[str, list[int]] = {}
        self.consumer_status = ConsumerStatus()
        self.connections_refused: dict[str, int] = {}  # by reason: per_ip, fd_exhausted, no_memory
        self.connections_closed_idle = 0
        self.accept_pauses = 0  # times max.connections was reached
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(self))
        ProcessCollector(registry=self.registry)  # process_cpu_seconds_total, process_resident_memory_bytes, ...

    def bind(self, broker: Any) -> None:
        """Give the scrape-time collector its sources (coordinator, partitions, connections)."""
        self.broker = broker

    # ------------------------------------------------------------ connection layer (hot path)

    def request_started(self, api_key: int) -> float:
        return time.perf_counter()

    def request_finished(self, api_key: int, started: float, response: Any) -> None:
        elapsed = time.perf_counter() - started
        stats = self._apis.get(api_key)
        if stats is None:
            stats = self._apis[api_key] = _ApiStats(api_name(api_key))
        stats.count += 1
        stats.latency.observe(elapsed)
        if response is not None:
            code = response_error(api_key, response)
            if code:
                stats.errors[code] = stats.errors.get(code, 0) + 1

    def bytes_in(self, n: int) -> None:
        self._bytes_in += n

    def bytes_out(self, n: int) -> None:
        self._bytes_out += n

    # ------------------------------------------------------------ coordinator

    def group_label(self, group: str) -> str:
        """The group's own label while fewer than the cap have one; ``__overflow__`` after that."""
        slots = self._group_slots
        if group in slots:
            return group
        if len(slots) < self.max_group_series:
            slots.add(group)
            return group
        return OVERFLOW

    def group_state_changed(self, group: str, old: str | None, new: str) -> None:
        key = (old or "", new)
        self._transitions[key] = self._transitions.get(key, 0) + 1

    def rebalance_started(self, group: str, cause: str) -> None:
        self._rebalances_started[cause] = self._rebalances_started.get(cause, 0) + 1
        if group not in self._in_rebalance:
            self._in_rebalance[group] = (time.monotonic(), cause)

    def rebalance_completed(
        self, group: str, generation: int, duration_s: float | None = None, cause: str | None = None
    ) -> None:
        began = self._in_rebalance.pop(group, None)
        if cause is None:
            cause = began[1] if began is not None else "join"
        if duration_s is None:
            duration_s = time.monotonic() - began[0] if began is not None else 0.0
        key = (self.group_label(group), cause)
        self._rebalances[key] = self._rebalances.get(key, 0) + 1
        hist = self._rebalance_seconds.get(cause)
        if hist is None:
            hist = self._rebalance_seconds[cause] = Histogram(REBALANCE_BUCKETS)
        hist.observe(duration_s)

    def join_phase(self, duration_s: float) -> None:
        self._join_phase.observe(duration_s)

    def sync_phase(self, duration_s: float) -> None:
        self._sync_phase.observe(duration_s)

    def heartbeat(self) -> None:
        self._heartbeats += 1

    def commit(self, n: int, duration_s: float | None = None) -> None:
        self._commits += 1
        self._offsets_committed += n
        if duration_s is not None:
            self._commit_seconds.observe(duration_s)

    def offsets_durable(
        self, group: str, rows: Iterable[tuple[str, int, int]], now_ms: int, log_end: Callable[[str, int], int | None]
    ) -> None:
        """A commit's offsets are durable: each goes into its partition's status window (groups with a
        series of their own only, so the windows are bounded like the series)."""
        if self.group_label(group) == OVERFLOW:
            return
        status = self.consumer_status
        for topic, partition, offset in rows:
            status.committed(group, topic, partition, offset, now_ms, log_end(topic, partition))

    def topic_in(self, topic: str, records: int, nbytes: int) -> None:
        _add_traffic(self._topics_in, topic, records, nbytes)

    def topic_out(self, topic: str, records: int, nbytes: int) -> None:
        _add_traffic(self._topics_out, topic, records, nbytes)

    def down_converted(self, records: int) -> None:
        """Records a Fetch v0-3 read converted to magic 0/1 (Kafka's FetchMessageConversionsPerSec)."""
        self._down_converted += records

    def up_converted(self, records: int) -> None:
        """Records of a Produce v0-2 message set converted to a v2 batch (ProduceMessageConversionsPerSec)."""
        self._up_converted += records

    def offsets_expired(self, n: int) -> None:
        self._offsets_expired += n

    def consumer_group_rebalance(self) -> None:
        self._consumer_rebalances += 1

    def group_removed(self, group: str) -> None:
        """A deleted group gives its series slot back (its per-group counters go with it)."""
        self._in_rebalance.pop(group, None)
        self.consumer_status.forget(group)
        if group in self._group_slots:
            self._group_slots.discard(group)
            for key in [k for k in self._rebalances if k[0] == group]:
                del self._rebalances[key]

    # ------------------------------------------------------------ storage

    def store_append(self, seconds: float, batch_records: int) -> None:
        self._store_append.observe(seconds)
        self._store_batch.observe(batch_records)

    def store_fsync(self, seconds: float) -> None:
        self._store_fsync.observe(seconds)

    # ------------------------------------------------------------ health

    def transaction_ended(self, result: str) -> None:
        self._txns_ended[result] += 1

    def share_state_write(self, seconds: float) -> None:
        self._share_state_writes.observe(seconds)

    def throttled(self, quota: str, ms: int) -> None:
        row = self._throttled.setdefault(quota, [0, 0.0])
        row[0] += 1
        row[1] += ms / 1000

    def authentication(self, listener: str, mechanism: str, result: str) -> None:
        """A SASL authentication ended: ``result`` is success or failure (Kafka's successful- and
        failed-authentication-total, per listener and mechanism)."""
        key = (listener, mechanism, result)
        self._authentications[key] = self._authentications.get(key, 0) + 1

    def connection_refused(self, reason: str, n: int = 1) -> None:
        self.connections_refused[reason] = self.connections_refused.get(reason, 0) + n

    def connection_closed_idle(self) -> None:
        self.connections_closed_idle += 1

    def accept_paused(self) -> None:
        self.accept_pauses += 1

    def healthy(self) -> tuple[bool, str]:
        """Ready when the broker listens, is not stopping, and every offsets partition is loaded."""
        broker = self.broker
        if broker is None or getattr(broker, "_server", None) is None:
            return False, "not listening"
        if broker.stopping:
            return False, "stopping"
        if not coordinator_loaded(broker.coordinator):
            return False, "offsets partitions loading"
        failures: dict[int, str] = getattr(broker.coordinator, "load_failures", dict)()
        if failures:
            return False, "offsets partitions failed to load: " + ", ".join(
                f"{p} ({why})" for p, why in failures.items()
            )
        return True, "ok"


def _add_traffic(rows: dict[str, list[int]], topic: str, records: int, nbytes: int) -> None:
    row = rows.get(topic)
    if row is None:
        row = rows[topic] = [0, 0]
    row[0] += records
    row[1] += nbytes


def coordinator_loaded(coordinator: Any) -> bool:
    """Duck-typed: ``is_loaded()``, ``loaded()`` or a ``loaded`` flag; no coordinator counts as loaded."""
    if coordinator is None:
        return True
    for name in ("is_loaded", "loaded"):
        probe = getattr(coordinator, name, None)
        if probe is None:
            continue
        return bool(probe() if callable(probe) else probe)
    return True


def _field(item: Any, name: str, index: int) -> Any:
    return item[index] if isinstance(item, tuple) else getattr(item, name)


def _protocol(item: Any) -> str:
    """A snapshot row's group protocol: classic unless it says consumer (older rows have no such field)."""
    if isinstance(item, tuple):
        return item[4] if len(item) > 4 else "classic"
    return getattr(item, "protocol", "classic")


class _Collector:
    """Renders the hook counters and scrape-time gauges; runs on the broker's loop."""

    def __init__(self, metrics: Metrics) -> None:
        self.m = metrics

    def collect(self) -> Iterator[Metric]:
        yield from self._requests()
        yield from self._groups_events()
        yield from self._store()
        yield from self._transactions()
        yield from self._share_coordinator()
        yield from self._authentications()
        yield from self._connection_limits()
        yield from _share_records(getattr(self.m.broker, "share_partitions", None))
        yield from _cluster(getattr(self.m.broker, "cluster", None))
        yield from self._scrape_time()

    def _authentications(self) -> Iterator[Metric]:
        yield _labelled(
            CounterMetricFamily,
            "groupd_authentications",
            "SASL authentications by listener, mechanism and result",
            ["listener", "mechanism", "result"],
            sorted(self.m._authentications.items()),
        )
        access = getattr(self.m.broker, "access", None)
        yield CounterMetricFamily(
            "groupd_authorization_denials",
            "Checks the authorizer denied (a request may be denied several resources); 0 without an authorizer",
            value=getattr(access, "denials", 0),
        )

    def _connection_limits(self) -> Iterator[Metric]:
        m = self.m
        yield _labelled(
            CounterMetricFamily,
            "groupd_connections_refused",
            "Connections closed at accept: over max.connections.per.ip, or the process out of descriptors",
            ["reason"],
            sorted(m.connections_refused.items()),
        )
        yield CounterMetricFamily(
            "groupd_connections_closed_idle",
            "Connections closed after connections.max.idle.ms without traffic",
            value=m.connections_closed_idle,
        )
        yield CounterMetricFamily(
            "groupd_accept_paused", "Times max.connections was reached and accepting paused", value=m.accept_pauses
        )

    def _transactions(self) -> Iterator[Metric]:
        m = self.m
        yield _labelled(
            CounterMetricFamily,
            "groupd_transactions_ended",
            "Transactions whose markers were written, by result",
            ["result"],
            m._txns_ended.items(),
        )
        throttled = CounterMetricFamily(
            "groupd_quota_throttled", "Responses throttled by a client quota, by quota", labels=["quota"]
        )
        muted = CounterMetricFamily(
            "groupd_quota_throttle_seconds", "Time throttled connections were muted, by quota", labels=["quota"]
        )
        for quota, (n, seconds) in sorted(m._throttled.items()):
            throttled.add_metric([quota], n)
            muted.add_metric([quota], seconds)
        yield throttled
        yield muted
        states: dict[str, int] = {}
        for txn in getattr(getattr(m.broker, "transactions", None), "all", list)():
            states[txn.state_name] = states.get(txn.state_name, 0) + 1
        yield _labelled(
            GaugeMetricFamily,
            "groupd_transactional_ids",
            "Transactional ids known to the coordinator, by state",
            ["state"],
            sorted(states.items()),
        )

    def _share_coordinator(self) -> Iterator[Metric]:
        """Kafka's share-coordinator-metrics: write-total and write-latency, last-pruned-offset."""
        m = self.m
        yield _hist(
            "groupd_share_coordinator_write_seconds",
            "Share-group state writes, from the call to the durable answer (Kafka write-total, write-latency)",
            m._share_state_writes,
        )
        share = getattr(m.broker, "share_coordinator", None)
        if share is None:
            return
        yield GaugeMetricFamily(
            "groupd_share_partition_states",
            "Share-partition states held by the share coordinator",
            value=share.states(),
        )
        yield _labelled(
            GaugeMetricFamily,
            "groupd_share_coordinator_last_pruned_offset",
            "Offset below which a __share_group_state partition was pruned (Kafka last-pruned-offset)",
            ["partition"],
            ((str(p), off) for p, off in sorted(share.last_pruned.items())),
        )

    def _requests(self) -> Iterator[Metric]:
        m = self.m
        count = CounterMetricFamily(
            "groupd_requests", "Requests handled, by API (Kafka RequestsPerSec)", labels=["api"]
        )
        latency = HistogramMetricFamily(
            "groupd_request_duration_seconds",
            "Time from decoded request to response (Kafka TotalTimeMs)",
            labels=["api"],
        )
        errors = CounterMetricFamily(
            "groupd_request_errors",
            "Responses carrying an error code, by API and Kafka error name",
            labels=["api", "error"],
        )
        for stats in m._apis.values():
            count.add_metric([stats.name], stats.count)
            latency.add_metric([stats.name], stats.latency.buckets(), stats.latency.sum)
            for code, n in stats.errors.items():
                name = m._error_names.get(code)
                if name is None:
                    name = m._error_names[code] = _error_name(code)
                errors.add_metric([stats.name, name], n)
        yield count
        yield latency
        yield errors
        yield CounterMetricFamily(
            "groupd_network_received_bytes", "Request bytes read, frames included", value=m._bytes_in
        )
        yield CounterMetricFamily(
            "groupd_network_sent_bytes", "Response bytes written, frames included", value=m._bytes_out
        )
        for direction, rows, verb in (("in", m._topics_in, "produced to"), ("out", m._topics_out, "fetched from")):
            messages = CounterMetricFamily(
                f"groupd_topic_messages_{direction}",
                f"Records {verb} a topic (Kafka MessagesInPerSec per topic)",
                labels=["topic"],
            )
            nbytes = CounterMetricFamily(
                f"groupd_topic_bytes_{direction}",
                f"Record bytes {verb} a topic (Kafka Bytes{direction.capitalize()}PerSec per topic)",
                labels=["topic"],
            )
            for topic, (n, b) in sorted(rows.items()):
                messages.add_metric([topic], n)
                nbytes.add_metric([topic], b)
            yield messages
            yield nbytes
        broker = m.broker
        conns = len(getattr(broker, "_connections", ())) if broker is not None else 0
        yield GaugeMetricFamily("groupd_connections", "Open client connections", value=conns)

    def _groups_events(self) -> Iterator[Metric]:
        m = self.m
        yield _labelled(
            CounterMetricFamily,
            "groupd_group_state_transitions",
            "Group state changes (from empty: a new group)",
            ["from", "to"],
            m._transitions.items(),
        )
        yield _labelled(
            CounterMetricFamily,
            "groupd_rebalances_started",
            "Rebalances begun (Kafka classic-group-rebalance), by cause",
            ["cause"],
            m._rebalances_started.items(),
        )
        yield _labelled(
            CounterMetricFamily,
            "groupd_rebalances",
            "Rebalances completed (group reached Stable at a new generation), by group and cause",
            ["group", "cause"],
            m._rebalances.items(),
        )
        hist = HistogramMetricFamily(
            "groupd_rebalance_duration_seconds", "From PreparingRebalance to Stable, by cause", labels=["cause"]
        )
        for cause, h in m._rebalance_seconds.items():
            hist.add_metric([cause], h.buckets(), h.sum)
        yield hist
        yield _hist("groupd_join_phase_seconds", "Time in PreparingRebalance (join phase)", m._join_phase)
        yield _hist("groupd_sync_phase_seconds", "Time in CompletingRebalance (sync phase)", m._sync_phase)
        yield CounterMetricFamily("groupd_heartbeats", "Heartbeats handled", value=m._heartbeats)
        yield CounterMetricFamily("groupd_offset_commits", "Offset commits made durable", value=m._commits)
        yield CounterMetricFamily("groupd_offsets_committed", "Partition offsets committed", value=m._offsets_committed)
        yield _hist("groupd_offset_commit_duration_seconds", "Commit request to durable offsets", m._commit_seconds)
        yield CounterMetricFamily(
            "groupd_offsets_expired", "Committed offsets removed by retention", value=m._offsets_expired
        )
        yield CounterMetricFamily(
            "groupd_consumer_group_rebalances",
            "Consumer-protocol group epochs bumped by heartbeats (Kafka consumer-group-rebalance-count; rate() for "
            "-rate)",
            value=m._consumer_rebalances,
        )
        yield CounterMetricFamily(
            "groupd_fetch_message_conversions",
            "Records down-converted to magic 0/1 for Fetch v0-3 readers",
            value=m._down_converted,
        )
        yield CounterMetricFamily(
            "groupd_produce_message_conversions",
            "Records of Produce v0-2 message sets converted to record batches v2",
            value=m._up_converted,
        )

    def _store(self) -> Iterator[Metric]:
        m = self.m
        yield _hist("groupd_store_append_seconds", "Time to append one batch to a log", m._store_append)
        yield _hist("groupd_store_batch_records", "Records per appended batch", m._store_batch)
        yield _hist("groupd_store_fsync_seconds", "Time of one fsync of a log", m._store_fsync)

    def _scrape_time(self) -> Iterator[Metric]:
        m = self.m
        broker = m.broker
        coordinator = getattr(broker, "coordinator", None)
        partitions = _partitions(broker)
        yield from partitions.families()
        yield GaugeMetricFamily(
            "kafka_brokers", "Brokers in the cluster (kafka_exporter): this one", value=1 if broker is not None else 0
        )
        yield _labelled(
            GaugeMetricFamily,
            "kafka_topic_partitions",
            "Partitions of a topic (kafka_exporter)",
            ["topic"],
            sorted(_topic_partition_counts(broker).items()),
        )
        yield GaugeMetricFamily(
            "groupd_coordinator_loaded",
            "1 when every owned offsets partition is loaded",
            value=int(coordinator_loaded(coordinator)),
        )
        snapshot = getattr(coordinator, "metrics_snapshot", None)
        yield from _group_families(m, snapshot() if callable(snapshot) else (), partitions.high_watermarks)
        share = getattr(coordinator, "share_group_counts", None)
        if callable(share):
            counts = share()
            yield _labelled(
                GaugeMetricFamily,
                "groupd_share_groups",
                "Share groups by state (Kafka share-group-count)",
                ["state"],
                sorted((state, n) for state, (n, _) in counts.items()),
            )
            yield GaugeMetricFamily(
                "groupd_share_group_members",
                "Members over all share groups",
                value=sum(members for _, members in counts.values()),
            )


def _topic_partition_counts(broker: Any) -> dict[str, int]:
    """Data topics and their partition counts (the topic registry's ``all()``)."""
    every = getattr(getattr(broker, "topics", None), "all", None)
    return {t.name: t.partitions for t in every()} if callable(every) else {}


def _share_records(manager: SharePartitionManager | None) -> Iterator[Metric]:
    """KIP-932 share-partitions' record counts (groupd/broker/share/manager.py)."""
    if manager is None:
        return
    yield CounterMetricFamily(
        "groupd_share_records_acquired", "Records acquired by share group members (deliveries)", value=manager.acquired
    )
    yield _labelled(
        CounterMetricFamily,
        "groupd_share_acknowledgements",
        "Records acknowledged by share group members, by type",
        ["type"],
        sorted(manager.acknowledged.items()),
    )
    yield CounterMetricFamily(
        "groupd_share_lock_expirations", "Acquired records whose acquisition lock ran out", value=manager.lock_expired
    )
    yield CounterMetricFamily(
        "groupd_share_records_archived_at_limit",
        "Records archived because they were released or their lock ran out on their last delivery",
        value=manager.archived_at_limit,
    )


# every other topic: "data"
_LEASE_KINDS = {OFFSETS_TOPIC: "offsets", TXN_STATE_TOPIC: "transactions", SHARE_STATE_TOPIC: "share_state"}


def _cluster(node: Any) -> Iterator[Metric]:
    """A cluster node's leases (docs/cluster.md): nothing on a single node."""
    if node is None:
        return
    member = node.member
    owned: dict[str, int] = {"data": 0, "offsets": 0, "transactions": 0, "share_state": 0}
    for topic, _partition in list(member.local.held):
        owned[_LEASE_KINDS.get(topic, "data")] += 1
    yield _labelled(
        GaugeMetricFamily,
        "groupd_cluster_owned_leases",
        "Leases this node holds, by kind",
        ["kind"],
        sorted(owned.items()),
    )
    yield GaugeMetricFamily("groupd_cluster_live_nodes", "Live nodes in this node's last view", value=len(member.nodes))
    yield CounterMetricFamily("groupd_cluster_lease_renewals", "Leases renewed", value=member.renewals)
    yield CounterMetricFamily("groupd_cluster_lease_takeovers", "Leases taken at a new epoch", value=member.takeovers)
    yield CounterMetricFamily(
        "groupd_cluster_heartbeat_failures", "Heartbeats the database did not take", value=member.failures
    )


def _labelled(
    family: type[CounterMetricFamily] | type[GaugeMetricFamily],
    name: str,
    doc: str,
    labels: list[str],
    rows: Iterable[tuple[Any, float]],
) -> CounterMetricFamily | GaugeMetricFamily:
    """A family with one sample a row: (label value, or a tuple of them, in ``labels``' order; value)."""
    out = family(name, doc, labels=labels)
    for key, value in rows:
        out.add_metric(list(key) if isinstance(key, tuple) else [key], value)
    return out


def _hist(name: str, doc: str, h: Histogram) -> HistogramMetricFamily:
    return HistogramMetricFamily(name, doc, buckets=h.buckets(), sum_value=h.sum)


class _Partitions:
    def __init__(self, rows: Iterable[Any]) -> None:
        self.high_watermarks: dict[tuple[str, int], int] = {}
        self.hwm = GaugeMetricFamily(
            "kafka_topic_partition_current_offset", "High watermark of a partition", labels=["topic", "partition"]
        )
        self.oldest = GaugeMetricFamily(
            "kafka_topic_partition_oldest_offset", "Log start offset of a partition", labels=["topic", "partition"]
        )
        self.size = GaugeMetricFamily(
            "groupd_log_size_bytes", "Bytes on disk of a partition (Kafka Log Size)", labels=["topic", "partition"]
        )
        for topic, partition, start, hwm, size in rows:
            labels = [topic, str(partition)]
            self.high_watermarks[(topic, partition)] = hwm
            self.hwm.add_metric(labels, hwm)
            self.oldest.add_metric(labels, start)
            self.size.add_metric(labels, size)

    def families(self) -> Iterator[Metric]:
        yield self.hwm
        yield self.oldest
        yield self.size


def _partitions(broker: Any) -> _Partitions:
    source = getattr(broker, "partition_metrics", None)
    return _Partitions(source() if callable(source) else ())


def _group_families(m: Metrics, groups: Iterable[Any], hwms: dict[tuple[str, int], int]) -> Iterator[Metric]:
    by_state = dict.fromkeys(GROUP_STATES, 0)
    consumer_by_state = dict.fromkeys(CONSUMER_GROUP_STATES, 0)
    by_protocol = dict.fromkeys(GROUP_PROTOCOLS, 0)
    members_total = 0
    offsets_total = 0
    overflow_groups = 0
    overflow_members = 0
    overflow_lag = 0
    overflow_offsets = 0
    members = GaugeMetricFamily("kafka_consumergroup_members", "Members of a group", labels=["consumergroup"])
    current = GaugeMetricFamily(
        "kafka_consumergroup_current_offset",
        "Committed offset of a group on a partition",
        labels=["consumergroup", "topic", "partition"],
    )
    lag = GaugeMetricFamily(
        "kafka_consumergroup_lag",
        "High watermark minus committed offset",
        labels=["consumergroup", "topic", "partition"],
    )
    lag_sum = GaugeMetricFamily(
        "kafka_consumergroup_lag_sum", "Lag of a group over all its partitions", labels=["consumergroup"]
    )
    offset_sum = GaugeMetricFamily(
        "kafka_consumergroup_current_offset_sum",
        "Committed offsets of a group summed over its partitions",
        labels=["consumergroup"],
    )
    status = GaugeMetricFamily(
        "groupd_consumergroup_status",
        "Live consumer status by Burrow's rules: 0 NOTFOUND, 1 OK, 2 WARN, 3 ERR",
        labels=["consumergroup"],
    )
    partition_status = GaugeMetricFamily(
        "groupd_consumergroup_partition_status",
        "Burrow's status of a partition: 1 OK, 2 WARN, 4 STOP, 5 STALL, 6 REWIND",
        labels=["consumergroup", "topic", "partition"],
    )
    now_ms = wall_ms()
    for g in groups:
        group_id = _field(g, "group_id", 0)
        state = _field(g, "state", 1)
        n_members = _field(g, "members", 2)
        offsets = _field(g, "offsets", 3)
        protocol = _protocol(g)
        by_protocol[protocol] = by_protocol.get(protocol, 0) + 1
        if protocol == "consumer":
            consumer_by_state[state] = consumer_by_state.get(state, 0) + 1
        else:
            by_state[state] = by_state.get(state, 0) + 1
        members_total += n_members
        offsets_total += len(offsets)
        label = m.group_label(group_id)
        group_lag = 0
        own = label != OVERFLOW
        for (topic, partition), committed in offsets.items():
            hwm = hwms.get((topic, partition))
            if own:
                current.add_metric([label, topic, str(partition)], committed)
            if hwm is not None and committed >= 0:
                value = max(0, hwm - committed)
                group_lag += value
                if own:
                    lag.add_metric([label, topic, str(partition)], value)
        if own:
            members.add_metric([label], n_members)
            lag_sum.add_metric([label], group_lag)
            offset_sum.add_metric([label], sum(o for o in offsets.values() if o >= 0))
            verdict, parts = m.consumer_status.evaluate(group_id, offsets, hwms, now_ms) if offsets else (NOTFOUND, {})
            status.add_metric([label], verdict)
            for (topic, partition), (s, _lag) in parts.items():
                partition_status.add_metric([label, topic, str(partition)], s)
        else:
            overflow_groups += 1
            overflow_members += n_members
            overflow_lag += group_lag
            overflow_offsets += sum(o for o in offsets.values() if o >= 0)
    if overflow_groups:
        members.add_metric([OVERFLOW], overflow_members)
        lag_sum.add_metric([OVERFLOW], overflow_lag)
        offset_sum.add_metric([OVERFLOW], overflow_offsets)
        lag.add_metric([OVERFLOW, OVERFLOW, "-1"], overflow_lag)
    yield _labelled(
        GaugeMetricFamily,
        "groupd_groups",
        "Classic groups by state (Kafka NumGroupsStable, NumGroupsPreparingRebalance, ...)",
        ["state"],
        by_state.items(),
    )
    yield _labelled(
        GaugeMetricFamily,
        "groupd_group_count",
        "Groups by rebalance protocol (Kafka group-count)",
        ["protocol"],
        by_protocol.items(),
    )
    yield _labelled(
        GaugeMetricFamily,
        "groupd_consumer_group_count",
        "Consumer-protocol groups by state (Kafka consumer-group-count)",
        ["state"],
        consumer_by_state.items(),
    )
    yield GaugeMetricFamily("groupd_members", "Members over all groups", value=members_total)
    yield GaugeMetricFamily("groupd_offsets", "Committed offsets held (Kafka NumOffsets)", value=offsets_total)
    yield GaugeMetricFamily(
        "groupd_group_series_overflow",
        "Groups beyond metrics.max.group.series, summed under __overflow__",
        value=overflow_groups,
    )
    yield members
    yield current
    yield lag
    yield lag_sum
    yield offset_sum
    yield status
    yield partition_status
