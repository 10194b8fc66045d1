"""Every API has its authorization decision recorded (groupd/broker/security/api_checks.py), the way
tests/unit/test_api_table.py guards the route table, and docs/security.md shows that record
(tests/wire/test_api_checks_asked.py checks that each handler asks what the record says)."""

from __future__ import annotations

from pathlib import Path

from groupd.broker.security import api_checks
from groupd.broker.security.api_checks import API_CHECKS, UNCHECKED
from groupd.protocol.api_table import API_TABLE

ROOT = Path(__file__).resolve().parents[2]


def test_every_api_has_an_authorization_decision():
    """An API added to the API table without a row here fails: say what Kafka's KafkaApis checks for it."""
    assert set(API_CHECKS) == set(API_TABLE)
    assert all(need.strip() for need in API_CHECKS.values())


def test_only_the_apis_kafka_answers_before_authentication_are_unchecked():
    unchecked = {API_TABLE[key].name for key, need in API_CHECKS.items() if need == UNCHECKED}
    assert unchecked == {"ApiVersions", "SaslHandshake", "SaslAuthenticate"}


def test_docs_show_the_record():
    doc = (ROOT / "docs/security.md").read_text()
    assert api_checks.checks_markdown() in doc, "docs/security.md is stale: python scripts/readme_tables.py"
