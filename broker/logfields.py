"""Structured fields for group events, so logfmt/json logs carry group id, member id and generation.

The formatters in ``server.py`` (``log.format`` = logfmt or json) print ``record.fields`` as keys; the
text format appends them as ``key=value`` too. Usage from the coordinator shell::

    group_event(log, "member joined", group="g1", member="m-1", generation=4, protocol="range")

Fields whose value is None are left out, so callers pass what they know.
"""

from __future__ import annotations

import logging

from coordinator.logfields import group_event, group_fields

__all__ = ["TextFieldsFormatter", "group_event", "group_fields"]


class TextFieldsFormatter(logging.Formatter):
    """The plain text format with ``key=value`` fields appended (``log.format=text``)."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = getattr(record, "fields", None)
        if fields:
            text += " " + " ".join(f"{k}={v}" for k, v in fields.items())
        return text
