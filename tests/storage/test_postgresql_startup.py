"""Start-up of a broker on the PostgreSQL engine when the database is not usable: one clear line naming
the problem, exit status 1, no traceback (a bad URL, an unreachable server, a user without the privileges
the schema needs, a database written by a newer groupd); and the password kept out of the URL.

Two of them start ``python -m groupd`` (the path from the engine's StorageError to the line and the exit
status); the others open the engine as the broker does and read the StorageError's message."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from groupd.storage import engines
from groupd.storage.errors import StorageError
from groupd.storage.postgresql.connection import PASSWORD_ENV, resolve_url
from groupd.storage.postgresql.schema import SCHEMA_VERSION
from tests.harness import ROOT, free_port
from tests.postgresql_server import PostgresServer


def start_broker(tmp_path: Path, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "groupd"]
    settings = {
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
        "log.dirs": str(tmp_path / "data"),
        "metrics.listener": "",
        "storage.engine": "postgresql",
        "storage.postgresql.url": url,
    }
    for key, value in settings.items():
        args += ["--override", f"{key}={value}"]
    return subprocess.run([*args, *extra], capture_output=True, text=True, timeout=60, cwd=ROOT)


def refused(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused start printed."""
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    lines = [line for line in done.stderr.splitlines() if "cannot start" in line]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_a_url_libpq_cannot_parse(tmp_path: Path) -> None:
    assert "storage.postgresql.url is not a libpq URL" in refused(start_broker(tmp_path, "host=x =nonsense"))


def opening(url: str) -> str:
    """The message of the StorageError the broker's engine raises when it opens."""
    with pytest.raises(StorageError) as refusal:
        engines.build({"storage.engine": "postgresql", "storage.postgresql.url": url}).open()
    return str(refusal.value)


def test_no_url() -> None:
    assert "storage.postgresql.url is empty" in opening("")


def test_nothing_listening() -> None:
    line = opening(f"postgresql://groupd@127.0.0.1:{free_port()}/groupd")
    assert "cannot connect to PostgreSQL at groupd@127.0.0.1" in line and "refused" in line


def test_a_user_who_may_not_create_the_tables(postgresql_server: PostgresServer) -> None:
    postgresql_server.execute("CREATE ROLE reader LOGIN")
    postgresql_server.execute("CREATE DATABASE locked")
    line = opening(postgresql_server.url("locked", user="reader"))
    assert "applying the schema migrations failed in PostgreSQL: permission denied for schema public" in line


def test_a_database_newer_than_the_binary(tmp_path: Path, postgresql_url: str) -> None:
    with psycopg.connect(postgresql_url) as conn:
        conn.execute("CREATE TABLE groupd_schema (version integer NOT NULL)")
        conn.execute("INSERT INTO groupd_schema VALUES (%s)", (SCHEMA_VERSION + 1,))
    line = refused(start_broker(tmp_path, postgresql_url))
    assert f"groupd schema version {SCHEMA_VERSION + 1}, newer than this groupd's {SCHEMA_VERSION}" in line


def test_the_password_from_a_file_or_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "pw"
    secret.write_text("s3cret\n")
    assert "password=s3cret" in resolve_url("postgresql://u@h/db", str(secret))
    monkeypatch.setenv(PASSWORD_ENV, "fromenv")
    assert "password=fromenv" in resolve_url("postgresql://u@h/db")
    assert "password=inurl" in resolve_url("postgresql://u:inurl@h/db", str(secret))  # the URL's own wins
    with pytest.raises(StorageError, match="storage.postgresql.password.file"):
        resolve_url("postgresql://u@h/db", str(tmp_path / "absent"))
