"""/metrics and /healthz of a live in-process broker: request accounting, hooks, scrape-time gauges, caps."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from groupd.broker.app import Broker
from groupd.broker.ops.logoutput import JsonFormatter, LogfmtFormatter, TextFieldsFormatter
from groupd.broker.ops.metrics import api_name
from groupd.coordinator.logfields import group_event, group_fields
from tests.conftest import broker_config
from tests.harness import WireClient


async def http_get(port: int, path: str, method: str = "GET") -> tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n".encode())
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body.decode()


def samples(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(text: str, name: str, **labels: str) -> float:
    return samples(text)[(name, tuple(sorted(labels.items())))]


@dataclass
class FakeGroup:
    group_id: str
    state: str
    members: int
    offsets: dict = field(default_factory=dict)
    protocol: str = "classic"


class FakeCoordinator:
    def __init__(self, groups: list[FakeGroup], loaded: bool = True) -> None:
        self.groups = groups
        self.loaded_flag = loaded

    def is_loaded(self) -> bool:
        return self.loaded_flag

    def metrics_snapshot(self):
        return iter(self.groups)


async def metrics_broker(tmp_path, **overrides) -> Broker:
    b = Broker(broker_config(tmp_path, **{"metrics.listener": "127.0.0.1:0", **overrides}))
    await b.start()
    return b


async def test_requests_bytes_and_connections_are_counted(tmp_path):
    b = await metrics_broker(tmp_path)
    try:
        client = await WireClient.connect(b.port)
        await client.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        await client.call(
            3, 12, {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
        )
        status, text = await http_get(b.metrics_server.port, "/metrics")
        assert status == 200
        assert value(text, "groupd_requests_total", api="ApiVersions") == 1
        assert value(text, "groupd_requests_total", api="Metadata") == 1
        assert value(text, "groupd_request_duration_seconds_count", api="Metadata") == 1
        assert value(text, "groupd_network_received_bytes_total") > 0
        assert value(text, "groupd_network_sent_bytes_total") > value(text, "groupd_network_received_bytes_total")
        assert value(text, "groupd_connections") == 1
        await client.close()
        head_status, head_body = await http_get(b.metrics_server.port, "/metrics", "HEAD")
        assert (head_status, head_body) == (200, "")
        assert (await http_get(b.metrics_server.port, "/nope"))[0] == 404
        assert (await http_get(b.metrics_server.port, "/metrics", "POST"))[0] == 405
    finally:
        await b.stop()


async def test_error_codes_top_level_and_nested(tmp_path):
    from kio.schema.heartbeat.v4.response import HeartbeatResponse
    from kio.schema.offset_commit.v8 import response as oc

    from groupd.protocol import codec

    b = await metrics_broker(tmp_path)
    try:
        m = b.metrics
        hb = codec.make(HeartbeatResponse, error_code=27, throttle_time=0)
        m.request_finished(12, m.request_started(12), hb)
        part = codec.make(oc.OffsetCommitResponsePartition, partition_index=0, error_code=25)
        topic = codec.make(oc.OffsetCommitResponseTopic, name="t", partitions=(part,))
        m.request_finished(
            8, m.request_started(8), codec.make(oc.OffsetCommitResponse, throttle_time=0, topics=(topic,))
        )
        # the same answers as the handlers give them: written once, with their error code beside
        from groupd.broker.dispatch import RequestContext
        from groupd.broker.handlers.offsets import _commit_response
        from groupd.coordinator.api import PartitionError
        from groupd.protocol.request import RequestHeader

        ctx = RequestContext(RequestHeader(8, 8, 1, "c"), "h", "c1")
        encoded = _commit_response(ctx, [PartitionError("t", 0, 0), PartitionError("t", 1, 25)])
        assert encoded.body == codec.encode(
            codec.make(
                oc.OffsetCommitResponse,
                throttle_time=0,
                topics=(
                    codec.make(
                        oc.OffsetCommitResponseTopic,
                        name="t",
                        partitions=(
                            codec.make(oc.OffsetCommitResponsePartition, partition_index=0, error_code=0),
                            codec.make(oc.OffsetCommitResponsePartition, partition_index=1, error_code=25),
                        ),
                    ),
                ),
            )
        )
        m.request_finished(8, m.request_started(8), encoded)
        hb_ctx = RequestContext(RequestHeader(12, 4, 1, "c"), "h", "c1")
        m.request_finished(12, m.request_started(12), hb_ctx.encoded(throttle_time=0, error_code=27))
        _, text = await http_get(b.metrics_server.port, "/metrics")
        assert value(text, "groupd_request_errors_total", api=api_name(12), error="REBALANCE_IN_PROGRESS") == 2
        assert value(text, "groupd_request_errors_total", api=api_name(8), error="UNKNOWN_MEMBER_ID") == 2
    finally:
        await b.stop()


async def test_healthz_follows_offsets_loading(tmp_path):
    b = await metrics_broker(tmp_path)
    try:
        port = b.metrics_server.port
        assert await http_get(port, "/healthz") == (200, "ok\n")
        b.coordinator = FakeCoordinator([], loaded=False)
        assert await http_get(port, "/healthz") == (503, "offsets partitions loading\n")
        _, text = await http_get(port, "/metrics")
        assert value(text, "groupd_coordinator_loaded") == 0
        b.coordinator.loaded_flag = True
        assert (await http_get(port, "/healthz"))[0] == 200
        b.coordinator.load_failures = lambda: {7: "CorruptBatch: negative record length"}
        assert await http_get(port, "/healthz") == (
            503,
            "offsets partitions failed to load: 7 (CorruptBatch: negative record length)\n",
        )
        del b.coordinator.load_failures
        b.stopping = True
        assert await http_get(port, "/healthz") == (503, "stopping\n")
        b.stopping = False
    finally:
        await b.stop()


async def test_group_hooks_and_scrape_time_gauges(tmp_path):
    b = await metrics_broker(tmp_path)
    try:
        m = b.metrics
        b.coordinator = FakeCoordinator(
            [
                FakeGroup("g1", "Stable", 2, {("t", 0): 5, ("t", 1): 7}),
                FakeGroup("g2", "PreparingRebalance", 1, {}),
                FakeGroup("g3", "Empty", 0, {("t", 0): 10}),
            ]
        )
        b.partition_metrics = lambda: [("t", 0, 0, 10, 4096), ("t", 1, 2, 7, 100)]
        m.group_state_changed("g1", None, "Empty")
        m.group_state_changed("g1", "Empty", "PreparingRebalance")
        m.rebalance_started("g1", "join")
        m.join_phase(0.2)
        m.sync_phase(0.05)
        m.rebalance_completed("g1", 1)
        m.rebalance_completed("g1", 2, duration_s=1.5, cause="leave")
        m.heartbeat()
        m.commit(2, 0.003)
        m.store_append(0.0004, 3)
        m.store_fsync(0.002)
        _, text = await http_get(b.metrics_server.port, "/metrics")
        assert value(text, "groupd_groups", state="Stable") == 1
        assert value(text, "groupd_groups", state="PreparingRebalance") == 1
        assert value(text, "groupd_groups", state="Dead") == 0
        assert value(text, "groupd_members") == 3
        assert value(text, "groupd_offsets") == 3
        assert value(text, "kafka_consumergroup_lag", consumergroup="g1", topic="t", partition="0") == 5
        assert value(text, "kafka_consumergroup_lag", consumergroup="g1", topic="t", partition="1") == 0
        assert value(text, "kafka_consumergroup_lag_sum", consumergroup="g3") == 0
        assert value(text, "kafka_consumergroup_current_offset", consumergroup="g1", topic="t", partition="1") == 7
        assert value(text, "kafka_topic_partition_current_offset", topic="t", partition="0") == 10
        assert value(text, "kafka_topic_partition_oldest_offset", topic="t", partition="1") == 2
        assert value(text, "groupd_log_size_bytes", topic="t", partition="0") == 4096
        assert value(text, "groupd_group_state_transitions_total", **{"from": "", "to": "Empty"}) == 1
        assert value(text, "groupd_rebalances_started_total", cause="join") == 1
        assert value(text, "groupd_rebalances_total", group="g1", cause="join") == 1
        assert value(text, "groupd_rebalances_total", group="g1", cause="leave") == 1
        assert value(text, "groupd_rebalance_duration_seconds_count", cause="leave") == 1
        assert value(text, "groupd_rebalance_duration_seconds_sum", cause="leave") == 1.5
        assert value(text, "groupd_join_phase_seconds_count") == 1
        assert value(text, "groupd_sync_phase_seconds_bucket", le="0.05") == 1
        assert value(text, "groupd_heartbeats_total") == 1
        assert value(text, "groupd_offsets_committed_total") == 2
        assert value(text, "groupd_offset_commit_duration_seconds_count") == 1
        assert value(text, "groupd_store_batch_records_sum") == 3
        assert value(text, "groupd_store_fsync_seconds_count") == 1
        m.group_removed("g1")
        assert "g1" not in m._group_slots
        _, text = await http_get(b.metrics_server.port, "/metrics")
        assert ("groupd_rebalances_total", (("cause", "join"), ("group", "g1"))) not in samples(text)
    finally:
        await b.stop()


async def test_five_thousand_groups_scrape_stays_bounded(tmp_path):
    b = await metrics_broker(tmp_path, **{"metrics.max.group.series": "1000"})
    try:
        groups = [FakeGroup(f"group-{i}", "Stable", 1, {("t", i % 4): 1}) for i in range(5000)]
        b.coordinator = FakeCoordinator(groups)
        b.partition_metrics = lambda: [("t", p, 0, 3, 0) for p in range(4)]
        for g in groups:
            b.metrics.rebalance_completed(g.group_id, 1, 0.1, "join")
        began = time.perf_counter()
        _, text = await http_get(b.metrics_server.port, "/metrics")
        scrape_s = time.perf_counter() - began
        got = samples(text)
        lag_series = [k for k in got if k[0] == "kafka_consumergroup_lag"]
        assert len(lag_series) == 1001
        assert len([k for k in got if k[0] == "groupd_rebalances_total"]) == 1001
        assert value(text, "groupd_rebalances_total", group="__overflow__", cause="join") == 4000
        assert value(text, "kafka_consumergroup_lag_sum", consumergroup="__overflow__") == 4000 * 2
        assert value(text, "kafka_consumergroup_members", consumergroup="__overflow__") == 4000
        assert value(text, "groupd_group_series_overflow") == 4000
        assert value(text, "groupd_groups", state="Stable") == 5000
        assert len([k for k in got if k[0] == "kafka_consumergroup_current_offset_sum"]) == 1001
        assert len([k for k in got if k[0] == "groupd_consumergroup_status"]) == 1000, (
            "the live status only for groups with series"
        )
        assert len(got) < 9000, "a fixed number of series per capped group (8 since issue 30), not one per group"
        assert scrape_s < 5, scrape_s
        print(f"scrape of 5000 groups: {scrape_s * 1000:.1f} ms, {len(text)} bytes")
    finally:
        await b.stop()


async def test_disabled_listener_means_no_server(broker):
    assert broker.metrics_server is None


def _record(fields: dict) -> logging.LogRecord:
    record = logging.LogRecord("groupd.coordinator", logging.INFO, __file__, 1, "member joined", (), None)
    record.fields = fields
    return record


def test_group_fields_reach_every_log_format():
    extra = group_fields("g1", "m-1", 4, protocol="range", reason=None)
    assert extra == {"fields": {"group": "g1", "member": "m-1", "generation": 4, "protocol": "range"}}
    record = _record(extra["fields"])
    assert json.loads(JsonFormatter().format(record))["generation"] == 4
    assert 'group="g1" member="m-1" generation=4' in LogfmtFormatter().format(record)
    assert (
        TextFieldsFormatter()
        .format(record)
        .endswith(" INFO groupd.coordinator: member joined group=g1 member=m-1 generation=4 protocol=range")
    )


def test_group_event_logs_with_fields(caplog):
    with caplog.at_level(logging.INFO, logger="groupd.test"):
        group_event(logging.getLogger("groupd.test"), "rebalance done", "g9", "m-2", 7, cause="join")
    assert caplog.records[-1].fields == {"group": "g9", "member": "m-2", "generation": 7, "cause": "join"}


async def test_groups_by_protocol_and_consumer_groups_by_state(tmp_path):
    """Kafka's group-count{protocol} and consumer-group-count{state} (GroupCoordinatorMetrics); the
    NumGroups<State> gauges (groupd_groups) count classic groups only, as Kafka's do."""
    b = await metrics_broker(tmp_path)
    try:
        b.coordinator = FakeCoordinator(
            [
                FakeGroup("c1", "Stable", 2, {}),
                FakeGroup("k1", "Stable", 3, {}, "consumer"),
                FakeGroup("k2", "Reconciling", 2, {}, "consumer"),
                FakeGroup("k3", "Empty", 0, {("t", 0): 1}, "consumer"),
            ]
        )
        b.metrics.consumer_group_rebalance()
        _, text = await http_get(b.metrics_server.port, "/metrics")
        assert value(text, "groupd_group_count", protocol="classic") == 1
        assert value(text, "groupd_group_count", protocol="consumer") == 3
        assert {
            s: value(text, "groupd_consumer_group_count", state=s)
            for s in ("Empty", "Assigning", "Reconciling", "Stable", "Dead")
        } == {"Empty": 1, "Assigning": 0, "Reconciling": 1, "Stable": 1, "Dead": 0}
        assert value(text, "groupd_groups", state="Stable") == 1 and value(text, "groupd_groups", state="Empty") == 0
        assert value(text, "groupd_consumer_group_rebalances_total") == 1
        assert value(text, "groupd_members") == 7
    finally:
        await b.stop()
