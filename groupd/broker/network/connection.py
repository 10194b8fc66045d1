"""One client connection: frames in, responses out, strictly in request order.

Kafka mutes a socket after reading a request until its response is sent; we read ahead up to
``queued.max.requests`` frames and ``queued.max.request.bytes`` bytes but process them one at a time,
so a parked JoinGroup holds back the requests behind it on its own connection and nobody else's. Past
either bound the transport stops reading until answers drain the queue: a client that parks a long poll
and streams frames behind it makes the broker hold no more than the bound (plus the read that crossed it).

The connection is an ``asyncio.Protocol`` rather than a stream reader plus a task: frames are cut from
``data_received`` and handled inline, and a handler that is a coroutine is stepped by the connection
itself (``_step``), resumed from the done-callback of the future it waits on. A heartbeat or a fetch of
committed offsets is answered within the same event-loop turn that read it; no task, no queue hand-off.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
from typing import TYPE_CHECKING, Any

from groupd.broker.dispatch import Later, RequestContext
from groupd.broker.handlers.cluster import api_versions_body
from groupd.broker.routes import HANDLERS
from groupd.protocol import codec
from groupd.protocol.api_table import ApiKey
from groupd.protocol.errors import ErrorCode
from groupd.protocol.framing import HEADER_PREFIX, SIZE, FrameError, check_size
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
_MUTED = object()  # stands for an outstanding request while a throttled connection is muted
_MIN_FRAME = HEADER_PREFIX.size  # a shorter frame, or a torn one, takes the checked path below


class Connection(asyncio.Protocol):
    slot: Slot | None = None  # its place in the connection quotas, when it is the socket's protocol (not behind TLS)

    def __init__(self, broker: Broker, listener: str | None = None) -> None:
        self.broker = broker
        self.listener = listener  # the listener's name: Metadata answers with that listener's advertised address
        self.id = f"conn-{next(_ids)}"
        self.peer = "?"
        self.host = "?"
        self.max_bytes: int = broker.config["socket.request.max.bytes"]
        self.max_queued: int = broker.config["queued.max.requests"]
        self.max_queued_bytes: int = broker.config["queued.max.request.bytes"]
        if self.max_queued_bytes <= 0:  # Kafka's "no bound"
            self.max_queued_bytes = 1 << 62
        self.transport: asyncio.Transport | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._buf = bytearray()
        self._frames: collections.deque[bytes] = collections.deque()
        self._queued_bytes = 0  # the frames' bytes
        self._in_hand = 0  # bytes of the request being answered, until its answer is written
        self._told_bounded = False  # reading paused by the byte bound: said once per connection
        self._coro: Any = None  # the suspended handler of the request being answered
        self._waiting_on: asyncio.Future | None = None
        self._current: tuple[int, int, int, float] | None = None  # api key, version, correlation id, started
        self._reading_paused = False
        self._writing_paused = False
        self._draining = False  # graceful stop: answer what was read, then close
        self._lost = False
        self._out: list[bytes] = []  # answers of this loop turn, sent together by flush()
        self._out_bytes = 0  # past WRITE_HIGH_WATER, no further request is handled until flush()
        self.user = "ANONYMOUS"  # the principal's name (Kafka's on a PLAINTEXT listener), as quotas see it; SASL or a TLS certificate sets it
        self._mute_ms = 0  # a quota's throttle time, applied once the current answer is out
        self.active = True  # read or wrote since the broker's last look for idle connections
        self.quiet_since = 0.0  # loop time it was last seen inactive from

    @property
    def principal(self) -> str:
        """Kafka's principal: ``User:<name>``; no authorizer reads it, quotas and logs do."""
        return f"User:{self.user}"

    # ------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  (uvloop transports are not asyncio.Transport subclasses)
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.peer = f"{peer[0]}:{peer[1]}"
        self.host = str(peer[0])
        self.broker.connection_opened(self)

    def data_received(self, data: bytes) -> None:
        if self._draining or self._lost:
            return
        self.active = True
        self.broker.metrics.bytes_in(len(data))
        buf = self._buf
        if not buf and len(data) >= 4:
            (size,) = SIZE.unpack_from(data, 0)
            if size + 4 == len(data) and _MIN_FRAME <= size <= self.max_bytes:
                # exactly one whole frame, the usual read of a client waiting for each answer: one copy
                self._frames.append(data[4:])
                self._queued_bytes += size
                self._queued()
                return
        buf += data
        pos, end = 0, len(buf)
        while end - pos >= 4:
            (size,) = SIZE.unpack_from(buf, pos)
            try:
                check_size(size, self.max_bytes)
            except FrameError as exc:
                log.warning("connection %s closed: %s", self.peer, exc)
                self._close()
                return
            if end - pos - 4 < size:
                break
            self._frames.append(bytes(buf[pos + 4 : pos + 4 + size]))
            self._queued_bytes += size
            pos += 4 + size
        if pos:
            del buf[:pos]
        self._queued()

    def _queued(self) -> None:
        if not self._reading_paused and self._over_read_ahead():
            self._reading_paused = True
            self.transport.pause_reading()
            if not self._told_bounded and len(self._frames) < self.max_queued:
                self._told_bounded = True
                log.info(
                    "connection %s: %d bytes read and not yet answered (queued.max.request.bytes %d): reading paused until answers drain them",
                    self.peer, self._queued_bytes + self._in_hand + len(self._buf), self.max_queued_bytes,
                )
        self._pump()

    def _over_read_ahead(self) -> bool:
        """Past ``queued.max.requests`` frames, or ``queued.max.request.bytes`` bytes read and not yet
        answered (the partial frame included). Only while something is outstanding: a lone frame is
        always read whole, whatever its size (``socket.request.max.bytes`` caps that)."""
        pending = self._queued_bytes + self._in_hand
        return len(self._frames) >= self.max_queued or (pending > 0 and pending + len(self._buf) >= self.max_queued_bytes)

    def eof_received(self) -> bool:
        self._log_torn_tail()
        return False  # close our side too, as Kafka does

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._frames.clear()
        self._queued_bytes = self._in_hand = 0
        if self._waiting_on is not None:
            self._waiting_on.cancel()  # like cancelling the request's task: the handler unwinds
        later = self._coro
        if type(later) is Later:
            self._coro = None  # its answer, when it comes, is for nobody
            if later.abandon is not None:
                later.abandon()
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
        frames = self._frames
        while frames and self._coro is None and not self._writing_paused and not self._lost and self._out_bytes < WRITE_HIGH_WATER:
            body = frames.popleft()
            self._queued_bytes -= len(body)
            self._handle(body)
        if self._reading_paused and not self._draining and not self._lost and not self._over_read_ahead():
            self._reading_paused = False
            self.transport.resume_reading()
        if self._draining and not frames and self._coro is None:
            self._close()

    def _handle(self, body: bytes) -> None:
        api_key, api_version, correlation_id = peek_header(body)
        try:
            header, request = parse_request(body, api_key, api_version)
        except UnsupportedVersion as exc:
            if api_key == API_VERSIONS:
                self._write(encode_response(API_VERSIONS, 0, correlation_id, _unsupported_api_versions()))
                return
            log.warning("connection %s closed: %s", self.peer, exc)
            self._close()
            return
        except UnknownApi as exc:
            log.warning("connection %s closed: %s", self.peer, exc)
            self._close()
            return
        except Exception as exc:  # kio could not decode the body
            log.warning(
                "connection %s closed: cannot decode api %d v%d: %s: %s",
                self.peer, api_key, api_version, type(exc).__name__, exc,
            )
            self._close()
            return
        started = self.broker.metrics.request_started(api_key)
        self._current = (api_key, api_version, correlation_id, started)
        self._in_hand = len(body)
        try:
            result = HANDLERS[api_key](self.broker, RequestContext(header, self.host, self.id, self, len(body)), request)
        except Exception:
            self._failed()
            return
        if type(result) is Later:
            if result.settled:
                self._answer_later(result)
                return
            self._coro = result  # the connection waits for it as for a coroutine
            result.listener = self._later_settled
        elif hasattr(result, "send"):  # a coroutine: run it up to its first wait, here and now
            self._coro = result
            self._step()
        else:
            self._answer(result)

    def _later_settled(self, later: Later) -> None:
        """Called by whoever settles it (a flush round's end): answer now; requests read meanwhile are
        taken on the next loop turn, not inside the caller's delivery."""
        if self._coro is not later:
            return  # the connection went away meanwhile
        self._coro = None
        self._answer_later(later)
        if self._frames or self._reading_paused:
            asyncio.get_running_loop().call_soon(self._pump)

    def _answer_later(self, later: Later) -> None:
        try:
            result = later.answer()
        except Exception:
            self._failed()
            return
        self._answer(result)

    def _resume(self, _done: Any = None) -> None:
        self._step()
        if self._coro is None:
            self._pump()

    def _step(self) -> None:
        """Run the handler's coroutine until it waits on a future again or returns (a minimal Task).

        Resumed from callbacks only; the first step runs inside ``_pump``'s loop, which carries on with
        the next frame itself, so a run of requests answered at once never nests."""
        self._waiting_on = None
        try:
            awaited = self._coro.send(None)
        except StopIteration as stop:
            self._coro = None
            self._answer(stop.value)
            return
        except asyncio.CancelledError:
            self._coro = None  # the connection went away while the request waited
            return
        except Exception:
            self._coro = None
            self._failed()
            return
        if awaited is None:  # a bare yield (asyncio.sleep(0)): continue on the next loop turn
            asyncio.get_running_loop().call_soon(self._resume)
            return
        awaited._asyncio_future_blocking = False
        self._waiting_on = awaited
        awaited.add_done_callback(self._resume)

    def _answer(self, result: Any) -> None:
        api_key, api_version, correlation_id, started = self._current
        self._current = None
        self._in_hand = 0
        if self._lost:
            return
        metrics = self.broker.metrics
        try:
            parts = None if result is None else encode_response_parts(api_key, api_version, correlation_id, result)
        except Exception:
            self._current = (api_key, api_version, correlation_id, started)
            self._failed()
            return
        metrics.request_finished(api_key, started, result)
        if parts is not None:
            head, body = parts
            if len(body) < 65536:
                self._write(head + body)
            else:  # a large body (a Fetch) goes out as it is, without a copy
                self._write(head)
                self._write(body)
        if self._mute_ms:
            self._mute()

    # ------------------------------------------------------------ quotas

    def mute_after_answer(self, ms: int) -> None:
        """Kafka answers a throttled request at once and then mutes its channel for the throttle time
        (KIP-219): no further request of this connection is handled until then."""
        self._mute_ms = max(self._mute_ms, ms)

    def _mute(self) -> None:
        ms, self._mute_ms = self._mute_ms, 0
        self._coro = _MUTED  # _pump takes no frame while a request is outstanding
        asyncio.get_running_loop().call_later(ms / 1000, self._unmute)

    def _unmute(self) -> None:
        if self._coro is _MUTED:
            self._coro = None
            self._pump()

    def _failed(self) -> None:
        api_key, api_version, _, started = self._current
        self._current = None
        self._in_hand = 0
        log.exception("connection %s closed: handler for api %d v%d failed", self.peer, api_key, api_version)
        self.broker.metrics.request_finished(api_key, started, None)
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
        return self._current is not None or self._coro is not None or bool(self._frames)

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
        self._frames.clear()
        self._queued_bytes = 0
        if self.transport is not None and not self.transport.is_closing():
            self.flush()
            self.transport.close()

    def _log_torn_tail(self) -> None:
        buf = self._buf
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
