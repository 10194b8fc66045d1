"""groupd-groups: list, describe, reset and delete consumer groups on any Kafka broker.

Like Kafka's kafka-consumer-groups.sh. It speaks the Kafka protocol through kafka-python's admin client
and consumer (already the project's first real client), so it works against groupd and Apache Kafka alike.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata


def _field(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _assigned(member: Any) -> list[tuple[str, int]]:
    assignment = _field(member, "member_assignment")
    out: list[tuple[str, int]] = []
    for entry in _field(assignment, "assigned_partitions", None) or []:
        topic = _field(entry, "topic", None) or (entry[0] if isinstance(entry, (tuple, list)) else None)
        partitions = _field(entry, "partitions", None) or (entry[1] if isinstance(entry, (tuple, list)) else [])
        out.extend((topic, p) for p in partitions)
    return out


def _table(rows: list[list[Any]]) -> str:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


_JAAS_OPTION = re.compile(r'(username|password)\s*=\s*"([^"]*)"')


def client_settings(properties: dict[str, str]) -> dict[str, Any]:
    """Kafka's client properties (``--command-config``, as Kafka's tools take them) as kafka-python's
    settings: the security protocol, SASL (PLAIN, SCRAM) and PEM TLS files. Java's or librdkafka's names."""
    out: dict[str, Any] = {}
    if "security.protocol" in properties:
        out["security_protocol"] = properties["security.protocol"].upper()
    if "sasl.mechanism" in properties:
        out["sasl_mechanism"] = properties["sasl.mechanism"].upper()
    jaas = dict(_JAAS_OPTION.findall(properties.get("sasl.jaas.config", "")))
    user = properties.get("sasl.username", jaas.get("username"))
    password = properties.get("sasl.password", jaas.get("password"))
    if user is not None:
        out["sasl_plain_username"], out["sasl_plain_password"] = user, password
    for keys, setting in ((("ssl.truststore.location", "ssl.ca.location"), "ssl_cafile"),
                          (("ssl.keystore.location", "ssl.certificate.location"), "ssl_certfile"),
                          (("ssl.key.location",), "ssl_keyfile")):
        for key in keys:
            if key in properties:
                out[setting] = properties[key]
    if out.get("ssl_certfile") and "ssl_keyfile" not in out:
        out["ssl_keyfile"] = out["ssl_certfile"]  # a PEM key store holds the key beside the chain
    if "ssl.endpoint.identification.algorithm" in properties and not properties["ssl.endpoint.identification.algorithm"]:
        out["ssl_check_hostname"] = False
    return out


class Groups:
    def __init__(self, bootstrap: str, settings: dict[str, Any] | None = None) -> None:
        self.bootstrap = bootstrap
        self.settings = settings or {}
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="groupd-groups", **self.settings)
        self._consumer: KafkaConsumer | None = None

    @property
    def consumer(self) -> KafkaConsumer:
        if self._consumer is None:
            self._consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, client_id="groupd-groups", enable_auto_commit=False, **self.settings)
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
        self.admin.close()

    def list(self) -> list[str]:
        return sorted(_field(g, "group_id") for g in self.admin.list_groups())

    def description(self, group: str) -> dict[str, Any]:
        return self.admin.describe_groups([group])[group]

    def committed(self, group: str) -> dict[TopicPartition, int]:
        offsets = self.admin.list_group_offsets({group: None}).get(group, {})
        return {tp: om.offset for tp, om in offsets.items() if om.offset >= 0}

    def end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return self.consumer.end_offsets(partitions) if partitions else {}

    def describe_offsets(self, group: str) -> list[list[Any]]:
        desc = self.description(group)
        owner: dict[tuple[str, int], Any] = {}
        for m in _field(desc, "members", []) or []:
            for tp in _assigned(m):
                owner[tp] = m
        committed = self.committed(group)
        partitions = sorted(set(committed) | {TopicPartition(t, p) for t, p in owner})
        ends = self.end_offsets(partitions)
        rows = [["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]]
        for tp in partitions:
            current = committed.get(tp)
            end = ends.get(tp)
            lag = end - current if current is not None and end is not None else "-"
            m = owner.get((tp.topic, tp.partition))
            rows.append([
                group, tp.topic, tp.partition, "-" if current is None else current, "-" if end is None else end, lag,
                _field(m, "member_id", "-") if m else "-", _field(m, "client_host", "-") if m else "-", _field(m, "client_id", "-") if m else "-",
            ])
        return rows

    def describe_members(self, group: str) -> list[list[Any]]:
        desc = self.description(group)
        rows = [["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]]
        for m in _field(desc, "members", []) or []:
            rows.append([group, _field(m, "member_id"), _field(m, "client_host"), _field(m, "client_id"), len(_assigned(m))])
        return rows

    def describe_state(self, group: str) -> list[list[Any]]:
        desc = self.description(group)
        return [
            ["GROUP", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
            [group, _field(desc, "protocol_data") or "", _field(desc, "group_state"), len(_field(desc, "members", []) or [])],
        ]

    def reset_plan(self, group: str, topic: str, how: str, to_offset: int | None) -> dict[TopicPartition, int]:
        partitions = [TopicPartition(topic, p) for p in sorted(self.consumer.partitions_for_topic(topic) or ())]
        if not partitions:
            raise SystemExit(f"groupd-groups: topic {topic} does not exist")
        if how == "earliest":
            return dict(self.consumer.beginning_offsets(partitions))
        if how == "latest":
            return dict(self.consumer.end_offsets(partitions))
        assert to_offset is not None
        return {tp: to_offset for tp in partitions}

    def reset(self, group: str, plan: dict[TopicPartition, int]) -> None:
        state = _field(self.description(group), "group_state")
        if state not in ("Empty", "Dead"):
            raise SystemExit(f"groupd-groups: assignments can only be reset if the group '{group}' is inactive, but the current state is {state}.")
        self.admin.alter_group_offsets(group, {tp: OffsetAndMetadata(off, "", -1) for tp, off in plan.items()})

    def delete(self, group: str) -> str | None:
        result = self.admin.delete_groups([group])
        error = result.get(group) if isinstance(result, dict) else None
        return None if error in (None, "", "OK") else str(error)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="groupd-groups", description="Consumer groups, like kafka-consumer-groups.sh")
    p.add_argument("--bootstrap-server", required=True)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true")
    action.add_argument("--describe", action="store_true")
    action.add_argument("--reset-offsets", action="store_true")
    action.add_argument("--delete", action="store_true")
    p.add_argument("--group")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true")
    view.add_argument("--offsets", action="store_true")
    view.add_argument("--state", action="store_true")
    p.add_argument("--topic")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=int)
    p.add_argument("--execute", action="store_true", help="apply the reset (without it: a dry run)")
    p.add_argument("--command-config", help="client properties (security.protocol, sasl.*, ssl.*) for a SASL or TLS listener")
    args = p.parse_args(argv)
    if not args.list and not args.group:
        p.error("--group is required")
    settings = {}
    if args.command_config:
        from broker.config import parse_properties

        with open(args.command_config) as f:
            settings = client_settings(parse_properties(f.read()))
    groups = Groups(args.bootstrap_server, settings)
    try:
        if args.list:
            print("\n".join(groups.list()))
        elif args.describe:
            rows = groups.describe_members(args.group) if args.members else groups.describe_state(args.group) if args.state else groups.describe_offsets(args.group)
            print(_table(rows))
        elif args.reset_offsets:
            if not args.topic or not (args.to_earliest or args.to_latest or args.to_offset is not None):
                p.error("--reset-offsets needs --topic and one of --to-earliest, --to-latest, --to-offset")
            how = "earliest" if args.to_earliest else "latest" if args.to_latest else "offset"
            plan = groups.reset_plan(args.group, args.topic, how, args.to_offset)
            print(_table([["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]] + [[args.group, tp.topic, tp.partition, off] for tp, off in sorted(plan.items())]))
            if args.execute:
                groups.reset(args.group, plan)
            else:
                print("(dry run: add --execute to apply)")
        elif args.delete:
            error = groups.delete(args.group)
            if error:
                print(f"groupd-groups: deletion of group '{args.group}' failed: {error}", file=sys.stderr)
                return 1
            print(f"Deletion of requested consumer groups ('{args.group}') was successful.")
    finally:
        groups.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
