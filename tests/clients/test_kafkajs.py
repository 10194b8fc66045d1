"""kafkajs (node) against groupd: the same group scenarios, driven by tests/clients/js/scenarios.js."""

import json
import os
import shutil
import subprocess

import pytest

from tests.harness import ROOT

pytestmark = pytest.mark.client
JS = ROOT / "tests" / "clients" / "js"


def run(scenario: str, bootstrap: str, timeout: float = 90, sasl: dict | None = None, ssl: dict | None = None) -> dict:
    """``sasl``: kafkajs's sasl option (mechanism, username, password), to go through a SASL listener;
    ``ssl``: PEM files (ca, cert, key) for kafkajs's ssl option, to go through TLS."""
    node = shutil.which("node")
    assert node, "node is not installed: kafkajs scenarios cannot run (install Node.js 20)"
    assert (JS / "node_modules" / "kafkajs").exists(), (
        "kafkajs is not installed: run `make js-deps` (npm ci in tests/clients/js)"
    )
    env = {
        **os.environ,
        **({"KAFKAJS_SASL": json.dumps(sasl)} if sasl else {}),
        **({"KAFKAJS_SSL": json.dumps(ssl)} if ssl else {}),
    }
    out = subprocess.run(
        [node, str(JS / "scenarios.js"), scenario, bootstrap],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=JS,
        env=env,
    )
    line = (out.stdout.strip().splitlines() or ["{}"])[-1]
    doc = json.loads(line)
    assert doc.get("ok"), f"kafkajs {scenario}: {doc.get('error') or out.stderr[-2000:]}"
    return doc["result"]


@pytest.mark.scenario("kafkajs", 1, 2)
def test_connect_and_create(broker_process):
    assert run("connect", broker_process.bootstrap)["topics"] == []
    assert run("create", broker_process.bootstrap)["partitions"] == 6


@pytest.mark.scenario("kafkajs", 3, 4)
def test_group_disjoint_then_handover(broker_process):
    result = run("group", broker_process.bootstrap)
    before, after = result["before"], result["after"]
    assert sorted(p for a in before for p in a) == list(range(6)) and all(before)
    assert sorted(p for a in after for p in a) == list(range(6)) and len(after) == 2


@pytest.mark.scenario("kafkajs", 6)
def test_commit_and_resume(broker_process):
    result = run("resume", broker_process.bootstrap)
    assert result["first"] == 30 and result["again"] == ["later"]


@pytest.mark.scenario("kafkajs", 9)
def test_admin_groups_and_offsets(broker_process):
    r = run("admin", broker_process.bootstrap)
    assert r["listed"] and r["state"] == "Stable" and r["members"] == 1
    assert r["nonEmpty"] == ["NON_EMPTY_GROUP"]
    assert r["offsets"] == [5, 5]
    assert r["reset"] == [-2, -2], "kafkajs commits -2 (earliest) for resetOffsets({earliest: true})"
    assert r["deleted"]


class NodeMember:
    """A kafkajs member in its own node process (SIGKILL: no LeaveGroup)."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        import threading

        self.assignment: set[int] = set()
        self.proc = subprocess.Popen(
            [shutil.which("node"), str(JS / "scenarios.js"), "member", bootstrap, topic, group],
            cwd=JS,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                self.assignment = set(json.loads(line)["assigned"])
            except (ValueError, KeyError):
                continue

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.mark.scenario("kafkajs", 5)
def test_killed_member_expires(broker_process):
    import time

    from tests.clients.kp import wait_until

    run("create", broker_process.bootstrap)  # js-six, 6 partitions
    members = [NodeMember(broker_process.bootstrap, "js-six", "js-kill") for _ in range(3)]

    def covered(ms):
        parts = [m.assignment for m in ms]
        return all(parts) and sum(map(len, parts)) == 6 and set().union(*parts) == set(range(6))

    try:
        wait_until(lambda: covered(members), 45, "kafkajs: three members sharing 6 partitions")
        members[0].kill()
        killed = time.monotonic()
        wait_until(lambda: covered(members[1:]), 45, "kafkajs: the survivors taking over after the session timeout")
        assert time.monotonic() - killed >= 1.5
    finally:
        for m in members:
            m.kill()


@pytest.mark.scenario("kafkajs", 11)
def test_transactions(broker_process):
    r = run("transactions", broker_process.bootstrap)
    # the aborted message is never read; the two committed ones and the transaction's group offset are
    assert r["seen"] == ["committed-1", "committed-2"] and r["groupOffset"] == 5


@pytest.mark.scenario("kafkajs", 12)
def test_quotas(tmp_path):
    from tests.clients.test_quotas import RATE, quota_broker_process, set_quotas

    with quota_broker_process(tmp_path) as proc:
        set_quotas(proc.port, "kafkajs-scenarios")
        r = run("quotas", proc.bootstrap)
    assert r["seen"] == list(range(40))
    assert r["producedMs"] > 120_000 / RATE * 1000 * 0.6  # 120 kB at 40 kB/s, the first window free
