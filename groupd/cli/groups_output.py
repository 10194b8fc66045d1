"""The tables groupd-groups prints, laid out as Kafka's ConsumerGroupCommand lays them out: the same
columns in the same order, the same minimum widths (15 for names, 10 for PARTITION, ...), a blank line
before each table and ``-`` for a missing value, so scripts that cut Kafka's columns cut these."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MISSING = "-"


def _v(value: Any) -> str:
    return MISSING if value is None else str(value)


def _line(widths: list[int], values: list[Any]) -> str:
    """Java's ``%-Ns`` for each column but the last (width 0: as is), one space apart."""
    return " ".join(f"{_v(v):<{w}}" if w else _v(v) for v, w in zip(values, widths, strict=True))


def format_list(listings: list[dict[str, Any]], with_type: bool, with_state: bool) -> str:
    width = max([15] + [len(g["group_id"]) for g in listings]) + 10
    header, widths = ["GROUP"], [width]
    if with_type:
        header.append("TYPE")
        widths.append(20)
    if with_state:
        header.append("STATE")
        widths.append(20)
    lines = [_line(widths, header)]
    for g in listings:
        row = [g["group_id"]]
        if with_type:
            row.append((g.get("group_type") or "Unknown").capitalize())
        if with_state:
            row.append(g.get("group_state") or "Unknown")
        lines.append(_line(widths, row))
    return "".join(line + "\n" for line in lines)


def format_offsets(rows: list[dict[str, Any]], verbose: bool) -> str:
    group = rows[0]["group"] if rows and "group" in rows[0] else None
    gw = max([15] + [len(r.get("group", group or "")) for r in rows])
    tw = max([15] + [len(r["tp"].topic) for r in rows])
    cw = max([15] + [len(_v(r["consumer"])) for r in rows])
    hw = max([15] + [len(_v(r["host"])) for r in rows])
    if verbose:
        widths = [gw, tw, 10, 15, 15, 15, 15, cw, hw, 0]
        header = [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "LEADER-EPOCH",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ]
    else:
        widths = [gw, tw, 10, 15, 15, 15, cw, hw, 0]
        header = [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ]
    lines = [_line(widths, header)]
    for r in rows:
        values = [r["group"], r["tp"].topic, r["tp"].partition]
        if verbose:
            values.append(r["epoch"])
        values += [r["offset"], r["end"], r["lag"], r["consumer"], r["host"], r["client"]]
        lines.append(_line(widths, values))
    return "".join("\n" + line for line in lines) + "\n"


def assignment_text(partitions: list[tuple[str, int]]) -> str:
    """Kafka's ``getAssignmentString``: ``topic:0,1;other:2``, topics sorted, partitions ascending."""
    by_topic: dict[str, list[int]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(p)
    return ";".join(sorted(f"{t}:" + ",".join(str(p) for p in sorted(ps)) for t, ps in by_topic.items())) or MISSING


def format_members(
    group: str,
    members: list[dict[str, Any]],
    verbose: bool,
    assigned: Callable[[dict[str, Any]], list[tuple[str, int]]],
    target_epoch: int | None = None,
) -> str:
    """``--describe --members``; with ``--verbose`` Kafka 4's epochs and assignments: a consumer-protocol
    member's epoch and current assignment, the group's target assignment epoch and the member's target
    (``-`` for a classic group), and UPGRADED when classic members sit in a consumer group (KIP-848's
    migration: ``true`` for the members speaking the consumer protocol)."""
    with_instance = any(m.get("group_instance_id") for m in members)
    with_upgraded = verbose and any(m.get("member_type") == 0 for m in members)
    gw = max([15, len(group)])
    cw = max([15] + [len(m.get("member_id") or "") for m in members])
    iw = max([17] + [len(m.get("group_instance_id") or "") for m in members])
    hw = max([15] + [len(m.get("client_host") or "") for m in members])
    lw = max([15] + [len(m.get("client_id") or "") for m in members])
    aw = max([20] + [len(assignment_text(assigned(m))) for m in members])
    tw = max([20] + [len(assignment_text(_target(m))) for m in members])
    widths = [gw, cw] + ([iw] if with_instance else []) + [hw, lw, 15]
    header = (
        ["GROUP", "CONSUMER-ID"]
        + (["GROUP-INSTANCE-ID"] if with_instance else [])
        + ["HOST", "CLIENT-ID", "#PARTITIONS"]
    )
    extra_widths = [15, aw, 15, tw] + ([0] if with_upgraded else [])

    def row(values: list[Any], extra: list[Any]) -> str:
        text = _line(widths, values) + " "
        if verbose:
            text += (
                _line(extra_widths, extra)
                if with_upgraded
                else _line([*extra_widths[:-1], 0], extra[:-1] + [f"{_v(extra[-1]):<{tw}}"])
            )
        return text

    lines = [
        row(
            header,
            ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT", "UPGRADED"][
                : len(extra_widths)
            ],
        )
    ]
    for m in members:
        parts = assigned(m)
        values = (
            [group, m.get("member_id")]
            + ([m.get("group_instance_id") or ""] if with_instance else [])
            + [m.get("client_host"), m.get("client_id"), len(parts)]
        )
        consumer = "member_epoch" in m
        extra = [
            m.get("member_epoch"),
            assignment_text(parts),
            target_epoch if consumer else None,
            assignment_text(_target(m)) if consumer else None,
        ]
        if with_upgraded:
            extra.append("false" if m.get("member_type") == 0 else "true")
        lines.append(row(values, extra))
    return "\n" + "\n".join(lines) + "\n"


def _target(member: dict[str, Any]) -> list[tuple[str, int]]:
    target = member.get("target_assignment") or {}
    return [(e["topic"], p) for e in target.get("assigned_partitions") or [] for p in e["partitions"]]


def format_state(group: str, desc: dict[str, Any], coordinator: str, verbose: bool) -> str:
    cw = max(25, len(coordinator))
    gw = max(15, len(group))
    strategy = desc.get("protocol_data") or MISSING
    members = len(desc.get("members") or [])
    if verbose:
        widths = [gw, cw, 20, 20, 15, 25, 0]
        header = [
            "GROUP",
            "COORDINATOR (ID)",
            "ASSIGNMENT-STRATEGY",
            "STATE",
            "GROUP-EPOCH",
            "TARGET-ASSIGNMENT-EPOCH",
            "#MEMBERS",
        ]
        row = [
            group,
            coordinator,
            strategy,
            desc.get("group_state"),
            desc.get("group_epoch"),
            desc.get("assignment_epoch"),
            members,
        ]
    else:
        widths = [gw, cw, 20, 20, 0]
        header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        row = [group, coordinator, strategy, desc.get("group_state"), members]
    return "\n" + _line(widths, header) + "\n" + _line(widths, row) + "\n"


def format_reset(plans: dict[str, dict[Any, int]]) -> str:
    """Kafka's ``printOffsetsToReset``: GROUP TOPIC PARTITION NEW-OFFSET (no header when no group)."""
    gw = max([15] + [len(g) for g in plans])
    tw = max([15] + [len(tp.topic) for offsets in plans.values() for tp in offsets])
    widths = [gw, tw, 10, 0]
    lines = [_line(widths, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"])] if plans else []
    for group, offsets in plans.items():
        lines += [_line(widths, [group, tp.topic, tp.partition, off]) for tp, off in sorted(offsets.items())]
    return "".join("\n" + line for line in lines) + "\n"


def format_status(group: str, rows: list[dict[str, Any]]) -> str:
    """groupd's ``--describe --status``: the broker's evaluation of each partition (Burrow's statuses)."""
    tw = max([15] + [len(r["topic"]) for r in rows])
    widths = [max(15, len(group)), tw, 10, 10, 0]
    lines = [_line(widths, ["GROUP", "TOPIC", "PARTITION", "STATUS", "LAG"])]
    lines += [_line(widths, [group, r["topic"], r["partition"], r["status"], r.get("lag")]) for r in rows]
    return "".join("\n" + line for line in lines) + "\n"
