"""Entity classes for the versions Kafka 3.9 accepted below kio 0.6.5's lowest, generated from
Kafka's message JSON by scripts/gen_old_schemas.py (the JSON itself is not kept here).

SCHEMAS maps (api key, version) to the request and response classes; groupd/protocol/codec.py looks here
when kio has no class for a pair."""

from __future__ import annotations

import importlib

MODULES: dict[tuple[int, int], tuple[str, str]] = {
    (0, 0): ("produce_v0_request", "produce_v0_response"),
    (0, 1): ("produce_v1_request", "produce_v1_response"),
    (0, 2): ("produce_v2_request", "produce_v2_response"),
    (1, 0): ("fetch_v0_request", "fetch_v0_response"),
    (1, 1): ("fetch_v1_request", "fetch_v1_response"),
    (1, 2): ("fetch_v2_request", "fetch_v2_response"),
    (1, 3): ("fetch_v3_request", "fetch_v3_response"),
    (2, 0): ("list_offsets_v0_request", "list_offsets_v0_response"),
    (8, 0): ("offset_commit_v0_request", "offset_commit_v0_response"),
    (8, 1): ("offset_commit_v1_request", "offset_commit_v1_response"),
    (9, 0): ("offset_fetch_v0_request", "offset_fetch_v0_response"),
    (19, 0): ("create_topics_v0_request", "create_topics_v0_response"),
    (19, 1): ("create_topics_v1_request", "create_topics_v1_response"),
    (20, 0): ("delete_topics_v0_request", "delete_topics_v0_response"),
    (23, 0): ("offset_for_leader_epoch_v0_request", "offset_for_leader_epoch_v0_response"),
    (23, 1): ("offset_for_leader_epoch_v1_request", "offset_for_leader_epoch_v1_response"),
    (29, 0): ("describe_acls_v0_request", "describe_acls_v0_response"),
    (30, 0): ("create_acls_v0_request", "create_acls_v0_response"),
    (31, 0): ("delete_acls_v0_request", "delete_acls_v0_response"),
    (32, 0): ("describe_configs_v0_request", "describe_configs_v0_response"),
    (34, 0): ("alter_replica_log_dirs_v0_request", "alter_replica_log_dirs_v0_response"),
    (35, 0): ("describe_log_dirs_v0_request", "describe_log_dirs_v0_response"),
}


def _entity_class(module: str) -> type:
    mod = importlib.import_module(f"groupd.protocol.old_schemas.{module}")
    return next(v for v in vars(mod).values() if isinstance(v, type) and getattr(v, "__type__", None) is not None
                and v.__type__.name in ("request", "response"))


def request_class(api_key: int, version: int) -> type | None:
    pair = MODULES.get((api_key, version))
    return None if pair is None else _entity_class(pair[0])


def response_class(api_key: int, version: int) -> type | None:
    pair = MODULES.get((api_key, version))
    return None if pair is None else _entity_class(pair[1])
