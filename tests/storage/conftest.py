"""The storage tests' PostgreSQL fixtures beyond tests/conftest.py's server and database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgresql_server import PostgresServer


@pytest.fixture
def outage(postgresql_server: PostgresServer) -> Iterator[PostgresServer]:
    """The shared server, for a test that stops it: started again after the test whatever it did."""
    yield postgresql_server
    postgresql_server.start_if_stopped()
