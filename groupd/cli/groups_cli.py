"""groupd-groups: Kafka's kafka-consumer-groups.sh for groupd (and any Kafka broker).

The flags, their combinations, the output columns and the error wording are those of Kafka's
``ConsumerGroupCommand`` / ``ConsumerGroupCommandOptions`` (4.x), so scripts written for one work with the
other, and ``--export`` / ``--from-file`` CSV moves offsets between groupd and Apache Kafka with either
tool. It speaks the Kafka protocol through kafka-python's admin client (a dependency of the broker, so
``make run`` is enough to use it). groupd's own addition: ``--describe --status`` shows the broker's live
consumer status (Burrow's rules, computed in the broker) read from its /metrics.

Exit codes: 0 success; 1 an operation failed (a missing group, a failed deletion, an unreachable broker);
2 bad arguments. No tracebacks: an unreachable broker, a closed pipe or ^C end with one line.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from groupd.cli import consumer_describe
from groupd.cli import groups_output as show
from groupd.cli import offset_reset as reset

MISSING = "-"
CONSUMER_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling")
CONSUMER_TYPES = ("Classic", "Consumer")
SCENARIOS = (
    "to_offset",
    "shift_by",
    "to_datetime",
    "by_duration",
    "to_earliest",
    "to_latest",
    "to_current",
    "from_file",
)
_JAAS_OPTION = re.compile(r'(username|password)\s*=\s*"([^"]*)"')


class CommandError(Exception):
    """An operation that failed: printed as Kafka prints it (``Error: ...``), exit 1."""


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
    for keys, setting in (
        (("ssl.truststore.location", "ssl.ca.location"), "ssl_cafile"),
        (("ssl.keystore.location", "ssl.certificate.location"), "ssl_certfile"),
        (("ssl.key.location",), "ssl_keyfile"),
    ):
        for key in keys:
            if key in properties:
                out[setting] = properties[key]
    if out.get("ssl_certfile") and "ssl_keyfile" not in out:
        out["ssl_keyfile"] = out["ssl_certfile"]  # a PEM key store holds the key beside the chain
    if (
        "ssl.endpoint.identification.algorithm" in properties
        and not properties["ssl.endpoint.identification.algorithm"]
    ):
        out["ssl_check_hostname"] = False
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="groupd-groups",
        description=(
            "This tool helps to list all consumer groups, describe a consumer group, delete consumer group info, "
            "or reset consumer group offsets (Kafka's kafka-consumer-groups.sh, same flags and output)."
        ),
    )
    p.add_argument("--bootstrap-server", help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--group", action="append", default=[], help="The consumer group we wish to act on (repeatable).")
    p.add_argument(
        "--topic", action="append", default=[], help="A topic, or topic:0,1,2 for some of its partitions (repeatable)."
    )
    p.add_argument(
        "--all-topics",
        action="store_true",
        help="Consider all topics assigned to a group in the reset-offsets process.",
    )
    p.add_argument("--all-groups", action="store_true", help="Apply to all consumer groups.")
    for flag, doc in (
        ("--list", "List all consumer groups."),
        ("--describe", "Describe consumer group and list offset lag related to given group."),
        ("--delete", "Delete groups: their offsets and ownership information."),
        ("--reset-offsets", "Reset offsets of consumer groups (inactive ones only)."),
        ("--delete-offsets", "Delete offsets of one consumer group, for the topics given."),
    ):
        p.add_argument(flag, action="store_true", help=doc)
    p.add_argument(
        "--timeout", type=int, default=5000, metavar="MS", help="How long to wait for the broker (ms, default 5000)."
    )
    p.add_argument("--command-config", help="Property file of client configs (security.protocol, sasl.*, ssl.*).")
    p.add_argument(
        "--dry-run", action="store_true", help="Only show results without executing changes (reset-offsets)."
    )
    p.add_argument("--execute", action="store_true", help="Execute operation (reset-offsets).")
    p.add_argument("--export", action="store_true", help="Export operation execution to a CSV file (reset-offsets).")
    p.add_argument("--to-offset", type=int, help="Reset offsets to a specific offset.")
    p.add_argument("--from-file", help="Reset offsets to values defined in CSV file.")
    p.add_argument("--to-datetime", help="Reset offsets to offset from datetime. Format: 'YYYY-MM-DDTHH:mm:SS.sss'")
    p.add_argument(
        "--by-duration", help="Reset offsets to offset by duration from current timestamp. Format: 'PnDTnHnMnS'"
    )
    p.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    p.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    p.add_argument("--to-current", action="store_true", help="Reset offsets to current offset.")
    p.add_argument(
        "--shift-by",
        type=int,
        help="Reset offsets shifting current offset by 'n', where 'n' can be positive or negative.",
    )
    p.add_argument("--members", action="store_true", help="Describe members of the group (with --describe).")
    p.add_argument("--verbose", action="store_true", help="Provide additional information when describing the group.")
    p.add_argument(
        "--offsets", action="store_true", help="Describe the group's partitions with their offset lag (the default)."
    )
    p.add_argument(
        "--state",
        nargs="?",
        const="",
        default=None,
        help="With --describe: the group's state; with --list: states, optionally filtered (stable,empty).",
    )
    p.add_argument(
        "--type",
        nargs="?",
        const="",
        default=None,
        help="With --list: group types, optionally filtered (classic,consumer).",
    )
    p.add_argument(
        "--status",
        action="store_true",
        help="groupd: with --describe, the broker's live consumer status per partition (Burrow's rules).",
    )
    p.add_argument(
        "--metrics-url",
        help="groupd: the broker's /metrics for --status (default http://<bootstrap host>:9404/metrics).",
    )
    p.add_argument(
        "--share",
        action="store_true",
        help="Share groups (KIP-932): --list and --describe as Kafka's kafka-share-groups.sh shows them.",
    )
    return p


def check_args(a: argparse.Namespace, usage: Callable[[str], NoReturn]) -> None:
    """Kafka's ``checkArgs``, message for message."""
    actions = [a.list, a.describe, a.delete, a.reset_offsets, a.delete_offsets]
    if sum(actions) != 1:
        usage(
            "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets"
        )
    if not a.bootstrap_server:
        usage('Missing required argument "[bootstrap-server]"')
    scope = "--all-groups, --group"
    if a.describe:
        if not a.group and not a.all_groups:
            usage(f"Option [describe] takes one of these options: {scope}")
        if sum((a.members, a.offsets, a.state is not None, a.status)) > 1:
            usage("Option [describe] takes at most one of these options: [members], [offsets], [state]")
        if a.state:
            usage("Option [describe] does not take a value for [state]")
    elif a.members or a.offsets or a.verbose or a.status:
        usage("Option [members], [offsets], [verbose] and [status] may be used with [describe] only")
    if a.state is not None and not (a.describe or a.list):
        usage("Option [state] may be used with [describe] or [list] only")
    if a.type is not None and not a.list:
        usage("Option [type] may be used with [list] only")
    if a.delete:
        if not a.group and not a.all_groups:
            usage(f"Option [delete] takes one of these options: {scope}")
        if a.topic:
            usage("The consumer does not support topic-specific offset deletion from a consumer group.")
    if a.delete_offsets and (len(a.group) != 1 or not a.topic):
        usage("Option [delete-offsets] takes the following options: --group, --topic")
    chosen = [s for s in SCENARIOS if getattr(a, s) not in (None, False)]
    if a.reset_offsets:
        if a.dry_run and a.execute:
            usage("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if not a.dry_run and not a.execute:
            print(
                "WARN: No action will be performed as the --execute option is missing. In a future major release, the "
                "default behavior of this command will be to prompt the user before executing the reset rather than "
                "doing a dry run. You should add the --dry-run option explicitly if you are scripting this command "
                "and want to keep the current default behavior without prompting.",
                file=sys.stderr,
            )
        if not a.group and not a.all_groups:
            usage(f"Option [reset-offsets] takes one of these options: {scope}")
        if len(chosen) > 1:
            usage(f"Option [{chosen[0].replace('_', '-')}] can't be used with option [{chosen[1].replace('_', '-')}]")
        if not chosen:
            usage(
                "Option '[reset-offsets]' requires one of the following scenarios: "
                + ", ".join(f"[{s.replace('_', '-')}]" for s in SCENARIOS)
            )
        if not (a.all_topics or a.topic or a.from_file):
            usage("One of the reset scopes should be defined: --all-topics, --topic.")
    elif chosen or a.dry_run or a.execute or a.export or a.all_topics:
        usage(
            "Option [reset-offsets] scenarios, [dry-run], [execute], [export] and [all-topics] may be used with "
            "[reset-offsets] only"
        )
    if a.group and a.all_groups:
        usage("Option [group] can't be used with option [all-groups]")
    if a.group and a.list:
        usage("Option [group] can't be used with option [list]")
    if a.topic and (a.list or a.describe):
        usage("Option [topic] can't be used with option [list] or [describe]")
    if a.share and not (a.list or a.describe):
        usage("Option [share] may be used with [list] or [describe] only")
    if a.share and (a.type is not None or a.status or a.command_config):
        usage("Option [share] can't be used with [type], [status] or [command-config]")


def _parse_filter(value: str | None, valid: tuple[str, ...], what: str) -> list[str]:
    if not value:
        return []
    by_upper = {v.upper(): v for v in valid}
    parsed = [s.strip() for s in value.split(",")]
    if any(s.upper() not in by_upper for s in parsed):
        raise reset.UsageError(f"Invalid {what} list '{value}'. Valid {what}s are: {', '.join(valid)}")
    return [by_upper[s.upper()] for s in parsed]


def _assigned(member: dict[str, Any]) -> list[tuple[str, int]]:
    assignment = member.get("member_assignment") or {}
    if not isinstance(assignment, dict):
        return []
    return [(e["topic"], p) for e in assignment.get("assigned_partitions") or [] for p in e["partitions"]]


class GroupService:
    """The admin-client work behind each action; printing is groups_output's."""

    def __init__(self, bootstrap: str, timeout_ms: int, settings: dict[str, Any]) -> None:
        from kafka import KafkaAdminClient

        self.timeout_ms = timeout_ms
        self.admin = KafkaAdminClient(
            bootstrap_servers=bootstrap,
            client_id="groupd-groups",
            request_timeout_ms=max(timeout_ms, 1000),
            bootstrap_timeout_ms=timeout_ms,
            **settings,
        )
        self.settings = settings
        self.warnings: list[str] = []

    def close(self) -> None:
        self.admin.close()

    # --- reading
    def list_groups(self, states: list[str] | None = None, types: list[str] | None = None) -> list[dict[str, Any]]:
        groups = self.admin.list_groups(
            states_filter=states or None, types_filter=[t.lower() for t in types] if types else None
        )
        return [g for g in groups if g.get("protocol_type") in ("consumer", "")]

    def describe(self, groups: list[str]) -> dict[str, dict[str, Any]]:
        """As Kafka's admin client describes consumer groups: ConsumerGroupDescribe first, DescribeGroups
        for the groups it does not know (classic ones)."""
        found = self.describe_consumer_groups(groups)
        rest = [g for g in groups if g not in found]
        out = dict(self.admin.describe_groups(rest)) if rest else {}
        out.update(found)
        return out

    def describe_consumer_groups(self, groups: list[str]) -> dict[str, dict[str, Any]]:
        """The consumer-protocol groups among ``groups``, from their coordinators (groupd/cli/consumer_describe.py);
        none when the listener needs SASL or the broker does not answer API 69 (an older Kafka)."""
        if not groups or not consumer_describe.speaks_plainly(self.settings):
            return {}
        by_coordinator: dict[tuple[str, int], list[str]] = {}
        for group in groups:
            broker = self.coordinator(group)
            if broker is not None:
                by_coordinator.setdefault((broker.host, broker.port), []).append(group)
        found: dict[str, dict[str, Any]] = {}
        ctx = consumer_describe.tls_context(self.settings)
        for (host, port), ids in by_coordinator.items():
            try:
                found.update(consumer_describe.describe(host, port, ids, ctx, self.timeout_ms / 1000))
            except (OSError, ValueError, EOFError):
                continue  # no ConsumerGroupDescribe there: DescribeGroups answers alone
        return found

    def coordinator(self, group: str) -> Any:
        manager = self.admin._manager  # kafka-python keeps FindCoordinator behind its admin client
        node_id = manager.run(self.admin._find_coordinator_id, group)
        return manager.cluster.broker_metadata(node_id)

    def committed(self, group: str) -> dict[Any, Any]:
        return {
            tp: om for tp, om in self.admin.list_group_offsets({group: None}).get(group, {}).items() if om.offset >= 0
        }

    def log_offsets(self, partitions: list[Any], spec: int) -> dict[Any, int]:
        if not partitions:
            return {}
        result = self.admin.list_partition_offsets({tp: spec for tp in partitions}, timeout_ms=self.timeout_ms)
        return {tp: getattr(v, "offset", v) for tp, v in result.items()}

    def topic_partitions(self, topics: list[str], missing_ok: bool = False) -> list[Any]:
        from kafka import TopicPartition

        if not topics:
            return []
        out = []
        for t in self.admin.describe_topics(topics):
            if t.get("error_code", 0) != 0:
                if missing_ok:
                    continue
                raise CommandError(
                    f"The partitions of topic '{t['name']}' could not be described: this server does not host this "
                    "topic-partition."
                )
            out += [TopicPartition(t["name"], p["partition_index"]) for p in t["partitions"]]
        return sorted(out)

    def offsets_rows(self, group: str, desc: dict[str, Any]) -> list[dict[str, Any]]:
        """One row a partition, as Kafka's ``collectGroupsOffsets``: members with the most partitions first,
        then committed partitions nobody owns."""
        from kafka import TopicPartition

        committed = self.committed(group)
        members = sorted((m for m in desc.get("members") or [] if _assigned(m)), key=lambda m: -len(_assigned(m)))
        rows: list[dict[str, Any]] = []
        owned: set[Any] = set()
        for m in members:
            tps = sorted(TopicPartition(t, p) for t, p in _assigned(m))
            owned.update(tps)
            rows += [
                dict(
                    group=group,
                    tp=tp,
                    consumer=m.get("member_id"),
                    host=m.get("client_host"),
                    client=m.get("client_id"),
                )
                for tp in tps
            ]
        rows += [
            dict(group=group, tp=tp, consumer=MISSING, host=MISSING, client=MISSING)
            for tp in sorted(set(committed) - owned)
        ]
        ends = self.log_offsets([r["tp"] for r in rows], -1)
        for r in rows:
            om = committed.get(r["tp"])
            r["offset"] = om.offset if om is not None else None
            r["epoch"] = (
                om.leader_epoch if om is not None and om.leader_epoch is not None and om.leader_epoch >= 0 else None
            )
            r["end"] = ends.get(r["tp"])
            r["lag"] = r["end"] - r["offset"] if r["offset"] is not None and r["end"] is not None else None
        return rows

    def coordinator_text(self, group: str) -> str:
        """``host:port  (id)`` of the group's coordinator, as Kafka's ``--describe --state`` shows it."""
        broker = self.coordinator(group)
        return MISSING if broker is None else f"{broker.host}:{broker.port}  ({broker.node_id})"

    # --- changing
    def delete_groups(self, groups: list[str]) -> dict[str, str | None]:
        result = self.admin.delete_groups(groups)
        return {
            g: (None if err in (None, "", "OK") or getattr(err, "errno", 1) == 0 else _error_text(err))
            for g, err in _items(result)
        }

    def plan(self, group: str, a: argparse.Namespace, file_plan: reset.Plan | None) -> dict[Any, int]:
        """The offsets ``--reset-offsets`` would commit for one group (Kafka's ``prepareOffsetsToReset``)."""
        if file_plan is not None:
            if group not in file_plan:
                raise CommandError(f"No reset plan for group {group} found.")
            requested = dict(file_plan[group])
            return self._bounded(requested)
        committed = self.committed(group)
        if a.all_topics:
            partitions = sorted(committed)
        else:
            whole, named = reset.split_topic_args(a.topic)
            partitions = sorted(set(named) | set(self.topic_partitions(whole)))
            known = set(self.topic_partitions(sorted({tp.topic for tp in named}), missing_ok=True))
            missing = [tp for tp in named if tp not in known]
            if missing:
                raise CommandError(
                    'The partitions "' + ",".join(f"{tp.topic}-{tp.partition}" for tp in missing) + '" do not exist'
                )
        if a.to_earliest:
            return self.log_offsets(partitions, -2)
        if a.to_latest:
            return self.log_offsets(partitions, -1)
        if a.to_offset is not None:
            return self._bounded({tp: a.to_offset for tp in partitions})
        if a.shift_by is not None:
            absent = [tp for tp in partitions if tp not in committed]
            if absent:
                raise CommandError(
                    f"Cannot shift offset for partition {absent[0].topic}-{absent[0].partition} since there is no "
                    "current committed offset"
                )
            return self._bounded({tp: committed[tp].offset + a.shift_by for tp in partitions})
        if a.to_current:
            ends = self.log_offsets([tp for tp in partitions if tp not in committed], -1)
            return {tp: committed[tp].offset if tp in committed else ends[tp] for tp in partitions}
        import time

        stamp = (
            reset.parse_datetime(a.to_datetime)
            if a.to_datetime
            else int(time.time() * 1000) - reset.parse_duration_ms(a.by_duration)
        )
        found = self.log_offsets(partitions, stamp)
        empty = [tp for tp in partitions if found.get(tp, -1) < 0]
        for tp in empty:
            self.warnings.append(
                f"\nWarn: Partition {tp.partition} from topic {tp.topic} is empty. Falling back to latest known offset."
            )
        found.update(self.log_offsets(empty, -1))
        return {tp: found[tp] for tp in partitions}

    def _bounded(self, requested: dict[Any, int]) -> dict[Any, int]:
        parts = sorted(requested)
        return reset.clamp(
            requested,
            self.log_offsets(parts, -2),
            self.log_offsets(parts, -1),
            lambda line: self.warnings.append(f"WARN {line}"),
        )

    def commit(self, group: str, offsets: dict[Any, int]) -> None:
        from kafka.structs import OffsetAndMetadata

        self.admin.alter_group_offsets(group, {tp: OffsetAndMetadata(off, "", -1) for tp, off in offsets.items()})

    def delete_offsets(self, group: str, topics: list[str]) -> tuple[str | None, dict[Any, str | None]]:
        whole, named = reset.split_topic_args(topics)
        partitions = sorted(set(named) | set(self.topic_partitions(whole)))
        try:
            result = self.admin.delete_group_offsets(group, partitions)
        except Exception as exc:  # a top-level error: the group is missing, not empty, ...
            return _error_text(exc), {}
        per = {tp: (None if getattr(err, "errno", 0) == 0 else _error_text(err)) for tp, err in result.items()}
        return (
            ("Encountered some partition-level error, see the follow-up details.") if any(per.values()) else None
        ), per


def _items(result: Any) -> list[tuple[str, Any]]:
    if isinstance(result, dict):
        return list(result.items())
    return [(g, err) for g, err in result]


def _error_text(err: Any) -> str:
    """A Kafka error as Kafka's tool shows it (the exception's name and message), not a Python repr."""
    if isinstance(err, str):  # kafka-python names DeleteGroups errors by their class name
        import kafka.errors

        err = getattr(kafka.errors, err, None) or err
        if isinstance(err, str):
            return err
    cls = err if isinstance(err, type) else type(err)
    description = getattr(cls, "description", None)
    if description:
        return f"{cls.__name__}: {description}"
    return str(err) or cls.__name__


def _status_rows(url: str, group: str) -> list[dict[str, Any]]:
    from groupd.cli.status_client import fetch_status

    try:
        return fetch_status(url, group)
    except ConnectionError as exc:
        raise CommandError(str(exc)) from None


def run(a: argparse.Namespace, out: Callable[[str], None], err: Callable[[str], None]) -> int:
    if a.share:
        from groupd.cli import share_groups

        try:
            return share_groups.run(a, out, err)
        except share_groups.ShareAdminError as exc:
            raise CommandError(str(exc)) from None
    settings: dict[str, Any] = {}
    if a.command_config:
        from groupd.broker.config import parse_properties

        try:
            with open(a.command_config) as f:
                settings = client_settings(parse_properties(f.read()))
        except OSError as exc:
            raise CommandError(f"cannot read --command-config {a.command_config}: {exc.strerror}") from None
    states = _parse_filter(a.state, CONSUMER_STATES, "state") if a.list else []
    types = _parse_filter(a.type, CONSUMER_TYPES, "type") if a.list else []
    service = GroupService(a.bootstrap_server, a.timeout, settings)
    try:
        return _run(service, a, states, types, out, err)
    finally:
        service.close()


def _run(
    service: GroupService,
    a: argparse.Namespace,
    states: list[str],
    types: list[str],
    out: Callable[[str], None],
    err: Callable[[str], None],
) -> int:
    if a.list:
        listings = service.list_groups(states, types)
        if a.state is not None or a.type is not None:
            out(show.format_list(listings, a.type is not None, a.state is not None))
        else:
            out("".join(g["group_id"] + "\n" for g in listings))
        return 0
    groups = [g["group_id"] for g in service.list_groups()] if a.all_groups else a.group
    if a.describe:
        return _describe(service, a, groups, out, err)
    if a.delete:
        results = service.delete_groups(groups)
        failed = {g: e for g, e in results.items() if e}
        ok = [g for g, e in results.items() if not e]
        if not failed:
            out("Deletion of requested consumer groups (" + ", ".join(f"'{g}'" for g in ok) + ") was successful.\n")
            return 0
        text = "\nError: Deletion of some consumer groups failed:\n" + "".join(
            f"* Group '{g}' could not be deleted due to: {e}\n" for g, e in failed.items()
        )
        if ok:
            text += "\nThese consumer groups were deleted successfully: " + ", ".join(f"'{g}'" for g in ok) + "\n"
        out(text)
        return 1
    if a.delete_offsets:
        top, per = service.delete_offsets(groups[0], a.topic)
        out((f"\nError: {top}" if top else f"Request succeeded for deleting offsets from group {groups[0]}.") + "\n")
        width = max([15] + [len(tp.topic) for tp in per])
        lines = [f"{'TOPIC':<{width}} {'PARTITION':<10} {'STATUS':<15}"]
        lines += [
            f"{tp.topic:<{width}} {tp.partition:<10} {('Error: ' + e) if e else 'Successful':<15}"
            for tp, e in sorted(per.items())
        ]
        out("".join("\n" + line for line in lines) + "\n")
        return 1 if top else 0
    return _reset(service, a, groups, out, err)


def _describe(
    service: GroupService,
    a: argparse.Namespace,
    groups: list[str],
    out: Callable[[str], None],
    err: Callable[[str], None],
) -> int:
    code = 0
    descriptions = service.describe(groups)
    for group in sorted(groups):
        desc = descriptions.get(group) or {"group_state": "Dead", "members": []}
        state = desc.get("group_state") or "Unknown"
        if state == "Dead":
            out(f"\nError: Consumer group '{group}' does not exist.\n")
            code = 1
            continue
        if state == "Empty":
            err(f"\nConsumer group '{group}' has no active members.\n")
        elif state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
            err(f"\nWarning: Consumer group '{group}' is rebalancing.\n")
        if a.members:
            out(
                show.format_members(
                    group, desc.get("members") or [], a.verbose, _assigned, desc.get("assignment_epoch")
                )
            )
        elif a.state is not None:
            out(show.format_state(group, desc, service.coordinator_text(group), a.verbose))
        elif a.status:
            url = a.metrics_url or f"http://{a.bootstrap_server.split(',')[0].rsplit(':', 1)[0]}:9404/metrics"
            rows = _status_rows(url, group)
            if not rows:
                err(f"\nConsumer group '{group}' has no committed offsets: no status to show.\n")
            else:
                out(show.format_status(group, rows))
        else:
            rows = service.offsets_rows(group, desc)
            if rows:
                out(show.format_offsets(rows, a.verbose))
    return code


def _reset(
    service: GroupService,
    a: argparse.Namespace,
    groups: list[str],
    out: Callable[[str], None],
    err: Callable[[str], None],
) -> int:
    file_plan = None
    if a.from_file:
        try:
            with open(a.from_file) as f:
                file_plan = reset.parse_csv(f.read(), a.group)
        except OSError as exc:
            raise CommandError(f"cannot read --from-file {a.from_file}: {exc.strerror}") from None
    descriptions = service.describe(groups)
    plans: reset.Plan = {}
    code = 0
    for group in groups:
        state = (descriptions.get(group) or {}).get("group_state") or "Dead"
        if state not in ("Empty", "Dead"):
            out(
                f"\nError: Assignments can only be reset if the group '{group}' is inactive, but the current state is "
                f"{state}.\n"
            )
            plans[group] = {}
            code = 1
            continue
        plans[group] = service.plan(group, a, file_plan)
        if a.execute and plans[group]:
            service.commit(group, plans[group])
    for line in service.warnings:
        err(line + "\n")
    if a.export:
        out(reset.export_csv(plans, with_group=len(a.group) != 1))
    else:
        out(show.format_reset(plans))
    return code


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()

    def usage(message: str) -> NoReturn:
        parser.print_usage(sys.stderr)
        print(f"groupd-groups: error: {message}", file=sys.stderr)
        raise SystemExit(2)

    a = parser.parse_args(argv)
    check_args(a, usage)
    out = _writer(sys.stdout)
    err = _writer(sys.stderr)
    try:
        return run(a, out, err)
    except reset.UsageError as exc:
        usage(str(exc))
    except CommandError as exc:
        out(f"\nError: {exc}\n")
        return 1
    except BrokenPipeError:
        _quiet_stdout()
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the client's errors (no broker, timeouts, auth) as one line, as Kafka prints them
        name = type(exc).__name__
        if name in ("NoBrokersAvailable", "KafkaConnectionError", "KafkaTimeoutError") or isinstance(exc, OSError):
            out(
                f"\nError: Executing consumer group command failed due to: could not reach {a.bootstrap_server} "
                f"within --timeout {a.timeout} ms ({name})\n"
            )
        else:
            out(f"\nError: Executing consumer group command failed due to {name}: {_error_text(exc)}\n")
        return 1


def _writer(stream: Any) -> Callable[[str], None]:
    def write(text: str) -> None:
        stream.write(text)
        stream.flush()

    return write


def _quiet_stdout() -> None:
    """After a closed pipe (``groupd-groups --list | head -1``) Python would complain again at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
