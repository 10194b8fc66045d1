"""A TCP relay between groupd and a PostgreSQL server that counts round trips and can add network latency.

A round trip (a *turn*) is the client speaking after the server has spoken (or first), when the client's
last message before was one it waits on (a Sync, a Flush or a simple Query): the client then waited for
an answer before it could go on. Counting turns says how many times one transaction made its caller wait,
whatever the machine's speed: on a loaded machine the server answers a pipeline's first statements before
the client has sent the rest, which is no wait. A bare Flush is no turn either (``_ClientMessages.nudge``:
psycopg sends one after a pipeline's Sync, answer come or not; counting it gave one turn too many or,
as the last word before the next request, one too few, now and then under load). ``delay_s`` holds every
answer back that long, as a database across a network does (docs/storage.md's figures with 1 ms of
latency were taken through it)."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from urllib.parse import urlsplit, urlunsplit

_SSL_OR_GSS = (80877103, 80877104)  # SSLRequest, GSSENCRequest: untyped, before the StartupMessage
_WAITS = (ord("S"), ord("H"), ord("Q"))  # Sync, Flush, Query: the client waits for the server after one
_FLUSH = b"H\x00\x00\x00\x04"  # a Flush message: its type and a length that counts itself


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
        frames = _ClientMessages()
        with contextlib.suppress(OSError):
            while data := source.recv(1 << 16):
                if side == "client" and frames.nudge(data):
                    frames.feed(data)  # not a turn, nor the client's turn to speak: see _ClientMessages.nudge
                    sink.sendall(data)
                    continue
                with self._lock:
                    turn = self._last != side  # the first bytes of an answer, or of a request after one
                    if side == "client" and turn and frames.waiting:
                        self.turns += 1
                    self._last = side
                if side == "client":
                    frames.feed(data)
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


class _ClientMessages:
    """Follows the client's side of one connection as PostgreSQL frontend messages (untyped start-up
    messages first: an SSL or GSS request, then the StartupMessage; then a type byte and a length that
    counts itself) to tell whether its last whole message was one it waits on (``waiting``; true before
    the first, so the first bytes are a turn)."""

    def __init__(self) -> None:
        self.buf = b""
        self.started = False
        self.waiting = True

    def nudge(self, data: bytes) -> bool:
        """Whether ``data`` is nothing but whole Flush messages: psycopg sends one at a pipeline's end after
        its Sync, whether or not the answer has come meanwhile, and while waiting for one it already asked
        for. It asks for nothing new, so the relay neither counts it as a turn (before the answer is all
        there it would count one too many) nor lets it be the last word (after the answer, the next request
        would not count: one too few)."""
        return self.started and not self.buf and len(data) % 5 == 0 and data == _FLUSH * (len(data) // 5)

    def feed(self, data: bytes) -> None:
        buf, pos = self.buf + data, 0
        while True:
            if not self.started:
                if len(buf) - pos < 8:
                    break
                length, code = struct.unpack_from(">ii", buf, pos)
                if len(buf) - pos < length:
                    break
                pos += length
                self.started = code not in _SSL_OR_GSS
                self.waiting = True  # the server answers each of them
                continue
            if len(buf) - pos < 5:
                break
            kind, length = buf[pos], struct.unpack_from(">i", buf, pos + 1)[0]
            if len(buf) - pos < 1 + length:
                break
            self.waiting = kind in _WAITS or kind == ord("p")  # p: a password or SASL answer
            pos += 1 + length
        self.buf = buf[pos:]
