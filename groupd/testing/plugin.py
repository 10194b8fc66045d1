"""The pytest plugin of groupd, registered through the ``pytest11`` entry point, so installing groupd is
all a project does to have its fixtures:

- ``groupd_broker``: one broker for the whole session (with pytest-xdist, one per worker, since each
  worker is a session of its own), a running ``groupd.testing.Broker``;
- ``groupd_fresh_broker``: a new broker for one test, configured by the test's ``@pytest.mark.groupd(...)``
  (any ``Broker`` option: ``num_partitions=3``, ``sasl_users={...}``, ``overrides={...}``);
- ``groupd_names``: names no other test uses (topics, group ids, transactional ids), so tests share
  ``groupd_broker`` without seeing each other's data.

Both brokers start from the ini options (``pytest.ini``'s ``[pytest]`` or pyproject.toml's
``[tool.pytest.ini_options]``): ``groupd_engine``, ``groupd_subprocess``, ``groupd_num_partitions``,
``groupd_initial_rebalance_delay_ms`` and ``groupd_overrides`` (``key=value`` lines, Kafka's names).
"""

from __future__ import annotations

import itertools
import os
import re
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from groupd.testing.broker import Broker

# groupd.testing.broker (and the broker's modules behind it) load when a fixture is first used: pytest
# loads this plugin in every run of a project that installed groupd, fixtures used or not


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "groupd_engine", "storage engine of the fixtures' brokers: memory (default) or local", default="memory"
    )
    parser.addini("groupd_subprocess", "run the fixtures' brokers as `python -m groupd` children", "bool", False)
    parser.addini("groupd_num_partitions", "partitions of an auto-created topic (num.partitions)", default="1")
    parser.addini("groupd_initial_rebalance_delay_ms", "group.initial.rebalance.delay.ms of the brokers", default="0")
    parser.addini("groupd_overrides", "more broker settings, one key=value a line (Kafka's names)", "linelist")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "groupd(**options): groupd.testing.Broker options of this test's groupd_fresh_broker "
        "(num_partitions=3, sasl_users={'alice': 'secret'}, overrides={'key': 'value'}, ...)",
    )


def _ini_options(config: pytest.Config) -> dict[str, Any]:
    """The Broker options the ini file sets; a ``key=value`` line that is not one refuses to run."""
    overrides: dict[str, str] = {}
    for line in config.getini("groupd_overrides") or []:
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"groupd_overrides: {line!r} is not key=value")
        overrides[key.strip()] = value.strip()
    try:
        return {
            "engine": config.getini("groupd_engine"),
            "subprocess": bool(config.getini("groupd_subprocess")),
            "num_partitions": int(config.getini("groupd_num_partitions")),
            "initial_rebalance_delay_ms": int(config.getini("groupd_initial_rebalance_delay_ms")),
            "overrides": overrides,
        }
    except ValueError as exc:
        raise pytest.UsageError(f"groupd ini options: {exc}") from None


@pytest.fixture(scope="session")
def groupd_broker(pytestconfig: pytest.Config) -> Iterator[Broker]:
    """One running broker for the session (one per xdist worker); stopped and removed at its end."""
    from groupd.testing.broker import Broker

    with Broker(**_ini_options(pytestconfig)) as broker:
        yield broker


@pytest.fixture
def groupd_fresh_broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    """A new running broker for this test alone, with the ini options and the test's ``groupd`` marker."""
    from groupd.testing.broker import Broker

    options = _ini_options(request.config)
    for mark in reversed(list(request.node.iter_markers("groupd"))):  # the closest marker wins
        if mark.args:
            raise pytest.UsageError("@pytest.mark.groupd takes Broker options by name only")
        marked = dict(mark.kwargs)
        options["overrides"] = {**options["overrides"], **marked.pop("overrides", {})}
        options.update(marked)
    with Broker(**options) as broker:
        yield broker


class Names:
    """Names for one test: ``topic()``, ``group()``, ``transactional_id()``, each new, made of the test's
    name (readable in the broker's logs) and a random part (unique across runs, workers and reruns).
    Kafka's legal characters only: letters, digits, ``.``, ``_`` and ``-``."""

    def __init__(self, test_name: str) -> None:
        self.base = re.sub(r"[^A-Za-z0-9._-]+", "-", test_name).strip("-.")[:150] or "test"
        self.run = uuid.uuid4().hex[:8]
        self._count = itertools.count(1)

    def _next(self, kind: str, prefix: str | None) -> str:
        return f"{prefix or self.base}-{kind}-{self.run}-{next(self._count)}"

    def topic(self, prefix: str | None = None) -> str:
        return self._next("t", prefix)

    def group(self, prefix: str | None = None) -> str:
        return self._next("g", prefix)

    def transactional_id(self, prefix: str | None = None) -> str:
        return self._next("tx", prefix)


@pytest.fixture
def groupd_names(request: pytest.FixtureRequest) -> Names:
    """Topic names, group ids and transactional ids of this test's own (see ``Names``)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return Names(f"{request.node.name}{'-' + worker if worker else ''}")
