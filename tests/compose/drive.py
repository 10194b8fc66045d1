"""The compose stack's integration runner: real clients against the groupd service, then every dashboard
panel's PromQL through the real Prometheus HTTP API must return data."""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from tests.clients.kp import ChildConsumer, wait_until


def log(msg: str) -> None:
    print(f"[integration] {msg}", flush=True)


def connect_admin(bootstrap: str, timeout: float = 90) -> KafkaAdminClient:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        except Exception as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"groupd at {bootstrap} did not answer: {exc}") from exc
            time.sleep(1)


def query(prometheus: str, expr: str) -> list:
    url = f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as resp:
        doc = json.load(resp)
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


def variable_query(query: str) -> tuple[str, str]:
    """Grafana's ``label_values(metric, label)`` as its metric and label (Prometheus has no such call)."""
    inner = query.strip()[len("label_values("):-1]
    metric, label = (part.strip() for part in inner.rsplit(",", 1))
    return metric, label


def with_all_values(expr: str, dashboard: dict) -> str:
    """A panel's PromQL as Grafana sends it with every variable at "All" (its allValue, ``.*``)."""
    for var in dashboard.get("templating", {}).get("list", []):
        expr = expr.replace(f"${var['name']}", var.get("allValue") or ".*")
    return expr


def wait_for_data(prometheus: str, expr: str, seconds: float = 90) -> list:
    deadline = time.monotonic() + seconds
    result: list = []
    while time.monotonic() < deadline:
        try:
            result = query(prometheus, expr)
        except OSError:
            result = []
        if result:
            break
        time.sleep(2)
    return result


def main() -> int:
    bootstrap = os.environ["GROUPD_BOOTSTRAP"]
    prometheus = os.environ["PROMETHEUS_URL"]
    dashboard = json.loads(Path(os.environ["DASHBOARD"]).read_text())
    admin = connect_admin(bootstrap)
    admin.create_topics([NewTopic("compose", 6, 1)])
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(300):
        producer.send("compose", value=f"v{i}".encode())
    producer.flush()
    log("produced 300 records")
    members = [
        ChildConsumer(bootstrap, "compose", commit=True, group_id="compose-g", auto_offset_reset="earliest",
                      enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=500)
        for _ in range(3)
    ]
    wait_until(lambda: sum(len(m.values()) for m in members) >= 300, 120, "the group to read 300 records")
    wait_until(
        lambda: sum(len(m.assignment) for m in members) == 6 and all(m.assignment for m in members),
        60,
        "3 members sharing 6 partitions",
    )
    log("three members read everything")
    members[0].stop()
    wait_until(lambda: sum(len(m.assignment) for m in members[1:]) == 6, 60, "the other two to take over")
    log("a member left; the others took over")
    for m in members[1:]:
        m.stop()
    for i in range(50):
        producer.send("compose", value=f"late{i}".encode())
    producer.flush()
    log("produced 50 more records nobody reads: lag")
    failures = []
    for var in dashboard.get("templating", {}).get("list", []):
        metric, label = variable_query(var["query"])
        result = wait_for_data(prometheus, f"count by ({label}) ({metric})")
        log(f"variable ${var['name']}: {'ok' if result else 'NO DATA'} ({len(result)} values) {var['query']}")
        if not result:
            failures.append(f"${var['name']}")
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = with_all_values(target["expr"], dashboard)
            result = wait_for_data(prometheus, expr)
            status = "ok" if result else "NO DATA"
            log(f"panel {panel['title']!r}: {status} ({len(result)} series) {expr}")
            if not result:
                failures.append(panel["title"])
    producer.close()
    admin.close()
    if failures:
        log(f"FAILED: panels without data: {failures}")
        return 1
    log("every dashboard panel returned data")
    return 0


if __name__ == "__main__":
    sys.exit(main())
