"""DescribeClientQuotas and AlterClientQuotas: the quota values, kept in the storage's metadata (ops/quotas.py)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest
from kio.schema.describe_client_quotas.v1.request import DescribeClientQuotasRequest

from groupd.broker.dispatch import Answer, RequestContext
from groupd.broker.ops import quotas as Q
from groupd.broker.security.access import ALTER_CONFIGS, CLUSTER_DENIED, DESCRIBE_CONFIGS
from groupd.protocol.errors import ErrorCode
from groupd.storage.errors import StorageError

if TYPE_CHECKING:
    from groupd.broker.app import Broker

log = logging.getLogger("groupd.quotas")


class _Refused(Exception):
    """The principal may not ALTER_CONFIGS the cluster: every entry is answered CLUSTER_AUTHORIZATION_FAILED."""


def _error(exc: Q.QuotaError) -> ErrorCode:
    return ErrorCode.unsupported_version if exc.unsupported else ErrorCode.invalid_request


def describe_client_quotas(broker: Broker, ctx: RequestContext, req: DescribeClientQuotasRequest) -> Answer:
    if not broker.access.cluster(ctx, DESCRIBE_CONFIGS):  # KafkaApis: DESCRIBE_CONFIGS on the cluster
        code = ErrorCode.cluster_authorization_failed
        return ctx.respond(throttle_time=0, error_code=code, error_message=CLUSTER_DENIED, entries=None)
    broker.quota_store.document.catch_up()  # in a cluster: another node's latest quotas
    components = [Q.Component(c.entity_type, c.match_type, c.match) for c in req.components]
    try:
        found = Q.describe(broker.quotas.values, components, req.strict)
    except Q.QuotaError as exc:
        return ctx.respond(throttle_time=0, error_code=_error(exc), error_message=str(exc), entries=None)
    entity_cls, value_cls, entry_cls = ctx.nested("EntityData"), ctx.nested("ValueData"), ctx.nested("EntryData")
    entries = tuple(
        entry_cls(
            entity=tuple(entity_cls(entity_type=kind, entity_name=name) for kind, name in entity),
            values=tuple(value_cls(key=key, value=value) for key, value in sorted(values.items())),
        )
        for entity, values in found
    )
    return ctx.respond(throttle_time=0, error_code=ErrorCode.none, error_message=None, entries=entries)


def alter_client_quotas(broker: Broker, ctx: RequestContext, req: AlterClientQuotasRequest) -> Answer:
    entity_cls, entry_cls = ctx.nested("EntityData"), ctx.nested("EntryData")
    allowed = broker.access.cluster(ctx, ALTER_CONFIGS)  # KafkaApis: ALTER_CONFIGS on the cluster

    def alter() -> tuple[tuple[list[object], list[Q.Entity]], bool]:
        results: list[object] = []
        changed: list[Q.Entity] = []
        for entry in req.entries:
            pairs = [(e.entity_type, e.entity_name) for e in entry.entity]
            error, message = ErrorCode.none, None
            try:
                if not allowed:
                    raise _Refused
                entity = Q.entity_of(pairs)
                ops: list[tuple[str, float | None]] = [(op.key, None if op.remove else op.value) for op in entry.ops]
                if broker.quotas.alter(entity, ops, req.validate_only):
                    changed.append(entity)
            except Q.QuotaError as exc:
                error, message = _error(exc), str(exc)
            except _Refused:
                error, message = ErrorCode.cluster_authorization_failed, CLUSTER_DENIED
            results.append(entry_cls(
                error_code=error, error_message=message,
                entity=tuple(entity_cls(entity_type=kind, entity_name=name) for kind, name in pairs),
            ))  # fmt: skip
        return (results, changed), bool(changed)

    try:
        results, changed = broker.quota_store.change(alter)
    except (OSError, StorageError) as exc:  # nothing changed (in a cluster: other nodes kept winning)
        log.error("client quotas not saved: %s", exc)
        refused = [
            entry_cls(
                error_code=ErrorCode.kafka_storage_error,
                error_message=f"quotas not saved: {exc}",
                entity=tuple(entity_cls(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity),
            )
            for entry in req.entries
        ]
        return ctx.respond(throttle_time=0, entries=tuple(refused))
    for entity in changed:
        log.info("client quotas of %s now %s", entity, broker.quotas.values.get(entity, {}))
    return ctx.respond(throttle_time=0, entries=tuple(results))
