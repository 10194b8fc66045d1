"""The PostgreSQL server the storage tests share (tests/postgresql_server.py): started once per test
process, at the first test that needs it, and a fresh database for each test that asks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgresql_server import PostgresServer, running


@pytest.fixture(scope="session")
def postgresql_server() -> Iterator[PostgresServer]:
    with running() as server:
        yield server


@pytest.fixture
def postgresql_url(postgresql_server: PostgresServer) -> str:
    """A new, empty database of the shared server."""
    return postgresql_server.database()
