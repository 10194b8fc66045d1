"""librdkafka's own consumer-group tests, in both group protocols, against a groupd broker.

librdkafka's test runner (``tests/test-runner`` of librdkafka 2.15.1, built by
``tests/upstream/librdkafka_build.py``) is pointed at a running broker as its README says: a
``test.conf`` naming ``bootstrap.servers``, ``TEST_KAFKA_VERSION`` for the release its tests check
their requirements against, ``TESTS`` for the selection, and ``TEST_CONSUMER_GROUP_PROTOCOL=consumer``
for the KIP-848 run (every consumer the tests make then sets ``group.protocol=consumer``; the tests
skip or adapt what that protocol forbids). ``-L`` leaves out its broker-less (mock cluster) tests and
``-E`` those that need its socket-emulation layer. The broker gets the settings of librdkafka's
default test scenario (four partitions per topic, topics created automatically).

The selection is librdkafka's consumer-group tests. A selected test librdkafka skips in one protocol is
deselected there with the reason next to it. Not selected: the tests that need more than one broker
(fetch from follower), Kafka's shell scripts (``KAFKA_PATH``: 0109), another scenario (0107,
``noautocreate``), SSL, SASL or ACLs (docs/limitations.md), and the share-consumer tests (minutes each;
docs/clients.md says how they fare).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.harness import BrokerProcess, free_port
from tests.upstream import librdkafka_build

pytestmark = pytest.mark.timeout(1800)  # a build of minutes on a shared 2-core machine, then runs of about two

KAFKA_VERSION = "4.2.0"  # the newest Kafka release librdkafka 2.15.1's tests check for
BROKER = {  # librdkafka's default scenario (tests/scenarios/default.json) on one node
    "num.partitions": 4,
    "auto.create.topics.enable": "true",
    # Kafka's default: the tests start several consumers one after another and expect them in the
    # first generation together (0089, 0102 fail on an extra rebalance with no delay)
    "group.initial.rebalance.delay.ms": 3000,
    # Kafka 4.2 computes a new target assignment in the heartbeat that changes a subscription; 4.3
    # batches it (at most once a second), so a member that changes its subscription twice within a
    # second waits for its next heartbeat (5 s). The tests were written against 4.2.
    "group.consumer.assignment.interval.ms": 0,
    "log.level": "WARN",
}

# test number -> what it covers. Each runs in both group protocols unless DESELECT says otherwise.
SELECTION = {
    "0018": "consumer group termination: close during rebalance",
    "0019": "ListGroups and DescribeGroups",
    "0020": "consumer destroy without hang",
    "0022": "batch consume from a group",
    "0026": "pause and resume in a group",
    "0029": "assign with offsets",
    "0030": "offset commits: sync, async, auto, committed()",
    "0033": "regex subscriptions",
    "0045": "subscription updates: topics created, removed, partitions added, many updates, regex re-subscribe",
    "0050": "adding topics to a subscription",
    "0056": "balanced group, multi-threaded",
    "0061": "consumer lag from committed offsets",
    "0069": "partitions added to a subscribed topic",
    "0081": "admin API on groups (its subtests naming Group, from a producer handle): ListConsumerGroups, "
    "DescribeConsumerGroups, DeleteGroups, Delete/Alter/ListConsumerGroupOffsets",
    "0084": "destroy flags: destroy without close leaves the group",
    "0089": "max.poll.interval.ms exceeded: the member leaves and rejoins",
    "0091": "max.poll.interval.ms timeout while blocked",
    "0093": "head-of-line blocking between group members",
    "0099": "commit metadata",
    "0102": "static group membership: restart without rebalance, subscription expansion",
    "0112": "assign of an unknown partition",
    "0113": "cooperative incremental rebalancing (its quick part: assign, subscribe with and without callback)",
    "0118": "commit during rebalance",
    "0122": "buffer cleaning after rebalance",
    "0130": "stored offsets",
    "0132": "assignment strategy ordering",
    "0140": "commit metadata (C++)",
}
# tests run on their own, with the flags and environment given: -Q is librdkafka's own quick subset of a
# test that takes minutes in full (0081's: its API tests from a producer handle, not again from a
# consumer's); SUBTESTS picks 0081's group subtests (its ACL subtests run against a broker with an
# authorizer below; its others cover SCRAM, topics and configs)
SEPARATE = {"0113": (["-Q"], {}), "0081": (["-Q"], {"SUBTESTS": "Group"})}
DESELECT: dict[str, dict[str, str]] = {
    "classic": {},
    "consumer": {
        "0084": "librdkafka skips it itself under the consumer protocol (\"FIXME: fix the test with "
        "subscribe/unsubscribe PR\")",
        "0132": "client-side assignor ordering: librdkafka skips it itself under the consumer protocol "
        "(the broker assigns)",
    },
}
MODES = ("classic", "consumer")
# librdkafka's own races, which groupd answers as Kafka does and cannot prevent: a run whose only failures are
# runs them again, alone against a fresh broker, until one attempt passes (RACE_ATTEMPTS at most: the race hit
# 1 run of 4 alone on a machine at load average 3)
RACE_ATTEMPTS = 2
CLIENT_RACES = {
    ("consumer", "0045"): "0045_subscribe_many_updates: an unsubscribe() while a revocation waits for the "
    "rebalance callback leaves the consumer silent or rejoining without its first request's fields "
    "(docs/clients.md, scripts/librdkafka_resubscribe_race.py)",
}
PARALLEL = 8  # tests at once per runner (librdkafka's run-test.sh default is 5); they mostly wait


def _tests_dir() -> Path:
    try:
        return librdkafka_build.build(sorted(SELECTION))
    except librdkafka_build.BuildUnavailable as e:
        pytest.skip(f"librdkafka's test runner is not available on this machine: {e}")


class _Run:
    """One test-runner process: a mode, its tests, its flags."""

    def __init__(self, tests: Path, tmp: Path, mode: str, numbers: list[str], bootstrap: str,
                 flags: list[str], extra_env: dict[str, str], conf_lines: tuple[str, ...] = (),
                 tag: str = "") -> None:
        self.mode, self.numbers = mode, numbers
        self.failed: set[str] | None = None  # the test numbers that did not pass; None: the run gave no report
        name = f"{mode}-{'-'.join(numbers) if len(numbers) == 1 else 'all'}-{extra_env.get('SUBTESTS', '')}"
        name += f"-{tag}" if tag else ""
        self.report = tmp / f"{name}.json"
        conf = tmp / f"{name}.conf"
        conf.write_text("".join(f"{line}\n" for line in (f"bootstrap.servers={bootstrap}", *conf_lines)))
        env = {
            **os.environ,
            "RDKAFKA_TEST_CONF": str(conf),
            "TEST_KAFKA_VERSION": KAFKA_VERSION,
            "TESTS": ",".join(numbers),
            "TEST_REPORT": str(self.report),
            "LD_LIBRARY_PATH": f"{tests.parent / 'src'}:{tests.parent / 'src-cpp'}",
            "RDKAFKA_GITVER": librdkafka_build.LIBRDKAFKA_VERSION,
        }
        for leftover in ("CI", "TEST_CONSUMER_GROUP_PROTOCOL", "SUBTESTS", "TESTS_SKIP", "TEST_DEBUG"):
            env.pop(leftover, None)
        env.update(extra_env)
        if mode == "consumer":
            env["TEST_CONSUMER_GROUP_PROTOCOL"] = "consumer"
        args = [str(tests / "test-runner"), "-L", "-E", f"-p{PARALLEL}", *flags]
        self.log = tmp / f"{name}.out"
        self._out = open(self.log, "wb")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(args, cwd=tests, env=env, stdout=self._out, stderr=subprocess.STDOUT)

    def wait(self, deadline: float) -> list[str]:
        """What went wrong ([] when every test of the run passed)."""
        try:
            self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._out.close()
        output = self.log.read_text(errors="replace")
        if not self.report.is_file():
            return [f"{self.mode}: no report (exit {self.proc.returncode}):\n{output[-4000:]}"]
        results = json.loads(self.report.read_text())["tests"]
        states = {name: r["state"] for name, r in results.items() if name[:4] in self.numbers}
        problems = [
            f"{self.mode}: {name} {state}"
            for name, state in states.items()
            if state not in ("PASSED", "SKIPPED")
        ]
        passed = {name[:4] for name, state in states.items() if state == "PASSED"}
        problems += [f"{self.mode}: {n} did not pass (every part skipped)" for n in self.numbers if n not in passed]
        self.failed = {name[:4] for name, state in states.items() if state not in ("PASSED", "SKIPPED")}
        self.failed |= {n for n in self.numbers if n not in passed}
        if problems:
            failures = [
                line for line in output.splitlines() if "### Test" in line or "assertion failed" in line.lower()
            ]
            problems.append("\n".join(failures[:20]) + "\n" + output[-3000:])
        return problems


def _finish(runs: list[_Run], brokers: list[BrokerProcess], seconds: float) -> str:
    """Wait for the runs (at most ``seconds``), then stop what is left and the brokers: what went wrong, with
    the brokers' last log lines, or "" when every run passed."""
    try:
        deadline = time.monotonic() + seconds
        problems = [p for run in runs for p in run.wait(deadline)]
    finally:
        for run in runs:
            if run.proc.poll() is None:
                run.proc.kill()
        for broker in brokers:
            broker.kill()
    if not problems:
        return ""
    return "\n".join(problems) + "\n" + "\n".join(b.log_text()[-2000:] for b in brokers)


@pytest.mark.client
def test_librdkafka_consumer_group_suite(tmp_path):
    """Both protocols at once, each against its own broker (a regex test must not see the other run's topics)."""
    tests = _tests_dir()
    brokers, runs = [], []
    try:
        for mode in MODES:
            broker = BrokerProcess(tmp_path / f"data-{mode}", overrides=BROKER)
            brokers.append(broker.start())
            chosen = [n for n in sorted(SELECTION) if n not in DESELECT[mode]]
            runs.append(_Run(tests, tmp_path, mode, [n for n in chosen if n not in SEPARATE], broker.bootstrap, [], {}))
            for n, (flags, extra_env) in SEPARATE.items():
                if n in chosen:
                    runs.append(_Run(tests, tmp_path, mode, [n], broker.bootstrap, flags, extra_env))
    except BaseException:
        _finish(runs, brokers, 0)  # a broker that would not start: stop the rest at once
        raise
    problems = _finish(runs, brokers, 480)
    if problems:
        problems = _again_alone(tests, tmp_path, runs, problems)
    assert not problems, problems


def _again_alone(tests: Path, tmp: Path, runs: list[_Run], problems: str) -> str:
    """When every failure of ``runs`` is one of CLIENT_RACES, those tests again, alone against a fresh broker of
    their mode, up to RACE_ATTEMPTS times: "" once an attempt passes, else what went wrong the last time; when
    any other failure is among them, ``problems`` unchanged."""
    raced = [(run.mode, n) for run in runs for n in sorted(run.failed or ())]
    if not raced or any(run.failed is None for run in runs) or any(r not in CLIENT_RACES for r in raced):
        return problems
    for attempt in range(1, RACE_ATTEMPTS + 1):
        print(f"librdkafka's known races, run again alone ({attempt}): {raced}\n{problems[:4000]}")  # in the output
        brokers: list[BrokerProcess] = []
        again: list[_Run] = []
        try:
            for mode, n in raced:
                broker = BrokerProcess(tmp / f"data-{mode}-{n}-again{attempt}", overrides=BROKER)
                brokers.append(broker.start())
                again.append(_Run(tests, tmp, mode, [n], broker.bootstrap, [], {}, tag=f"again{attempt}"))
        except BaseException:
            _finish(again, brokers, 0)
            raise
        problems = _finish(again, brokers, 300)
        if not problems:
            return ""
    return problems


# 0081's subtests that need an authorizer, as librdkafka's own CI broker has one: StandardAuthorizer,
# allow.everyone.if.no.acl.found=true (a resource without ACLs is open, so the test's topics and groups
# need none), over SASL PLAIN as a user who is no super user (0081 checks that an ACL naming its topic
# narrows its authorized operations to READ and DESCRIBE). "Acls": CreateAcls, DescribeAcls, DeleteAcls
# (every validation and filter case); "authorized": DescribeTopics, DescribeCluster and
# DescribeConsumerGroups with authorized operations, before and after ACLs name the resource.
ACL_SUBTESTS = ("Acls", "authorized")
ACL_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" ' \
    'user_rdkafka="rdkafka-secret";'
ACL_CLIENT = ("security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", "sasl.username=rdkafka",
              "sasl.password=rdkafka-secret")


def acl_broker(data: Path) -> tuple[BrokerProcess, str]:
    """A broker as 0081's ACL subtests expect one, and its SASL PLAIN bootstrap (beside the plaintext listener the
    harness waits on)."""
    sasl = free_port()
    broker = BrokerProcess(data, overrides={
        **BROKER,
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": ACL_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
        "super.users": "User:admin",
    })
    broker.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{broker.port},SASL_PLAINTEXT://127.0.0.1:{sasl}"
    return broker, f"127.0.0.1:{sasl}"


@pytest.mark.client
def test_librdkafka_acl_subtests(tmp_path):
    """0081's ACL subtests, each selection against a broker of its own (one's ACLs must not count in the other's
    DescribeAcls), from a producer handle (-Q)."""
    tests = _tests_dir()
    brokers, runs = [], []
    try:
        for sub in ACL_SUBTESTS:
            broker, bootstrap = acl_broker(tmp_path / f"data-{sub}")
            brokers.append(broker.start())
            runs.append(_Run(tests, tmp_path, "classic", ["0081"], bootstrap, ["-Q"], {"SUBTESTS": sub},
                             ACL_CLIENT))
    except BaseException:
        _finish(runs, brokers, 0)  # a broker that would not start: stop the rest at once
        raise
    problems = _finish(runs, brokers, 300)
    assert not problems, problems
