"""Records which client x scenario each real-client test proves, for COMPATIBILITY.md.

A test says what it covers with ``@pytest.mark.scenario("kafka-python", 3, 4)``. Outcomes go to
build/compat-results.json at the end of the run (on the xdist controller), and
``scripts/gen_compat.py`` renders the matrix from that file, so the matrix is what the run saw.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[2] / "build" / "compat-results.json"
_outcomes: dict[str, dict[str, str]] = {}


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("scenario"):
        client, *numbers = mark.args
        item.user_properties.append(("scenario", json.dumps([client, numbers])))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in getattr(report, "user_properties", ()):
        if name != "scenario":
            continue
        client, numbers = json.loads(value)
        if report.when == "call" or report.outcome == "failed":
            outcome = "pass" if report.passed else ("fail" if report.failed else "skipped")
            for n in numbers:
                cell = _outcomes.setdefault(client, {})
                previous = cell.get(str(n))
                # a scenario passes only if every test covering it passed
                cell[str(n)] = "fail" if "fail" in (previous, outcome) else outcome


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput") or not _outcomes:
        return
    RESULTS.parent.mkdir(exist_ok=True)
    existing = json.loads(RESULTS.read_text()) if RESULTS.exists() and os.environ.get("COMPAT_MERGE") else {}
    for client, cells in _outcomes.items():
        existing.setdefault(client, {}).update(cells)
    RESULTS.write_text(json.dumps(existing, indent=1, sort_keys=True))
