"""An unknown config key is warned about in the same format as every other line (it used to come out in
logging's default ``WARNING:groupd.config:...`` form, before the broker's format was set up), with a
"did you mean" for a close typo."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from tests.harness import ROOT, free_port


def first_lines(tmp_path, *overrides: str) -> list[str]:
    port = free_port()
    args = [sys.executable, "-m", "groupd", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={tmp_path / 'data'}", "--override", "metrics.listener="]
    for o in overrides:
        args += ["--override", o]
    proc = subprocess.Popen(args, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if "listening on" in line:
                break
    finally:
        proc.terminate()
        proc.wait(15)
    return lines


def test_unknown_key_warning_is_a_line_like_the_others_with_did_you_mean(tmp_path):
    lines = first_lines(tmp_path, "log.retension.ms=5", "totally.unknown=1")
    stamp = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} "
    typo = [line for line in lines if "log.retension.ms" in line]
    assert len(typo) == 1 and re.match(
        stamp + r"WARNING groupd\.config: unknown configuration key log\.retension\.ms is ignored "
        r"\(did you mean log\.retention\.ms\?\)$",
        typo[0],
    ), lines
    other = [line for line in lines if "totally.unknown" in line]
    assert len(other) == 1 and re.match(
        stamp + r"WARNING groupd\.config: unknown configuration key totally\.unknown is ignored$", other[0]
    )
    assert all(re.match(stamp, line) for line in lines), lines


def test_in_json_too(tmp_path):
    lines = first_lines(tmp_path, "log.format=json", "group.max.sise=3")
    doc = json.loads(next(line for line in lines if "group.max.sise" in line))
    assert (
        doc["level"] == "WARNING" and doc["logger"] == "groupd.config" and "did you mean group.max.size?" in doc["msg"]
    )
