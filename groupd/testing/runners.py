"""Where a test's broker runs: on its own event loop in a thread of the caller's process (the fastest
start, and the broker's objects are at hand), or as ``python -m groupd`` in a child process (the broker
exactly as deployed, with its own interpreter, signals and exit status).

Both take the broker's settings as ``key=value`` overrides, read by the same ``load_config`` the
command line uses, bind port 0 unless told a port, and report the ports their listeners bound."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from groupd.broker.config import load_config

if TYPE_CHECKING:
    from groupd.broker.app import Broker as App

# the broker's line once every listener is bound (groupd/broker/app.py): NAME://host:port, ...
_LISTENING = re.compile(r"groupd listening on (.+?) \(node\.id")
_ENDPOINT = re.compile(r"([A-Za-z0-9_]+)://([^,\s]*):(\d+)")


def _overrides(settings: Mapping[str, str]) -> list[str]:
    return [f"{key}={value}" for key, value in settings.items()]


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop where it is installed (as the command runs the broker), else asyncio's."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class ThreadRunner:
    """The broker (groupd.broker.app.Broker) on a new event loop in a daemon thread."""

    def __init__(self, settings: Mapping[str, str]) -> None:
        self.config = load_config(None, _overrides(settings))  # a ConfigError here, in the caller
        self.app: App | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def start(self, timeout: float) -> dict[str, int]:
        self._thread = threading.Thread(target=self._run, name="groupd-broker", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"the broker did not start within {timeout} s")
        if self._error is not None:
            self._thread.join(timeout)
            raise self._error
        assert self.app is not None
        return {spec.name: self.app.port_of(spec.name) for spec in self.config.listeners}

    def _run(self) -> None:
        from groupd.broker.app import Broker as App  # the broker's modules load on the first start

        loop = self.loop = _new_loop()
        asyncio.set_event_loop(loop)
        try:
            self.app = App(self.config)
            loop.run_until_complete(self.app.start())
        except BaseException as exc:  # told to the caller of start(), which raises it
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _stop(self) -> None:
        assert self.app is not None
        try:
            await self.app.stop()
        finally:
            asyncio.get_running_loop().stop()

    def stop(self, timeout: float) -> None:
        if self._thread is None or self.loop is None or self._error is not None:
            return
        if not self.loop.is_closed():
            done = asyncio.run_coroutine_threadsafe(self._stop(), self.loop)
            with contextlib.suppress(Exception):  # the stop's own failures are logged by the broker
                done.result(timeout)
        self._thread.join(timeout)
        self._thread = None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def output(self) -> list[str]:
        return []  # its log lines go to the caller's logging (pytest shows them with a failed test)


class ProcessRunner:
    """``python -m groupd --override ...`` as a child; its output is kept (the last lines) in memory."""

    def __init__(self, settings: Mapping[str, str], python: str | None = None) -> None:
        load_config(None, _overrides(settings))  # a ConfigError in the caller, not a child's exit status 2
        self.command = [python or sys.executable, "-m", "groupd"]
        for override in _overrides(settings):
            self.command += ["--override", override]
        self.proc: subprocess.Popen[bytes] | None = None
        self._lines: collections.deque[str] = collections.deque(maxlen=2000)
        self._ports: dict[str, int] = {}
        self._listening = threading.Event()
        self._reader: threading.Thread | None = None
        self.exit_code: int | None = None  # once it has exited

    def start(self, timeout: float) -> dict[str, int]:
        self.proc = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self._reader = threading.Thread(target=self._read, name="groupd-broker-output", daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout
        while not self._listening.wait(0.02):
            if self.proc.poll() is not None:
                self._reader.join(1)
                raise RuntimeError(f"the broker exited with {self.proc.returncode}: {self.tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"the broker did not start within {timeout} s: {self.tail()}")
        return dict(self._ports)

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self._lines.append(line)
            if not self._listening.is_set() and (m := _LISTENING.search(line)):
                self._ports = {name.upper(): int(port) for name, _host, port in _ENDPOINT.findall(m[1])}
                self._listening.set()

    def tail(self, lines: int = 40) -> str:
        return "\n".join(list(self._lines)[-lines:])

    def stop(self, timeout: float) -> None:
        """SIGTERM, as a supervisor stops it: it finishes in-flight requests, flushes and exits 0."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._finish()

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self._finish()

    def _finish(self) -> None:
        if self._reader is not None:
            self._reader.join(5)
        if self.proc is not None:
            self.exit_code = self.proc.returncode
            if self.proc.stdout is not None:
                self.proc.stdout.close()
        self.proc = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def output(self) -> list[str]:
        return list(self._lines)
