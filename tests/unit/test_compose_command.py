"""`make compose-up` runs one compose command that exists on the machine: Docker's plugin
(`docker compose`) when the docker CLI has it, else Debian's `docker-compose` (v1.29). Before, the
Makefile called `docker-compose` whatever the machine had."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def fake(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def compose(bin_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": str(bin_dir)}
    return subprocess.run(
        ["/bin/bash", str(ROOT / "scripts/compose.sh"), *args], env=env, capture_output=True, text=True, timeout=10
    )


def test_plugin_preferred_then_standalone_then_a_message(tmp_path):
    plugin, standalone, none = tmp_path / "plugin", tmp_path / "standalone", tmp_path / "none"
    for d in (plugin, standalone, none):
        d.mkdir()
    fake(plugin, "docker", 'if [ "$1" = compose ]; then shift; echo "plugin $*"; exit 0; fi; exit 1')
    fake(plugin, "docker-compose", 'echo "v1 $*"')
    fake(standalone, "docker", 'echo "docker: unknown command: docker $1" >&2; exit 1')
    fake(standalone, "docker-compose", 'echo "v1 $*"')
    fake(none, "docker", "exit 1")
    assert compose(plugin, "--which").stdout.strip() == "docker compose"
    assert compose(plugin, "-f", "x.yml", "up", "-d").stdout.strip() == "plugin -f x.yml up -d"
    assert compose(standalone, "--which").stdout.strip() == "docker-compose"
    assert compose(standalone, "ps").stdout.strip() == "v1 ps"
    missing = compose(none, "up")
    assert missing.returncode == 127 and "apt-get install docker-compose" in missing.stderr


def test_make_compose_up_goes_through_the_chooser():
    plan = subprocess.run(
        ["make", "-n", "compose-up"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
    ).stdout
    assert "scripts/compose.sh -f docker/docker-compose.yml up" in plan, plan
