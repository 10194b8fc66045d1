"""Start-up walks of big logs shared with helper processes: the broker's other cores.

Loading the offsets store is one pure-Python walk over every record (``collect_latest``), and the
broker is not serving anything else while it runs, so a second core halves it. A helper is a process
of its own (threads would share one interpreter lock): it gets file ranges of whole batches, walks
them with the same ``collect_latest``, and answers with the last value of every key it saw. The
broker walks the first part of a log itself meanwhile and lays the helper's answer over its own: a
later range supersedes an earlier one key by key, exactly as if one walk had read them all.

Helpers are started with ``close_fds`` (no client socket leaks into them) and end on EOF. Kafka sizes
its start-up pool with ``num.recovery.threads.per.data.dir``; groupd runs that many walkers, the
broker itself being one.
"""

from __future__ import annotations

import logging
import os
import pickle
import struct
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from groupd.storage.batch import TransactionalBatch, collect_latest
from groupd.storage.errors import CorruptBatch
from groupd.storage.synchelper import end_helper_process, helper_process

log = logging.getLogger("groupd.storage")

Ranges = Sequence[tuple[str, int, int]]  # (file path, start, end) of whole batches
Walked = tuple[int, dict[bytes, bytes | None]]  # records seen, last value of every key

T = TypeVar("T")
_LENGTH = struct.Struct(">Q")
_ROOT = str(Path(__file__).resolve().parents[2])


def walk_ranges(ranges: Ranges) -> Walked:
    """What a helper does with one request (and what the broker would do with the same ranges)."""
    latest: dict[bytes, bytes | None] = {}
    seen = 0
    fds: dict[str, int] = {}
    try:
        for path, start, end in ranges:
            fd = fds.get(path)
            if fd is None:
                fd = fds[path] = os.open(path, os.O_RDONLY)
            data = os.pread(fd, end - start, start)
            if len(data) != end - start:
                raise CorruptBatch(f"{path} ends at {start + len(data)}, before {end}")
            seen += collect_latest(data, latest)
    finally:
        for fd in fds.values():
            os.close(fd)
    return seen, latest


def _read_message(fd: int) -> bytes | None:
    head = _read_exactly(fd, _LENGTH.size)
    if head is None:
        return None
    body = _read_exactly(fd, _LENGTH.unpack(head)[0])
    if body is None:
        raise EOFError("message cut short")
    return body


def _read_exactly(fd: int, n: int) -> bytes | None:
    parts, got = [], 0
    while got < n:
        part = os.read(fd, min(n - got, 1 << 20))
        if not part:
            return None
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _write_message(fd: int, payload: bytes) -> None:
    view = memoryview(_LENGTH.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view):]


def serve(rfd: int = 0, wfd: int = 1) -> None:
    """The helper's loop: a pickled list of ranges in, ("ok", seen, latest) or (kind, message) out."""
    while (request := _read_message(rfd)) is not None:
        try:
            answer: tuple = ("ok", *walk_ranges(pickle.loads(request)))
        except TransactionalBatch as exc:
            answer = ("txn", str(exc))  # the broker walks these ranges itself, in order
        except CorruptBatch as exc:
            answer = ("corrupt", str(exc))
        except Exception as exc:  # noqa: BLE001 - reported to the broker, which walks the ranges itself
            answer = ("error", f"{type(exc).__name__}: {exc}")
        _write_message(wfd, pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))


class WalkHelpers:
    """Helper processes, each answering its requests in order."""

    def __init__(self, procs: list[subprocess.Popen]) -> None:
        self.procs = procs
        self._asked: list[int] = []  # which helpers owe an answer, in the order asked

    @classmethod
    def spawn(cls, count: int) -> WalkHelpers | None:
        """``count`` running helpers (blocking: run it in a thread), or None where none start."""
        procs: list[subprocess.Popen] = []
        code = f"import sys; sys.path.insert(0, {_ROOT!r}); from groupd.storage.walkhelper import serve; serve()"
        for _ in range(count):
            try:
                procs.append(helper_process(code))
            except OSError as exc:
                log.warning("no start-up walk helper (%s): the broker walks alone", exc)
                break
        return cls(procs) if procs else None

    @property
    def count(self) -> int:
        return len(self.procs)

    def send(self, parts: Sequence[Ranges]) -> None:
        """Ask helper i to walk ``parts[i]``; answers come from ``receive``."""
        if self._asked:
            raise RuntimeError("the previous answers were not received")
        for i, ranges in enumerate(parts):
            _write_message(self.procs[i].stdin.fileno(), pickle.dumps(list(ranges)))  # type: ignore[union-attr]
            self._asked.append(i)

    def receive(self) -> list[Walked | None]:
        """The answers to the last ``send``, in its order (blocking); None for ranges holding
        transactional batches, which the caller walks itself (their markers may end transactions of
        earlier ranges). CorruptBatch as a helper found it; OSError when a helper failed otherwise
        (the caller then walks those ranges itself)."""
        asked, self._asked = self._asked, []
        answers: list[Walked | None] = []
        failure: tuple | None = None  # the first (kind, message) that was not "ok"
        for i in asked:  # every owed answer is read, so a later send starts clean
            try:
                raw = _read_message(self.procs[i].stdout.fileno())  # type: ignore[union-attr]
                answer: tuple = pickle.loads(raw) if raw is not None else ("error", "the helper exited")
            except (OSError, EOFError, pickle.UnpicklingError) as exc:
                answer = ("error", str(exc))
            if answer[0] == "ok":
                answers.append((answer[1], answer[2]))
            elif answer[0] == "txn":
                answers.append(None)
            elif failure is None:
                failure = answer
        if failure is not None:
            if failure[0] == "corrupt":
                raise CorruptBatch(failure[1])
            raise OSError(f"a start-up walk helper failed: {failure[1]}")
        return answers

    def close(self) -> None:
        for proc in self.procs:
            end_helper_process(proc)


def split_by_bytes(ranges: Sequence[tuple[T, int, int]], parts: int) -> list[list[tuple[T, int, int]]]:
    """``ranges`` cut into ``parts`` consecutive runs of about equal bytes (some may be empty)."""
    total = sum(end - start for _, start, end in ranges)
    out: list[list[tuple[T, int, int]]] = [[] for _ in range(parts)]
    done = 0
    for r in ranges:
        i = min(parts - 1, done * parts // total) if total else 0
        out[i].append(r)
        done += r[2] - r[1]
    return out
