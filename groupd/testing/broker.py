"""``groupd.testing.Broker``: a real Kafka-protocol broker for a test, started on a free loopback port.

::

    with Broker() as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)

    async with Broker(num_partitions=3) as broker:
        consumer = AIOKafkaConsumer("t", bootstrap_servers=broker.bootstrap_servers)

Every API groupd serves is there (every group type, transactions, share groups, the admin APIs). By
default it keeps everything in memory (``storage.engine=memory``: nothing on disk, nothing to clean up),
runs on its own event loop in a thread of this process, waits for no rebalance delay and accepts short
sessions; ``engine="local"`` keeps Kafka's segment files in a temporary directory instead, and
``subprocess=True`` starts ``python -m groupd`` as a child. Stopping it (leaving the ``with``) stops
the broker cleanly and removes its data unless ``keep_data=True``.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

from groupd.storage import memory
from groupd.testing import wire
from groupd.testing.runners import ProcessRunner, ThreadRunner

if TYPE_CHECKING:
    from groupd.broker.app import Broker as App

T = TypeVar("T")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_SCRAM = tuple(m for m in SASL_MECHANISMS if m.startswith("SCRAM"))


def _plain_jaas(users: Mapping[str, str]) -> str:
    """Kafka's PlainLoginModule entry naming each user's password (docs/security.md)."""
    entries = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {entries};"


def _setting(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


class Broker:
    """A broker for one test (or one session); see the module's text.

    Options (each a Kafka broker setting; ``overrides`` sets any other, by Kafka's name, and wins):

    - ``engine``: ``"memory"`` (default) or ``"local"`` (segment files in ``data_dir``).
    - ``subprocess``: run ``python -m groupd`` in a child process instead of a thread here.
    - ``data_dir``: where a local engine keeps its files (default: a new temporary directory), or the
      name of a memory store; ``keep_data``: leave the data when stopping (a directory you gave is
      always left alone).
    - ``initial_rebalance_delay_ms`` (``group.initial.rebalance.delay.ms``, default 0 here, 3000 in Kafka),
      ``min_session_timeout_ms`` / ``max_session_timeout_ms`` (``group.min/max.session.timeout.ms``,
      default 100 here, 6000 in Kafka / Kafka's 1800000), ``num_partitions`` (of auto-created topics),
      ``auto_create_topics`` (``auto.create.topics.enable``).
    - ``sasl_users``: {user: password}; adds a SASL_PLAINTEXT listener (``sasl_bootstrap_servers``) on
      which each user logs in with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    - ``start_timeout``: seconds to wait for the broker to answer.
    """

    def __init__(
        self,
        *,
        engine: str = "memory",
        subprocess: bool = False,
        data_dir: str | Path | None = None,
        keep_data: bool = False,
        initial_rebalance_delay_ms: int = 0,
        min_session_timeout_ms: int = 100,
        max_session_timeout_ms: int | None = None,
        num_partitions: int = 1,
        auto_create_topics: bool = True,
        sasl_users: Mapping[str, str] | None = None,
        overrides: Mapping[str, object] | None = None,
        host: str = "127.0.0.1",
        start_timeout: float = 30.0,
    ) -> None:
        self.engine = engine
        self.subprocess = subprocess
        self.keep_data = keep_data
        self.host = host
        self.start_timeout = start_timeout
        self.sasl_users = dict(sasl_users or {})
        overrides = dict(overrides or {})
        if "storage.engine" in overrides:
            self.engine = engine = str(overrides["storage.engine"])
        if "log.dirs" in overrides:
            data_dir = str(overrides.pop("log.dirs"))
        self._own_data_dir = data_dir is None
        if data_dir is None and engine == "memory":
            # a memory store is only named by it: the directory is never made
            data_dir = Path(tempfile.gettempdir()) / f"groupd-memory-{uuid.uuid4().hex}"
        # a local engine's own temporary directory is made by start(), so a broker never started leaves none
        self.data_dir: Path | None = Path(data_dir) if data_dir is not None else None
        settings: dict[str, object] = {
            "storage.engine": engine,
            "listeners": f"PLAINTEXT://{host}:0",
            "metrics.listener": "",
            "group.initial.rebalance.delay.ms": initial_rebalance_delay_ms,
            "group.min.session.timeout.ms": min_session_timeout_ms,
            "num.partitions": num_partitions,
            "auto.create.topics.enable": auto_create_topics,
        }
        if max_session_timeout_ms is not None:
            settings["group.max.session.timeout.ms"] = max_session_timeout_ms
        if self.sasl_users:
            settings["listeners"] = f"PLAINTEXT://{host}:0,SASL_PLAINTEXT://{host}:0"
            settings["sasl.enabled.mechanisms"] = ",".join(SASL_MECHANISMS)
            settings["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = _plain_jaas(self.sasl_users)
        if subprocess:
            settings["log.level"] = "INFO"  # the child's "listening on" line says which ports it bound
        settings.update(overrides)
        self.settings: dict[str, str] = {key: _setting(value) for key, value in settings.items()}
        self.ports: dict[str, int] = {}
        self._runner: ThreadRunner | ProcessRunner | None = None
        self._last_runner: ThreadRunner | ProcessRunner | None = None  # its output stays readable after the stop

    # ------------------------------------------------------------ where clients connect

    @property
    def port(self) -> int:
        """The PLAINTEXT listener's port (the first listener's, when overrides name others)."""
        return self.ports.get("PLAINTEXT") or next(iter(self.ports.values()))

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` for any Kafka client's bootstrap servers."""
        self._check_running()
        return f"{self.host}:{self.port}"

    @property
    def sasl_bootstrap_servers(self) -> str:
        """``host:port`` of the SASL_PLAINTEXT listener (only with ``sasl_users``)."""
        self._check_running()
        if "SASL_PLAINTEXT" not in self.ports:
            raise RuntimeError("this broker has no SASL listener: give it sasl_users")
        return f"{self.host}:{self.ports['SASL_PLAINTEXT']}"

    @property
    def app(self) -> App:
        """The running broker's own object (in-thread brokers only): its topics, coordinator, config.
        Touch it only from its loop (``call_in_loop``)."""
        if not isinstance(self._runner, ThreadRunner) or self._runner.app is None:
            raise RuntimeError("only a broker running in this process has an app")
        return self._runner.app

    @property
    def running(self) -> bool:
        return self._runner is not None and self._runner.alive

    @property
    def output(self) -> list[str]:
        """The child's last log lines, also after it stopped (subprocess brokers; an in-thread broker logs
        through ``logging``)."""
        return self._last_runner.output if self._last_runner is not None else []

    @property
    def exit_code(self) -> int | None:
        """The child's exit status once it stopped (0 after a clean stop; subprocess brokers)."""
        return self._last_runner.exit_code if isinstance(self._last_runner, ProcessRunner) else None

    def _check_running(self) -> None:
        if not self.ports:
            raise RuntimeError("the broker is not started: use `with Broker() as broker:` or call start()")

    # ------------------------------------------------------------ start and stop

    def start(self) -> Broker:
        """Start the broker and return once it answers ApiVersions (and its SASL users exist)."""
        if self._runner is not None:
            raise RuntimeError("the broker is already started")
        if self.data_dir is None or (self._own_data_dir and self.engine != "memory" and not self.data_dir.exists()):
            self.data_dir = Path(tempfile.mkdtemp(prefix="groupd-"))
        settings = {**self.settings, "log.dirs": str(self.data_dir)}
        if self.ports:  # a restart: the same ports, so clients that knew them reconnect
            settings["listeners"] = ",".join(f"{name}://{self.host}:{port}" for name, port in self.ports.items())
        runner: ThreadRunner | ProcessRunner | None = None
        try:
            runner = ProcessRunner(settings) if self.subprocess else ThreadRunner(settings)
            self._runner = self._last_runner = runner
            self.ports = runner.start(self.start_timeout)
            if not wire.answers_api_versions(self.host, self.port, self.start_timeout):
                raise RuntimeError(f"the broker on port {self.port} does not answer ApiVersions")
            if self.sasl_users:
                wire.add_scram_users(self.host, self.port, self.sasl_users, _SCRAM)
        except BaseException:
            self._runner = None
            if runner is not None:
                runner.stop(self.start_timeout)
            self._remove_data()
            raise
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the broker cleanly (it finishes in-flight requests and closes its storage), then remove its
        data unless ``keep_data``. Stopping a stopped broker does nothing."""
        runner, self._runner = self._runner, None
        if runner is None:
            return
        try:
            runner.stop(timeout)
        finally:
            self._remove_data()

    def restart(self) -> Broker:
        """Stop and start again on the same ports with the same data: what survives a broker's restart
        (committed offsets, topics, transactions). A memory store survives only in-thread (a child's
        memory goes with it)."""
        keep, self.keep_data = self.keep_data, True
        try:
            self.stop()
        finally:
            self.keep_data = keep
        return self.start()

    def _remove_data(self) -> None:
        if self.keep_data or self.data_dir is None:
            return
        if self.engine == "memory":
            memory.discard(str(self.data_dir))
        elif self._own_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def call_in_loop(self, fn: Callable[[], T]) -> T:
        """Call ``fn`` on the in-thread broker's loop and return what it returns: the safe way to look at
        ``app`` from a test (a coroutine: ``asyncio.run_coroutine_threadsafe(coro, broker.app_loop)``)."""

        async def call() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), self.app_loop).result(self.start_timeout)

    @property
    def app_loop(self) -> asyncio.AbstractEventLoop:
        if not isinstance(self._runner, ThreadRunner) or self._runner.loop is None:
            raise RuntimeError("only a broker running in this process has a loop")
        return self._runner.loop

    # ------------------------------------------------------------ with / async with

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    async def __aenter__(self) -> Broker:
        """Started in a worker thread, so the caller's loop keeps running meanwhile."""
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)

    def __repr__(self) -> str:
        where = "subprocess" if self.subprocess else "thread"
        state = f"on {self.host}:{self.port}" if self.ports and self.running else "stopped"
        return f"<groupd.testing.Broker {self.engine} in a {where}, {state}>"
