"""Blocking one-request calls to a broker, for starting one (is it answering yet?) and seeding it (SCRAM
users): no client library, only groupd's own codec, so the fixtures need nothing the wheel does not
bring."""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Mapping
from typing import Any

from groupd.broker.security.scram import BY_NAME, salted_password
from groupd.protocol import codec
from groupd.protocol.api_table import ApiKey
from groupd.protocol.request import encode_request

SCRAM_ITERATIONS = 4096  # Kafka's least


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def call(host: str, port: int, api_key: ApiKey, version: int, body: Any, timeout: float = 5.0) -> Any:
    """Send one request on a new connection and decode its answer; OSError when there is none."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(encode_request(api_key, version, body, 1, "groupd-testing"))
        (size,) = struct.unpack(">i", _recv_exact(s, 4))
        data = _recv_exact(s, size)
    _header, used = codec.decode(codec.response_header_class(api_key, version), data, 0)
    response, _ = codec.decode(codec.response_class(api_key, version), data, used)
    return response


def answers_api_versions(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when the broker on ``host:port`` answers an ApiVersions v0 (it is up)."""
    try:
        call(host, port, ApiKey.API_VERSIONS, 0, {}, timeout)
    except (OSError, ValueError, struct.error):  # nothing listening yet, or not a Kafka answer
        return False
    return True


def add_scram_users(host: str, port: int, users: Mapping[str, str], mechanisms: tuple[str, ...]) -> None:
    """Create each user's SCRAM credentials for each mechanism through AlterUserScramCredentials, as an
    administrator would (the broker keeps salts and keys, never the password); one request per mechanism,
    since Kafka refuses a user named twice in one request."""
    cls = codec.request_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0)
    upsertion = codec.nested(cls, "ScramCredentialUpsertion")
    for mechanism in (BY_NAME[m] for m in mechanisms):
        rows = []
        for name, password in users.items():
            salt = os.urandom(16)
            salted = salted_password(mechanism, password, salt, SCRAM_ITERATIONS)
            rows.append(
                codec.make(
                    upsertion,
                    name=name,
                    mechanism=mechanism.type,
                    iterations=SCRAM_ITERATIONS,
                    salt=salt,
                    salted_password=salted,
                )
            )
        body = codec.make(cls, deletions=(), upsertions=tuple(rows))
        response = call(host, port, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, body)
        failed = [(r.user, r.error_message) for r in response.results if r.error_code]
        if failed:
            raise RuntimeError(f"SCRAM users were refused: {failed}")
