"""One client connection on an asyncio transport: the adapter between the socket and its Exchange.

The exchange (``broker/network/exchange.py``) keeps the state of the conversation without doing any
I/O: it cuts frames from what is read, bounds the read-ahead (``queued.max.requests``,
``queued.max.request.bytes``), hands out one request at a time, mutes for a quota, and puts answers back
in request order. This class feeds it what the transport reads, runs the handler of each request it
hands out, and writes what it gives back; it owns the transport, the loop's timers and the log lines.

Kafka mutes a socket after reading a request until its response is sent; we read ahead up to the
bounds but answer one request at a time, so a parked JoinGroup holds back the requests behind it on its
own connection and nobody else's. Past either bound the transport stops reading until answers drain the
queue: a client that parks a long poll and streams frames behind it makes the broker hold no more than
the bound (plus the read that crossed it).

Frames are cut in ``data_received`` and handled inline. A handler answers with a response at once (a
heartbeat, a fetch of committed offsets: answered within the event-loop turn that read it, no task, no
queue hand-off) or with a ``Later`` that calls the connection back when its answer is ready.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import TYPE_CHECKING, cast

from groupd.broker.dispatch import Later, RequestContext, Response
from groupd.broker.handlers.cluster import api_versions_body
from groupd.broker.network.exchange import Chunks, Exchange
from groupd.broker.routes import HANDLERS
from groupd.protocol import codec
from groupd.protocol.api_table import ApiKey
from groupd.protocol.errors import ErrorCode
from groupd.protocol.framing import SIZE, FrameError
from groupd.protocol.request import (
    UnknownApi,
    UnsupportedVersion,
    encode_response,
    encode_response_parts,
    parse_request,
    peek_header,
)

if TYPE_CHECKING:
    from groupd.broker.app import Broker
    from groupd.broker.network.acceptor import Slot

log = logging.getLogger("groupd.connection")
_ids = itertools.count(1)
API_VERSIONS = int(ApiKey.API_VERSIONS)
WRITE_HIGH_WATER = 1 << 20
NOTHING_IN_HAND = (-1, -1, -1, -1, 0.0)
LARGE_BODY = 65536  # a body this long goes to the transport as it is, not copied behind its header


class Connection(asyncio.Protocol):
    slot: Slot | None = None  # its place in the connection quotas, when it is the socket's protocol (not behind TLS)

    def __init__(self, broker: Broker, listener: str | None = None) -> None:
        self.broker = broker
        self.listener = listener  # the listener's name: Metadata answers with that listener's advertised address
        self.id = f"conn-{next(_ids)}"
        self.peer = "?"
        self.host = "?"
        config = broker.config
        self.exchange = Exchange(
            config["socket.request.max.bytes"], config["queued.max.requests"], config["queued.max.request.bytes"]
        )
        self.transport: asyncio.Transport | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._told_bounded = False  # reading paused by the byte bound: said once per connection
        self._later: Later | None = None  # the answer the request in hand waits for
        self._current = NOTHING_IN_HAND  # the request being answered: ticket, api key, version, correlation id, started
        self._reading_paused = False
        self._writing_paused = False
        self._draining = False  # graceful stop: answer what was read, then close
        self._lost = False
        self._out: list[bytes] = []  # answers of this loop turn, sent together by flush()
        self._out_bytes = 0  # past WRITE_HIGH_WATER, no further request is handled until flush()
        # the principal's name (Kafka's on a PLAINTEXT listener), as quotas see it; SASL or a TLS certificate sets it
        self.user = "ANONYMOUS"
        self._mute_ms = 0  # a quota's throttle time, applied once the current answer is out
        self.active = True  # read or wrote since the broker's last look for idle connections
        self.quiet_since = 0.0  # loop time it was last seen inactive from

    @property
    def principal(self) -> str:
        """Kafka's principal: ``User:<name>``; no authorizer reads it, quotas and logs do."""
        return f"User:{self.user}"

    @property
    def max_bytes(self) -> int:
        """``socket.request.max.bytes``, or less while a SASL client has not authenticated."""
        return self.exchange.max_bytes

    # ------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop transports are not asyncio.Transport subclasses
        self.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.peer = f"{peer[0]}:{peer[1]}"
        self.host = str(peer[0])
        self.broker.connection_opened(self)

    def data_received(self, data: bytes) -> None:
        if self._draining or self._lost:
            return
        self.active = True
        self.broker.metrics.bytes_in(len(data))
        taken: tuple[int, bytes] | None = None
        try:
            if self._writing_paused or self._reading_paused or self._out_bytes >= WRITE_HIGH_WATER:
                self.exchange.receive(data)  # nothing may be handled now
            else:
                taken = self.exchange.take(data)  # a lone whole frame: handled at once, as _pump would
        except FrameError as exc:
            log.warning("connection %s closed: %s", self.peer, exc)
            self._close()
            return
        if taken is None:
            self._queued()
            return
        self._handle(taken[0], taken[1])
        if self._draining:
            self._pump()

    def _queued(self) -> None:
        exchange = self.exchange
        if not self._reading_paused and exchange.over_read_ahead() and self.transport is not None:
            self._reading_paused = True
            self.transport.pause_reading()
            if not self._told_bounded and exchange.bounded_by_bytes:
                self._told_bounded = True
                log.info(
                    "connection %s: %d bytes read and not yet answered (queued.max.request.bytes %d): reading paused "
                    "until answers drain them",
                    self.peer,
                    exchange.unanswered_bytes,
                    exchange.max_queued_bytes,
                )
        self._pump()

    def eof_received(self) -> bool:
        self._log_torn_tail()
        return False  # close our side too, as Kafka does

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self.exchange.lost()
        later, self._later = self._later, None
        if later is not None and later.abandon is not None:
            later.abandon()  # its answer, when it comes, is for nobody; a waiting handler unwinds
        if not self.closed.done():
            self.closed.set_result(None)
        self.broker.connection_closed(self)
        if self.slot is not None:
            self.slot.release()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._pump()

    # ------------------------------------------------------------ requests, one at a time

    def _pump(self) -> None:
        exchange = self.exchange
        while exchange.frames and not self._writing_paused and not self._lost and self._out_bytes < WRITE_HIGH_WATER:
            taken = exchange.next_request()
            if taken is None:
                break
            ticket, body = taken
            self._handle(ticket, body)
        if (
            self._reading_paused
            and not self._draining
            and not self._lost
            and not exchange.over_read_ahead()
            and self.transport is not None
        ):
            self._reading_paused = False
            self.transport.resume_reading()
        if self._draining and not exchange.busy:
            self._close()

    def _handle(self, ticket: int, body: bytes) -> None:
        api_key, api_version, correlation_id = peek_header(body)
        try:
            header, request = parse_request(body, api_key, api_version)
        except UnsupportedVersion as exc:
            if api_key == API_VERSIONS:
                self._send(ticket, (encode_response(API_VERSIONS, 0, correlation_id, _unsupported_api_versions()),))
                return
            self._refuse(ticket, "%s", exc)
            return
        except UnknownApi as exc:
            self._refuse(ticket, "%s", exc)
            return
        except Exception as exc:  # kio could not decode the body
            self._refuse(ticket, "cannot decode api %d v%d: %s: %s", api_key, api_version, type(exc).__name__, exc)
            return
        started = self.broker.metrics.request_started(api_key)
        self._current = (ticket, api_key, api_version, correlation_id, started)
        try:
            result = HANDLERS[api_key](
                self.broker, RequestContext(header, self.host, self.id, self, len(body)), request
            )
        except Exception:
            self._failed()
            return
        if isinstance(result, Later):
            if result.settled:
                self._answer_later(result)
                return
            self._later = result
            result.listener = self._later_settled
        else:
            self._answer(result)

    def _refuse(self, ticket: int, why: str, *args: object) -> None:
        """A request Kafka closes the connection for: said, left unanswered, and the connection closed."""
        log.warning("connection %s closed: " + why, self.peer, *args)
        self._send(ticket, ())
        self._close()

    def _later_settled(self, later: Later) -> None:
        """Called by whoever settles it (a flush round's end, a task's): answer now; requests read
        meanwhile are taken on the next loop turn, not inside the caller's delivery."""
        if self._later is not later:
            return  # the connection went away meanwhile
        self._later = None
        self._answer_later(later)
        if self.exchange.frames or self._reading_paused:
            asyncio.get_running_loop().call_soon(self._pump)

    def _answer_later(self, later: Later) -> None:
        try:
            result = later.answer()
        except asyncio.CancelledError:  # whoever it waited on was cancelled (the broker stopping): no answer
            ticket = self._current[0]
            self._current = NOTHING_IN_HAND
            self._send(ticket, ())
            return
        except Exception:
            self._failed()
            return
        self._answer(result)

    def _answer(self, result: Response | None) -> None:
        ticket, api_key, api_version, correlation_id, started = self._current
        self._current = NOTHING_IN_HAND
        if self._lost:
            return
        try:
            parts = None if result is None else encode_response_parts(api_key, api_version, correlation_id, result)
        except Exception:
            self._current = (ticket, api_key, api_version, correlation_id, started)
            self._failed()
            return
        self.broker.metrics.request_finished(api_key, started, result)
        if parts is None:
            chunks: Chunks = ()
        else:
            head, body = parts
            chunks = (head + body,) if len(body) < LARGE_BODY else parts
        for data in self.exchange.answer(ticket, chunks):  # as _send, without a second call on the hot path
            self._write(data)
        if self._mute_ms:
            self._mute()

    def _send(self, ticket: int, chunks: Chunks) -> None:
        """Give the exchange the answer to ``ticket``; write what it lets out, in request order."""
        for data in self.exchange.answer(ticket, chunks):
            self._write(data)

    # ------------------------------------------------------------ quotas

    def mute_after_answer(self, ms: int) -> None:
        """Kafka answers a throttled request at once and then mutes its channel for the throttle time
        (KIP-219): no further request of this connection is handled until then."""
        self._mute_ms = max(self._mute_ms, ms)

    def _mute(self) -> None:
        ms, self._mute_ms = self._mute_ms, 0
        self.exchange.mute()
        asyncio.get_running_loop().call_later(ms / 1000, self._unmute)

    def _unmute(self) -> None:
        if self.exchange.unmute():
            self._pump()

    def _failed(self) -> None:
        ticket, api_key, api_version, _, started = self._current
        self._current = NOTHING_IN_HAND
        log.exception("connection %s closed: handler for api %d v%d failed", self.peer, api_key, api_version)
        self.broker.metrics.request_finished(api_key, started, None)
        self._send(ticket, ())  # no answer, and nothing in hand any more
        self._close()

    # ------------------------------------------------------------ lifecycle

    def stop_reading(self) -> None:
        """Graceful stop: requests already read are finished and answered; then the connection closes."""
        self._draining = True
        if self.transport is not None and not self._lost:
            if not self._reading_paused:
                self.transport.pause_reading()
            self._reading_paused = True
            self._pump()

    @property
    def busy(self) -> bool:
        """A request of it is read and not yet answered: not idle, however long that takes."""
        return self._current is not NOTHING_IN_HAND or self.exchange.busy

    def close_idle(self) -> None:
        self._close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def _write(self, data: bytes) -> None:
        """Queue an answer; the broker sends every connection's queue once this loop turn's input is done.

        One burst per turn instead of a send per answer: a peer woken by the first send finds the rest
        already there (a wake-up across CPUs is the dearest part of a small request on a VM), and answers
        to pipelined requests share one send."""
        if self.transport is not None and not self.transport.is_closing():
            if not self._out:
                self.broker.flush_soon(self)
            self._out.append(data)
            self._out_bytes += len(data)
            self.broker.metrics.bytes_out(len(data))

    def flush(self) -> None:
        out = self._out
        if not out:
            return
        held_back = self._out_bytes >= WRITE_HIGH_WATER
        self._out, self._out_bytes = [], 0
        self.active = True
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if len(out) == 1:
            transport.write(out[0])
        else:
            transport.writelines(out)
        if held_back:
            self._pump()  # requests read meanwhile (the transport pauses us itself if its buffer is full)

    def _close(self) -> None:
        self.exchange.drop_queued()
        if self.transport is not None and not self.transport.is_closing():
            self.flush()
            self.transport.close()

    def _unframed(self) -> bytes:
        """What was read after the last whole frame."""
        return self.exchange.tail

    def _log_torn_tail(self) -> None:
        buf = self._unframed()
        if not buf:
            return
        if len(buf) < 4:
            log.warning("connection %s closed: truncated frame size (%d bytes)", self.peer, len(buf))
        else:
            (size,) = SIZE.unpack_from(buf, 0)
            log.warning("connection %s closed: truncated frame (%d of %d bytes)", self.peer, len(buf) - 4, size)


def _unsupported_api_versions():
    """Kafka's answer to an ApiVersions version it does not know: v0 body, error 35, the full table."""
    return api_versions_body(codec.response_class(API_VERSIONS, 0), ErrorCode.unsupported_version)
