"""The operator's metrics, scraped from a broker started by the test while real clients work: the commit
duration is observed, process_* and kafka_exporter's names are there, per-topic traffic is counted, and
the live consumer status (Burrow's rules) is OK for a consumer that caught up and ERR (STALL) for one
that commits the same offset while records come;
``groupd-groups --describe --status`` shows the same."""

from __future__ import annotations

import time
import urllib.request

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata
from prometheus_client.parser import text_string_to_metric_families

from groupd.cli.groups_cli import main as groups
from tests.harness import BrokerProcess, free_port

pytestmark = pytest.mark.client


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


def value(samples, name, **labels):
    found = [v for (n, ls), v in samples.items() if n == name and all(dict(ls).get(k) == x for k, x in labels.items())]
    assert found, f"no {name} {labels}"
    return sum(found)


def check_dashboard(samples) -> None:
    """The Grafana dashboard reads only series the broker exports (the compose test runs its PromQL
    against real Prometheus), its counters only through rate(), and its variables are defined."""
    import json
    import re

    from tests.harness import ROOT

    doc = json.loads((ROOT / "docker/grafana/dashboards/groupd.json").read_text())
    exported = {name for name, _ in samples}
    variables = {v["name"] for v in doc["templating"]["list"]}
    assert variables == {"group", "topic"}
    for panel in doc["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            assert set(re.findall(r"\$(\w+)", expr)) <= variables, expr
            for name in re.findall(r"\b((?:groupd|kafka|process)_\w+)", expr):
                assert name in exported, f"{panel['title']}: {name} is not exported"
                if name.endswith("_total") or name.endswith("_bucket"):
                    assert re.search(rf"rate\({name}\b", expr), (
                        f"{panel['title']}: a counter is shown as a rate: {expr}"
                    )
    titles = " ".join(p["title"] for p in doc["panels"]).lower()
    for wanted in ("consumer status", "lag by group and topic", "in / out per topic", "rebalance rate by cause"):
        assert wanted in titles


def test_operator_metrics_and_live_status(tmp_path, capsys):
    mport = free_port()
    proc = BrokerProcess(tmp_path / "data", {"metrics.listener": f"127.0.0.1:{mport}"}).start()
    try:
        bs = proc.bootstrap
        admin = KafkaAdminClient(bootstrap_servers=bs)
        admin.create_topics([NewTopic("mt", 2, 1)])
        producer = KafkaProducer(bootstrap_servers=bs)
        for i in range(10):
            producer.send("mt", value=b"0123456789", partition=i % 2)
        producer.flush()
        consumer = KafkaConsumer(
            "mt",
            bootstrap_servers=bs,
            group_id="mg",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=5000,
        )
        assert sum(1 for _ in zip(range(10), consumer, strict=False)) == 10
        consumer.commit()
        samples = scrape(mport)
        assert value(samples, "groupd_offset_commit_duration_seconds_count") >= 1, "a commit's duration is observed"
        assert value(samples, "process_cpu_seconds_total") > 0 and value(samples, "process_resident_memory_bytes") > 0
        assert value(samples, "kafka_brokers") == 1
        assert value(samples, "kafka_topic_partitions", topic="mt") == 2
        assert value(samples, "kafka_consumergroup_current_offset_sum", consumergroup="mg") == 10
        assert value(samples, "kafka_consumergroup_lag_sum", consumergroup="mg") == 0
        assert value(samples, "kafka_consumergroup_members", consumergroup="mg") == 1
        assert value(samples, "groupd_topic_messages_in_total", topic="mt") == 10
        assert value(samples, "groupd_topic_bytes_in_total", topic="mt") > 100
        assert value(samples, "groupd_topic_messages_out_total", topic="mt") >= 10
        assert value(samples, "groupd_topic_bytes_out_total", topic="mt") > 100
        assert value(samples, "groupd_consumergroup_status", consumergroup="mg") == 1, "caught up: OK"
        check_dashboard(samples)
        consumer.close()

        # the consumer stops moving while records keep coming: the same offset committed with lag is STALL
        for _ in range(10):
            producer.send("mt", value=b"late", partition=0)
        producer.flush()
        tp = TopicPartition("mt", 0)
        for _ in range(3):
            admin.alter_group_offsets("stuck", {tp: OffsetAndMetadata(5, "", -1)})
            time.sleep(1.1)  # Burrow keeps commits at least a second apart
        samples = scrape(mport)
        assert (
            value(samples, "groupd_consumergroup_partition_status", consumergroup="stuck", topic="mt", partition="0")
            == 5
        ), "STALL"
        assert value(samples, "groupd_consumergroup_status", consumergroup="stuck") == 3, (
            "a stalled partition makes the group ERR"
        )
        assert value(samples, "groupd_consumergroup_status", consumergroup="mg") == 1, (
            "mg's lag was zero in its window: OK"
        )
        url = f"http://127.0.0.1:{mport}/metrics"
        code = groups(["--bootstrap-server", bs, "--describe", "--group", "stuck", "--status", "--metrics-url", url])
        out = capsys.readouterr().out
        rows = [line.split() for line in out.splitlines() if line.strip()]
        assert code == 0 and rows[0] == ["GROUP", "TOPIC", "PARTITION", "STATUS", "LAG"]
        assert rows[1:] == [["stuck", "mt", "0", "STALL", "10"]], out
        groups(["--bootstrap-server", bs, "--describe", "--group", "mg", "--status", "--metrics-url", url])
        rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip()]
        assert rows[1:] == [["mg", "mt", "0", "OK", "10"], ["mg", "mt", "1", "OK", "0"]]
        producer.close()
        admin.close()
    finally:
        proc.kill()
