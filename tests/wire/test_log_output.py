"""groupd/broker/ops/logoutput.py: the event loop's lines leave once per loop turn, in the order they were logged;
warnings, other threads and a clean exit do not wait."""

from __future__ import annotations

import asyncio
import io
import logging
import subprocess
import sys
import threading
import time

from groupd.broker.ops.logoutput import TEXT_FORMAT, TextFieldsFormatter, TurnBufferedHandler


class CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, s: str) -> int:
        self.writes += 1
        return super().write(s)


def logger_to(stream: CountingStream, name: str) -> logging.Logger:
    handler = TurnBufferedHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    log = logging.getLogger(name)
    log.handlers[:] = [handler]
    log.propagate = False
    log.setLevel(logging.INFO)
    return log


async def test_a_turns_lines_are_one_write_when_the_turn_ends():
    stream = CountingStream()
    log = logger_to(stream, "t.turn")
    for i in range(5):
        log.info("line %d", i)
    assert stream.getvalue() == "" and stream.writes == 0
    await asyncio.sleep(0)
    assert stream.getvalue() == "".join(f"INFO line {i}\n" for i in range(5)) and stream.writes == 1
    log.info("next turn")
    await asyncio.sleep(0)
    assert stream.getvalue().endswith("INFO next turn\n") and stream.writes == 2


async def test_a_warning_goes_at_once_after_the_lines_before_it():
    stream = CountingStream()
    log = logger_to(stream, "t.warn")
    log.info("first")
    log.warning("trouble")
    assert stream.getvalue() == "INFO first\nWARNING trouble\n"
    await asyncio.sleep(0)
    assert stream.getvalue() == "INFO first\nWARNING trouble\n"


async def test_another_threads_line_goes_at_once_in_order():
    stream = CountingStream()
    log = logger_to(stream, "t.thread")
    log.info("loop")
    t = threading.Thread(target=log.info, args=("thread",))
    t.start()
    t.join()
    assert stream.getvalue() == "INFO loop\nINFO thread\n"


def test_outside_a_loop_lines_go_at_once():
    stream = CountingStream()
    log = logger_to(stream, "t.sync")
    log.info("now")
    assert stream.getvalue() == "INFO now\n"


def test_the_text_line_reads_as_loggings_own_with_the_second_formatted_once():
    mine, theirs = TextFieldsFormatter(), logging.Formatter(TEXT_FORMAT)
    base = int(time.time())
    for created in (base + 0.001, base + 0.5, base + 0.999, base + 1.25, base + 3600.75):
        record = logging.LogRecord("groupd", logging.INFO, __file__, 1, "m", (), None)
        record.created, record.msecs = created, int((created - int(created)) * 1000)
        assert mine.format(record) == theirs.format(record)
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("groupd", logging.ERROR, __file__, 1, "failed %s", ("x",), sys.exc_info())
    record.fields = {"group": "g"}
    head, _, trace = mine.format(record).partition("\n")
    assert head.endswith(" ERROR groupd: failed x group=g")  # fields stay on the line, the traceback follows
    assert trace.startswith("Traceback") and trace.endswith("ValueError: boom")


def test_a_clean_exit_writes_what_waits():
    """A loop stopped in the turn that logged (SystemExit leaves the loop at once): the lines are still
    written, by logging's flush at exit."""
    script = (
        "import asyncio, logging\n"
        "from groupd.broker.config import default_config\n"
        "from groupd.broker.ops.logoutput import setup_logging\n"
        "setup_logging(default_config(**{'log.format': 'logfmt'}))\n"
        "async def main():\n"
        "    for i in range(3):\n"
        "        logging.getLogger('groupd.x').info('bye %d', i)\n"
        "    raise SystemExit(0)\n"
        "loop = asyncio.new_event_loop()\n"
        "try:\n"
        "    loop.run_until_complete(main())\n"
        "finally:\n"
        "    loop.close()\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    lines = out.stderr.splitlines()
    assert [line.split("msg=")[1] for line in lines] == ['"bye 0"', '"bye 1"', '"bye 2"'], out.stderr
    assert all(line.startswith("ts=") and "level=INFO logger=groupd.x" in line for line in lines)
