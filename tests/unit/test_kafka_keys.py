"""Kafka's stock server.properties starts groupd with Kafka's meaning: unit variants read with Kafka's
precedence (KafkaConfig.logRetentionTimeMillis / logRollTimeMillis), and every stock key either
honoured or named, with why, as ignored (logged once, documented in docs/configuration.md)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from groupd.broker import config as cfg
from groupd.broker.config import KEYS, build_config, default_config
from groupd.broker.kafka_keys import IGNORED

ROOT = Path(__file__).resolve().parents[2]

# the keys (and values) of Kafka's stock config/server.properties: KRaft combined mode (4.x), plus the
# ZooKeeper-era file's own (3.x) and its commented-out examples
STOCK = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.quorum.bootstrap.servers": "localhost:9093",
    "controller.quorum.voters": "1@localhost:9093",
    "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
    "inter.broker.listener.name": "PLAINTEXT",
    "advertised.listeners": "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": (
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
    ),
    "num.network.threads": "3",
    "num.io.threads": "8",
    "socket.send.buffer.bytes": "102400",
    "socket.receive.buffer.bytes": "102400",
    "socket.request.max.bytes": "104857600",
    "log.dirs": "/tmp/kraft-combined-logs",
    "num.partitions": "1",
    "num.recovery.threads.per.data.dir": "1",
    "offsets.topic.replication.factor": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "log.flush.interval.messages": "10000",
    "log.flush.interval.ms": "1000",
    "log.retention.hours": "168",
    "log.retention.bytes": "1073741824",
    "log.segment.bytes": "1073741824",
    "log.retention.check.interval.ms": "300000",
    "broker.id": "0",
    "zookeeper.connect": "localhost:2181",
    "zookeeper.connection.timeout.ms": "18000",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.mark.parametrize(
    ("given", "retention_ms"),
    [
        ({}, 604_800_000),  # log.retention.hours=168
        ({"log.retention.hours": "1"}, 3_600_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "5"}, 300_000),  # minutes over hours
        ({"log.retention.minutes": "5", "log.retention.ms": "7"}, 7),  # ms over both
        ({"log.retention.hours": "-1"}, -1),  # negative: unlimited
        ({"log.retention.minutes": "-3"}, -1),
    ],
)
def test_retention_units_with_kafkas_precedence(given, retention_ms):
    assert default_config(**given)["log.retention.ms"] == retention_ms


def test_roll_hours_and_broker_id():
    assert default_config(**{"log.roll.hours": "2"})["log.roll.ms"] == 7_200_000
    assert default_config(**{"log.roll.hours": "2", "log.roll.ms": "60000"})["log.roll.ms"] == 60_000
    assert default_config(**{"broker.id": "4"})["node.id"] == 4
    assert default_config(**{"broker.id": "4", "node.id": "2"})["node.id"] == 2


def test_stock_server_properties_has_no_unknown_key_and_says_what_it_ignores(caplog, monkeypatch):
    monkeypatch.setattr(cfg, "_warned", set())
    assert set(STOCK) <= set(KEYS) | set(IGNORED), set(STOCK) - set(KEYS) - set(IGNORED)
    with caplog.at_level(logging.INFO, logger="groupd.config"):
        config = build_config(STOCK)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], [r.getMessage() for r in caplog.records]
    said = {r.getMessage() for r in caplog.records}
    for key in set(STOCK) & set(IGNORED):
        assert f"Kafka's {key} is ignored: {IGNORED[key]}" in said
    assert config["log.retention.ms"] == 604_800_000 and config["node.id"] == 1


def test_the_configuration_page_names_every_stock_key():
    page = (ROOT / "docs" / "configuration.md").read_text()
    for key in STOCK:
        assert f"`{key}`" in page, f"docs/configuration.md says nothing of {key}"
    for key, why in IGNORED.items():
        assert f"| `{key}` | {why} |" in page
