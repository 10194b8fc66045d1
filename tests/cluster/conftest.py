"""The cluster tests' PostgreSQL: tests/conftest.py's private server (tests/postgresql_server.py), one per
test process, a fresh schema per test (its ``postgresql_server`` and ``postgresql_url`` fixtures)."""
