"""The cluster tests' PostgreSQL: the storage tests' private server (tests/postgresql_server.py), one per
test process, a fresh schema per test."""

from __future__ import annotations

from tests.storage.conftest import postgresql_server, postgresql_url

__all__ = ["postgresql_server", "postgresql_url"]
