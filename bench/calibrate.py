"""What the machine itself costs, recorded beside every bench run so runs on different machines compare.

Three numbers drive groupd's speed more than anything it does: how fast the interpreter runs plain
Python, what a loopback round trip costs between two processes (on one CPU and across CPUs: a wake-up
on another vCPU can cost tens of microseconds on a VM), and how long a syncfs(2) takes. Each is
measured in a second or so, bounded in count.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import statistics
import tempfile
import time
from typing import Any


def python_loop_seconds(n: int = 5_000_000) -> float:
    """Seconds for a plain ``for`` loop of ``n`` additions (best of three)."""
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        total = 0
        for i in range(n):
            total += i
        best = min(best, time.perf_counter() - began)
    return best


def ping_pong_us(cpus: tuple[int, int] | None, rounds: int = 3000) -> float:
    """Median round trip of 100 bytes between two processes over loopback TCP, in microseconds;
    ``cpus`` pins parent and child to two different CPUs (None: the scheduler places them)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    for s in (client, server):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pid = os.fork()
    if pid == 0:  # the echoing child
        client.close()
        try:
            if cpus is not None:
                os.sched_setaffinity(0, {cpus[1]})
            while data := server.recv(65536):
                server.sendall(data)
        finally:
            os._exit(0)
    server.close()
    before = os.sched_getaffinity(0)
    try:
        if cpus is not None:
            os.sched_setaffinity(0, {cpus[0]})
        message, samples = b"x" * 100, []
        for _ in range(rounds):
            began = time.perf_counter()
            client.sendall(message)
            got = 0
            while got < len(message):
                got += len(client.recv(65536))
            samples.append(time.perf_counter() - began)
        return round(statistics.median(samples) * 1e6, 1)
    finally:
        os.sched_setaffinity(0, before)
        client.close()
        os.waitpid(pid, 0)


def syncfs_ms(directory: str, rounds: int = 30) -> float | None:
    """Median syncfs(2) after a small write, in milliseconds (None where the call is missing)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "syncfs"):
        return None
    fd = os.open(directory, os.O_RDONLY)
    path = os.path.join(directory, "calibrate.tmp")
    samples = []
    try:
        for _ in range(rounds):
            with open(path, "ab") as f:
                f.write(b"x" * 100)
            began = time.perf_counter()
            libc.syncfs(fd)
            samples.append(time.perf_counter() - began)
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
    return round(statistics.median(samples) * 1000, 3)


def calibrate(directory: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"python_loop_5m_s": round(python_loop_seconds(), 3)}
    out["loopback_rtt_us"] = ping_pong_us(None)
    cpus = sorted(os.sched_getaffinity(0))
    out["loopback_rtt_cross_cpu_us"] = ping_pong_us((cpus[0], cpus[1])) if len(cpus) >= 2 else None
    with tempfile.TemporaryDirectory(dir=directory) as d:
        out["syncfs_ms"] = syncfs_ms(d)
    return out


def describe(c: dict[str, Any], label: str = "Machine") -> str:
    return (
        f"{label}: a 5M-iteration Python loop {c['python_loop_5m_s']} s; loopback round trip {c['loopback_rtt_us']} us "
        f"({c['loopback_rtt_cross_cpu_us']} us across CPUs); syncfs {c['syncfs_ms']} ms."
    )


if __name__ == "__main__":
    print(describe(calibrate()))
