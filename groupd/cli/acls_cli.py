"""groupd-acls: add, remove and list ACLs with kafka-acls.sh's flags, over the wire (CreateAcls,
DeleteAcls, DescribeAcls through kafka-python's admin client, as groupd-groups talks to a broker), against
groupd or Apache Kafka alike:

    groupd-acls --bootstrap-server H:P --command-config admin.properties \\
        --add --allow-principal User:alice --consumer --topic orders --group billing
    groupd-acls --bootstrap-server H:P --add --allow-principal User:alice --producer --topic orders- \\
        --resource-pattern-type prefixed
    groupd-acls --bootstrap-server H:P --list --topic orders
    groupd-acls --bootstrap-server H:P --remove --allow-principal User:alice --operation Read --topic orders

``--command-config`` is a client properties file: security.protocol, sasl.mechanism and
sasl.jaas.config's username and password, as kafka-acls.sh takes them.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from groupd.broker.security.acl import CLUSTER_NAME, Operation, PatternType, Permission, ResourceType

# kafka-acls.sh's shortcuts (AclCommand): what --producer and --consumer grant
PRODUCER_TOPIC = (Operation.WRITE, Operation.DESCRIBE, Operation.CREATE)
PRODUCER_TXN = (Operation.WRITE, Operation.DESCRIBE)
CONSUMER_TOPIC = (Operation.READ, Operation.DESCRIBE)
CONSUMER_GROUP = (Operation.READ,)
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"([^"]*)"')


@dataclass(frozen=True)
class Entry:
    """One ACL to add (or to match, for --remove and --list), in the broker's codes."""

    resource_type: ResourceType
    name: str
    pattern: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission


def _operation(text: str) -> Operation:
    key = re.sub(r"(?<!^)(?=[A-Z])", "_", text).upper() if "_" not in text and not text.isupper() else text.upper()
    try:
        return Operation[key]
    except KeyError:
        raise argparse.ArgumentTypeError(f"unknown operation {text!r}") from None


def _pattern(text: str) -> PatternType:
    try:
        return PatternType[text.upper()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"unknown resource pattern type {text!r}") from None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="groupd-acls", description="Kafka's kafka-acls.sh, over the wire")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--command-config", help="client properties: security.protocol, sasl.mechanism, sasl.jaas.config")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true")
    action.add_argument("--remove", action="store_true")
    action.add_argument("--list", action="store_true")
    p.add_argument("--allow-principal", action="append", default=[])
    p.add_argument("--deny-principal", action="append", default=[])
    p.add_argument("--principal", action="append", default=[], help="--list: only these principals' ACLs")
    p.add_argument("--allow-host", action="append", default=[])
    p.add_argument("--deny-host", action="append", default=[])
    p.add_argument("--operation", action="append", default=[], type=_operation)
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--transactional-id", action="append", default=[])
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--resource-pattern-type", type=_pattern, default=None)
    p.add_argument("--producer", action="store_true")
    p.add_argument("--consumer", action="store_true")
    p.add_argument("--idempotent", action="store_true")
    p.add_argument("--force", action="store_true", help="accepted, as kafka-acls.sh's: groupd-acls never asks")
    return p


def resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in args.topic]
    out += [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster or (args.producer and args.idempotent):
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def operations_for(args: argparse.Namespace, rtype: ResourceType) -> tuple[Operation, ...]:
    """The operations an --add or --remove names for a resource: --operation's, or the shortcuts'."""
    if args.producer or args.consumer:
        ops: list[Operation] = []
        if args.producer:
            ops += {
                ResourceType.TOPIC: PRODUCER_TOPIC,
                ResourceType.TRANSACTIONAL_ID: PRODUCER_TXN,
                ResourceType.CLUSTER: (Operation.IDEMPOTENT_WRITE,),
            }.get(rtype, ())
        if args.consumer:
            ops += {ResourceType.TOPIC: CONSUMER_TOPIC, ResourceType.GROUP: CONSUMER_GROUP}.get(rtype, ())
        return tuple(dict.fromkeys(ops))
    return tuple(args.operation) or ((Operation.ALL,) if args.add else (Operation.ANY,))


def entries(args: argparse.Namespace) -> Iterator[Entry]:
    """The ACLs --add creates (or --remove matches), one per principal x host x operation x resource."""
    default_pattern = PatternType.LITERAL
    pattern = args.resource_pattern_type or default_pattern
    grants = [(p, Permission.ALLOW, args.allow_host or ["*"]) for p in args.allow_principal]
    grants += [(p, Permission.DENY, args.deny_host or ["*"]) for p in args.deny_principal]
    for rtype, name in resources(args):
        ops = operations_for(args, rtype)
        if not grants:  # --remove without a principal: every ACL of the resource
            for op in ops:
                yield Entry(rtype, name, pattern, None, None, op, Permission.ANY)
        for principal, permission, hosts in grants:
            for host in hosts:
                for op in ops:
                    yield Entry(rtype, name, pattern, principal, host, op, permission)


def client_config(path: str | None) -> dict[str, Any]:
    """kafka-python's settings from a Kafka client properties file."""
    if path is None:
        return {}
    props: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith(("#", "!")) and "=" in line:
                key, _, value = line.partition("=")
                props[key.strip()] = value.strip()
    out: dict[str, Any] = {}
    if "security.protocol" in props:
        out["security_protocol"] = props["security.protocol"]
    if "sasl.mechanism" in props:
        out["sasl_mechanism"] = props["sasl.mechanism"]
    options = dict(_JAAS_OPTION.findall(props.get("sasl.jaas.config", "")))
    if "username" in options:
        out["sasl_plain_username"] = options["username"]
        out["sasl_plain_password"] = options.get("password", "")
    return out


def describe(pattern: Any) -> str:
    return (
        f"ResourcePattern(resourceType={ResourceType(pattern.resource_type).name}, name={pattern.resource_name}, "
        f"patternType={PatternType(pattern.pattern_type).name})"
    )


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if (args.add or args.remove) and not resources(args):
        print("You must specify one of: --topic, --cluster, --group, --transactional-id", file=sys.stderr)
        return 1
    if args.add and not (args.allow_principal or args.deny_principal):
        print("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.", file=sys.stderr)
        return 1
    if args.consumer and not args.group and args.add:
        print("With --consumer you must specify a --group", file=sys.stderr)
        return 1
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError

    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap_server, **client_config(args.command_config))
    try:
        return _run(args, admin)
    except KafkaError as exc:  # the broker refused the whole request (CLUSTER_AUTHORIZATION_FAILED, ...)
        print(f"Error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        admin.close()


def _kafka_python(e: Entry, entry_cls: Any, pattern_cls: Any) -> Any:
    """An Entry as kafka-python's ACL (with a ResourcePattern) or ACLFilter (with a ResourcePatternFilter)."""
    from kafka.admin import ACLOperation, ACLPermissionType, ACLResourcePatternType
    from kafka.admin import ResourceType as KResourceType

    pattern = pattern_cls(KResourceType(e.resource_type), e.name, ACLResourcePatternType(e.pattern))
    return entry_cls(e.principal, e.host, ACLOperation(e.operation), ACLPermissionType(e.permission), pattern)


def _run(args: argparse.Namespace, admin: Any) -> int:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KResourceType

    if args.add:
        acls = [_kafka_python(e, ACL, ResourcePattern) for e in entries(args)]
        result = admin.create_acls(acls)
        for error in result["failed"]:  # kafka-python gives the error classes of the refused ones
            print(f"Error while adding ACLs: {getattr(error, '__name__', error)}", file=sys.stderr)
        if result["failed"]:
            return 1
        for acl in acls:
            print(f"Adding ACL for resource `{describe(acl.resource_pattern)}`:")
            print(
                f" \t(principal={acl.principal}, host={acl.host}, operation={acl.operation.name}, "
                f"permissionType={acl.permission_type.name})"
            )
        return 0
    if args.remove:
        filters = [_kafka_python(e, ACLFilter, ResourcePatternFilter) for e in entries(args)]
        code = 0
        for _, removed, error in admin.delete_acls(filters):
            if error.errno:
                print(f"Error while removing ACLs: {error}", file=sys.stderr)
                code = 1
            for acl in removed:
                print(
                    f"Removed ACL {acl.principal} {acl.operation.name} {acl.permission_type.name} on "
                    f"{describe(acl.resource_pattern)}"
                )
        return code
    wanted: list[tuple[ResourceType, str | None]] = [*resources(args)] or [(ResourceType.ANY, None)]
    pattern = args.resource_pattern_type or (PatternType.LITERAL if resources(args) else PatternType.ANY)
    principals = args.principal or [None]
    code = 0
    for rtype, name in wanted:
        for principal in principals:
            flt = ACLFilter(
                principal,
                None,
                ACLOperation.ANY,
                ACLPermissionType.ANY,
                ResourcePatternFilter(KResourceType(rtype), name, ACLResourcePatternType(pattern)),
            )
            acls, error = admin.describe_acls(flt)
            if error.errno:
                print(f"Error while listing ACLs: {error}", file=sys.stderr)
                code = 1
                continue
            by_resource: dict[str, list[Any]] = {}
            for acl in acls:
                by_resource.setdefault(describe(acl.resource_pattern), []).append(acl)
            for resource, rows in by_resource.items():
                print(f"Current ACLs for resource `{resource}`: ")
                for acl in rows:
                    print(
                        f" \t(principal={acl.principal}, host={acl.host}, operation={acl.operation.name}, "
                        f"permissionType={acl.permission_type.name})"
                    )
                print()
    return code


if __name__ == "__main__":
    sys.exit(main())
