"""The same job on a standalone Spark cluster: a master and a worker started from the PySpark install's own
``bin/spark-class`` (bound to 127.0.0.1), the job run as ``python -m pipeline ... --master spark://...``,
and its answer compared with the one on ``local[2]``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.pipeline.conftest import INCIDENT_END

pytestmark = pytest.mark.timeout(900)  # a cluster and two Spark runs on a shared 2-core machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen) -> None:
    """spark-class execs java, so the pid is the JVM's; its session holds nothing else of ours."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    import pyspark

    home = Path(pyspark.__file__).parent
    tmp = tmp_path_factory.mktemp("spark-standalone")
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp),
        "SPARK_NO_DAEMONIZE": "1",
    }
    port, ui = free_port(), free_port()
    spark_class = str(home / "bin" / "spark-class")
    logs = {name: open(tmp / f"{name}.log", "wb") for name in ("master", "worker")}  # noqa: SIM115 (closed below)
    master = subprocess.Popen(
        [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        ],
        env=env,
        stdout=logs["master"],
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"spark://127.0.0.1:{port}"
    worker = subprocess.Popen(
        [
            spark_class,
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            "127.0.0.1",
            "--port",
            str(free_port()),
            "--webui-port",
            str(free_port()),
            "--cores",
            "2",
            "--memory",
            "1g",
            "--work-dir",
            str(tmp / "work"),
            url,
        ],
        env=env,
        stdout=logs["worker"],
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json", timeout=5) as r:
                    state = json.load(r)
                if state.get("aliveworkers", 0) >= 1:
                    break
            except OSError:
                pass
            assert master.poll() is None and worker.poll() is None, (tmp / "master.log").read_text()[-2000:] + (
                tmp / "worker.log"
            ).read_text()[-2000:]
            assert time.monotonic() < deadline, "the standalone worker did not register with its master in 300 s"
            time.sleep(1)
        yield {"url": url, "ui": ui, "work": tmp / "work"}
    finally:
        stop(worker)
        stop(master)
        for f in logs.values():
            f.close()


def test_the_job_runs_unchanged_on_a_standalone_cluster(spark, incident, standalone, tmp_path):
    from groupd.pipeline.__main__ import run

    local = json.loads(run("overview", incident["log_dirs"], tmp_path / "local", now_ms=INCIDENT_END).read_text())
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "groupd.pipeline",
            "overview",
            "--master",
            standalone["url"],
            "--log-dirs",
            incident["log_dirs"],
            "--out",
            str(tmp_path / "cluster"),
            "--now-ms",
            str(INCIDENT_END),
        ],
        capture_output=True,
        text=True,
        timeout=800,
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print("on the standalone cluster:\n" + done.stdout)  # its steps and their times, shown with -s
    assert f"Spark session on {standalone['url']}" in done.stdout
    cluster = json.loads((tmp_path / "cluster" / "overview.json").read_text())
    assert sorted(cluster, key=lambda r: r["group"]) == sorted(local, key=lambda r: r["group"])
    assert len(local) == 8
    # the work ran in the worker's executor, not in the driver
    with urllib.request.urlopen(f"http://127.0.0.1:{standalone['ui']}/json", timeout=10) as r:
        apps = json.load(r)["completedapps"]
    assert [a["name"] for a in apps] == ["groupd-pipeline"]
    executors = list(standalone["work"].glob("app-*/*/stderr"))
    assert executors, "no executor ran on the worker"
