"""How log lines leave the broker: ``log.format`` (text, logfmt, json) and one write per loop turn.

At INFO (``make run``'s default) a rebalancing group is a dozen lines: its state changes and every
member's join, sync and leave, with their fields (``coordinator/logfields.py``). Python's logging
machinery costs more per line than the request that logged it, so the parts that buy nothing here are
taken out:

- the caller's file, line, thread and process are not looked up (no format prints them; the logging
  HOWTO's own optimisation switches);
- the timestamp's text is made once per second, not once per line;
- lines logged on the event loop are written together when the loop turn ends (one write, not a write
  and a flush per line). Lines from other threads, from outside the loop, or at WARNING and above are
  written at once, after any that wait; a clean exit flushes what is left.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from typing import IO, Any

from broker.config import Config

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


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
        return self.default_msec_format % (self._stamp, record.msecs)


class TextFieldsFormatter(_Formatter):
    """``log.format=text``: ``TEXT_FORMAT``'s line with ``key=value`` fields appended, then any traceback.

    Written out rather than through ``%``-style formatting, which costs more than the rest of the line."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        text = f"{self.formatTime(record)} {record.levelname} {record.name}: {record.message}"
        fields = getattr(record, "fields", None)
        if fields:
            text += " " + " ".join(f"{k}={v}" for k, v in fields.items())
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            text += "\n" + record.exc_text
        if record.stack_info:
            text += "\n" + self.formatStack(record.stack_info)
        return text


class JsonFormatter(_Formatter):
    """One JSON object a line (``log.format=json``): ts, level, logger, msg, then the fields."""

    def format(self, record: logging.LogRecord) -> str:
        doc = {"ts": self.formatTime(record), "level": record.levelname, "logger": record.name, "msg": record.getMessage()}
        doc.update(getattr(record, "fields", {}) or {})
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc)


class LogfmtFormatter(_Formatter):
    """``key=value`` pairs (``log.format=logfmt``), strings quoted."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [f"ts={self.formatTime(record)!s}".replace(" ", "T"), f"level={record.levelname}", f"logger={record.name}"]
        parts.append(f"msg={json.dumps(record.getMessage())}")
        for key, value in (getattr(record, "fields", {}) or {}).items():
            parts.append(f"{key}={json.dumps(value) if isinstance(value, str) else value}")
        text = " ".join(parts)
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


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
    logging._srcfile = None  # type: ignore[attr-defined]  (no caller lookup per line: no format prints it)
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
