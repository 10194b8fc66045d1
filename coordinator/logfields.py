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
