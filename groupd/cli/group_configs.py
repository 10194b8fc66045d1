"""groupd-configs' ``--entity-type groups``: group configs described and altered as kafka-configs.sh does
(ConfigCommand 4.3), through DescribeConfigs, IncrementalAlterConfigs, ListGroups and ListConfigResources
on GROUP resources. Works against groupd and Apache Kafka alike.

    groupd-configs --bootstrap-server H:P --entity-type groups --entity-name G --alter \\
        --add-config share.auto.offset.reset=earliest,consumer.heartbeat.interval.ms=6000
    groupd-configs --bootstrap-server H:P --entity-type groups --entity-name G --describe [--all]
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from groupd.protocol import codec
from groupd.protocol.api_table import ApiKey
from groupd.protocol.errors import ErrorCode

if TYPE_CHECKING:  # configs_cli calls this module with its client
    from groupd.cli.configs_cli import Client

GROUP = 32
SET, DELETE = 0, 1
DYNAMIC_GROUP_CONFIG = 8
# the Admin client's ConfigEntry.ConfigSource names of DescribeConfigs' source ids
SOURCE_NAMES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "DYNAMIC_CLIENT_METRICS_CONFIG",
    8: "DYNAMIC_GROUP_CONFIG",
}
_ITEM = re.compile(r"([^,=\[\]]+)=(\[[^\]]*\]|[^,]*)")


def parse_plain_configs(text: str) -> dict[str, str]:
    """kafka-configs.sh's --add-config: ``k=v,k2=[a,b]`` (brackets hold a list, written back with commas)."""
    out: dict[str, str] = {}
    rest = text.strip()
    while rest:
        m = _ITEM.match(rest)
        if m is None:
            raise ValueError(f'Invalid entity config: all configs to be added must be in the format "key=val": {rest}')
        key, value = m.group(1).strip(), m.group(2).strip()
        out[key] = value[1:-1] if value.startswith("[") else value
        rest = rest[m.end() :].lstrip(",").strip()
    return out


def _check(code: ErrorCode, message: str | None) -> None:
    if code:
        raise ValueError(f"{code.name.upper() if hasattr(code, 'name') else code}: {message}")


def alter(client: Client, group: str, add: str, delete: str) -> list[str]:
    """Deletions then settings in one IncrementalAlterConfigs, as ConfigCommand.alterResourceConfig sends them."""
    added = parse_plain_configs(add or "")
    removed = [k.strip() for k in (delete or "").split(",") if k.strip()]
    cls = codec.request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
    cfg = codec.nested(cls, "AlterableConfig")
    ops = tuple(cfg(name=k, config_operation=DELETE, value="") for k in removed)
    ops += tuple(cfg(name=k, config_operation=SET, value=v) for k, v in added.items())
    resource = codec.nested(cls, "AlterConfigsResource")(resource_type=GROUP, resource_name=group, configs=ops)
    resp = client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, resources=(resource,), validate_only=False)
    for r in resp.responses:
        _check(r.error_code, r.error_message)
    return [f"Completed updating config for group {group}."]


def _configured_groups(client: Client) -> set[str]:
    resp = client.call(ApiKey.LIST_CONFIG_RESOURCES, 1, resource_types=(GROUP,))
    _check(resp.error_code, None)
    return {r.resource_name for r in resp.config_resources}


def _groups(client: Client) -> set[str]:
    resp = client.call(ApiKey.LIST_GROUPS, 5, states_filter=(), types_filter=())
    _check(resp.error_code, None)
    return {g.group_id for g in resp.groups}


def describe(client: Client, group: str | None, every: bool) -> list[str]:
    """Each group's configs: only the group's own (DYNAMIC_GROUP_CONFIG), or with ``every`` all of them;
    without a name, every group that exists or has configs."""
    if group is not None and not every and group not in _groups(client) and group not in _configured_groups(client):
        return [f"The group '{group}' doesn't exist and doesn't have dynamic config."]
    names = [group] if group is not None else sorted(_groups(client) | _configured_groups(client))
    lines: list[str] = []
    cls = codec.request_class(ApiKey.DESCRIBE_CONFIGS, 4)
    res_cls = codec.nested(cls, "DescribeConfigsResource")
    for name in names:
        lines.append(f"{'All' if every else 'Dynamic'} configs for group {name} are:")
        resp = client.call(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            include_synonyms=True,
            include_documentation=False,
            resources=(res_cls(resource_type=GROUP, resource_name=name, configuration_keys=None),),
        )
        (result,) = resp.results
        _check(result.error_code, result.error_message)
        for entry in sorted(result.configs, key=lambda e: e.name):
            if not every and entry.config_source != DYNAMIC_GROUP_CONFIG:
                continue
            synonyms = ", ".join(f"{SOURCE_NAMES.get(s.source, 'UNKNOWN')}:{s.name}={s.value}" for s in entry.synonyms)
            lines.append(
                f"  {entry.name}={entry.value} sensitive={str(entry.is_sensitive).lower()} synonyms={{{synonyms}}}"
            )
    return lines
