"""The pure half of ``groupd-groups --reset-offsets``: what Kafka's tool reads from its arguments and files
and how it bounds the offsets it plans, with no client in sight (so each rule is tested on its own).

Kafka's rules, from its ``GroupOffsetsResetter`` and ``ConsumerGroupCommand``:

- ``--topic t`` means every partition of t, ``--topic t:0,2`` the partitions named;
- ``--to-datetime`` takes ``YYYY-MM-DDTHH:mm:SS[.sss]`` with an optional ``Z`` or ``+hh:mm`` zone, UTC when
  none is given; ``--by-duration`` an ISO-8601 duration ``PnDTnHnMnS`` counted back from now;
- a planned offset past the log end is set to the end, one below the log start to the start, each with a
  warning (``--to-offset``, ``--shift-by`` and ``--from-file`` are bounded this way);
- ``--export`` writes CSV lines without a header: ``topic,partition,offset`` for one group,
  ``group,topic,partition,offset`` for several; ``--from-file`` reads either form.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Iterable, Mapping

from kafka import TopicPartition

Plan = dict[str, dict[TopicPartition, int]]


class UsageError(ValueError):
    """A bad argument: the tool prints it with its usage and exits non-zero, as Kafka's does."""


def split_topic_args(topic_args: Iterable[str]) -> tuple[list[str], list[TopicPartition]]:
    """``--topic`` values: whole topics, and the partitions named as ``topic:0,1,2``."""
    whole: list[str] = []
    named: list[TopicPartition] = []
    for arg in topic_args:
        if ":" not in arg:
            whole.append(arg)
            continue
        parts = arg.split(":")
        if len(parts) != 2:
            raise UsageError(f"Invalid topic arg '{arg}', expected topic name and partitions")
        topic, partitions = parts
        for p in partitions.split(","):
            try:
                named.append(TopicPartition(topic, int(p)))
            except ValueError:
                raise UsageError(f"Invalid partition '{p}' specified in topic arg '{arg}''") from None
    return whole, named


_DATETIME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?(Z|[+-]\d{2}(?::?\d{2})?)?$")


def parse_datetime(text: str) -> int:
    """``--to-datetime`` as epoch milliseconds; a time without a zone is UTC (Kafka appends ``Z``)."""
    if "T" not in text:
        raise UsageError("Error parsing timestamp. It does not contain a 'T' according to ISO8601 format")
    m = _DATETIME.match(text.strip())
    if not m:
        raise UsageError(f"Error parsing timestamp '{text}': expected YYYY-MM-DDTHH:mm:SS.sss")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    millis = int((m.group(7) or "0").ljust(3, "0"))
    zone = m.group(8) or "Z"
    if zone == "Z":
        tz = _dt.UTC
    else:
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        tz = _dt.timezone(sign * _dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0)))
    when = _dt.datetime(year, month, day, hour, minute, second, millis * 1000, tzinfo=tz)
    return int(when.timestamp() * 1000)


_DURATION = re.compile(
    r"^([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?$", re.I
)


def parse_duration_ms(text: str) -> int:
    """``--by-duration``: an ISO-8601 duration (java.time.Duration's ``PnDTnHnMn.nS``) in milliseconds."""
    m = _DURATION.match(text.strip())
    if not m or text.strip().upper().endswith(("P", "T")):
        raise UsageError(f"Text cannot be parsed to a Duration: {text}")
    sign, days, hours, minutes, seconds, fraction = m.groups()
    ms = (int(days or 0) * 86_400 + int(hours or 0) * 3600 + int(minutes or 0) * 60 + int(seconds or 0)) * 1000
    if fraction:
        ms += (-1 if (seconds or "").startswith("-") else 1) * int(fraction.ljust(3, "0")[:3])
    return -ms if sign == "-" else ms


def clamp(
    requested: Mapping[TopicPartition, int],
    starts: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
    warn: Callable[[str], None],
) -> dict[TopicPartition, int]:
    """Kafka's ``checkOffsetsRange``: past the end becomes the end, before the start becomes the start."""
    out: dict[TopicPartition, int] = {}
    for tp, offset in requested.items():
        label = f"{tp.topic}-{tp.partition}"
        if tp in ends and offset > ends[tp]:
            warn(
                f"New offset ({offset}) is higher than latest offset for topic partition {label}. Value will be set to "
                f"{ends[tp]}."
            )
            out[tp] = ends[tp]
        elif tp in starts and offset < starts[tp]:
            warn(
                f"New offset ({offset}) is lower than earliest offset for topic partition {label}. Value will be set "
                f"to {starts[tp]}."
            )
            out[tp] = starts[tp]
        else:
            out[tp] = offset
    return out


def export_csv(plan: Plan, with_group: bool) -> str:
    """``--export``: one line a partition, no header (Kafka's CsvRecordNoGroup / CsvRecordWithGroup)."""
    lines = []
    for group, offsets in plan.items():
        for tp, offset in offsets.items():
            fields = [group] if with_group else []
            lines.append(",".join([*fields, tp.topic, str(tp.partition), str(offset)]))
    return "".join(line + "\n" for line in lines)


def parse_csv(text: str, groups: list[str]) -> Plan:
    """``--from-file``: ``topic,partition,offset`` lines belong to the one ``--group``; otherwise each line
    is ``group,topic,partition,offset``."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    plan: Plan = {}
    three = bool(lines) and len(lines[0].split(",")) == 3
    if three and len(groups) != 1:
        raise UsageError("a topic,partition,offset file needs exactly one --group")
    for line in lines:
        fields = [f.strip().strip('"') for f in line.split(",")]
        try:
            if three:
                group, (topic, partition, offset) = groups[0], fields
            else:
                group, topic, partition, offset = fields
            plan.setdefault(group, {})[TopicPartition(topic, int(partition))] = int(offset)
        except ValueError:
            raise UsageError(f"Cannot parse reset plan line '{line}'") from None
    return plan
