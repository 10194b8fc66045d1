"""``groupd-groups --share``: what Kafka's kafka-share-groups.sh shows (ShareGroupCommand, 4.3), with its
output columns: ``--list`` (with ``--state``: GROUP STATE), ``--describe`` (the default ``--offsets``:
GROUP TOPIC PARTITION START-OFFSET LAG, ``--verbose`` adds LEADER-EPOCH; ``--members``; ``--state``).

kafka-python's admin client knows no share-group API, so this speaks ListGroups v5, ShareGroupDescribe and
DescribeShareGroupOffsets itself over one plain connection to the group's coordinator (FindCoordinator v3),
with the broker's own codec (groupd/protocol/). Plain listeners only: ``--command-config`` (TLS, SASL) is not
supported with ``--share``.
"""

from __future__ import annotations

import argparse
import builtins
import socket
import struct
from collections.abc import Callable
from typing import Any

from kio.schema.share_group_describe.v1.response import DescribedGroup, Member

from groupd.protocol import codec
from groupd.protocol.api_table import ApiKey
from groupd.protocol.request import encode_request

MISSING = "-"
# one share partition of a group: (topic, partition, leader epoch, start offset, lag)
OffsetRow = tuple[str, int, int, int, int]
SHARE_STATES = ("Stable", "Empty", "Dead")


class ShareAdminError(Exception):
    """A failed share-group operation, printed as ``Error: ...``."""


class Connection:
    """One blocking Kafka connection: a request at a time, its response decoded with kio."""

    def __init__(self, host: str, port: int, timeout_ms: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_ms / 1000)
        self._cid = 0

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self._cid += 1
        self.sock.sendall(encode_request(api_key, version, body, self._cid, "groupd-groups"))
        (size,) = struct.unpack(">i", self._exactly(4))
        data = self._exactly(size)
        _header, used = codec.decode(codec.response_header_class(api_key, version), data, 0)
        body_out, _ = codec.decode(codec.response_class(api_key, version), data, used)
        return body_out

    def _exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()


def _host_port(server: str) -> tuple[str, int]:
    host, _, port = server.strip().rpartition(":")
    return host or "localhost", int(port)


class ShareAdmin:
    def __init__(self, bootstrap: str, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self.bootstrap = Connection(*_host_port(bootstrap.split(",")[0]), timeout_ms)
        self._coordinators: dict[str, tuple[Connection, str]] = {}

    def close(self) -> None:
        self.bootstrap.close()
        for conn, _ in self._coordinators.values():
            if conn is not self.bootstrap:
                conn.close()

    def coordinator(self, group: str) -> tuple[Connection, str]:
        """The group's coordinator connection and its ``host:port  (id)`` text."""
        if group not in self._coordinators:
            r = self.bootstrap.call(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
            if r.error_code:
                raise ShareAdminError(
                    f"The coordinator of share group '{group}' is not available (error {int(r.error_code)})."
                )
            conn = Connection(r.host, r.port, self.timeout_ms)
            self._coordinators[group] = (conn, f"{r.host}:{r.port}  ({r.node_id})")
        return self._coordinators[group]

    def list(self, states: list[str]) -> list[tuple[str, str]]:
        r = self.bootstrap.call(ApiKey.LIST_GROUPS, 5, {"states_filter": tuple(states), "types_filter": ("share",)})
        return sorted((g.group_id, g.group_state) for g in r.groups)

    def describe(self, group: str) -> DescribedGroup:
        conn, _ = self.coordinator(group)
        (g,) = conn.call(
            ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": (group,), "include_authorized_operations": False}
        ).groups
        return g

    def offsets(self, group: str) -> builtins.list[OffsetRow]:  # (``list`` in this class is the method above)
        """Every initialized partition's row."""
        conn, _ = self.coordinator(group)
        cls = codec.request_class(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1)
        entry = codec.make(codec.nested(cls, "DescribeShareGroupOffsetsRequestGroup"), group_id=group, topics=None)
        r = conn.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": (entry,)})
        (g,) = r.groups
        if g.error_code:
            raise ShareAdminError(
                g.error_message
                or f"Describing the offsets of share group '{group}' failed (error {int(g.error_code)})."
            )
        return sorted(
            (t.topic_name, p.partition_index, p.leader_epoch, p.start_offset, p.lag)
            for t in g.topics
            for p in t.partitions
        )


def _shown(v: int) -> str:
    return MISSING if v < 0 else str(v)


def format_list(rows: list[tuple[str, str]]) -> str:
    width = max([15] + [len(g) for g, _ in rows])
    return f"{'GROUP':<{width}} STATE\n" + "".join(f"{g:<{width}} {s}\n" for g, s in rows)


def format_offsets(group: str, rows: list[OffsetRow], verbose: bool) -> str:
    if not rows:
        return f"\nShare group '{group}' has no offset information.\n"
    gw, tw = max(15, len(group)), max([15] + [len(r[0]) for r in rows])
    if verbose:
        head = f"\n{'GROUP':<{gw}} {'TOPIC':<{tw}} {'PARTITION':<10} {'LEADER-EPOCH':<13} {'START-OFFSET':<13} LAG"
        lines = [
            f"\n{group:<{gw}} {t:<{tw}} {p:<10} {_shown(e):<13} {_shown(o):<13} {_shown(lag)}"
            for t, p, e, o, lag in rows
        ]
    else:
        head = f"\n{'GROUP':<{gw}} {'TOPIC':<{tw}} {'PARTITION':<10} {'START-OFFSET':<13} LAG"
        lines = [f"\n{group:<{gw}} {t:<{tw}} {p:<10} {_shown(o):<13} {_shown(lag)}" for t, p, _e, o, lag in rows]
    return head + "".join(lines) + "\n"


def format_state(group: str, g: DescribedGroup, coordinator: str, verbose: bool) -> str:
    gw, cw = max(15, len(group)), max(25, len(coordinator))
    if verbose:
        fmt = f"\n{{:<{gw}}} {{:<{cw}}} {{:<15}} {{:<12}} {{:<17}} {{}}"
        return (
            fmt.format("GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS")
            + fmt.format(group, coordinator, g.group_state, g.group_epoch, g.assignment_epoch, len(g.members))
            + "\n"
        )
    fmt = f"\n{{:<{gw}}} {{:<{cw}}} {{:<15}} {{}}"
    return (
        fmt.format("GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS")
        + fmt.format(group, coordinator, g.group_state, len(g.members))
        + "\n"
    )


def _assignment(member: Member) -> tuple[int, str]:
    tps = member.assignment.topic_partitions
    count = sum(len(tp.partitions) for tp in tps)
    text = ";".join(
        sorted(f"{tp.topic_name}:" + ",".join(str(p) for p in sorted(tp.partitions)) for tp in tps if tp.partitions)
    )
    return count, text


def format_members(group: str, g: DescribedGroup, verbose: bool) -> str:
    members = sorted(g.members, key=lambda m: m.member_id)
    gw = max(15, len(group))
    iw = max([15] + [len(m.member_id) for m in members])
    hw = max([15] + [len(m.client_host) for m in members])
    cw = max([15] + [len(m.client_id) for m in members])
    if verbose:
        fmt = f"\n{{:<{gw}}} {{:<{iw}}} {{:<{hw}}} {{:<{cw}}} {{:<12}} {{:<13}} {{}}"
        out = fmt.format("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH", "ASSIGNMENT")
        for m in members:
            n, text = _assignment(m)
            out += fmt.format(group, m.member_id, m.client_host, m.client_id, n, m.member_epoch, text)
    else:
        fmt = f"\n{{:<{gw}}} {{:<{iw}}} {{:<{hw}}} {{:<{cw}}} {{:<12}} {{}}"
        out = fmt.format("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")
        for m in members:
            n, text = _assignment(m)
            out += fmt.format(group, m.member_id, m.client_host, m.client_id, n, text)
    return out + "\n"


def states_filter(value: str | None) -> list[str]:
    if not value:
        return []
    by_upper = {s.upper(): s for s in SHARE_STATES}
    parsed = [s.strip() for s in value.split(",")]
    bad = [s for s in parsed if s.upper() not in by_upper]
    if bad:
        raise ShareAdminError(f"Invalid state list '{value}'. Valid states are: {', '.join(SHARE_STATES)}")
    return [by_upper[s.upper()] for s in parsed]


def run(a: argparse.Namespace, out: Callable[[str], None], err: Callable[[str], None]) -> int:
    """The share view of ``--list`` and ``--describe``; exit code as ShareGroupCommand's."""
    admin = ShareAdmin(a.bootstrap_server, a.timeout)
    try:
        if a.list:
            rows = admin.list(states_filter(a.state))
            out(format_list(rows) if a.state is not None else "".join(g + "\n" for g, _ in rows))
            return 0
        groups = [g for g, _ in admin.list([])] if a.all_groups else a.group
        code = 0
        for group in sorted(groups):
            g = admin.describe(group)
            if g.error_code:
                out(f"\nError: Share group '{group}' does not exist.\n")
                code = 1
                continue
            if g.group_state == "Empty":
                err(f"\nShare group '{group}' has no active members.\n")
            if a.members:
                if g.members:
                    out(format_members(group, g, a.verbose))
            elif a.state is not None:
                out(format_state(group, g, admin.coordinator(group)[1], a.verbose))
            else:
                out(format_offsets(group, admin.offsets(group), a.verbose))
        return code
    finally:
        admin.close()
