"""The Makefile as a new user meets it: `make run` installs the broker's own dependencies only (no test
extras, no PySpark, no Java, no root) and starts the broker; `make test` and `make pipeline` install
what they need under stamps of their own."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.harness import free_port

ROOT = Path(__file__).resolve().parents[2]


def dry_run(target: str, venv: Path) -> str:
    out = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
    )
    return out.stdout


def test_run_installs_the_broker_alone(tmp_path):
    plan = dry_run("run", tmp_path / "venv")
    installs = [line for line in plan.splitlines() if "pip install" in line]
    assert installs and all(line.rstrip().endswith("-e .") for line in installs), plan
    for heavy in ("[test", "pipeline]", "pyspark", "apt-get", "java", "openjdk"):
        assert heavy not in plan, f"make run must not need {heavy}: {plan}"


def test_test_and_pipeline_install_their_own_extras(tmp_path):
    assert "-e '.[test,pipeline]'" in dry_run("test", tmp_path / "venv")
    pipeline = dry_run("pipeline", tmp_path / "venv")
    assert "-e '.[pipeline]'" in pipeline and "[test" not in pipeline


def test_make_run_from_nothing_listens_without_test_or_spark_packages(tmp_path):
    """The real thing: a new venv, `make run`, a broker answering; the venv holds no pytest, no PySpark
    and needs no root (the stamp's recipe runs pip only). ~7 s with a warm package cache."""
    venv, port = tmp_path / "venv", free_port()
    args = (
        f"--override listeners=PLAINTEXT://127.0.0.1:{port} --override log.dirs={tmp_path / 'data'} "
        "--override metrics.listener="
    )
    started = time.monotonic()
    proc = subprocess.Popen(
        ["make", "run", f"VENV={venv}", f"ARGS={args}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    try:
        listening = None
        while time.monotonic() - started < 120 and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                listening = time.monotonic() - started
                break
            except OSError:
                time.sleep(0.2)
        assert listening is not None, (
            f"make run did not start the broker: {proc.stdout.read() if proc.poll() is not None else ''}"
        )
        site = next(venv.glob("lib/python3*/site-packages"))
        names = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
        assert {"kio", "kafka_python", "prometheus_client"} <= names
        assert not names & {"pytest", "pyspark", "pandas", "confluent_kafka", "aiokafka"}, names
        print(f"make run from an empty venv: listening after {listening:.1f} s")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
