import logging

import pytest

from groupd.broker.config import ConfigError, load_config, parse_properties


def test_defaults_are_kafkas():
    cfg = load_config()
    assert cfg["group.initial.rebalance.delay.ms"] == 3000
    assert cfg["group.min.session.timeout.ms"] == 6000
    assert cfg["group.max.session.timeout.ms"] == 1_800_000
    assert cfg["offsets.topic.num.partitions"] == 50
    assert cfg["socket.request.max.bytes"] == 104_857_600
    assert cfg["offset.metadata.max.bytes"] == 4096
    assert cfg["max.request.partition.size.limit"] == 2000
    assert cfg.listener == ("127.0.0.1", 9092)


def test_file_then_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("# comment\nlisteners=PLAINTEXT://127.0.0.1:9999\nnum.partitions = 3\n! other comment\n")
    cfg = load_config(path, ["num.partitions=6", "auto.create.topics.enable=false"])
    assert cfg.listener == ("127.0.0.1", 9999)
    assert cfg["num.partitions"] == 6
    assert cfg["auto.create.topics.enable"] is False


@pytest.mark.parametrize(
    "override, message",
    [
        ("num.partitions=zero", "num.partitions"),
        ("num.partitions=0", "must be >= 1"),
        ("max.request.partition.size.limit=0", "must be >= 1"),
        ("listeners=127.0.0.1:9092", "PLAINTEXT"),
        ("auto.create.topics.enable=yes", "true or false"),
        ("group.min.session.timeout.ms=9000000", "must not exceed"),
        ("novalue", "key=value"),
        ("storage.engine=cassandra", "expected one of local"),
    ],
)
def test_invalid_values_refused(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_unknown_key_warned_once(caplog):
    with caplog.at_level(logging.WARNING):
        load_config(None, ["made.up.key=1"])
        load_config(None, ["made.up.key=2"])
    assert sum("made.up.key" in r.message for r in caplog.records) == 1


def test_properties_separators():
    assert parse_properties("a=1\nb: 2\nc.d = x=y\n") == {"a": "1", "b": "2", "c.d": "x=y"}


def test_readme_config_table_is_current():
    from pathlib import Path

    from groupd.broker.config import config_table_markdown

    readme = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    assert config_table_markdown() in readme, (
        "docs/configuration.md's config table is stale: python scripts/readme_tables.py"
    )
