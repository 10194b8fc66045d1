"""Connections of secured listeners. On a SASL listener, until the client authenticates its frames
go to a SaslGate (broker/security/sasl.py) instead of the request path; afterwards it is an ordinary
connection. On an SSL listener the client's certificate names it.

Only those listeners make these, so a PLAINTEXT connection's request path pays nothing for security.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from groupd.broker.network.connection import Connection
from groupd.broker.security.sasl import FAILED, SaslGate
from groupd.broker.security.tls import principal
from groupd.protocol.framing import SIZE

if TYPE_CHECKING:
    from groupd.broker.app import Broker
    from groupd.broker.network.acceptor import Slot

log = logging.getLogger("groupd.connection")


class SaslConnection(Connection):
    def __init__(self, broker: Broker, listener: str, gate: SaslGate) -> None:
        super().__init__(broker, listener)
        self.listener_name = listener  # every SASL connection is on a named listener
        self._gate: SaslGate | None = gate
        self._gate_buf = bytearray()  # frames for the gate are cut here, with the gate's own bound and words
        self._full_max_bytes = self.exchange.max_bytes
        # Kafka's sasl.server.max.receive.size: an unauthenticated client cannot make us buffer 100 MB
        self.exchange.max_bytes = min(self._full_max_bytes, broker.config["sasl.server.max.receive.size"])

    def data_received(self, data: bytes) -> None:
        if self._gate is None:
            Connection.data_received(self, data)
            return
        if (
            self._draining
            or self._lost
            or self._gate.state == FAILED
            or self.transport is None
            or self.transport.is_closing()
        ):
            return
        self.active = True
        buf = self._gate_buf
        buf += data
        pos, end = 0, len(buf)
        while self._gate is not None and end - pos >= 4:
            (size,) = SIZE.unpack_from(buf, pos)
            if size < 0 or size > self.max_bytes:
                log.warning(
                    "connection %s (listener %s) closed: Failing SASL authentication due to invalid receive size %d "
                    "(sasl.server.max.receive.size %d)",
                    self.peer,
                    self.listener,
                    size,
                    self.max_bytes,
                )
                self.broker.metrics.authentication(self.listener_name, "none", "failure")
                buf.clear()
                self._close()
                return
            if end - pos - 4 < size:
                break
            frame = bytes(buf[pos + 4 : pos + 4 + size])
            pos += 4 + size
            self.broker.metrics.bytes_in(4 + size)
            if not self._gate_frame(frame):
                buf.clear()
                return
        rest = bytes(buf[pos:])
        buf.clear()
        if self._gate is None:
            if rest:
                Connection.data_received(self, rest)  # requests sent right behind the last token
        else:
            buf += rest

    def _gate_frame(self, frame: bytes) -> bool:
        """One frame through the gate; False once the connection is closing."""
        gate = self._gate
        assert gate is not None  # frames come here only until the client authenticates
        step = gate.receive(frame)
        ticket = self.exchange.admit(len(frame))  # answered here and now, in its turn
        if step.passthrough:
            self._handle(ticket, frame)  # ApiVersions: the ordinary answer, unsupported versions included
        else:
            self._send(ticket, () if step.reply is None else (step.reply,))
        mechanism = gate.mechanism_name or "none"
        if step.close is not None:
            log.warning("connection %s (listener %s) closed: %s", self.peer, self.listener, step.close)
            if step.failed:
                self.broker.metrics.authentication(self.listener_name, mechanism, "failure")
            self._close_after_failure()
            return False
        if step.principal is not None:
            self.user = step.principal.partition(":")[2]  # quotas by user apply to it from now on
            self._gate = None
            self.exchange.max_bytes = self._full_max_bytes
            self.broker.metrics.authentication(self.listener_name, mechanism, "success")
            log.debug(
                "connection %s (listener %s) authenticated as %s with %s",
                self.peer,
                self.listener,
                self.principal,
                mechanism,
            )
        return True

    def _unframed(self) -> bytes:
        return bytes(self._gate_buf) if self._gate is not None else Connection._unframed(self)

    def _close_after_failure(self) -> None:
        """Kafka's connection.failed.authentication.delay.ms: the answer goes out now, the close comes
        later, so a client retrying a bad password cannot spin the broker."""
        self.exchange.drop_queued()
        if not self._reading_paused and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()
        self.flush()
        delay = self.broker.config["connection.failed.authentication.delay.ms"]
        if delay <= 0:
            self._close()
        else:
            asyncio.get_running_loop().call_later(delay / 1000, self._close)


class TlsConnection(Connection):
    """A connection on an SSL listener: its principal is its verified client certificate's subject."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.user = principal(transport.get_extra_info("peercert")).partition(":")[2]
        log.debug("connection %s (listener %s) is %s", self.peer, self.listener, self.principal)


TLS_HANDSHAKE_TIMEOUT = 10.0  # seconds a client has to finish its TLS handshake
_READ = 1 << 16


class TlsTransport:
    """The transport a connection on an SSL or SASL_SSL listener writes to: plaintext through an
    ``ssl.SSLObject`` over memory BIOs, ciphertext out through the TCP transport."""

    def __init__(self, tcp: asyncio.Transport, tls: ssl.SSLObject, outgoing: ssl.MemoryBIO) -> None:
        self.tcp, self.tls, self.outgoing = tcp, tls, outgoing
        self._closing = False

    def flush(self) -> None:
        data = self.outgoing.read()
        if data:
            self.tcp.write(data)

    def write(self, data: bytes) -> None:
        if not self._closing:
            self.tls.write(data)
            self.flush()

    def writelines(self, parts: Any) -> None:
        self.write(b"".join(parts))

    def is_closing(self) -> bool:
        return self._closing or self.tcp.is_closing()

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        with contextlib.suppress(ssl.SSLError):
            self.tls.unwrap()  # writes our close_notify; the peer's is not awaited
        self.flush()
        self.tcp.close()

    def abort(self) -> None:
        self._closing = True
        self.tcp.abort()

    def pause_reading(self) -> None:
        self.tcp.pause_reading()

    def resume_reading(self) -> None:
        self.tcp.resume_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.tcp.set_write_buffer_limits(high=high, low=low)

    def get_write_buffer_size(self) -> int:
        return self.tcp.get_write_buffer_size()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peercert":
            return self.tls.getpeercert()
        if name == "ssl_object":
            return self.tls
        return self.tcp.get_extra_info(name, default)


class TlsServer(asyncio.Protocol):
    """The TCP side of a connection on an SSL or SASL_SSL listener: runs the TLS handshake over
    memory BIOs, so a failed one is logged and counted as Kafka counts a failed authentication
    (asyncio's own TLS server drops it without a word), then hands plaintext to the listener's
    connection through a TlsTransport."""

    slot: Slot | None = None  # its place in the connection quotas (broker/network/acceptor.py)

    def __init__(self, broker: Broker, listener: str, context: ssl.SSLContext, make: Callable[[], Connection]) -> None:
        self.broker, self.listener, self.context, self.make = broker, listener, context, make
        self.conn: Connection | None = None
        self.peer = "?"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.tcp = transport
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.peer = f"{peer[0]}:{peer[1]}"
        self.incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = TlsTransport(transport, self.context.wrap_bio(self.incoming, outgoing, server_side=True), outgoing)  # type: ignore[arg-type]
        self.timer = asyncio.get_running_loop().call_later(TLS_HANDSHAKE_TIMEOUT, self._handshake_timed_out)

    def data_received(self, data: bytes) -> None:
        self.incoming.write(data)
        if self.conn is None and not self._handshake():
            return
        chunks, closed = [], False
        while True:
            try:
                chunk = self.tls.tls.read(_READ)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:  # the client's close_notify: its end of the stream
                closed = True
                break
            except ssl.SSLError as exc:
                log.warning("connection %s (listener %s) closed: TLS error: %s", self.peer, self.listener, exc)
                self.tls.abort()
                return
            if not chunk:  # so the ssl module reports a close_notify too
                closed = True
                break
            chunks.append(chunk)
        self.tls.flush()  # what reading wrote (TLS 1.3 tickets, key updates)
        conn = self.conn
        assert conn is not None  # the handshake made it
        if chunks:
            conn.data_received(b"".join(chunks))
        if closed and not conn.eof_received():
            self.tls.close()  # answered with our close_notify, as Kafka closes on a client's EOF

    def _handshake(self) -> bool:
        try:
            self.tls.tls.do_handshake()
        except ssl.SSLWantReadError:
            self.tls.flush()
            return False
        except ssl.SSLError as exc:
            self.tls.flush()  # the alert telling the client why
            self._failed(str(exc))
            return False
        self.tls.flush()
        self.timer.cancel()
        conn = self.conn = self.make()
        if not isinstance(conn, SaslConnection):
            self.broker.metrics.authentication(self.listener, "SSL", "success")
        conn.connection_made(self.tls)  # type: ignore[arg-type]
        return True

    def _failed(self, why: str) -> None:
        log.warning("connection %s (listener %s) closed: TLS handshake failed: %s", self.peer, self.listener, why)
        self.broker.metrics.authentication(self.listener, "SSL", "failure")
        self.timer.cancel()
        self.tls._closing = True
        self.tcp.close()  # not abort: the alert written just before goes out first

    def _handshake_timed_out(self) -> None:
        if self.conn is None and not self.tcp.is_closing():
            self._failed(f"not finished within {TLS_HANDSHAKE_TIMEOUT:.0f} s")

    def eof_received(self) -> bool:
        return bool(self.conn.eof_received()) if self.conn is not None else False

    def connection_lost(self, exc: Exception | None) -> None:
        self.timer.cancel()
        if self.conn is not None:
            self.conn.connection_lost(exc)
        if self.slot is not None:
            self.slot.release()

    def pause_writing(self) -> None:
        if self.conn is not None:
            self.conn.pause_writing()

    def resume_writing(self) -> None:
        if self.conn is not None:
            self.conn.resume_writing()
