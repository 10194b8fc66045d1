"""One client connection: frames in, responses out, strictly in request order.

Kafka mutes a socket after reading a request until its response is sent; we read ahead up to
``queued.max.requests`` frames but process them one at a time, so a parked JoinGroup holds back the
requests behind it on its own connection and nobody else's.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
from typing import TYPE_CHECKING

from broker.dispatch import HANDLERS, RequestContext
from protocol.errors import ErrorCode
from protocol.framing import SIZE, FrameError, check_size
from protocol.request import UnknownApi, UnsupportedVersion, encode_response, parse_request, peek_header

if TYPE_CHECKING:
    from broker.app import Broker

log = logging.getLogger("groupd.connection")
_ids = itertools.count(1)
API_VERSIONS = 18


class Connection:
    def __init__(self, broker: Broker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.broker = broker
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.peer = f"{peer[0]}:{peer[1]}"
        self.host = str(peer[0])
        self.id = f"conn-{next(_ids)}"
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue(broker.config["queued.max.requests"])
        self.max_bytes: int = broker.config["socket.request.max.bytes"]

    async def serve(self) -> None:
        processor = asyncio.create_task(self._process())
        try:
            await self._read_frames(processor)
        finally:
            if not processor.done():
                if self.broker.stopping:
                    # Graceful stop: let requests already read finish and be answered.
                    with contextlib.suppress(asyncio.TimeoutError, Exception):
                        await asyncio.wait_for(self._drain(processor), 5)
                processor.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await processor
            self._close()

    async def _drain(self, processor: asyncio.Task) -> None:
        await self.queue.put(None)
        await asyncio.shield(processor)

    async def _read_frames(self, processor: asyncio.Task) -> None:
        reader = self.reader
        while not self.broker.stopping and not processor.done():
            try:
                head = await reader.readexactly(4)
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    log.warning("connection %s closed: truncated frame size (%d bytes)", self.peer, len(exc.partial))
                return
            except (ConnectionError, OSError):
                return
            (size,) = SIZE.unpack(head)
            try:
                check_size(size, self.max_bytes)
            except FrameError as exc:
                log.warning("connection %s closed: %s", self.peer, exc)
                return
            try:
                body = await reader.readexactly(size)
            except asyncio.IncompleteReadError as exc:
                log.warning("connection %s closed: truncated frame (%d of %d bytes)", self.peer, len(exc.partial), size)
                return
            except (ConnectionError, OSError):
                return
            self.broker.metrics.bytes_in(size + 4)
            await self.queue.put(body)

    async def _process(self) -> None:
        while True:
            body = await self.queue.get()
            if body is None:
                return
            if not await self._handle(body):
                self._close()
                return

    async def _handle(self, body: bytes) -> bool:
        """Handle one request; False means the connection must close."""
        api_key, api_version, correlation_id = peek_header(body)
        try:
            header, request = parse_request(body)
        except UnsupportedVersion as exc:
            if api_key == API_VERSIONS:
                self._write(encode_response(API_VERSIONS, 0, correlation_id, _unsupported_api_versions()))
                return True
            log.warning("connection %s closed: %s", self.peer, exc)
            return False
        except UnknownApi as exc:
            log.warning("connection %s closed: %s", self.peer, exc)
            return False
        except Exception as exc:  # kio could not decode the body
            log.warning(
                "connection %s closed: cannot decode api %d v%d: %s: %s",
                self.peer, api_key, api_version, type(exc).__name__, exc,
            )
            return False
        ctx = RequestContext(header, self.host, self.id)
        metrics = self.broker.metrics
        started = metrics.request_started(api_key)
        try:
            result = HANDLERS[api_key](self.broker, ctx, request)
            if inspect.isawaitable(result):
                result = await result
            payload = None if result is None else encode_response(api_key, api_version, correlation_id, result)
        except Exception:
            log.exception("connection %s closed: handler for api %d v%d failed", self.peer, api_key, api_version)
            metrics.request_finished(api_key, started, None)
            return False
        metrics.request_finished(api_key, started, result)
        if payload is not None:
            self._write(payload)
            if self.writer.transport.get_write_buffer_size() > 1 << 20:
                try:
                    await self.writer.drain()
                except (ConnectionError, OSError):
                    return False
        return True

    def stop_reading(self) -> None:
        """Graceful stop: requests already read are finished; the read loop ends."""
        self.reader.feed_eof()

    def abort(self) -> None:
        self.writer.transport.abort()

    def _write(self, data: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(data)
            self.broker.metrics.bytes_out(len(data))

    def _close(self) -> None:
        if not self.writer.is_closing():
            self.writer.close()


def _unsupported_api_versions():
    """Kafka's answer to an ApiVersions version it does not know: v0 body, error 35, the full table."""
    from broker.handlers.cluster import api_versions_body
    from protocol import codec

    return api_versions_body(codec.response_class(API_VERSIONS, 0), ErrorCode.unsupported_version)
