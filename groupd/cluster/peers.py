"""Requests from this node to another node of the cluster, in Kafka's protocol (WriteTxnMarkers,
AddPartitionsToTxn verifications, the share-state RPCs), as one Kafka broker's inter-broker client sends
them: one connection per peer, kept open, one request at a time on it, reconnected after any failure.

The peer is reached at its registered address on the inter-broker listener, with that listener's security
(``InterBroker``: TLS trusting the listener's truststore, then a SASL login, peer_login.py), as Kafka's
brokers reach each other on ``inter.broker.listener.name`` (docs/cluster.md, "Listeners").
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import struct
from collections.abc import Callable
from typing import Any

from groupd.broker.security.errors import AuthenticationFailed
from groupd.broker.security.inter_broker import InterBroker
from groupd.broker.security.tls import client_context
from groupd.cluster.peer_login import log_in
from groupd.protocol import codec
from groupd.protocol.api_table import ApiKey
from groupd.protocol.request import encode_request
from groupd.storage.errors import StorageError

_SIZE = struct.Struct(">i")


class PeerUnavailable(StorageError):
    """The peer could not be reached or did not answer in time: the caller retries later."""


class _Connection:
    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self.address: tuple[str, int] | None = None

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
        self.streams = None


class Peers:
    def __init__(
        self,
        address: Callable[[int], tuple[str, int] | None],
        client_id: str,
        timeout: float,
        security: InterBroker | None = None,
    ) -> None:
        self.address = address  # a node's address on the inter-broker listener, as the cluster last read it
        self.client_id = client_id
        self.timeout = timeout
        self.security = security  # None: plaintext, no login
        self._tls = (
            client_context(security.ssl, security.check_hostname)
            if security is not None and security.tls and security.ssl is not None
            else None
        )
        self._connections: dict[int, _Connection] = {}
        self._correlation = itertools.count(1)
        self.logins = 0  # SASL logins done (tests, metrics)

    async def call(self, node: int, api_key: ApiKey, version: int, body: Any) -> Any:
        """The peer's response entity; PeerUnavailable when it has no address, cannot be reached, refuses
        this node's login, or does not answer within the timeout."""
        address = self.address(node)
        if address is None:
            raise PeerUnavailable(f"node {node} is not live")
        conn = self._connections.setdefault(node, _Connection())
        async with conn.lock:
            try:
                return await asyncio.wait_for(self._exchange(conn, address, api_key, version, body), self.timeout)
            except (
                OSError,
                TimeoutError,
                EOFError,
                asyncio.IncompleteReadError,
                ValueError,
                struct.error,
                AuthenticationFailed,
            ) as exc:
                conn.close()
                raise PeerUnavailable(f"node {node} at {address[0]}:{address[1]}: {exc!r}") from exc

    async def _exchange(
        self, conn: _Connection, address: tuple[str, int], api_key: ApiKey, version: int, body: Any
    ) -> Any:
        if conn.streams is None or conn.address != address:
            conn.close()
            await self._connect(conn, address)
        assert conn.streams is not None
        return await self._round_trip(conn.streams, api_key, version, body)

    async def _connect(self, conn: _Connection, address: tuple[str, int]) -> None:
        """Open the connection (TLS when the listener asks for it) and log in (SASL) before any request."""
        host, port = address
        if self._tls is not None:
            conn.streams = await asyncio.open_connection(host, port, ssl=self._tls, server_hostname=host)
        else:
            conn.streams = await asyncio.open_connection(host, port)
        conn.address = address
        if self.security is not None and self.security.sasl:
            streams = conn.streams
            await log_in(lambda key, v, request: self._round_trip(streams, key, v, request), self.security)
            self.logins += 1

    async def _round_trip(
        self, streams: tuple[asyncio.StreamReader, asyncio.StreamWriter], api_key: ApiKey, version: int, body: Any
    ) -> Any:
        reader, writer = streams
        correlation = next(self._correlation)
        writer.write(encode_request(api_key, version, body, correlation, self.client_id))
        await writer.drain()
        (size,) = _SIZE.unpack(await reader.readexactly(_SIZE.size))
        data = await reader.readexactly(size)
        header, used = codec.decode(codec.response_header_class(api_key, version), data, 0)
        if header.correlation_id != correlation:
            raise ValueError(f"correlation id {header.correlation_id}, expected {correlation}")
        response, _ = codec.decode(codec.response_class(api_key, version), data, used)
        return response

    def close(self) -> None:
        for conn in self._connections.values():
            with contextlib.suppress(OSError, RuntimeError):
                conn.close()
        self._connections.clear()
