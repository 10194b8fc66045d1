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


def _factory(name: str, place: Path) -> EngineFactory:
    return lambda: registry.ENGINES[name]({"log.dirs": str(place), "storage.engine": name})


@pytest.fixture(params=ENGINES)
def engines(request: pytest.FixtureRequest, tmp_path: Path) -> EngineFactory:
    return _factory(request.param, tmp_path)


@pytest.fixture
def engine(engines: EngineFactory) -> StorageEngine:
    return engines()
