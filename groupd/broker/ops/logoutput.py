"""How log lines leave the broker: ``log.format`` (text, logfmt, json) and one write per loop turn.

At INFO (``make run``'s default) a rebalancing group is a dozen lines: its state changes and every
member's join, sync and leave, with their fields (``groupd/coordinator/logfields.py``). Python's logging
machinery costs more per line than the request that logged it, so the parts that buy nothing here are
taken out:

- the caller's file, line, thread and process are not looked up (no format prints them; the logging
  HOWTO's own optimisation switches);
- the timestamp's text is made once per second, not once per line;
- lines logged on the event loop are written together when the loop turn ends (one write, not a write
  and a flush per line). Lines from other threads, from outside the loop, or at WARNING and above are
  written at once, after any that wait; a clean exit flushes what is left.

Log lines carry text clients chose (user names, client ids, group and member ids, a SASL token quoted
in an error), so the formatters, not the call sites, make it safe: one record is one line whatever it
holds. Every interpolated value and every field is cut at ``VALUE_MAX_CHARS`` and the whole message at
``MESSAGE_MAX_CHARS`` (the cut says how much it dropped); control characters, Unicode line separators
and bidirectional overrides are escaped (``\n``, ``\x1b``, ``\u2028``) in the text format, and quoted
by JSON in the logfmt and json formats, whose tracebacks go in a field on the record's line. A text
traceback stays multi-line, as Python prints it, but its exception messages are escaped and cut too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
import traceback
from collections.abc import Mapping
from typing import IO, Any

from groupd.broker.config import Config

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
VALUE_MAX_CHARS = 1024  # one interpolated value or field
MESSAGE_MAX_CHARS = 8192  # one message, after interpolation
TRACEBACK_MAX_CHARS = 65536  # one traceback in a structured line, its head and its tail kept

# C0 and C1 controls, DEL, Unicode's line and paragraph separators, bidirectional overrides and
# isolates: whatever could end a line, move the cursor or reorder what a reader sees.
_UNSAFE = [*range(0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_ESCAPES = {c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" for c in _UNSAFE} | {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}


def cut(text: str, limit: int = VALUE_MAX_CHARS) -> str:
    """``text`` at most ``limit`` characters, saying how many it dropped."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...[{len(text) - limit} more chars]"


def escape(text: str) -> str:
    """``text`` on one line: control and invisible-ordering characters written as escapes."""
    return text if text.isprintable() else text.translate(_ESCAPES)


class _Cut:
    """An argument that is neither a number nor a string, cut when %-formatting turns it into text."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __str__(self) -> str:
        return cut(str(self.value))

    def __repr__(self) -> str:
        return cut(repr(self.value))


def _cut_arg(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= VALUE_MAX_CHARS else cut(value)
    if value is None or isinstance(value, (int, float)):
        return value  # %d and %.3f need the number itself
    return _Cut(value)


def safe_message(record: logging.LogRecord) -> str:
    """``record.getMessage()`` with each argument cut before interpolation and the result cut; not
    escaped (the text format escapes it, JSON quotes it)."""
    args = record.args
    try:
        if type(args) is tuple and args:  # the common arguments (short strings, ints) pass without a call
            msg = str(record.msg) % tuple(
                [a if type(a) is int or (type(a) is str and len(a) <= VALUE_MAX_CHARS) else _cut_arg(a) for a in args]
            )
        elif not args:
            msg = str(record.msg)
        elif isinstance(args, Mapping):
            msg = str(record.msg) % {k: _cut_arg(v) for k, v in args.items()}
        else:
            msg = str(record.msg) % tuple(_cut_arg(a) for a in args)
    except TypeError:  # an argument %-formatting needs as it is (%d of a Decimal): the whole message is cut
        msg = record.getMessage()
    return msg if len(msg) <= MESSAGE_MAX_CHARS else cut(msg, MESSAGE_MAX_CHARS)


def _text_field(value: Any) -> str:
    """A field's value in the text format: cut and escaped."""
    text = value if type(value) is str else str(value)
    return text if len(text) <= VALUE_MAX_CHARS and text.isprintable() else escape(cut(text))


def safe_field(value: Any) -> Any:
    """A field's value for a structured line: numbers as they are, anything else as cut text."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return cut(value if isinstance(value, str) else str(value))


def escaped_traceback(exc_info: Any) -> str:
    """Python's traceback text, with each exception's message (text a client may have chosen) cut and
    escaped, so it reads as one line of the traceback."""
    te = traceback.TracebackException(*exc_info)
    seen: set[int] = set()
    todo = [te]
    while todo:
        one = todo.pop()
        if id(one) in seen:
            continue
        seen.add(id(one))
        said = getattr(one, "_str", None)  # CPython's text of the exception (3.10 to 3.13)
        if isinstance(said, str):
            one._str = escape(cut(said))  # type: ignore[attr-defined]  # private: typeshed does not name it
        todo.extend(
            t for t in (one.__cause__, one.__context__, *(getattr(one, "exceptions", None) or ())) if t is not None
        )
    text = "".join(te.format()).rstrip("\n")
    if len(text) > TRACEBACK_MAX_CHARS:
        half = TRACEBACK_MAX_CHARS // 2
        text = f"{text[:half]}\n...[{len(text) - 2 * half} chars]...\n{text[-half:]}"
    return text


class _Formatter(logging.Formatter):
    """``formatTime`` with the text of the current second kept (lines come many per second)."""

    _second = -1
    _stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 (logging's name)
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        if second != self._second:
            self._stamp = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = second
        msec_format = self.default_msec_format  # logging.Formatter.formatTime's test: None keeps the second
        return msec_format % (self._stamp, record.msecs) if msec_format else self._stamp


class TextFieldsFormatter(_Formatter):
    """``log.format=text``: ``TEXT_FORMAT``'s line with ``key=value`` fields appended, then any traceback.

    Written out rather than through ``%``-style formatting, which costs more than the rest of the line."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        message = safe_message(record)
        record.message = message if message.isprintable() else escape(message)
        text = f"{self.formatTime(record)} {record.levelname} {record.name}: {record.message}"
        fields = getattr(record, "fields", None)
        if fields:
            text += " " + " ".join(
                [f"{k}={v}" if type(v) is int else f"{k}={_text_field(v)}" for k, v in fields.items()]
            )
        if record.exc_info and not record.exc_text:
            record.exc_text = escaped_traceback(record.exc_info)
        if record.exc_text:
            text += "\n" + record.exc_text
        if record.stack_info:
            text += "\n" + self.formatStack(record.stack_info)
        return text


class JsonFormatter(_Formatter):
    """One JSON object a line (``log.format=json``): ts, level, logger, msg, then the fields."""

    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "ts": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "msg": safe_message(record),
        }
        for key, value in (getattr(record, "fields", {}) or {}).items():
            doc[key] = safe_field(value)
        if record.exc_info:
            doc["exc"] = escaped_traceback(record.exc_info)
        return json.dumps(doc)


class LogfmtFormatter(_Formatter):
    """``key=value`` pairs (``log.format=logfmt``), strings quoted; a traceback is the ``exc`` pair."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [
            f"ts={self.formatTime(record)!s}".replace(" ", "T"),
            f"level={record.levelname}",
            f"logger={record.name}",
        ]
        parts.append(f"msg={json.dumps(safe_message(record))}")
        for key, value in (getattr(record, "fields", {}) or {}).items():
            if type(value) is int:
                parts.append(f"{key}={value}")
                continue
            value = safe_field(value)
            parts.append(f"{key}={json.dumps(value) if isinstance(value, str) else value}")
        if record.exc_info:
            parts.append(f"exc={json.dumps(escaped_traceback(record.exc_info))}")
        return " ".join(parts)


class TurnBufferedHandler(logging.StreamHandler):
    """A stream handler that writes the event loop's lines once per loop turn (see the module text).

    ``emit`` runs under the handler's lock, as does the write at the turn's end, so lines keep the
    order they were logged in whichever thread logged them."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        super().__init__(stream)
        self._pending: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
        except Exception:
            self.handleError(record)
            return
        loop = asyncio._get_running_loop() if record.levelno < logging.WARNING else None  # None off the loop
        if loop is None:
            self._pending.append(line)
            self._write_pending(record)
            return
        if not self._pending:
            loop.call_soon(self._end_of_turn)
        self._pending.append(line)

    def _end_of_turn(self) -> None:
        self.acquire()
        try:
            self._write_pending(None)
        finally:
            self.release()

    def _write_pending(self, record: logging.LogRecord | None) -> None:
        lines, self._pending = self._pending, []
        if not lines:
            return
        try:
            self.stream.write("".join(lines))
            self.stream.flush()
        except Exception:
            if record is not None:
                self.handleError(record)

    def flush(self) -> None:
        self.acquire()
        try:
            self._write_pending(None)
            super().flush()
        finally:
            self.release()


def setup_logging(config: Config) -> None:
    """The root logger's one handler, at ``log.level``, formatted by ``log.format``."""
    logging._srcfile = None  # no caller lookup per line: no format prints it
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = TurnBufferedHandler(sys.stderr)
    formats: dict[str, Any] = {"json": JsonFormatter, "logfmt": LogfmtFormatter}
    fmt = config["log.format"]
    handler.setFormatter(formats.get(fmt, TextFieldsFormatter)())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(config["log.level"])
