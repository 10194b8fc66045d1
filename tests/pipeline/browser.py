"""A real browser for the report tests: Debian's headless Chromium driven over the DevTools protocol on a
pipe (``--remote-debugging-pipe``: JSON messages ended by NUL on fds 3 and 4), so no driver package and no
port are needed. It opens a file, collects script errors and console errors, measures elements and takes a
full-page screenshot."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
MISSING = (
    "Chromium is not installed, so the report was NOT rendered in a browser. `make venv` installs it with "
    "apt-get (Debian's package `chromium`); run `apt-get install -y chromium` and rerun."
)


def find_chromium() -> str | None:
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)


class Chromium:
    def __init__(self, binary: str, width: int = 1300, height: int = 900, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # out of the way of 3 and 4, which the child must receive them as
        to_child_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
        from_child_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)

        def as_3_and_4() -> None:
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        self.proc = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-pipe",
                "--no-first-run",
                "--disable-extensions",
                "--hide-scrollbars",
                "--force-device-scale-factor=1",
                f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=as_3_and_4,
            pass_fds=(3, 4),
            close_fds=True,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._ids = iter(range(1, 1_000_000))
        self.events: list[dict] = []
        self.session: str | None = None
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t["targetId"] for t in targets if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_child], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise ConnectionError("Chromium closed its DevTools pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, **params: Any) -> dict:
        n = next(self._ids)
        msg: dict[str, Any] = {"id": n, "method": method, "params": params}
        if self.session is not None and not method.startswith(("Target.", "Browser.")):
            msg["sessionId"] = self.session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == n:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> dict:
        deadline = time.monotonic() + self.timeout
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        while True:
            e = self._read_message(deadline)
            if e.get("method") == method:
                return e
            self.events.append(e)

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def errors(self) -> list[str]:
        """Uncaught exceptions, console errors and failed loads seen so far."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append(
                    p["exceptionDetails"].get("text", "exception")
                    + " "
                    + str(p["exceptionDetails"].get("exception", {}).get("description", ""))
                )
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(
                    "console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
                )
            elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append("log: " + p["entry"].get("text", ""))
        return out

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def screenshot(self) -> bytes:
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)
        return base64.b64decode(shot["data"])

    def close(self) -> None:
        with contextlib.suppress(OSError, TimeoutError, ConnectionError, RuntimeError):
            self.call("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_child, self._from_child):
            os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)
