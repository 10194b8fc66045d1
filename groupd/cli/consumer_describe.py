"""ConsumerGroupDescribe (API 69) for groupd-groups: the consumer-protocol (KIP-848) groups' description.

kafka-python, the tool's admin client, has no ConsumerGroupDescribe; Kafka's own admin client asks it first
and falls back to DescribeGroups for the groups it does not know (a classic group is GROUP_ID_NOT_FOUND
to it, a consumer group is Dead to DescribeGroups). So does groupd-groups: one request over a blocking
socket to the group's coordinator, kio's codec both ways. The answer is turned into the dict shape
kafka-python gives for DescribeGroups (``group_state``, ``members`` with ``member_assignment``), plus the
epochs and target assignments Kafka 4's tool prints.

A listener that needs SASL is not spoken to here (``None``: the caller keeps DescribeGroups' answer).
"""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any

from kio.schema.consumer_group_describe.v1.response import Assignment, DescribedGroup

from groupd.protocol import codec
from groupd.protocol.api_table import ApiKey
from groupd.protocol.request import encode_request

NOT_FOUND = 69  # GROUP_ID_NOT_FOUND: not a consumer-protocol group (or no group at all)
VERSION = 1  # v1 adds each member's MemberType (classic or consumer); the entities imported above are v1's
_SIZE = struct.Struct(">i")


def tls_context(settings: dict[str, Any]) -> ssl.SSLContext | None:
    """The TLS settings of client_settings (PEM files), or None for a plaintext listener."""
    if not str(settings.get("security_protocol", "PLAINTEXT")).upper().endswith("SSL"):
        return None
    ctx = ssl.create_default_context(cafile=settings.get("ssl_cafile"))
    if settings.get("ssl_certfile"):
        ctx.load_cert_chain(settings["ssl_certfile"], settings.get("ssl_keyfile"))
    if settings.get("ssl_check_hostname") is False:
        ctx.check_hostname = False
    return ctx


def speaks_plainly(settings: dict[str, Any]) -> bool:
    """Whether this module can reach the listener: plaintext or TLS, not SASL."""
    return "SASL" not in str(settings.get("security_protocol", "PLAINTEXT")).upper()


def _exchange(host: str, port: int, frame: bytes, ctx: ssl.SSLContext | None, timeout_s: float) -> bytes:
    with socket.create_connection((host, port), timeout=timeout_s) as raw:
        sock = ctx.wrap_socket(raw, server_hostname=host) if ctx is not None else raw
        sock.sendall(frame)
        size = _SIZE.unpack(_read(sock, 4))[0]
        return _read(sock, size)


def _read(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        out += chunk
    return bytes(out)


def describe(
    host: str, port: int, group_ids: list[str], ctx: ssl.SSLContext | None, timeout_s: float
) -> dict[str, dict[str, Any]]:
    """The consumer-protocol groups among ``group_ids`` (those answered GROUP_ID_NOT_FOUND are left out),
    as groupd-groups' description dicts. Raises OSError/ConnectionError when the broker cannot answer."""
    body = {"group_ids": tuple(group_ids), "include_authorized_operations": False}
    frame = encode_request(ApiKey.CONSUMER_GROUP_DESCRIBE, VERSION, body, 1, "groupd-groups")
    reply = _exchange(host, port, frame, ctx, timeout_s)
    _, used = codec.decode(codec.response_header_class(ApiKey.CONSUMER_GROUP_DESCRIBE, VERSION), reply)
    response, _ = codec.decode(codec.response_class(ApiKey.CONSUMER_GROUP_DESCRIBE, VERSION), reply, used)
    out = {}
    for g in response.groups:
        if int(g.error_code) == NOT_FOUND:
            continue
        out[g.group_id] = as_description(g)
    return out


def _partitions(assignment: Assignment) -> list[dict[str, Any]]:
    return [{"topic": tp.topic_name, "partitions": list(tp.partitions)} for tp in assignment.topic_partitions]


def as_description(g: DescribedGroup) -> dict[str, Any]:
    """One DescribedGroup in the shape groupd-groups prints (kafka-python's DescribeGroups dicts)."""
    error = int(g.error_code)
    return {
        "group_id": g.group_id,
        "group_state": g.group_state if error == 0 else "Dead",
        "error_code": error,
        "protocol_type": "consumer",
        "protocol_data": g.assignor_name,
        "group_type": "consumer",
        "group_epoch": g.group_epoch,
        "assignment_epoch": g.assignment_epoch,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_epoch": m.member_epoch,
                "member_type": int(getattr(m, "member_type", -1)),
                "member_assignment": {"assigned_partitions": _partitions(m.assignment)},
                "target_assignment": {"assigned_partitions": _partitions(m.target_assignment)},
            }
            for m in g.members
        ],
    }
