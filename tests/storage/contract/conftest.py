"""The engines the storage seam's contract tests run against (storage/engine.py).

Each param is a factory: called again over the same place, it gives the engine a restarted broker
would get (the reopen tests close the first one before). A new engine registers itself in
groupd/storage/engines.py; the tests do not change."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from groupd.storage import engines as registry
from groupd.storage.engine import StorageEngine

ENGINES = sorted(registry.ENGINES)

EngineFactory = Callable[[], StorageEngine]


def _factory(config: dict[str, str]) -> EngineFactory:
    def make() -> StorageEngine:
        engine = registry.ENGINES[config["storage.engine"]](config)
        engine.open()
        return engine

    return make


def _config(name: str, place: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    """The configuration of engine ``name``: a data directory, and what the engine needs besides (a fresh
    database of the test run's PostgreSQL server, tests/conftest.py)."""
    config = {"log.dirs": str(place), "storage.engine": name}
    if name == "postgresql":
        config["storage.postgresql.url"] = request.getfixturevalue("postgresql_url")
    return config


@pytest.fixture(params=ENGINES)
def engines(request: pytest.FixtureRequest, tmp_path: Path) -> EngineFactory:
    return _factory(_config(request.param, tmp_path, request))


@pytest.fixture
def engine(engines: EngineFactory) -> StorageEngine:
    return engines()
