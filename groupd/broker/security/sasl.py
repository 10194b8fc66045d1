"""SASL on a connection, as Kafka's SaslServerAuthenticator runs it: a pure state machine fed whole
frames, answering with bytes to write and what to do next.

Before authentication a client may send ApiVersions (once, first), then SaslHandshake; v1 of the
handshake carries the mechanism's tokens in SaslAuthenticate requests, v0 as bare size-prefixed
tokens. Any other request closes the connection; a failed authentication answers once (v1) and
closes. The mechanisms are below (PLAIN) and in ``security.scram``.
"""

from __future__ import annotations

import functools
import hmac
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from groupd.broker.security.errors import AuthenticationFailed, InvalidCredentials
from groupd.broker.security.scram import BY_NAME, ScramCredential, ScramServer
from groupd.protocol import codec
from groupd.protocol.api_table import API_TABLE, ApiKey
from groupd.protocol.errors import ErrorCode
from groupd.protocol.framing import HEADER_PREFIX
from groupd.protocol.request import UnknownApi, UnsupportedVersion, encode_response, parse_request

if TYPE_CHECKING:
    from groupd.broker.security.listeners import Listener

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = (
    int(ApiKey.API_VERSIONS),
    int(ApiKey.SASL_HANDSHAKE),
    int(ApiKey.SASL_AUTHENTICATE),
)
ANONYMOUS = "User:ANONYMOUS"
_SIZE = struct.Struct(">i")


class Mechanism(Protocol):
    name: str
    complete: bool
    authorization_id: str | None

    def evaluate(self, token: bytes) -> bytes | None: ...


class PlainServer:
    """RFC 4616 ``[authzid] NUL authcid NUL passwd`` against the JAAS ``user_<name>`` passwords."""

    name = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = users
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        parts = token.decode("utf-8", "replace").split("\x00", 3)
        if len(parts) != 3:
            raise AuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}")
        authzid, username, password = parts
        if not username:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self.users.get(username)
        if expected is None or not hmac.compare_digest(password.encode(), expected.encode()):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.authorization_id = username
        self.complete = True
        return b""


@dataclass(slots=True)
class Step:
    """What the connection does with one frame's outcome."""

    reply: bytes | None = None  # a whole frame to write
    passthrough: bool = False  # answer the frame on the ordinary request path (ApiVersions)
    close: str | None = None  # close (after the reply), for this reason (logged)
    failed: bool = False  # the close is an authentication failure: counted, and delayed
    principal: str | None = None  # set once authenticated: ordinary requests from now on


INITIAL, HANDSHAKE, AUTHENTICATE, AUTHENTICATE_RAW, COMPLETE, FAILED = range(6)


class SaslGate:
    """One connection's authentication. ``receive(frame)`` for each frame until a Step carries the
    principal (then the connection serves requests as usual) or a close."""

    def __init__(self, enabled: tuple[str, ...], factories: Mapping[str, Callable[[], Mechanism]]) -> None:
        self.enabled = enabled
        self.factories = factories
        self.state = INITIAL
        self.mechanism: Mechanism | None = None

    @property
    def mechanism_name(self) -> str | None:
        return self.mechanism.name if self.mechanism is not None else None

    def receive(self, frame: bytes) -> Step:
        if self.state == AUTHENTICATE_RAW:
            return self._raw_token(frame)
        if len(frame) < HEADER_PREFIX.size:
            return self._fail("not a Kafka request (GSSAPI tokens without a handshake are not served)")
        api_key, version, correlation_id = HEADER_PREFIX.unpack_from(frame, 0)
        allowed = {
            INITIAL: (API_VERSIONS, SASL_HANDSHAKE),
            HANDSHAKE: (SASL_HANDSHAKE,),
            AUTHENTICATE: (SASL_AUTHENTICATE,),
        }
        if api_key not in allowed.get(self.state, ()):
            during = "SASL authentication" if self.state == AUTHENTICATE else "SASL handshake"
            return self._fail(f"Unexpected Kafka request of type {_api_name(api_key)} during {during}")
        if api_key == API_VERSIONS:
            if _supported(API_VERSIONS, version):  # after an UNSUPPORTED_VERSION answer a client retries older
                self.state = HANDSHAKE
            return Step(passthrough=True)
        try:
            _, request = parse_request(frame, api_key, version)
        except (UnknownApi, UnsupportedVersion) as exc:
            return self._fail(str(exc))
        except Exception as exc:  # kio could not decode the body
            return self._fail(f"cannot decode {_api_name(api_key)} v{version}: {type(exc).__name__}: {exc}")
        if api_key == SASL_HANDSHAKE:
            return self._handshake(version, correlation_id, request.mechanism)
        return self._authenticate(version, correlation_id, request.auth_bytes)

    def _handshake(self, version: int, correlation_id: int, wanted: str) -> Step:
        cls = codec.response_class(SASL_HANDSHAKE, version)
        if wanted not in self.enabled or wanted not in self.factories:
            reply = codec.make(cls, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=self.enabled)
            self.state = FAILED
            return Step(
                encode_response(SASL_HANDSHAKE, version, correlation_id, reply),
                close=f"Unsupported SASL mechanism {wanted}",
                failed=True,
            )
        self.mechanism = self.factories[wanted]()
        self.state = AUTHENTICATE if version >= 1 else AUTHENTICATE_RAW
        reply = codec.make(cls, error_code=ErrorCode.none, mechanisms=self.enabled)
        return Step(encode_response(SASL_HANDSHAKE, version, correlation_id, reply))

    def _authenticate(self, version: int, correlation_id: int, token: bytes) -> Step:
        cls = codec.response_class(SASL_AUTHENTICATE, version)
        mechanism = self._chosen()
        try:
            answer = mechanism.evaluate(token)
        except (AuthenticationFailed, InvalidCredentials) as exc:
            self.state = FAILED
            message = str(exc) if isinstance(exc, AuthenticationFailed) else invalid_credentials_message(mechanism.name)
            reply = codec.make(
                cls,
                error_code=ErrorCode.sasl_authentication_failed,
                error_message=message,
                auth_bytes=b"",
                session_lifetime=0,
            )
            return Step(
                encode_response(SASL_AUTHENTICATE, version, correlation_id, reply),
                close=f"{mechanism.name}: {exc}",
                failed=True,
            )
        reply = codec.make(
            cls, error_code=ErrorCode.none, error_message=None, auth_bytes=answer or b"", session_lifetime=0
        )
        return self._maybe_done(encode_response(SASL_AUTHENTICATE, version, correlation_id, reply))

    def _raw_token(self, token: bytes) -> Step:
        """Handshake v0: the token is the whole frame, the answer a bare size-prefixed token, and a
        failure closes without one."""
        mechanism = self._chosen()
        try:
            answer = mechanism.evaluate(token)
        except (AuthenticationFailed, InvalidCredentials) as exc:
            self.state = FAILED
            return Step(close=f"{mechanism.name}: {exc}", failed=True)
        return self._maybe_done(None if answer is None else _SIZE.pack(len(answer)) + answer)

    def _maybe_done(self, reply: bytes | None) -> Step:
        mechanism = self._chosen()
        if not mechanism.complete:
            return Step(reply)
        self.state = COMPLETE
        return Step(reply, principal=f"User:{mechanism.authorization_id}")

    def _chosen(self) -> Mechanism:
        """The mechanism the handshake picked: the states that authenticate are reached only through it."""
        assert self.mechanism is not None
        return self.mechanism

    def _fail(self, reason: str) -> Step:
        self.state = FAILED
        return Step(close=reason, failed=True)


def invalid_credentials_message(mechanism: str) -> str:
    """What Kafka tells a client whose credentials did not verify, whatever the reason."""
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


def _supported(api_key: int, version: int) -> bool:
    return API_TABLE[api_key].supports(version)


def _api_name(api_key: int) -> str:
    spec = API_TABLE.get(api_key)
    return spec.name if spec is not None else f"api {api_key}"


def mechanism_factories(
    listener: Listener, scram_lookup: Callable[[str, str], ScramCredential | None]
) -> dict[str, Callable[[], Mechanism]]:
    """A fresh server-side mechanism per connection, for each mechanism the listener enables; SCRAM
    looks its users' credentials up with ``scram_lookup(user, mechanism name)``."""
    out: dict[str, Callable[[], Mechanism]] = {}
    for name in listener.mechanisms:
        if name == "PLAIN":
            out[name] = functools.partial(PlainServer, listener.plain_users)
        elif name in BY_NAME:
            out[name] = functools.partial(ScramServer, BY_NAME[name], scram_lookup)
    return out
