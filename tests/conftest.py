"""Fixtures every test folder shares: in-process and child-process brokers, and the storage engine they
run on.

The storage engine: a test (or a module, with ``pytestmark``) marked ``engines`` runs once per engine,
``local`` and ``postgresql`` (ids ``[local]`` / ``[postgresql]``); every broker it starts, through
``broker_config`` or ``BrokerProcess``, gets that engine's settings (tests/harness.py ENGINE_SETTINGS),
so the test itself does not change. Unmarked tests run on ``GROUPD_TEST_ENGINE`` (default ``local``):
``GROUPD_TEST_ENGINE=postgresql make test`` runs every broker of the suite on PostgreSQL."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from groupd.broker.app import Broker
from groupd.broker.config import default_config
from tests import harness
from tests.harness import FAST_CONFIG, BrokerProcess, WireClient
from tests.postgresql_server import PostgresServer, running

ENGINES = ("local", "postgresql")
DEFAULT_ENGINE = os.environ.get("GROUPD_TEST_ENGINE", "local")


def broker_config(tmp_path, **overrides):
    values = {
        **FAST_CONFIG,
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(tmp_path / "data"),
        "metrics.listener": "",
        **harness.ENGINE_SETTINGS,
    }
    values.update(overrides)
    return default_config(**values)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "engines: run once per storage engine (local, postgresql)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("engines") and "storage_engine" in metafunc.fixturenames:
        metafunc.parametrize("storage_engine", ENGINES, indirect=True)


@pytest.fixture(scope="session")
def postgresql_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server per test process (tests/postgresql_server.py), started at the first test
    that needs it."""
    with running() as server:
        yield server


@pytest.fixture
def postgresql_url(postgresql_server: PostgresServer) -> str:
    """A new, empty database (a schema) of the shared server."""
    return postgresql_server.database()


@pytest.fixture(autouse=True)
def storage_engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """The engine this test's brokers store on; a PostgreSQL engine gets a fresh database per test."""
    name = getattr(request, "param", DEFAULT_ENGINE)
    if name == "postgresql":
        url = request.getfixturevalue("postgresql_url")
        harness.ENGINE_SETTINGS = {"storage.engine": "postgresql", "storage.postgresql.url": url}
    try:
        yield name
    finally:
        harness.ENGINE_SETTINGS = {}


@pytest.fixture
async def broker(tmp_path):
    """An in-process broker on a free port (wire tests)."""
    b = Broker(broker_config(tmp_path))
    await b.start()
    yield b
    await b.stop()


@pytest.fixture
async def wire(broker):
    client = await WireClient.connect(broker.port)
    yield client
    await client.close()


@pytest.fixture
def broker_process(tmp_path):
    """``python -m groupd`` as a child process (real clients, restarts)."""
    proc = BrokerProcess(tmp_path / "data")
    proc.start()
    yield proc
    proc.kill()
