"""Executed bytecodes per function, for A/B work on a hot path: ``python -m bench.bytecodes OUT.json --
<bench.inprocess arguments>`` runs an in-process scenario under ``sys.settrace`` opcode events and
writes [file, function, bytecodes] rows; ``python -m bench.bytecodes --diff A_SMALL A_LARGE B_SMALL
B_LARGE N`` subtracts two sizes of each side (start-up cancels) and lists the functions whose count per
operation moved most.

Deterministic where callgrind's instruction counts need valgrind, and it names the Python function
(callgrind names the C loop): the reshape's remaining rebalance cost was found this way (bench/HISTORY.md,
session 19). Slow (about 20x): use small sizes, e.g. 5 and 15 rebalances one at a time."""

from __future__ import annotations

import collections
import json
import os
import runpy
import sys
import threading
from types import FrameType
from typing import Any

_counting = {"on": False}


def phase(state: str) -> None:
    """Called by bench.inprocess at the start ("on") and end ("off") of the scenario's own phase, as it
    toggles callgrind: start-up and shutdown (which grow with the groups and partitions held) are left out."""
    _counting["on"] = state == "on"


def _count(out: str, args: list[str]) -> None:
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    sys.modules["bench.bytecodes"] = sys.modules[__name__]  # so bench.inprocess finds phase() under -m
    counting = _counting

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        key = (frame.f_code.co_filename, frame.f_code.co_name)

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "opcode" and counting["on"]:
                counts[key] += 1
            return local

        return local

    sys.argv = ["bench.inprocess", *args]
    sys.settrace(tracer)
    threading.settrace(tracer)
    try:
        runpy.run_module("bench.inprocess", run_name="__main__")
    finally:
        sys.settrace(None)
        root = os.getcwd() + "/"
        with open(out, "w") as f:
            json.dump([[p.replace(root, "").replace("groupd/", ""), n, c] for (p, n), c in counts.items()], f)


def _load(path: str) -> collections.Counter[tuple[str, str]]:
    with open(path) as f:
        return collections.Counter({(p, n): c for p, n, c in json.load(f)})


def _diff(a_small: str, a_large: str, b_small: str, b_large: str, ops: int) -> None:
    per = []
    for small, large in ((a_small, a_large), (b_small, b_large)):
        s, big = _load(small), _load(large)
        per.append({k: (big[k] - s[k]) / ops for k in big})
    a, b = per
    print(f"bytecodes per operation: A {sum(a.values()):,.0f}  B {sum(b.values()):,.0f}")
    for key in sorted(set(a) | set(b), key=lambda k: -abs(b.get(k, 0) - a.get(k, 0)))[:40]:
        print(f"{b.get(key, 0) - a.get(key, 0):+9.1f}  {a.get(key, 0):9.1f} -> {b.get(key, 0):9.1f}  {key[0]}:{key[1]}")


def main() -> None:
    if sys.argv[1] == "--diff":
        _diff(*sys.argv[2:6], int(sys.argv[6]))
    else:
        _count(sys.argv[1], [a for a in sys.argv[2:] if a != "--"])


if __name__ == "__main__":
    main()
