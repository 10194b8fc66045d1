"""Structured fields for group events, so logfmt/json logs carry group id, member id and generation.

The coordinator shell logs group events with these; the formatters (``broker/ops/logoutput.py``)
print ``record.fields`` as keys. Fields whose value is None are left out, so callers pass what they know.
"""

from __future__ import annotations

import logging
from typing import Any


def group_fields(group: str, member: str | None = None, generation: int | None = None, **more: Any) -> dict[str, Any]:
    """The ``extra`` dict for a group event: ``{"fields": {"group": ..., "member": ..., ...}}``."""
    fields: dict[str, Any] = {"group": group}
    if member is not None:
        fields["member"] = member
    if generation is not None:
        fields["generation"] = generation
    for key, value in more.items():
        if value is not None:
            fields[key] = value
    return {"fields": fields}


def group_event(
    logger: logging.Logger,
    msg: str,
    group: str,
    member: str | None = None,
    generation: int | None = None,
    level: int = logging.INFO,
    **more: Any,
) -> None:
    """Log one group event with its fields (cheap when the level is off)."""
    if logger.isEnabledFor(level):
        logger.log(level, msg, extra=group_fields(group, member, generation, **more))


def error_name(code: int | None) -> str | None:
    """A Kafka error code by its name (``INVALID_SESSION_TIMEOUT``), None for none: log lines name errors."""
    if not code:
        return None
    from groupd.protocol.errors import ErrorCode

    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)


def log_member_event(logger: logging.Logger, event: str, group: str, member: str | None, generation: int | None,
                     error: int | None, instance: str | None) -> None:
    """A join, sync or leave. The first JoinGroup's MEMBER_ID_REQUIRED is the protocol's first step (the
    member is given its id and joins again), so it is said as such, not as an error; any other error is
    named (``error=INVALID_SESSION_TIMEOUT``) and the line says the request was refused."""
    from groupd.coordinator.errors import MEMBER_ID_REQUIRED

    if error == MEMBER_ID_REQUIRED:
        group_event(logger, f"new member {member} is given its id and joins again", group, member, instance=instance)
        return
    if error:
        verb = {"member joined": "join", "member synced": "sync", "members left": "leave"}.get(event, event)
        group_event(logger, f"{verb} refused", group, member, generation, error=error_name(error), instance=instance)
        return
    group_event(logger, event, group, member, generation, instance=instance)


def log_transition(logger: logging.Logger, group_id: str, before: str | None, after: str, group: Any) -> None:
    """A group's state change. Entering PreparingRebalance says why (the member and what it did) with the
    generation it starts from; reaching Stable says the generation before and after and the member count."""
    generation = group.generation if group is not None else -1
    fields: dict[str, Any] = {"group": group_id, "generation": generation, "state": after}
    text = f"group {group_id}: {before or 'new'} -> {after}"
    if group is not None and after == "PreparingRebalance":
        text += f": {group.rebalance_reason}"
        fields.update(cause=group.rebalance_cause, generation_before=group.rebalance_generation)
    elif group is not None and after == "Stable" and before == "CompletingRebalance":
        text += f" at generation {generation} (from {group.rebalance_generation}) with {len(group.members)} members"
        fields.update(generation_before=group.rebalance_generation, members=len(group.members))
    elif group is not None and after == "CompletingRebalance":
        text += (
            f": generation {generation} formed with {len(group.members)} members, waiting for the leader's assignment"
        )
    logger.info(text, extra={"fields": fields})
