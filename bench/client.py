"""A minimal asyncio Kafka connection for load generation: kio codecs, pipelined requests.

No client library in the loop, so what is measured is the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import struct
from typing import Any

from groupd.protocol import codec
from groupd.protocol.request import encode_request

_SIZE = struct.Struct(">i")


class _Protocol(asyncio.Protocol):
    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def data_received(self, data: bytes) -> None:
        self.conn._feed(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn._lost(exc)


_unsent: list[Conn] = []


@functools.cache
def _response_readers(api_key: int, version: int) -> tuple[Any, Any]:
    return codec.reader(codec.response_header_class(api_key, version)), codec.reader(
        codec.response_class(api_key, version)
    )


def _send_all() -> None:
    conns = _unsent[:]
    _unsent.clear()
    for conn in conns:
        conn._send()


class Conn:
    """One connection; responses are matched to requests by correlation id as they arrive.

    Requests made in one loop turn are sent together after it, as the broker sends its answers: a
    broker woken by the first finds the others already there."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._cid = 0
        self._pending: dict[int, tuple[asyncio.Future, int, int]] = {}
        self._buf = bytearray()
        self._out: list[bytes | bytearray] = []
        self._closed = asyncio.get_running_loop().create_future()

    def _write(self, frame: bytes | bytearray) -> None:
        if not self._out:
            if not _unsent:
                asyncio.get_running_loop().call_soon(_send_all)
            _unsent.append(self)
        self._out.append(frame)

    def _send(self) -> None:
        out, self._out = self._out, []
        if self.transport is None or self.transport.is_closing():
            return
        if len(out) == 1:
            self.transport.write(out[0])
        else:
            self.transport.writelines(out)

    @classmethod
    async def open(cls, host: str, port: int) -> Conn:
        conn = cls()
        transport, _ = await asyncio.get_running_loop().create_connection(lambda: _Protocol(conn), host, port)
        conn.transport = transport  # type: ignore[assignment]
        return conn

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> asyncio.Future:
        self._cid += 1
        cid = self._cid
        header = {
            "request_api_key": api_key,
            "request_api_version": version,
            "correlation_id": cid,
            "client_id": "bench",
        }
        payload = codec.encode_values(codec.request_header_class(api_key, version), header) + codec.encode_values(
            codec.request_class(api_key, version), body
        )
        fut = asyncio.get_running_loop().create_future()
        self._pending[cid] = (fut, api_key, version)
        self._write(_SIZE.pack(len(payload)) + payload)
        return fut

    def send_frame(self, api_key: int, version: int, frame: bytearray) -> asyncio.Future:
        """A pre-encoded request (see ``Template``): only the correlation id is written in."""
        self._cid += 1
        cid = self._cid
        _SIZE.pack_into(frame, 8, cid)
        fut = asyncio.get_running_loop().create_future()
        self._pending[cid] = (fut, api_key, version)
        self._write(frame)
        return fut

    async def call(self, api_key: int, version: int, body: dict[str, Any], timeout: float | None = 30) -> Any:
        """One request; ``timeout=None`` where the caller bounds a whole exchange itself."""
        fut = self.request(api_key, version, body)
        return await (fut if timeout is None else asyncio.wait_for(fut, timeout))

    def _feed(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        pos, end = 0, len(buf)
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if end - pos - 4 < size:
                break
            frame = bytes(buf[pos + 4 : pos + 4 + size])
            pos += 4 + size
            (cid,) = _SIZE.unpack_from(frame, 0)
            fut, api_key, version = self._pending.pop(cid)
            read_header, read_body = _response_readers(api_key, version)
            _, used = read_header(frame, 0)
            body, _ = read_body(frame, used)
            if not fut.done():
                fut.set_result(body)
        if pos:
            del buf[:pos]

    def _lost(self, exc: Exception | None) -> None:
        for fut, _, _ in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError(str(exc or "connection closed")))
        self._pending.clear()
        if not self._closed.done():
            self._closed.set_result(None)

    async def close(self) -> None:
        if self.transport is not None:
            self._send()
            self.transport.close()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._closed), 5)


def nested(api_key: int, version: int, name: str) -> type:
    return codec.nested(codec.request_class(api_key, version), name)


class Template:
    """A request encoded once by kio, with one int64 field patched per send (e.g. a committed offset).

    Load generation should cost the load generator little, so what is measured is the broker: the
    request is encoded with a marker value, and each send copies the frame and writes the new value
    where the marker was."""

    MARKER = 0x5EEDC0DE5EEDC0DE

    def __init__(self, api_key: int, version: int, body: dict[str, Any]) -> None:
        self.api_key, self.version = api_key, version
        self.frame = encode_request(api_key, version, body, 0, "bench")
        marker = _I64.pack(self.MARKER)
        self.at = self.frame.find(marker)

    def send(self, conn: Conn, value: int | None = None) -> asyncio.Future:
        frame = bytearray(self.frame)
        if value is not None:
            _I64.pack_into(frame, self.at, value)
        return conn.send_frame(self.api_key, self.version, frame)


_I64 = struct.Struct(">q")
