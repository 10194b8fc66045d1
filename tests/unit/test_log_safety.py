"""groupd/broker/ops/logoutput.py: text a client chose cannot forge a log line or write a huge one, in every
``log.format``. Control characters are escaped, and each interpolated value, each field and each
message is capped (issue 26 item 4)."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from groupd.broker.ops.logoutput import (
    MESSAGE_MAX_CHARS,
    VALUE_MAX_CHARS,
    JsonFormatter,
    LogfmtFormatter,
    TextFieldsFormatter,
)

FORGED = "alice\n2026-11-25 14:00:00,000 INFO groupd.broker: FORGED"
FORMATTERS = {"text": TextFieldsFormatter, "logfmt": LogfmtFormatter, "json": JsonFormatter}


def record(
    msg: str, args: tuple | dict = (), fields: dict | None = None, exc_info=None, level: int = logging.WARNING
) -> logging.LogRecord:
    rec = logging.LogRecord("groupd.connection", level, __file__, 1, msg, args, exc_info)
    if fields is not None:
        rec.fields = fields
    return rec


def _logfmt_value(line: str, key: str) -> str:
    """The JSON-quoted value of ``key`` in a logfmt line."""
    start = line.index(f" {key}=") + len(key) + 2
    value, _ = json.JSONDecoder().raw_decode(line[start:])
    return json.dumps(value)


@pytest.mark.parametrize("fmt", FORMATTERS)
def test_a_newline_in_an_interpolated_value_stays_on_its_line(fmt):
    line = FORMATTERS[fmt]().format(
        record("connection %s closed: SCRAM-SHA-256: bad client-first %s", ("1.2.3.4:5", FORGED))
    )
    assert "\n" not in line and "\r" not in line
    assert "FORGED" in line, "the text is kept, escaped, for whoever investigates"
    if fmt == "text":
        assert "alice\\n2026-11-25" in line


@pytest.mark.parametrize("fmt", FORMATTERS)
def test_control_characters_and_terminal_escapes_are_escaped(fmt):
    nasty = "a\rb\x1b[31mred\x00\x07\u2028c\u202ed\x85"
    line = FORMATTERS[fmt]().format(record("user %s", (nasty,)))
    for ch in "\r\n\x1b\x00\x07\u2028\u202e\x85":
        assert ch not in line, repr(ch)
    if fmt == "text":
        assert line.endswith("user a\\rb\\x1b[31mred\\x00\\x07\\u2028c\\u202ed\\x85")


@pytest.mark.parametrize("fmt", FORMATTERS)
def test_a_huge_value_is_cut_to_the_cap_and_says_how_much_was_cut(fmt):
    token = "A" * 500_000
    line = FORMATTERS[fmt]().format(record("bad token %s from %s", (token, "1.2.3.4:5")))
    assert len(line) < VALUE_MAX_CHARS + 300
    assert f"[{500_000 - VALUE_MAX_CHARS} more chars]" in line
    assert "1.2.3.4:5" in line, "the values after the long one are still there"


@pytest.mark.parametrize("fmt", FORMATTERS)
def test_an_exception_or_object_value_is_capped_too(fmt):
    exc = ValueError("x" * 100_000 + "\nforged")
    line = FORMATTERS[fmt]().format(record("decode failed: %s (%r)", (exc, exc)))
    assert "\n" not in line and len(line) < 2 * VALUE_MAX_CHARS + 300


@pytest.mark.parametrize("fmt", FORMATTERS)
def test_a_preformatted_message_is_capped_and_escaped_as_a_whole(fmt):
    line = FORMATTERS[fmt]().format(record(f"closed: {FORGED}" + "B" * 100_000))
    assert "\n" not in line and len(line) < MESSAGE_MAX_CHARS + 300


@pytest.mark.parametrize("fmt", FORMATTERS)
def test_fields_are_escaped_and_capped(fmt):
    line = FORMATTERS[fmt]().format(
        record("member joined", fields={"group": "g", "member": FORGED, "client": "c" * 50_000, "generation": 3})
    )
    assert "\n" not in line and len(line) < 2 * VALUE_MAX_CHARS + 300
    if fmt == "json":
        doc = json.loads(line)
        assert doc["member"] == FORGED and doc["generation"] == 3
    elif fmt == "logfmt":
        assert " generation=3" in line and ' group="g"' in line
    else:
        assert " generation=3" in line and " group=g " in line


@pytest.mark.parametrize("fmt", FORMATTERS)
def test_numbers_keep_their_format_and_a_dict_argument_works(fmt):
    line = FORMATTERS[fmt]().format(record("%(n)d of %(what)s at %(ratio).1f", {"n": 7, "what": "x\ny", "ratio": 0.25}))
    assert "7 of x" in line and "0.2" in line and "\n" not in line
    line = FORMATTERS[fmt]().format(record("api %d v%d took %.3f s", (3, 12, 0.0125)))
    assert "api 3 v12 took 0.013 s" in line or "api 3 v12 took 0.012 s" in line


@pytest.mark.parametrize("fmt", ["logfmt", "json"])
def test_structured_formats_keep_a_traceback_on_the_records_line(fmt):
    try:
        raise ValueError("boom\n2026-11-25 14:00:00,000 INFO groupd.broker: FORGED")
    except ValueError:
        line = FORMATTERS[fmt]().format(record("handler failed", exc_info=sys.exc_info(), level=logging.ERROR))
    assert "\n" not in line, "one record, one line"
    exc = json.loads(line)["exc"] if fmt == "json" else json.loads(_logfmt_value(line, "exc"))
    assert exc.startswith("Traceback") and "ValueError: boom" in exc


def test_text_tracebacks_stay_multiline_but_their_message_cannot_forge_a_line():
    try:
        raise ValueError("boom\n2026-11-25 14:00:00,000 INFO groupd.broker: FORGED")
    except ValueError:
        text = TextFieldsFormatter().format(record("handler failed", exc_info=sys.exc_info(), level=logging.ERROR))
    lines = text.split("\n")
    assert (
        lines[1].startswith("Traceback")
        and lines[-1] == "ValueError: boom\\n2026-11-25 14:00:00,000 INFO groupd.broker: FORGED"
    )
    assert not any(line.startswith("2026-11-25 14:00:00,000") for line in lines)


def test_a_message_that_does_not_format_is_still_logged_not_raised():
    """A bad format string is the caller's bug; logging reports it as it always did (a TypeError from
    getMessage), it is not hidden by the capping."""
    with pytest.raises(TypeError):
        TextFieldsFormatter().format(record("%d items", ("many",)))


@pytest.mark.parametrize("fmt", FORMATTERS)
def test_a_number_type_that_needs_its_own_value_for_percent_d_still_formats(fmt):
    from decimal import Decimal

    line = FORMATTERS[fmt]().format(record("%d records", (Decimal("12"),)))
    assert "12 records" in line
