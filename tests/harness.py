"""Brokers for tests: in-process (wire tests) and as a subprocess (real clients, restarts, SIGKILL)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from groupd.protocol import codec
from groupd.protocol.request import (
    encode_request,
    encode_response,  # noqa: F401  (re-exported for tests)
)
from groupd.testing.wire import answers_api_versions

ROOT = Path(__file__).resolve().parent.parent

# Short timeouts so group scenarios finish in seconds, set through config as a user would.
FAST_CONFIG = {
    "log.level": os.environ.get("GROUPD_TEST_LOG_LEVEL", "INFO"),
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    "offsets.retention.check.interval.ms": "600000",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Real clients often join before their metadata names the topic, so the first generation assigns
# nothing and a rejoin follows at once. A short initial delay (Kafka's default is 3000 ms) lets the
# metadata arrive first, as it does against a default Kafka, and spares the tests that extra rebalance.
CLIENT_CONFIG = {**FAST_CONFIG, "group.initial.rebalance.delay.ms": "300"}

# The storage engine's settings every broker of the running test gets (tests/conftest.py's storage_engine
# fixture sets them; empty means the default, local). A test's own overrides win.
ENGINE_SETTINGS: dict[str, str] = {}


class BrokerProcess:
    """``python -m groupd`` in a child process on a free loopback port; survives restart with the same data."""

    def __init__(
        self, log_dir: Path, overrides: dict[str, Any] | None = None, port: int | None = None, nofile: int | None = None
    ) -> None:
        self.log_dir = Path(log_dir)
        self.nofile = nofile  # RLIMIT_NOFILE of the child (tests of running out of descriptors)
        self.port = port or free_port()
        self.overrides = {**CLIENT_CONFIG, **{k: str(v) for k, v in (overrides or {}).items()}}
        self.proc: subprocess.Popen | None = None
        self.log_path = self.log_dir.parent / f"broker-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        args = [sys.executable, "-m", "groupd"]
        settings = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dir),
            "metrics.listener": "",
            **ENGINE_SETTINGS,
            **self.overrides,
        }
        for key, value in settings.items():
            args += ["--override", f"{key}={value}"]
        return args

    def launch(self) -> None:
        """The process, not yet waited for."""
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the process
        self.proc = subprocess.Popen(
            self.command(),
            cwd=ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=self._limits if self.nofile else None,
        )

    def start(self, timeout: float = 20.0) -> BrokerProcess:
        self.launch()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}: {self.log_text()[-2000:]}")
            if answers_api_versions("127.0.0.1", self.port):
                return self
            time.sleep(0.05)
        self.kill()
        raise TimeoutError(f"broker did not answer within {timeout}s: {self.log_text()[-2000:]}")

    def _limits(self) -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 15.0) -> int:
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.proc = None
        self._log.close()
        return code

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            self._log.close()

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill() if exc[0] else self.stop()


def request_bytes(api_key: int, version: int, body: Any, correlation_id: int = 1, client_id: str = "test") -> bytes:
    """A whole request frame. ``body`` is a kio entity or a dict of newest-shape values."""
    return encode_request(api_key, version, body, correlation_id, client_id)


def padded_api_versions(correlation_id: int, size: int) -> bytes:
    """A whole ApiVersions v3 frame of ``size`` bytes: its client software name carries the padding."""
    frame = bytearray(
        request_bytes(18, 3, {"client_software_name": "x", "client_software_version": "1"}, correlation_id)
    )
    name_at = frame.index(b"\x02x")  # compact string "x": length+1, then the byte
    grow = size - len(frame)
    name = b"a" * (1 + grow)
    length = len(name) + 1
    varint = bytearray()
    while True:
        byte, length = length & 0x7F, length >> 7
        varint.append(byte | (0x80 if length else 0))
        if not length:
            break
    body = frame[4:name_at] + varint + name + frame[name_at + 2 :]
    return struct.pack(">i", len(body)) + bytes(body)


class WireClient:
    """A raw asyncio Kafka connection for wire tests: send kio requests, decode kio responses."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str = "test") -> None:
        self.reader, self.writer = reader, writer
        self.client_id = client_id
        self._cid = 0
        self._pending: list[tuple[int, int, int]] = []

    @classmethod
    async def connect(cls, port: int, host: str = "127.0.0.1", client_id: str = "test") -> WireClient:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, client_id)

    def send(self, api_key: int, version: int, body: Any) -> int:
        self._cid += 1
        self.writer.write(request_bytes(api_key, version, body, self._cid, self.client_id))
        self._pending.append((self._cid, api_key, version))
        return self._cid

    async def recv(self) -> Any:
        cid, api_key, version = self._pending.pop(0)
        (size,) = struct.unpack(">i", await self.reader.readexactly(4))
        data = await self.reader.readexactly(size)
        header_cls = codec.response_header_class(api_key, version)
        header, used = codec.decode(header_cls, data, 0)
        assert header.correlation_id == cid, (header.correlation_id, cid)
        body, _ = codec.decode(codec.response_class(api_key, version), data, used)
        return body

    async def call(self, api_key: int, version: int, body: Any, timeout: float = 10.0) -> Any:
        self.send(api_key, version, body)
        return await asyncio.wait_for(self.recv(), timeout)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


def env_without_proxies() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
