"""SaslHandshake and SaslAuthenticate after authentication, or on a listener without SASL.

Before authentication a SASL connection's gate answers them (security/sasl.py); a request that gets
here comes from an authenticated or PLAINTEXT client, and Kafka's KafkaApis answers it
ILLEGAL_SASL_STATE (re-authentication is not served: connections.max.reauth.ms is 0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.dispatch import RequestContext, handles
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.app import Broker


@handles(17)
def sasl_handshake(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    return ctx.respond(error_code=ErrorCode.illegal_sasl_state, mechanisms=())


@handles(36)
def sasl_authenticate(broker: Broker, ctx: RequestContext, req: Any) -> Any:
    return ctx.respond(
        error_code=ErrorCode.illegal_sasl_state, error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"", session_lifetime=0,
    )
