"""``/metrics`` and ``/healthz`` over a tiny HTTP/1.1 server on the broker's own event loop.

Why not prometheus_client's WSGI server in a thread: the scrape-time collector reads coordinator and
partition state that only the event loop mutates; reading it from another thread could see a dict
change size mid-iteration. On the loop a scrape is one atomic step, needs no locks, and costs a scrape's
render time on the loop (bounded by the per-group series cap). One request per connection, GET/HEAD only,
bounded header size and read time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from prometheus_client.exposition import choose_encoder

if TYPE_CHECKING:
    from groupd.broker.app import Broker

log = logging.getLogger("groupd.metrics")

MAX_HEADER_BYTES = 16 * 1024
READ_TIMEOUT_S = 10.0


class MetricsServer:
    """A broker service: start() binds ``metrics.listener``, stop() closes it."""

    def __init__(self, broker: Broker, host: str, port: int) -> None:
        self.broker = broker
        self.host = host
        self.requested_port = port
        self._server: asyncio.base_events.Server | None = None
        self._clients: set[asyncio.Task] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.sockets[0].getsockname()[1]

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._on_client, self.host, self.requested_port, reuse_address=True, limit=MAX_HEADER_BYTES
        )
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._clients):
            task.cancel()
        if self._clients:
            await asyncio.wait(list(self._clients), timeout=1)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 1)

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            status, ctype, body, is_head = self._respond(head)
        except (TimeoutError, asyncio.LimitOverrunError, asyncio.IncompleteReadError, ConnectionError):
            status, ctype, body, is_head = "400 Bad Request", "text/plain", b"bad request\n", False
        except Exception:
            log.exception("metrics request failed")
            status, ctype, body, is_head = "500 Internal Server Error", "text/plain", b"error\n", False
        finally:
            self._clients.discard(task)
        header = (
            f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        with contextlib.suppress(ConnectionError, OSError):
            writer.write(header if is_head else header + body)
            await writer.drain()
        writer.close()

    def _respond(self, head: bytes) -> tuple[str, str, bytes, bool]:
        if len(head) > MAX_HEADER_BYTES:
            return "431 Request Header Fields Too Large", "text/plain", b"too large\n", False
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            return "400 Bad Request", "text/plain", b"bad request line\n", False
        method, target, _ = parts
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", "text/plain", b"GET or HEAD\n", False
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        path = target.split("?", 1)[0]
        is_head = method == "HEAD"
        if path == "/metrics":
            encoder, ctype = choose_encoder(headers.get("accept", ""))
            return "200 OK", ctype, encoder(self.broker.metrics.registry), is_head
        if path in ("/healthz", "/health", "/ready"):
            ok, why = self.broker.metrics.healthy()
            return ("200 OK" if ok else "503 Service Unavailable"), "text/plain", f"{why}\n".encode(), is_head
        return "404 Not Found", "text/plain", b"try /metrics or /healthz\n", is_head
