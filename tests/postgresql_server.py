"""A PostgreSQL server of the test run's own (Debian's PostgreSQL 15 binaries): ``initdb`` into a temp
directory, a free 127.0.0.1 port, its unix socket in that directory, stopped at the end. The tests of the
PostgreSQL engine need it; ``make test`` installs the binaries (the Makefile's postgresql target).

initdb refuses to run as root, so under root the server runs as the ``postgres`` user."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from itertools import count
from pathlib import Path

import psycopg

BIN = Path(os.environ.get("GROUPD_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
MISSING = (
    f"PostgreSQL's server binaries are missing ({BIN}/initdb, pg_ctl): `make test` installs them "
    "(apt-get install postgresql), or set GROUPD_TEST_PG_BIN to their directory"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One running server; ``database()`` makes a fresh database and gives its URL."""

    def __init__(self, fsync: bool = False) -> None:
        self.fsync = fsync  # off for tests (the engine's behaviour, not the disk's); on to measure
        if not (BIN / "initdb").exists() or not (BIN / "pg_ctl").exists():
            raise RuntimeError(MISSING)
        self.dir = Path(tempfile.mkdtemp(prefix="groupd-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self._names = count(1)
        self._as: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.dir, user.pw_uid, user.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        self._run(
            str(BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"
        )
        self.start()
        self.admin_url = self.url("postgres")

    def _run(self, *cmd: str) -> None:
        done = subprocess.run([*self._as, *cmd], capture_output=True, text=True, timeout=60, cwd=self.dir)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:1])} failed: {done.stderr.strip() or done.stdout.strip()}")

    def url(self, database: str, user: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """The URL of a new, empty schema (a fresh database costs 0.25 s and 7 MB; a schema nothing): the
        URL's search_path puts the engine's tables there."""
        name = f"t{next(self._names)}"
        self.execute(f"CREATE SCHEMA {name}")
        return f"{self.admin_url}?options=-csearch_path%3D{name}"

    def execute(self, sql: str) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def stop(self, mode: str = "fast") -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self._run(str(BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def start(self) -> None:
        """Start the server (again, after ``stop``) on its port and data."""
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.dir} "
            + ("" if self.fsync else "-c fsync=off -c full_page_writes=off ")
            + "-c max_connections=200"
        )
        log = str(self.dir / "server.log")
        self._run(str(BIN / "pg_ctl"), "-D", str(self.data), "-l", log, "-o", options, "-w", "-t", "30", "start")

    def start_if_stopped(self) -> None:
        if not (self.data / "postmaster.pid").exists():
            self.start()

    def close(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def running() -> Iterator[PostgresServer]:
    server = PostgresServer()
    try:
        yield server
    finally:
        server.close()
