"""What one allowed ACL check costs, in instructions counted by callgrind (deterministic): ``Access.allowed``
and ``Access.refused_names`` (one name) called N times on a decided (cached) question, less the same loop
calling a function that does nothing. Each count is a whole ``python`` under callgrind, run for 0 and for N
calls, so start-up cancels.

    python -m bench.acl_check [--calls 20000]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from types import SimpleNamespace

KINDS = ("nothing", "allowed", "refused_names")


class Conn:
    """As the broker's Connection presents itself to a check: a user name, and a principal property."""

    def __init__(self) -> None:
        self.user = "alice"

    @property
    def principal(self) -> str:
        return f"User:{self.user}"


def loop(kind: str, calls: int) -> None:
    """The measured loop: ``calls`` checks of alice's READ on a topic a LITERAL ACL allows her."""
    from groupd.broker.dispatch import RequestContext
    from groupd.broker.security.access import Access
    from groupd.broker.security.acl import AclBinding, Operation, ResourceType
    from groupd.broker.security.authorizer import Authorizer

    authorizer = Authorizer(bindings=[AclBinding.of_wire(2, "bench", 3, "User:alice", "*", 3, 3)])
    access = Access(authorizer, None)  # type: ignore[arg-type]  (no ACL is stored through it)
    ctx = RequestContext(SimpleNamespace(api_version=0), "127.0.0.1", "c1", Conn())  # type: ignore[arg-type]
    read, topic = Operation.READ, ResourceType.TOPIC
    names = ["".join(["ben", "ch"]) for _ in range(calls)]  # a new string each, as a decoded request's

    def nothing(ctx: object, op: object, rtype: object, name: object) -> bool:
        return True

    if kind == "refused_names":
        for name in names:
            access.refused_names(ctx, read, topic, (name,))  # type: ignore[arg-type]
        return
    check = access.allowed if kind == "allowed" else nothing
    for name in names:
        check(ctx, read, topic, name)  # type: ignore[arg-type]


def instructions(kind: str, calls: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out", sys.executable, "-m", "bench.acl_check",
             "--run", kind, "--calls", str(calls)],
            capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "0"},
        )  # fmt: skip
    found = re.search(r"Collected : (\d+)", out.stderr)
    assert found is not None, out.stderr
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--run", choices=KINDS, help="(internal) the loop itself, under callgrind")
    args = parser.parse_args()
    if args.run:
        loop(args.run, args.calls)
        return
    instructions("nothing", 0)  # a first run writes the bytecode caches: not counted
    per_call = {k: (instructions(k, args.calls) - instructions(k, 0)) / args.calls for k in KINDS}
    for kind in KINDS[1:]:
        print(f"{kind}: {per_call[kind] - per_call['nothing']:,.0f} instructions per check "
              f"({per_call[kind]:,.0f} with the loop's own {per_call['nothing']:,.0f})")  # fmt: skip


if __name__ == "__main__":
    main()
