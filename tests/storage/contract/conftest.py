"""The engines the storage seam's contract tests run against (storage/engine.py).

Each param is a factory: called again over the same place, it gives the engine a restarted broker
would get (the reopen tests close the first one before). A new engine adds its name to ``ENGINES``
and a branch to ``_factory``; the tests do not change."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from groupd.storage.engine import StorageEngine
from groupd.storage.local import LocalEngine

ENGINES = ["local"]

EngineFactory = Callable[[], StorageEngine]


def _factory(name: str, place: Path) -> EngineFactory:
    if name == "local":
        return lambda: LocalEngine(place)
    raise AssertionError(f"unknown engine {name}")


@pytest.fixture(params=ENGINES)
def engines(request: pytest.FixtureRequest, tmp_path: Path) -> EngineFactory:
    return _factory(request.param, tmp_path)


@pytest.fixture
def engine(engines: EngineFactory) -> StorageEngine:
    return engines()
