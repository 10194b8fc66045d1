"""GROUP resources (ConfigResource type 32) in DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

As Kafka 4.3 answers them: a group need not exist to have configs described or set (its controller keeps
them as it keeps any config resource; DeleteGroups leaves them); DescribeConfigs lists every group config
with the group's own value (GROUP_CONFIG) or the broker's (STATIC_BROKER_CONFIG when set, DEFAULT_CONFIG
otherwise, named by the broker key), as ConfigHelper.createGroupConfigEntry does. The request-level checks
are the broker's ConfigAdminManager.preprocess (duplicates, nulls: INVALID_REQUEST); the rest is the
controller's (ConfigurationControlManager, ControllerConfigurationValidator, GroupConfig.validate).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING, Any

from groupd.broker.dataplane.group_configs import (
    BROKER_DEFAULTS,
    GROUP_CONFIG_KEYS,
    InvalidRequest,
    broker_explicit,
    broker_value,
    shown,
    validate,
)
from groupd.broker.dataplane.topic_configs import InvalidConfig
from groupd.protocol import codec
from groupd.protocol.errors import ErrorCode
from groupd.storage.errors import StorageError

if TYPE_CHECKING:
    from groupd.broker.app import Broker

log = logging.getLogger("groupd.group_configs")

GROUP = 32
SOURCE_STATIC_BROKER, SOURCE_DEFAULT, SOURCE_GROUP = 4, 5, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
MAX_VALUE_CHARS = 32767  # Short.MAX_VALUE


def describe_group(
    broker: Broker,
    group_id: str,
    wanted: set[str] | None,
    synonym_cls: type | None,
    entry_cls: type,
    documentation: bool,
) -> tuple[ErrorCode, str | None, list[Any]]:
    """(error, message, entries) of one GROUP resource; every key in name order (Kafka: map order)."""
    if not group_id:
        return ErrorCode.invalid_request, "Group name must not be empty", []
    own = broker.group_configs.stored(group_id)
    entries = []
    for spec in sorted(GROUP_CONFIG_KEYS, key=lambda s: s.name):
        if wanted is not None and spec.name not in wanted:
            continue
        synonyms: list[tuple[str, str, int]] = []
        if spec.name in own:
            synonyms.append((spec.name, shown(spec.name, own[spec.name]), SOURCE_GROUP))
        if spec.broker_key is not None:
            value = str(broker_value(broker.config, spec.broker_key))
            if broker_explicit(broker.config, spec.broker_key):
                synonyms.append((spec.broker_key, value, SOURCE_STATIC_BROKER))
            synonyms.append((spec.broker_key, str(BROKER_DEFAULTS[spec.broker_key]), SOURCE_DEFAULT))
        else:
            synonyms.append((spec.name, spec.default, SOURCE_DEFAULT))
        _, value, source = synonyms[0]  # the group's own value, else the broker's (or GroupConfig's default)
        entries.append(
            codec.make(
                entry_cls,
                name=spec.name,
                value=value,
                read_only=False,
                config_source=source,
                is_default=source == SOURCE_DEFAULT,
                is_sensitive=False,
                config_type=spec.type,
                synonyms=tuple(synonym_cls(name=n, value=v, source=s) for n, v, s in synonyms)
                if synonym_cls is not None
                else (),
                documentation=spec.doc if documentation else None,
            )
        )
    return ErrorCode.none, None, entries


def alter_group(broker: Broker, res: Any, validate_only: bool, incremental: bool) -> tuple[ErrorCode, str | None]:
    """One GROUP resource of AlterConfigs (``incremental`` False: the given set replaces the group's) or
    IncrementalAlterConfigs; (error, message)."""
    names = [c.name for c in res.configs]
    if any(n > 1 for n in Counter(names).values()):
        return ErrorCode.invalid_request, "Error due to duplicate config keys"
    nulls = [c.name for c in res.configs if c.value is None and not (incremental and c.config_operation == DELETE)]
    if nulls:
        return ErrorCode.invalid_request, "Null value not supported for : " + ", ".join(nulls)
    group_id = res.resource_name
    broker.group_configs.follow()  # in a cluster: another node's change to this group is the starting point
    current = broker.group_configs.stored(group_id)
    if incremental:
        configs: dict[str, str | None] = dict(current)
        for c in res.configs:
            if c.config_operation == SET:
                configs[c.name] = c.value
            elif c.config_operation == DELETE:
                configs.pop(c.name, None)
            elif c.config_operation in _OP_NAMES:
                return (
                    ErrorCode.invalid_config,
                    f"Can't {_OP_NAMES[c.config_operation]} to key {c.name} because its type is not LIST.",
                )
            else:
                return ErrorCode.invalid_request, f"Unknown operations type {c.config_operation}"
    else:
        configs = {c.name: c.value for c in res.configs}
    for name, value in configs.items():
        # the controller's bound on one record's value (Java's String.length(): UTF-16 units)
        if value is not None and value != current.get(name) and len(value.encode("utf-16-le")) // 2 > MAX_VALUE_CHARS:
            return ErrorCode.invalid_config, (
                "The configuration value cannot be added because it exceeds the maximum value size of "
                f"{MAX_VALUE_CHARS} bytes."
            )
    try:
        new = validate(group_id, configs, broker.config)
    except InvalidRequest as exc:
        return ErrorCode.invalid_request, str(exc)
    except InvalidConfig as exc:
        return ErrorCode.invalid_config, str(exc)
    if not validate_only:
        try:
            broker.group_configs.set(group_id, new)
        except (OSError, StorageError) as exc:  # nothing changed (in a cluster: other nodes kept winning)
            log.error("group %s configs not saved: %s", group_id, exc)
            return ErrorCode.kafka_storage_error, f"configs not saved: {exc}"
    return ErrorCode.none, None


def duplicated_groups(resources: Any) -> set[str]:
    """GROUP resources named more than once in one request: Kafka refuses each of them."""
    seen = Counter(r.resource_name for r in resources if r.resource_type == GROUP)
    return {name for name, n in seen.items() if n > 1}
