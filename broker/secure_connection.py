"""Connections of secured listeners. On a SASL listener, until the client authenticates its frames
go to a SaslGate (security/sasl.py) instead of the request path; afterwards it is an ordinary
connection. On an SSL listener the client's certificate names it.

Only those listeners make these, so a PLAINTEXT connection's request path pays nothing for security.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker.connection import Connection
from protocol.framing import SIZE
from security.sasl import FAILED, SaslGate
from security.tls import principal

if TYPE_CHECKING:
    from broker.app import Broker

log = logging.getLogger("groupd.connection")


class SaslConnection(Connection):
    def __init__(self, broker: Broker, listener: str, gate: SaslGate) -> None:
        super().__init__(broker, listener)
        self._gate: SaslGate | None = gate
        self._full_max_bytes = self.max_bytes
        # Kafka's sasl.server.max.receive.size: an unauthenticated client cannot make us buffer 100 MB
        self.max_bytes = min(self.max_bytes, broker.config["sasl.server.max.receive.size"])

    def data_received(self, data: bytes) -> None:
        if self._gate is None:
            Connection.data_received(self, data)
            return
        if self._draining or self._lost or self._gate.state == FAILED or self.transport.is_closing():
            return
        buf = self._buf
        buf += data
        pos, end = 0, len(buf)
        while self._gate is not None and end - pos >= 4:
            (size,) = SIZE.unpack_from(buf, pos)
            if size < 0 or size > self.max_bytes:
                log.warning(
                    "connection %s (listener %s) closed: Failing SASL authentication due to invalid receive size %d (sasl.server.max.receive.size %d)",
                    self.peer, self.listener, size, self.max_bytes,
                )
                self.broker.metrics.authentication(self.listener, "none", "failure")
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
        step = gate.receive(frame)
        if step.passthrough:
            self._handle(frame)  # ApiVersions: the ordinary answer, unsupported versions included
        elif step.reply is not None:
            self._write(step.reply)
        mechanism = gate.mechanism_name or "none"
        if step.close is not None:
            log.warning("connection %s (listener %s) closed: %s", self.peer, self.listener, step.close)
            if step.failed:
                self.broker.metrics.authentication(self.listener, mechanism, "failure")
            self._close_after_failure()
            return False
        if step.principal is not None:
            self.principal = step.principal
            self._gate = None
            self.max_bytes = self._full_max_bytes
            self.broker.metrics.authentication(self.listener, mechanism, "success")
            log.debug("connection %s (listener %s) authenticated as %s with %s", self.peer, self.listener, self.principal, mechanism)
        return True

    def _close_after_failure(self) -> None:
        """Kafka's connection.failed.authentication.delay.ms: the answer goes out now, the close comes
        later, so a client retrying a bad password cannot spin the broker."""
        self._frames.clear()
        if not self._reading_paused:
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
        self.principal = principal(transport.get_extra_info("peercert"))
        log.debug("connection %s (listener %s) is %s", self.peer, self.listener, self.principal)
