"""syncfs(2) in a helper process, answered through a pipe the event loop watches.

A flush thread in the broker must take the GIL back twice per round (to start, and after syncfs
returns) from an event loop that is busy answering requests; under load that wait was most of a flush
round (about 1.2-1.8 ms of a 2.5 ms round, against 0.6 ms for the syncfs itself). A process has its own
interpreter: the loop writes one byte to ask for a sync, the helper runs syncfs on a descriptor of the
same filesystem and writes back the result, and the loop reads it when it next polls. syncfs commits
every dirty file of the filesystem whoever wrote it, so data the broker wrote before asking is durable
when the answer comes; an error is reported to the helper's descriptor (Linux >= 5.8 reports
writeback errors to every syncfs caller since its descriptor was opened) and fails the round.

The helper can also fdatasync one of the files it was given at start (the offsets journal's two,
storage/journal.py): a round then waits for one file, not for every dirty file of the filesystem.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("groupd.storage")

_HELPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(sys.argv[1], os.O_RDONLY)
files = [os.open(path, os.O_RDWR) for path in sys.argv[2:]]
os.write(1, b"\0\0")  # ready
while True:
    ask = os.read(0, 1)
    if not ask:
        break
    if ask == b"s":
        err = 0 if libc.syncfs(fd) == 0 else ctypes.get_errno() or 5
    else:
        try:
            os.fdatasync(files[ask[0] - 48])
            err = 0
        except OSError as exc:
            err = exc.errno or 5
    os.write(1, err.to_bytes(2, "big"))
"""


def helper_process(code: str, *args: str) -> subprocess.Popen:
    """A broker helper: its own interpreter running ``code``, talking over stdin/stdout pipes. It
    inherits no descriptor (no client socket), and a terminal's Ctrl-C is the broker's to handle: a
    helper ends on EOF."""
    return subprocess.Popen(
        [sys.executable, "-I", "-c", code, *args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True, start_new_session=True,
    )


def end_helper_process(proc: subprocess.Popen) -> None:
    """Close its pipes (EOF ends it) and reap it, killing one that does not end within 5 s."""
    for stream in (proc.stdin, proc.stdout):
        with contextlib.suppress(OSError):
            stream.close()  # type: ignore[union-attr]
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _spawn(directory: Path, files: tuple[Path, ...]) -> subprocess.Popen | None:
    try:
        proc = helper_process(_HELPER, str(directory), *map(str, files))
        ready = proc.stdout.read(2)  # type: ignore[union-attr]
    except OSError as exc:
        log.warning("no syncfs helper process (%s): flushing from a thread", exc)
        return None
    if ready != b"\0\0":
        proc.kill()
        proc.wait()
        log.warning("the syncfs helper did not start: flushing from a thread")
        return None
    return proc


def _answer(callback: Callable[[int | OSError], None], outcome: int | OSError) -> None:
    try:
        callback(outcome)
    except Exception:  # one waiter's failure must not keep the answer from the others
        log.exception("a syncfs waiter failed")


class SyncHelper:
    """One helper process per directory; requests are answered in order, one two-byte errno each."""

    def __init__(self, proc: subprocess.Popen, loop: asyncio.AbstractEventLoop) -> None:
        self.proc = proc
        self.loop = loop
        self._out = proc.stdout.fileno()  # type: ignore[union-attr]
        self._in = proc.stdin.fileno()  # type: ignore[union-attr]
        # one callback per request, in order: called with the errno (0: synced) or an OSError (gone)
        self._waiting: collections.deque[Callable[[int | OSError], None]] = collections.deque()
        self._buf = b""
        self.alive = True
        os.set_blocking(self._out, False)
        loop.add_reader(self._out, self._readable)

    @classmethod
    async def start(cls, directory: Path, files: tuple[Path, ...] = ()) -> SyncHelper | None:
        """A running helper, or None where syncfs or a helper process is not available. ``files``
        (at most ten) can be fdatasynced by number: see ``sync_then``."""
        if sys.platform != "linux":
            return None
        proc = await asyncio.to_thread(_spawn, directory, tuple(files)[:10])
        return None if proc is None else cls(proc, asyncio.get_running_loop())

    def sync_then(self, callback: Callable[[int | OSError], None], file: int | None = None) -> None:
        """``callback(0)`` once everything written before the call is on disk (with ``file``, the
        number of one of the helper's files: everything written to that file), ``callback(errno)``
        if the sync failed, ``callback(OSError)`` if the helper is gone. It is called from the
        loop's reader callback itself, without a further loop turn: under load every turn is long
        (it handles every connection's requests), and a round's waiters should not wait for the next."""
        if not self.alive:
            callback(OSError("the syncfs helper is gone"))
            return
        try:
            os.write(self._in, b"s" if file is None else b"%d" % file)
        except OSError as exc:
            self._gone(exc)
            callback(OSError(f"the syncfs helper is gone: {exc}"))
            return
        self._waiting.append(callback)

    def _readable(self) -> None:
        try:
            data = os.read(self._out, 4096)
        except BlockingIOError:
            return
        except OSError as exc:
            self._gone(exc)
            return
        if not data:
            self._gone(EOFError("exited"))
            return
        self._buf += data
        while len(self._buf) >= 2 and self._waiting:
            err, self._buf = int.from_bytes(self._buf[:2], "big"), self._buf[2:]
            _answer(self._waiting.popleft(), err)

    def _gone(self, exc: BaseException) -> None:
        if self.alive:
            log.error("the syncfs helper process stopped (%s): flushing from a thread", exc)
        self.alive = False
        with contextlib.suppress(Exception):
            self.loop.remove_reader(self._out)
        while self._waiting:
            _answer(self._waiting.popleft(), OSError(f"the syncfs helper is gone: {exc}"))

    def close(self) -> None:
        if self.alive:
            self.alive = False  # a deliberate stop: nothing to report
            self._gone(EOFError("closed"))
        end_helper_process(self.proc)
