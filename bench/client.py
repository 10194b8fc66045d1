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
