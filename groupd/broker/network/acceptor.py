"""Listening sockets accepted by hand, so the broker decides about each connection before serving it.

asyncio's ``create_server`` accepts whatever comes; Kafka's acceptor first asks its ConnectionQuotas.
groupd does the same here, with Kafka's names:

- ``max.connections.per.ip`` (and ``max.connections.per.ip.overrides``): one connection more from an
  address is accepted and closed at once (Kafka's TooManyConnectionsException), with a log line;
- ``max.connections``: at the limit the broker stops accepting, on every listener, until a connection
  closes (Kafka's acceptor blocks in waitForConnectionSlot); a new connection waits in the listen
  backlog, unanswered, and is taken when a slot frees, while the open ones are served throughout;
- out of file descriptors (EMFILE, ENFILE): a descriptor held in reserve is given up for a moment so
  the waiting connection can be accepted and closed at once (the client sees a close and retries,
  rather than waiting in the backlog for an answer that cannot come), and the broker says so, once per
  interval however many connections it turned away.

Every refusal is counted in the metrics and logged at most once per ``LOG_INTERVAL_S`` with the count
since the last line, so a flood of connections cannot flood the log.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger("groupd.connection")

LOG_INTERVAL_S = 10.0  # at most one line per kind of refusal in this long
ACCEPTS_PER_WAKE = 64  # accepted per readiness callback: a connect storm does not starve the loop
BACKLOG = 100  # asyncio's create_server default
RETRY_S = 1.0  # no reserve descriptor to give up: accepting pauses this long (asyncio's own delay)
_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)
_OUT_OF_MEMORY = (errno.ENOBUFS, errno.ENOMEM)


class Occasional:
    """A log line for an event that may come thousands of times a second: the first is logged, the
    rest within the interval only counted, and the next line says how many there were."""

    def __init__(self, interval_s: float = LOG_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._next = 0.0
        self._missed = 0

    def due(self) -> int | None:
        """None: count this one silently; a number: log now, and say that many went unlogged."""
        now = time.monotonic()
        if now < self._next:
            self._missed += 1
            return None
        self._next = now + self.interval_s
        missed, self._missed = self._missed, 0
        return missed


class ConnectionQuotas:
    """Kafka's ConnectionQuotas for one node: open connections in all and per address."""

    def __init__(self, max_connections: int, per_ip: int, overrides: dict[str, int]) -> None:
        self.max_connections = max_connections
        self.per_ip = per_ip
        self.overrides = dict(overrides)
        self.total = 0
        self.by_ip: dict[str, int] = {}

    def resolve_overrides(self) -> None:
        """Overrides name hosts or addresses; Kafka resolves each once (InetAddress.getByName)."""
        resolved: dict[str, int] = {}
        for host, count in self.overrides.items():
            try:
                infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
            except OSError as exc:
                log.warning(
                    "max.connections.per.ip.overrides: cannot resolve %s (%s); its override is not applied", host, exc
                )
                continue
            for info in infos:
                resolved[str(info[4][0])] = count
        self.overrides = resolved

    def limit_of(self, ip: str) -> int:
        return self.overrides.get(ip, self.per_ip)

    def full(self) -> bool:
        return self.total >= self.max_connections

    def opened(self, ip: str) -> None:
        self.total += 1
        self.by_ip[ip] = self.by_ip.get(ip, 0) + 1

    def closed(self, ip: str) -> None:
        self.total -= 1
        left = self.by_ip[ip] - 1
        if left:
            self.by_ip[ip] = left
        else:
            del self.by_ip[ip]


class Slot:
    """A connection's place in the quotas, given back once, when its transport is lost."""

    __slots__ = ("gate", "ip")

    def __init__(self, gate: Admission, ip: str) -> None:
        self.gate: Admission | None = gate
        self.ip = ip

    def release(self) -> None:
        gate, self.gate = self.gate, None
        if gate is not None:
            gate.released(self.ip)


class Acceptor:
    """One listener's bound sockets, read by the loop while the broker accepts."""

    def __init__(
        self, name: str, sockets: list[socket.socket], make: Callable[[], asyncio.BaseProtocol], gate: Admission
    ) -> None:
        self.name, self.sockets, self.make, self.gate = name, sockets, make, gate
        self._reading = False
        self._closed = False

    def resume(self) -> None:
        if not self._reading and not self._closed:
            loop = asyncio.get_running_loop()
            for sock in self.sockets:
                loop.add_reader(sock.fileno(), self._ready, sock)
            self._reading = True

    def pause(self) -> None:
        if self._reading:
            loop = asyncio.get_running_loop()
            for sock in self.sockets:
                loop.remove_reader(sock.fileno())
            self._reading = False

    def close(self) -> None:
        """Stop listening (the ``Server.close`` of asyncio)."""
        self.pause()
        self._closed = True
        for sock in self.sockets:
            sock.close()

    def _ready(self, sock: socket.socket) -> None:
        for _ in range(ACCEPTS_PER_WAKE):
            if not self._reading:
                return  # max.connections reached meanwhile, or closed
            try:
                conn, addr = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue  # the client gave up before we took it
            except OSError as exc:
                self.gate.accept_failed(self, sock, exc)
                return
            self.gate.accepted(self, conn, str(addr[0]))


class Admission:
    """The broker's acceptors and the quotas between them; hands admitted sockets to the loop."""

    def __init__(self, config: Any, metrics: Any) -> None:
        self.quotas = ConnectionQuotas(
            config["max.connections"], config["max.connections.per.ip"], config["max.connections.per.ip.overrides"]
        )
        self.metrics = metrics
        self.acceptors: list[Acceptor] = []
        self._reserve = _open_reserve()
        self._full_log = Occasional()
        self._per_ip_log = Occasional()
        self._fd_log = Occasional()
        self._paused_for_limit = self.quotas.full()  # max.connections 0: never accept

    def listen(self, name: str, host: str, port: int, make: Callable[[], asyncio.BaseProtocol]) -> Acceptor:
        acceptor = Acceptor(name, bind(host, port), make, self)
        self.acceptors.append(acceptor)
        if not self._paused_for_limit:
            acceptor.resume()
        return acceptor

    def close(self) -> None:
        for acceptor in self.acceptors:
            acceptor.close()
        if self._reserve is not None:
            os.close(self._reserve)
            self._reserve = None

    # ------------------------------------------------------------ accepting

    def accepted(self, acceptor: Acceptor, conn: socket.socket, ip: str) -> None:
        quotas = self.quotas
        limit = quotas.limit_of(ip)
        if quotas.by_ip.get(ip, 0) >= limit:
            conn.close()
            self.metrics.connection_refused("per_ip")
            missed = self._per_ip_log.due()
            if missed is not None:
                log.info(
                    "Rejected connection from %s on listener %s, address already has the configured maximum of %d "
                    "connections (max.connections.per.ip %d)%s",
                    ip,
                    acceptor.name,
                    limit,
                    limit,
                    _more(missed),
                )
            return
        quotas.opened(ip)
        slot = Slot(self, ip)
        conn.setblocking(False)
        protocol = acceptor.make()
        protocol.slot = slot  # type: ignore[attr-defined]  # Connection and TlsServer release it when lost
        task = asyncio.ensure_future(asyncio.get_running_loop().connect_accepted_socket(lambda: protocol, conn))
        task.add_done_callback(lambda t: _handed_over(t, slot, conn))
        if quotas.full():
            self._pause_for_limit()

    def released(self, ip: str) -> None:
        self.quotas.closed(ip)
        if self._paused_for_limit and not self.quotas.full():
            self._paused_for_limit = self.quotas.full()  # max.connections 0: never accept
            for acceptor in self.acceptors:
                acceptor.resume()

    def _pause_for_limit(self) -> None:
        self._paused_for_limit = True
        for acceptor in self.acceptors:
            acceptor.pause()
        self.metrics.accept_paused()
        missed = self._full_log.due()
        if missed is not None:
            log.warning(
                "max.connections %d reached: new connections wait until one closes%s",
                self.quotas.max_connections,
                _more(missed, "times reached"),
            )

    def accept_failed(self, acceptor: Acceptor, sock: socket.socket, exc: OSError) -> None:
        """accept(2) failed for want of a resource: turn the waiting connection away, say so now and
        then, and keep accepting."""
        if exc.errno not in _OUT_OF_DESCRIPTORS + _OUT_OF_MEMORY:
            log.warning("listener %s: accept failed: %s", acceptor.name, exc)
            return
        turned_away = self._turn_away(sock) if exc.errno in _OUT_OF_DESCRIPTORS else 0
        self.metrics.connection_refused(
            "fd_exhausted" if exc.errno in _OUT_OF_DESCRIPTORS else "no_memory", max(turned_away, 1)
        )
        missed = self._fd_log.due()
        if missed is not None:
            what = "out of file descriptors" if exc.errno in _OUT_OF_DESCRIPTORS else "out of socket memory"
            log.warning(
                "listener %s: %s (%s, %d connections open, limit %s): incoming connections are closed at once; "
                "raise the limit (ulimit -n) or lower max.connections%s",
                acceptor.name,
                what,
                exc.strerror,
                self.quotas.total,
                _nofile(),
                _more(missed, "accepts failed"),
            )
        if turned_away == 0:  # nothing given up to make room: wait before the next try, as asyncio does
            acceptor.pause()
            asyncio.get_running_loop().call_later(RETRY_S, self._retry, acceptor)

    def _retry(self, acceptor: Acceptor) -> None:
        if self._reserve is None:
            self._reserve = _open_reserve()  # lost to a race when last given up: take it back if we can
        if not self._paused_for_limit:
            acceptor.resume()

    def _turn_away(self, sock: socket.socket) -> int:
        """libuv's trick: free the reserve descriptor, accept and close what waits, take it back."""
        if self._reserve is None:
            return 0
        os.close(self._reserve)
        self._reserve = None
        closed = 0
        try:
            while closed < ACCEPTS_PER_WAKE:
                try:
                    conn, _ = sock.accept()
                except OSError:
                    break
                conn.close()
                closed += 1
        finally:
            self._reserve = _open_reserve()
        return closed


def _handed_over(task: asyncio.Future, slot: Slot, conn: socket.socket) -> None:
    if task.cancelled() or task.exception() is not None:
        if not task.cancelled():
            log.debug("accepted connection could not be set up: %s", task.exception())
        conn.close()
        slot.release()


def _open_reserve() -> int | None:
    try:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def _nofile() -> str:
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        return str(soft)
    except (ImportError, OSError, ValueError):
        return "?"


def _more(missed: int, what: str = "more") -> str:
    return f" ({missed} {what} since the last such line)" if missed else ""


def bind(host: str | None, port: int, backlog: int = BACKLOG) -> list[socket.socket]:
    """Listening sockets for ``host:port``, as ``loop.create_server`` makes them: every address the
    host resolves to (all interfaces for an empty host), SO_REUSEADDR, IPv6 sockets v6-only."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    seen: set[Any] = set()
    try:
        for family, kind, proto, _, address in _unique(infos, seen):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                raise OSError(
                    exc.errno, f"error while attempting to bind on address {address!r}: {(exc.strerror or '').lower()}"
                ) from None
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _unique(infos: Iterable[Any], seen: set[Any]) -> Iterable[Any]:
    for info in infos:
        key = (info[0], info[4])
        if key not in seen:
            seen.add(key)
            yield info
