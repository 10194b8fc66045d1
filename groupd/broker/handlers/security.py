"""SaslHandshake and SaslAuthenticate after authentication, or on a listener without SASL; and the
SCRAM credential APIs (Describe- and AlterUserScramCredentials).

Before authentication a SASL connection's gate answers them (security/sasl.py); a request that gets
here comes from an authenticated or PLAINTEXT client, and Kafka's KafkaApis answers it
ILLEGAL_SASL_STATE (re-authentication is not served: connections.max.reauth.ms is 0).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kio.schema.alter_user_scram_credentials.v0.request import AlterUserScramCredentialsRequest
from kio.schema.describe_user_scram_credentials.v0.request import DescribeUserScramCredentialsRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from groupd.broker.dispatch import Answer, RequestContext
from groupd.broker.security.access import ALTER, CLUSTER_DENIED, DESCRIBE
from groupd.broker.security.scram import Result
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from groupd.broker.app import Broker

log = logging.getLogger("groupd.security")


def sasl_handshake(broker: Broker, ctx: RequestContext, req: SaslHandshakeRequest) -> Answer:
    return ctx.respond(error_code=ErrorCode.illegal_sasl_state, mechanisms=())


def sasl_authenticate(broker: Broker, ctx: RequestContext, req: SaslAuthenticateRequest) -> Answer:
    return ctx.respond(
        error_code=ErrorCode.illegal_sasl_state,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
        session_lifetime=0,
    )


def describe_user_scram_credentials(
    broker: Broker, ctx: RequestContext, req: DescribeUserScramCredentialsRequest
) -> Answer:
    """Each named user's mechanisms and iterations (every user's when none is named), as Kafka's
    ScramImage describes them; nothing secret leaves."""
    if not broker.access.cluster(ctx, DESCRIBE):  # KafkaApis: DESCRIBE on the cluster
        code = ErrorCode.cluster_authorization_failed
        return ctx.respond(throttle_time=0, error_code=code, error_message=CLUSTER_DENIED, results=())
    broker.scram.document.catch_up()  # in a cluster: another node's latest credentials
    users = None if req.users is None else [u.name for u in req.users]
    info_cls, result_cls = ctx.nested("CredentialInfo"), ctx.nested("DescribeUserScramCredentialsResult")
    results = tuple(
        codec.make(
            result_cls,
            user=result.user,
            error_code=result.error,
            error_message=result.message,
            credential_infos=tuple(codec.make(info_cls, mechanism=m, iterations=i) for m, i in infos),
        )
        for result, infos in broker.scram.credentials.describe(users)
    )
    return ctx.respond(throttle_time=0, error_code=ErrorCode.none, error_message=None, results=results)


def alter_user_scram_credentials(broker: Broker, ctx: RequestContext, req: AlterUserScramCredentialsRequest) -> Answer:
    """Upsert (from the client's salt and salted password) or delete credentials, checked as Kafka's
    ScramControlManager checks them; what changed is on disk before the answer."""
    if not broker.access.cluster(ctx, ALTER):  # KafkaApis: ALTER on the cluster, every user refused
        names = [d.name for d in req.deletions] + [u.name for u in req.upsertions]
        refused = ErrorCode.cluster_authorization_failed
        results = [Result(name, refused, CLUSTER_DENIED) for name in names]
        return ctx.respond(
            throttle_time=0,
            results=tuple(
                codec.make(
                    ctx.nested("AlterUserScramCredentialsResult"),
                    user=r.user,
                    error_code=r.error,
                    error_message=r.message,
                )
                for r in results
            ),
        )
    results = broker.scram.alter(
        [(d.name, int(d.mechanism)) for d in req.deletions],
        [
            (u.name, int(u.mechanism), int(u.iterations), bytes(u.salt), bytes(u.salted_password))
            for u in req.upsertions
        ],
    )
    result_cls = ctx.nested("AlterUserScramCredentialsResult")
    return ctx.respond(
        throttle_time=0,
        results=tuple(
            codec.make(result_cls, user=r.user, error_code=r.error, error_message=r.message) for r in results
        ),
    )
