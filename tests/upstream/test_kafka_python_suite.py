"""kafka-python's own integration suite, from its source distribution, against a groupd broker.

The suite is the one of the kafka-python release installed for the client tests. It is pointed at a
running broker as kafka-python's CI allows (``KAFKA_URI``), with ``KAFKA_VERSION=4.2.0``: the suite
asserts the release it infers from ApiVersions, and skips tests by it. The broker gets the settings of
kafka-python's own test broker (its ``servers/resources/default/kafka.properties``): node 0, four
partitions per topic, two offsets partitions, no initial rebalance delay, 1 s minimum session.

kafka-python's test broker runs an authorizer that lets everyone do what no ACL names
(``allow.everyone.if.no.acl.found=true``), so its ACL test runs here too, against groupd's authorizer.
Deselected: the SSL module, which starts a broker of its own with Java keystores (groupd reads PEM only,
docs/limitations.md, and the suite runs against a running broker). Its transactional tests run. The SASL
module skips itself against an external broker."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.harness import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build" / "upstream"
KAFKA_VERSION = "4.2.0"
DESELECT = {
    "ssl": "SSL: the module starts its own broker with JKS keystores; groupd reads PEM, and runs already",
}
BROKER = {  # kafka-python's test broker settings
    "node.id": 0,
    "num.partitions": 4,
    "offsets.topic.num.partitions": 2,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "log.level": "WARN",
}


def _suite() -> Path:
    """The extracted source distribution, downloaded once into build/ and kept there."""
    version = importlib.metadata.version("kafka-python")
    tree = CACHE / f"kafka_python-{version}"
    if not (tree / "test" / "integration").is_dir():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
             "--dest", str(CACHE), f"kafka-python=={version}"],
            check=True, timeout=300,
        )
        with tarfile.open(CACHE / f"kafka_python-{version}.tar.gz") as tar:
            tar.extractall(CACHE, filter="data")
    # test the installed client, not the sdist's copy; make test/ a package (the sdist has no
    # __init__.py, and the standard library's own `test` package would be found instead)
    for leftover in ("kafka",):
        if (tree / leftover).is_dir():
            subprocess.run(["rm", "-rf", str(tree / leftover)], check=True)
    (tree / "test" / "__init__.py").touch()
    (tree / "test" / "service.py").write_text((Path(__file__).parent / "service_standin.py").read_text())
    (tree / "servers" / KAFKA_VERSION / "kafka-bin").mkdir(parents=True, exist_ok=True)  # checked, never run
    return tree


@pytest.mark.client
def test_kafka_python_integration_suite(tmp_path):
    tree = _suite()
    broker = BrokerProcess(tmp_path / "data", overrides=BROKER)
    broker.start()
    report = tmp_path / "junit.xml"
    try:
        env = {**os.environ, "KAFKA_VERSION": KAFKA_VERSION, "KAFKA_URI": f"kafka://{broker.bootstrap}"}
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "test/integration", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
             "-W", "ignore::DeprecationWarning", "--timeout", "120", f"--junitxml={report}",
             "-k", " and ".join(f"not {word}" for word in DESELECT)],
            cwd=tree, env=env, capture_output=True, text=True, timeout=900,
        )
    finally:
        broker.kill()
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None, run.stdout[-3000:]
    failed = []
    for case in suite.iter("testcase"):
        for outcome in ("failure", "error"):
            found = case.find(outcome)  # an Element without children is falsy: compare with None
            if found is not None:
                failed.append(
                    f"{case.get('classname')}.{case.get('name')} ({outcome}): {found.get('message', '')[:300]}"
                )
    assert not failed, "\n".join(failed) + "\n" + run.stdout[-3000:]
    ran = int(suite.get("tests", 0)) - int(suite.get("skipped", 0))
    assert ran >= 55, run.stdout[-3000:]  # the suite ran, not just collected (55 tests at 3.0.12)
