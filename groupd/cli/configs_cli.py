"""groupd-configs: client quotas, SCRAM credentials and group configs, like Kafka's kafka-configs.sh.

Kafka's own tool is Java and the Python clients have no API for client quotas, so this one speaks
DescribeClientQuotas/AlterClientQuotas and Describe/AlterUserScramCredentials itself (through kio, as
the broker does). It works against groupd and Apache Kafka alike. kafka-configs.sh's syntax:

    groupd-configs --bootstrap-server H:P --entity-type clients --entity-name app --alter \\
        --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    groupd-configs --bootstrap-server H:P --entity-type users --entity-name alice --alter \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    groupd-configs --bootstrap-server H:P --entity-type users --entity-default --describe
    groupd-configs --bootstrap-server H:P --entity-type groups --entity-name G --alter \\
        --add-config share.auto.offset.reset=earliest
    groupd-configs --bootstrap-server H:P --group G --describe --all

Group configs (groupd/cli/group_configs.py) go through DescribeConfigs and IncrementalAlterConfigs.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import struct
import sys
from typing import Any

from groupd.broker.security.scram import BY_NAME, BY_TYPE, salted_password
from groupd.cli import group_configs
from groupd.protocol import codec
from groupd.protocol.api_table import ApiKey
from groupd.protocol.request import encode_request

ENTITY_TYPES = {"clients": "client-id", "users": "user", "ips": "ip"}
DEFAULT_ITERATIONS = 4096  # kafka-configs.sh's default
_SCRAM = re.compile(r"(SCRAM-SHA-(?:256|512))=\[([^\]]*)\]")


class KafkaError(Exception):
    pass


class Client:
    """One blocking connection: a request out, its response back."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout)
        self.correlation = 0

    def call(self, api_key: int, version: int, **values: Any) -> Any:
        self.correlation += 1
        self.sock.sendall(encode_request(api_key, version, values, self.correlation, "groupd-configs"))
        (size,) = struct.unpack(">i", self._read(4))
        data = self._read(size)
        _, used = codec.decode(codec.response_header_class(api_key, version), data, 0)
        return codec.decode(codec.response_class(api_key, version), data, used)[0]

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise KafkaError("the broker closed the connection")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self.sock.close()


def parse_configs(text: str) -> tuple[dict[str, float], dict[str, dict[str, str]]]:
    """'k=v,SCRAM-SHA-256=[iterations=8192,password=x]' -> ({quota: value}, {mechanism: {key: value}})."""
    scram = {m: dict(kv.split("=", 1) for kv in body.split(",") if kv) for m, body in _SCRAM.findall(text)}
    quotas = {}
    for item in _SCRAM.sub("", text).split(","):
        if item.strip():
            key, _, value = item.partition("=")
            quotas[key.strip()] = float(value)
    return quotas, scram


def _entity(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    kinds = [ENTITY_TYPES[t] for t in args.entity_type]
    names: list[str | None] = list(args.entity_name or [])
    names += [None] * (len(kinds) - len(names))  # --entity-default for the rest
    return list(zip(kinds, names, strict=True))


def describe(client: Client, entity: list[tuple[str, str | None]]) -> list[str]:
    components = [{"entity_type": k, "match_type": 1 if n is None else 0, "match": n} for k, n in entity]
    resp = client.call(
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        1,
        components=tuple(
            codec.make(codec.nested(codec.request_class(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1), "ComponentData"), **c)
            for c in components
        ),
        strict=True,
    )
    if resp.error_code:
        raise KafkaError(f"{resp.error_code.name}: {resp.error_message}")
    lines = []
    for entry in resp.entries or ():
        who = ", ".join(
            f"{e.entity_type}={e.entity_name if e.entity_name is not None else '<default>'}" for e in entry.entity
        )
        values = ",".join(f"{v.key}={_number(v.value)}" for v in entry.values)
        lines.append(f"Quota configs for {who} are {values}")
    users = [n for k, n in entity if k == "user" and n is not None]
    if users and len(entity) == 1:
        resp = client.call(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
            0,
            users=tuple(
                codec.make(
                    codec.nested(codec.request_class(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0), "UserName"), name=u
                )
                for u in users
            ),
        )
        for result in resp.results:
            if result.error_code == 0:
                creds = ",".join(
                    f"{BY_TYPE[c.mechanism].name}=iterations={c.iterations}"
                    for c in result.credential_infos
                    if c.mechanism in BY_TYPE
                )
                lines.append(f"SCRAM credential configs for user-principal '{result.user}' are {creds}")
    return lines


def _number(value: float) -> str:
    return f"{value:.0f}" if value.is_integer() else repr(value)


def alter(client: Client, entity: list[tuple[str, str | None]], add: str, delete: str) -> list[str]:
    quotas, scram = parse_configs(add or "")
    removed = [k.strip() for k in (delete or "").split(",") if k.strip()]
    out = []
    quota_ops = [(k, v, False) for k, v in quotas.items()] + [(k, 0.0, True) for k in removed if k not in BY_NAME]
    if quota_ops:
        cls = codec.request_class(ApiKey.ALTER_CLIENT_QUOTAS, 1)
        entry = codec.nested(cls, "EntryData")(
            entity=tuple(codec.nested(cls, "EntityData")(entity_type=k, entity_name=n) for k, n in entity),
            ops=tuple(codec.nested(cls, "OpData")(key=k, value=v, remove=r) for k, v, r in quota_ops),
        )
        resp = client.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, entries=(entry,), validate_only=False)
        for result in resp.entries:
            if result.error_code:
                raise KafkaError(f"{result.error_code.name}: {result.error_message}")
        out.append(
            "Completed updating config for "
            + ", ".join(f"{k} {n if n is not None else '<default>'}" for k, n in entity)
            + "."
        )
    user = next((n for k, n in entity if k == "user"), None)
    scram_removed = [k for k in removed if k in BY_NAME]
    if scram or scram_removed:
        if user is None or len(entity) != 1:
            raise KafkaError("SCRAM credentials belong to one named user (--entity-type users --entity-name NAME)")
        cls = codec.request_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0)
        # one request per mechanism: a KRaft controller refuses a user named twice in one request
        for name, fields in scram.items():
            mechanism = BY_NAME[name]
            iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
            salt = fields["salt"].encode() if "salt" in fields else os.urandom(32)
            upsertion = codec.nested(cls, "ScramCredentialUpsertion")(
                name=user,
                mechanism=mechanism.type,
                iterations=iterations,
                salt=salt,
                salted_password=salted_password(mechanism, fields["password"], salt, iterations),
            )
            _scram_result(client.call(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, deletions=(), upsertions=(upsertion,)))
        for gone in scram_removed:
            deletion = codec.nested(cls, "ScramCredentialDeletion")(name=user, mechanism=BY_NAME[gone].type)
            _scram_result(client.call(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, deletions=(deletion,), upsertions=()))
        out.append(f"Completed updating config for user {user}.")
    return out


def _scram_result(resp: Any) -> None:
    for result in resp.results:
        if result.error_code:
            raise KafkaError(f"{result.error_code.name}: {result.error_message}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="groupd-configs", description="Client quotas, SCRAM credentials and group configs, like kafka-configs.sh"
    )
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--entity-type", action="append", choices=sorted([*ENTITY_TYPES, "groups"]))
    p.add_argument("--entity-name", action="append")
    p.add_argument("--entity-default", action="store_true", help="the default entity of the last --entity-type")
    p.add_argument("--group", help="the same as --entity-type groups --entity-name GROUP")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true")
    action.add_argument("--alter", action="store_true")
    p.add_argument("--all", action="store_true", help="with --describe: every config, not only the entity's own")
    p.add_argument("--add-config", default="")
    p.add_argument("--delete-config", default="")
    args = p.parse_args(argv)
    if args.group is not None:
        args.entity_type, args.entity_name = (
            [*(args.entity_type or []), "groups"],
            [*(args.entity_name or []), args.group],
        )
    if not args.entity_type:
        p.error("give --entity-type (or --group)")
    groups = "groups" in args.entity_type
    if groups and (len(args.entity_type) != 1 or args.entity_default or len(args.entity_name or []) > 1):
        p.error("groups take one --entity-name, alone (no --entity-default)")
    if not groups and len(args.entity_name or []) + args.entity_default != len(args.entity_type):
        p.error("give one --entity-name (or --entity-default, last) per --entity-type")
    if args.alter and not (args.add_config or args.delete_config):
        p.error("--alter needs --add-config or --delete-config")
    if groups and args.alter and not args.entity_name:
        p.error("--alter of groups needs --entity-name")
    client = Client(args.bootstrap_server)
    try:
        if groups:
            name = args.entity_name[0] if args.entity_name else None
            lines = (
                group_configs.describe(client, name, args.all)
                if args.describe
                else group_configs.alter(client, args.entity_name[0], args.add_config, args.delete_config)
            )
            print("\n".join(lines))
            return 0
        entity = _entity(args)
        lines = (
            describe(client, entity) if args.describe else alter(client, entity, args.add_config, args.delete_config)
        )
        print("\n".join(lines))
        return 0
    except (KafkaError, KeyError, ValueError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())
