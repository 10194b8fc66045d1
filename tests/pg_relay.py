"""A TCP relay between groupd and a PostgreSQL server that counts round trips and can add network latency.

A round trip (a *turn*) is the client speaking after the server has spoken (or first): the client then
waited for an answer before it could go on. Counting turns says how many times one transaction made its
caller wait, whatever the machine's speed; ``delay_s`` holds every answer back that long, as a database
across a network does (docs/storage.md's figures with 1 ms of latency were taken through it)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from urllib.parse import urlsplit, urlunsplit


class Relay:
    """Listens on a free 127.0.0.1 port and relays every connection to ``port``; ``url()`` rewrites a
    libpq URL to go through it."""

    def __init__(self, port: int, delay_s: float = 0.0) -> None:
        self.target = port
        self.delay_s = delay_s
        self.turns = 0
        self._last = ""  # who spoke last: "client" or "server"
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="pg-relay").start()

    def url(self, url: str) -> str:
        parts = urlsplit(url)
        user = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{self.port}"))

    def counted(self) -> int:
        """The turns so far (take the difference around what is measured)."""
        with self._lock:
            return self.turns

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _addr = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, "client"), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, "server"), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, side: str) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(1 << 16):
                with self._lock:
                    turn = self._last != side  # the first bytes of an answer, or of a request after one
                    if side == "client" and turn:
                        self.turns += 1
                    self._last = side
                if side == "server" and turn and self.delay_s:
                    time.sleep(self.delay_s)  # once per answer, not per chunk of it: a round trip's latency
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.close()
