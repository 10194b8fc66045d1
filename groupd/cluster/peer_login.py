"""How a node logs in on a peer's inter-broker listener (docs/cluster.md, "Listeners"): SaslHandshake v1,
then SaslAuthenticate v2 with the mechanism's tokens, as a Kafka broker's inter-broker client does before
its first request. PLAIN sends the username and password; SCRAM runs scram.py's client and checks the
peer's signature. TLS, when the listener asks for it, is set up before (peers.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from groupd.broker.security.errors import AuthenticationFailed
from groupd.broker.security.inter_broker import InterBroker
from groupd.broker.security.listeners import PLAIN
from groupd.broker.security.scram import BY_NAME, ScramClient
from groupd.protocol import codec
from groupd.protocol.api_table import ApiKey
from groupd.protocol.errors import ErrorCode

Exchange = Callable[[ApiKey, int, Any], Awaitable[Any]]


async def log_in(exchange: Exchange, security: InterBroker) -> None:
    """Authenticate through ``exchange`` (one request, its response); AuthenticationFailed when the peer
    refuses the mechanism or the credentials, or its SCRAM signature does not check."""
    mechanism, user, password = security.mechanism, security.username, security.password
    assert mechanism is not None and user is not None and password is not None  # resolve() checked them
    handshake = await exchange(
        ApiKey.SASL_HANDSHAKE, 1, codec.make(codec.request_class(ApiKey.SASL_HANDSHAKE, 1), mechanism=mechanism)
    )
    if handshake.error_code != ErrorCode.none:
        raise AuthenticationFailed(
            f"the peer does not enable {mechanism} ({ErrorCode(handshake.error_code).name}; it enables "
            f"{', '.join(handshake.mechanisms)})"
        )

    async def authenticate(token: bytes) -> bytes:
        cls = codec.request_class(ApiKey.SASL_AUTHENTICATE, 2)
        answer = await exchange(ApiKey.SASL_AUTHENTICATE, 2, codec.make(cls, auth_bytes=token))
        if answer.error_code != ErrorCode.none:
            raise AuthenticationFailed(f"the peer refused {user} ({mechanism}): {answer.error_message}")
        return bytes(answer.auth_bytes)

    if mechanism == PLAIN:
        await authenticate(b"\0" + user.encode() + b"\0" + password.encode())
        return
    scram = ScramClient(BY_NAME[mechanism], user, password)
    scram.verify(await authenticate(scram.final(await authenticate(scram.first()))))
