"""The pytest plugin (groupd/testing/plugin.py) as a project meets it, run by pytest's own ``pytester``:
its fixtures and their scopes, the marker, the ini options, names of each test's own, and pytest-xdist
(a broker per worker), with real clients (kafka-python, aiokafka, confluent-kafka) in the inner tests."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import tempfile

import pytest

pytest_plugins = ["pytester"]


_REGISTERED = "import importlib.metadata as m; print(any(e.name == 'groupd' for e in m.entry_points(group='pytest11')))"


@functools.cache
def plugin_args() -> list[str]:
    """``-p groupd.testing.plugin`` unless an installed groupd registered it already (``pytest11``), as
    the inner pytest sees it: asked from a neutral directory, since this one's ``groupd.egg-info`` (which a
    build refreshes) may list the entry point where the environment's installed metadata does not."""
    seen = subprocess.run(
        [sys.executable, "-c", _REGISTERED], cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=60
    )
    return [] if seen.stdout.strip() == "True" else ["-p", "groupd.testing.plugin"]


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A pytest of its own, as a project runs it (in-process runs would share this one's imports, which
    pytester unloads after each run under the broker threads' feet)."""
    return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", *args, timeout=120)


SHARED = """
from kafka import KafkaConsumer, KafkaProducer

SEEN = []

def test_first(groupd_broker, groupd_names):
    topic = groupd_names.topic()
    producer = KafkaProducer(bootstrap_servers=groupd_broker.bootstrap_servers)
    producer.send(topic, b"one").get(10)
    producer.close()
    SEEN.append((groupd_broker.bootstrap_servers, topic))

def test_second_sees_the_same_broker_and_other_names(groupd_broker, groupd_names):
    first_servers, first_topic = SEEN[0]
    assert groupd_broker.bootstrap_servers == first_servers
    topic = groupd_names.topic()
    assert topic != first_topic and groupd_names.group() != groupd_names.group()
    consumer = KafkaConsumer(first_topic, group_id=groupd_names.group(), auto_offset_reset="earliest",
                             bootstrap_servers=groupd_broker.bootstrap_servers, consumer_timeout_ms=10000)
    assert next(consumer).value == b"one"
    consumer.close()
"""


FRESH = """
import asyncio
import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka.admin import AdminClient, NewTopic

PORTS = []

def test_one(groupd_fresh_broker):
    PORTS.append(groupd_fresh_broker.port)

def test_two(groupd_fresh_broker):
    PORTS.append(groupd_fresh_broker.port)
    assert PORTS[0] != PORTS[1]

@pytest.mark.groupd(num_partitions=3, overrides={"message.max.bytes": 2000})
def test_marked(groupd_fresh_broker):
    async def send():
        producer = AIOKafkaProducer(bootstrap_servers=groupd_fresh_broker.bootstrap_servers)
        await producer.start()
        try:
            await producer.send_and_wait("auto", b"x")
        finally:
            await producer.stop()
    asyncio.run(send())
    admin = AdminClient({"bootstrap.servers": groupd_fresh_broker.bootstrap_servers})
    assert len(admin.list_topics(timeout=10).topics["auto"].partitions) == 3
    config = groupd_fresh_broker.call_in_loop(lambda: groupd_fresh_broker.app.config)
    assert config["message.max.bytes"] == 2000

@pytest.mark.groupd("positional")
def test_a_positional_marker_is_refused(groupd_fresh_broker):
    pass
"""


def test_a_shared_session_broker_a_fresh_one_per_test_its_marker_and_names(pytester: pytest.Pytester) -> None:
    """One run of two modules (each pytest run costs a second or more to start)."""
    pytester.makepyfile(test_shared=SHARED, test_fresh=FRESH)
    result = run(pytester)
    result.assert_outcomes(passed=5, errors=1)
    result.stdout.fnmatch_lines(["*takes Broker options by name only*"])


INI = """
[pytest]
groupd_engine = local
groupd_num_partitions = 2
groupd_initial_rebalance_delay_ms = 40
groupd_overrides =
    group.max.size = 7
    offsets.topic.num.partitions=3
"""

USES_INI = """
from confluent_kafka import Producer

def test_settings_from_the_ini_file(groupd_broker):
    config = groupd_broker.call_in_loop(lambda: groupd_broker.app.config)
    assert config["storage.engine"] == "local" and config["group.initial.rebalance.delay.ms"] == 40
    assert (config["group.max.size"], config["offsets.topic.num.partitions"]) == (7, 3)
    producer = Producer({"bootstrap.servers": groupd_broker.bootstrap_servers})
    producer.produce("ini-topic", b"v")
    assert producer.flush(10) == 0
    topic = groupd_broker.call_in_loop(lambda: groupd_broker.app.topics.get("ini-topic"))
    assert topic.partitions == 2
    assert (groupd_broker.data_dir / "ini-topic-0").is_dir()
"""


def test_ini_options_set_the_brokers(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_ini=USES_INI)
    run(pytester).assert_outcomes(passed=1)


def test_a_bad_override_line_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ngroupd_overrides =\n    no-equals-sign\n")
    pytester.makepyfile(test_bad="def test_x(groupd_broker):\n    pass\n")
    result = run(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*'no-equals-sign' is not key=value*"])


PER_WORKER = """
import json, os
import pytest
from kafka import KafkaProducer

@pytest.mark.parametrize("n", range(6))
def test_worker(groupd_broker, groupd_names, n):
    producer = KafkaProducer(bootstrap_servers=groupd_broker.bootstrap_servers)
    producer.send(groupd_names.topic(), b"x").get(10)
    producer.close()
    with open(os.environ["SEEN_FILE"], "a") as f:
        f.write(json.dumps([os.environ.get("PYTEST_XDIST_WORKER"), groupd_broker.port]) + "\\n")
"""


def test_with_xdist_each_worker_has_its_own_broker(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = pytester.path / "seen.jsonl"
    monkeypatch.setenv("SEEN_FILE", str(seen))
    pytester.makepyfile(test_workers=PER_WORKER)
    run(pytester, "-n", "2").assert_outcomes(passed=6)
    rows = [json.loads(line) for line in seen.read_text().splitlines()]
    ports: dict[str, set[int]] = {}
    for worker, port in rows:
        ports.setdefault(worker, set()).add(port)
    assert all(len(p) == 1 for p in ports.values())  # one broker per worker, for the whole session
    assert len({p for ps in ports.values() for p in ps}) == len(ports)  # and no two workers share one
    assert set(ports) <= {"gw0", "gw1"} and len(rows) == 6
