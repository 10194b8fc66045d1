"""A minimal asyncio Kafka connection for load generation: kio codecs, pipelined requests.

No client library in the loop, so what is measured is the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from typing import Any

from protocol import codec

_SIZE = struct.Struct(">i")


class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self._cid = 0
        self._pending: dict[int, tuple[asyncio.Future, int, int]] = {}
        self._task = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def open(cls, host: str, port: int) -> Conn:
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
        return cls(reader, writer)

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> asyncio.Future:
        self._cid += 1
        cid = self._cid
        cls = codec.request_class(api_key, version)
        entity = codec.make(cls, **body)
        header = codec.request_header_class(api_key, version)(
            request_api_key=api_key, request_api_version=version, correlation_id=cid, client_id="bench"
        )
        payload = codec.encode(header) + codec.encode(entity)
        fut = asyncio.get_running_loop().create_future()
        self._pending[cid] = (fut, api_key, version)
        self.writer.write(_SIZE.pack(len(payload)) + payload)
        return fut

    def send_frame(self, api_key: int, version: int, frame: bytearray) -> asyncio.Future:
        """A pre-encoded request (see ``Template``): only the correlation id is written in."""
        self._cid += 1
        cid = self._cid
        _SIZE.pack_into(frame, 8, cid)
        fut = asyncio.get_running_loop().create_future()
        self._pending[cid] = (fut, api_key, version)
        self.writer.write(frame)
        return fut

    async def call(self, api_key: int, version: int, body: dict[str, Any], timeout: float = 30) -> Any:
        return await asyncio.wait_for(self.request(api_key, version, body), timeout)

    async def _read(self) -> None:
        try:
            while True:
                (size,) = _SIZE.unpack(await self.reader.readexactly(4))
                data = await self.reader.readexactly(size)
                (cid,) = _SIZE.unpack_from(data, 0)
                fut, api_key, version = self._pending.pop(cid)
                header_cls = codec.response_header_class(api_key, version)
                _, used = codec.decode(header_cls, data, 0)
                body, _ = codec.decode(codec.response_class(api_key, version), data, used)
                if not fut.done():
                    fut.set_result(body)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            for fut, _, _ in self._pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError(str(exc)))
        except asyncio.CancelledError:
            pass

    async def close(self) -> None:
        self._task.cancel()
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


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
        header = codec.request_header_class(api_key, version)(
            request_api_key=api_key, request_api_version=version, correlation_id=0, client_id="bench"
        )
        payload = codec.encode(header) + codec.encode(codec.make(codec.request_class(api_key, version), **body))
        self.frame = _SIZE.pack(len(payload)) + payload
        marker = _I64.pack(self.MARKER)
        self.at = self.frame.find(marker)

    def send(self, conn: Conn, value: int | None = None) -> asyncio.Future:
        frame = bytearray(self.frame)
        if value is not None:
            _I64.pack_into(frame, self.at, value)
        return conn.send_frame(self.api_key, self.version, frame)


_I64 = struct.Struct(">q")
