"""Clients that pick request versions from a configured Kafka release, not from ApiVersions (issue 32):
Sarama 1.22 and segmentio/kafka-go 0.2 from Debian's Go source packages, built here in GOPATH mode
with Debian's golang-go, and kafka-python with ``api_version=(0, 10)`` forced. Kafka 3.9 serves them;
Kafka 4 closes their connections. The Go programs are tests/clients/go/*/main.go.

Where Go cannot be installed on a machine (the Makefile's ``go-deps`` step apt-gets golang-go and the
two libraries), the Go tests say so and are skipped there: the one allowed skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.clients.kp import wait_until
from tests.harness import ROOT

pytestmark = pytest.mark.client

GOPATH = "/usr/share/gocode"  # where Debian's golang-*-dev packages put their sources
GO_SOURCES = ROOT / "tests" / "clients" / "go"
NEEDED = ("github.com/Shopify/sarama", "github.com/segmentio/kafka-go")


def _go_missing() -> str | None:
    if shutil.which("go") is None:
        return "Go is not installed on this machine (Debian's golang-go; `make go-deps` installs it)"
    missing = [p for p in NEEDED if not (Path(GOPATH) / "src" / p).is_dir()]
    if missing:
        return f"Debian's Go source packages are not installed: {', '.join(missing)} (`make go-deps`)"
    return None


@pytest.fixture(scope="session")
def go_clients(tmp_path_factory) -> dict[str, Path]:
    reason = _go_missing()
    if reason is not None:
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("go")
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": GOPATH, "GOCACHE": str(out / "cache"), "GOFLAGS": ""}
    built = {}
    for name in ("sarama_client", "kafkago_client"):
        target = out / name
        subprocess.run(["go", "build", "-o", str(target), f"./{name}"], cwd=GO_SOURCES, env=env, check=True,
                       capture_output=True, timeout=300)
        built[name] = target
    return built


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def run(binary: Path, *args: str, timeout: float = 60) -> str:
    done = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class GoConsumer:
    """A Sarama group member in its own process: its lines are read by a thread; closing its stdin
    makes it close the group (a final commit and LeaveGroup)."""

    def __init__(self, binary: Path, bootstrap: str, topic: str, group: str) -> None:
        self.proc = subprocess.Popen([str(binary), "consume", bootstrap, topic, group], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.values: list[str] = []
        self.assigned: list[int] = []
        self.closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            parts = line.split()
            if parts[:1] == ["MSG"]:
                self.values.append(parts[3])
            elif parts[:1] == ["ASSIGNED"]:
                self.assigned.append(int(parts[1]))
            elif parts[:1] == ["CLOSED"]:
                self.closed = True

    def close(self, timeout: float = 30) -> None:
        self.proc.stdin.close()
        code = self.proc.wait(timeout)
        self._reader.join(5)
        assert code == 0 and self.closed, self.proc.stderr.read()[-2000:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.mark.scenario("sarama", 16)
def test_sarama_group_of_three_commits_and_a_restart_resumes_exactly(go_clients, broker_process):
    """Sarama's defaults (Version raised to 0.10.2, the least its groups accept): gzip message sets
    produced with Produce v2, read with Fetch v3, committed with OffsetCommit v1 by a group of three;
    after a broker restart one member reads exactly the 300 records produced since, none again."""
    sarama, bs = go_clients["sarama_client"], broker_process.bootstrap
    create_topic(bs, "sar", 6)
    assert "PRODUCED 300" in run(sarama, "produce", bs, "sar", "0", "300", "gzip")
    members = [GoConsumer(sarama, bs, "sar", "sg") for _ in range(3)]
    try:
        wait_until(
            lambda: (
                len({v for m in members for v in m.values}) == 300
                and all(m.assigned and m.assigned[-1] == 2 for m in members)
            ),
            60,
            "three members sharing 300 records",
        )
        time.sleep(2.5)  # past Sarama's 1 s auto-commit interval
        for m in members:
            m.close()
    finally:
        for m in members:
            m.kill()
    assert {v for m in members for v in m.values} == {f"v{i}" for i in range(300)}
    broker_process.restart()
    assert "PRODUCED 300" in run(sarama, "produce", bs, "sar", "300", "300")
    again = GoConsumer(sarama, bs, "sar", "sg")
    try:
        wait_until(lambda: len(again.values) >= 300, 60, "the records produced after the restart")
        time.sleep(1.5)  # room for any re-read to show
        again.close()
    finally:
        again.kill()
    assert sorted(again.values, key=lambda v: int(v[1:])) == [f"v{i}" for i in range(300, 600)]


@pytest.mark.scenario("sarama", 16)
@pytest.mark.parametrize("codec", ["snappy", "lz4"])
def test_sarama_snappy_and_lz4_message_sets_round_trip(go_clients, broker_process, codec):
    """Sarama 1.22 at 0.10.2 writes snappy (go-xerial-snappy's stream) and lz4 (pierrec/lz4's frame)
    magic 1 sets with Produce v2; its group reads them back with Fetch v3, down-converted from the
    stored v2 batches to wrappers of the same codec."""
    sarama, bs = go_clients["sarama_client"], broker_process.bootstrap
    topic = f"sar-{codec}"
    create_topic(bs, topic, 2)
    assert "PRODUCED 200" in run(sarama, "produce", bs, topic, "0", "200", codec)
    member = GoConsumer(sarama, bs, topic, f"{topic}-g")
    try:
        wait_until(lambda: len(set(member.values)) == 200, 60, f"200 {codec} records")
        member.close()
    finally:
        member.kill()
    assert sorted(set(member.values), key=lambda v: int(v[1:])) == [f"v{i}" for i in range(200)]


@pytest.mark.scenario("sarama", 16)
def test_sarama_client_finds_a_controller(go_clients, broker_process):
    """Metadata v1's controller id: this node, so Sarama's Controller() has a broker to return."""
    assert run(go_clients["sarama_client"], "controller", broker_process.bootstrap).split() == ["CONTROLLER", "1"]


@pytest.mark.scenario("kafka-go", 16)
def test_kafka_go_02_writer_and_group_reader_resume(go_clients, broker_process):
    """kafka-go 0.2: its writer's Produce v2 message sets, its group reader's Fetch v2 and commits; a
    second reader of the group starts where the first committed."""
    kgo, bs = go_clients["kafkago_client"], broker_process.bootstrap
    create_topic(bs, "kg", 3)
    assert "WRITTEN 200" in run(kgo, "write", bs, "kg", "0", "200")
    first = [
        line.split()[3] for line in run(kgo, "read", bs, "kg", "kgg", "200").splitlines() if line.startswith("MSG")
    ]
    assert sorted(first, key=lambda v: int(v[1:])) == [f"v{i}" for i in range(200)]
    assert "WRITTEN 50" in run(kgo, "write", bs, "kg", "200", "50")
    second = [
        line.split()[3] for line in run(kgo, "read", bs, "kg", "kgg", "50").splitlines() if line.startswith("MSG")
    ]
    assert sorted(second, key=lambda v: int(v[1:])) == [f"v{i}" for i in range(200, 250)]


@pytest.mark.scenario("kafka-go", 16)
@pytest.mark.parametrize("codec", ["snappy", "lz4"])
def test_kafka_go_02_snappy_and_lz4_writer_and_reader(go_clients, broker_process, codec):
    """kafka-go 0.2's writer compresses magic 1 sets with its own codecs: snappy as one raw block (no
    xerial stream: snappy-java's reader takes that too), lz4 with pierrec/lz4's frame; its group reader
    reads them back through Fetch v2, down-converted to wrappers of the same codec."""
    kgo, bs = go_clients["kafkago_client"], broker_process.bootstrap
    topic = f"kg-{codec}"
    create_topic(bs, topic, 1)
    assert "WRITTEN 100" in run(kgo, "write", bs, topic, "0", "100", codec)
    got = [
        line.split()[3]
        for line in run(kgo, "read", bs, topic, f"{topic}-g", "100").splitlines()
        if line.startswith("MSG")
    ]
    assert got == [f"v{i}" for i in range(100)]


@pytest.mark.scenario("kafka-python api_version=(0, 10)", 16)
def test_kafka_python_with_api_version_0_10_forced(broker_process):
    """kafka-python told the broker is 0.10: magic 1 message sets (Produce v2, gzip), Fetch v2-3, a
    group through JoinGroup v0-1 and OffsetCommit v2; a second consumer resumes at the commit."""
    from kafka import KafkaConsumer, KafkaProducer

    bs = broker_process.bootstrap
    create_topic(bs, "kp10", 2)
    producer = KafkaProducer(bootstrap_servers=bs, api_version=(0, 10), compression_type="gzip")
    for i in range(100):
        producer.send("kp10", key=b"k", value=f"v{i}".encode())
    producer.flush(15)
    producer.close()

    def consume(n):
        c = KafkaConsumer(
            "kp10",
            bootstrap_servers=bs,
            api_version=(0, 10),
            group_id="kp10g",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=15000,
        )
        got = []
        for m in c:
            got.append(m.value.decode())
            if len(got) == n:
                break
        c.commit()
        c.close()
        return got

    assert consume(60) == [f"v{i}" for i in range(60)]  # one key: one partition, in order
    assert consume(40) == [f"v{i}" for i in range(60, 100)]


def _read_all(bs: str, topic: str, n: int, **config) -> list[str]:
    from kafka import KafkaConsumer

    c = KafkaConsumer(
        topic,
        bootstrap_servers=bs,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15000,
        **config,
    )
    got = []
    for m in c:
        got.append(m.value.decode())
        if len(got) == n:
            break
    c.close()
    return got


def _write(bs: str, topic: str, values: list[str], compression: str, **config) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bs, compression_type=compression, linger_ms=20, **config)
    for v in values:
        producer.send(topic, key=b"k", value=v.encode())
    producer.flush(15)
    producer.close()


@pytest.mark.scenario("kafka-python api_version=(0, 10)", 16)
@pytest.mark.parametrize("compression", ["snappy", "lz4"])
@pytest.mark.parametrize(("api_version", "magic"), [((0, 10), 1), ((0, 9), 0)])
def test_kafka_python_old_formats_with_snappy_and_lz4(tmp_path, monkeypatch, compression, api_version, magic):
    """kafka-python told the broker is 0.10 (magic 1: Produce v2, Fetch v3) or 0.9 (magic 0: Produce v1,
    Fetch v1) writes snappy and lz4 message sets (magic 0's LZ4 frame with Kafka's broken header
    checksum); a current kafka-python reads them as v2 batches, and the old one reads back both its own
    records and a current producer's compressed v2 batches, down-converted to wrappers of their codec."""
    import kafka.codec

    from tests.clients.test_operator_metrics import scrape, value
    from tests.harness import BrokerProcess, free_port
    from tests.legacy_sets import XxhashShim

    monkeypatch.setattr(kafka.codec, "xxhash", XxhashShim())  # kafka-python's magic-0 LZ4 wants the xxhash package
    mport = free_port()
    broker = BrokerProcess(tmp_path / "data", {"metrics.listener": f"127.0.0.1:{mport}"}).start()
    try:
        _old_formats_round(broker.bootstrap, compression, api_version)
        samples = scrape(mport)  # the broker converted every record of the old client's both ways
        assert value(samples, "groupd_produce_message_conversions_total") == 300
        assert value(samples, "groupd_fetch_message_conversions_total") >= 600
    finally:
        broker.kill()


def _old_formats_round(bs: str, compression: str, api_version: tuple[int, int]) -> None:
    magic = 0 if api_version < (0, 10) else 1
    old, new = f"old-{compression}-{magic}", f"new-{compression}-{magic}"
    create_topic(bs, old, 1)
    create_topic(bs, new, 1)
    values = [f"v{i}" for i in range(300)]
    _write(bs, old, values, compression, api_version=api_version)
    _write(bs, new, values, compression)
    assert _read_all(bs, old, 300) == values  # Fetch v12+: the stored v2 batches
    assert _read_all(bs, old, 300, api_version=api_version) == values
    assert _read_all(bs, new, 300, api_version=api_version) == values


BURROW_CONFIG = """
[general]
pidfile="{dir}/burrow.pid"
[logging]
level="info"
[zookeeper]
servers=[ "127.0.0.1:{zk_port}" ]
timeout=6
root-path="/burrow"
[client-profile.old]
client-id="burrow-groupd"
kafka-version="0.10.2"
[cluster.groupd]
class-name="kafka"
servers=[ "{bootstrap}" ]
client-profile="old"
topic-refresh=2
offset-refresh=2
[consumer.groupd]
class-name="kafka"
cluster="groupd"
servers=[ "{bootstrap}" ]
client-profile="old"
start-latest=false
[httpserver.default]
address="127.0.0.1:{http_port}"
[storage.default]
class-name="inmemory"
workers=4
intervals=10
expire-group=604800
min-distance=1
"""

ZK_SERVER = Path("/usr/share/zookeeper/bin/zkServer.sh")  # Debian's zookeeper (Burrow keeps its own state there)


@pytest.mark.scenario("burrow", 16)
def test_burrow_reads_lag_from_groupd(go_clients, broker_process, tmp_path):
    """Burrow 1.2.1 (Debian's ``burrow``): reads every commit from __consumer_offsets (Fetch v3,
    down-converted to magic 1), asks log end offsets with ListOffsets v0, and reports the lag: 30
    records produced after the group committed 100."""
    import json
    import urllib.request

    from tests.harness import free_port

    if shutil.which("Burrow") is None or not ZK_SERVER.exists() or shutil.which("java") is None:
        pytest.skip(
            "Burrow and ZooKeeper are not installed on this machine (Debian's burrow, zookeeper; `make go-deps`)"
        )
    sarama, bs = go_clients["sarama_client"], broker_process.bootstrap
    create_topic(bs, "bt", 2)
    run(sarama, "produce", bs, "bt", "0", "100")
    member = GoConsumer(sarama, bs, "bt", "bg")
    try:
        wait_until(lambda: len(member.values) == 100, 60, "the group reading 100 records")
        time.sleep(1.5)
        member.close()
    finally:
        member.kill()
    run(sarama, "produce", bs, "bt", "100", "30")
    zk_port, http_port = free_port(), free_port()
    (tmp_path / "zk").mkdir()
    (tmp_path / "zoo.cfg").write_text(
        f"tickTime=2000\ndataDir={tmp_path / 'zk'}\nclientPort={zk_port}\nclientPortAddress=127.0.0.1\n"
        "admin.enableServer=false\n4lw.commands.whitelist=srvr\n"
    )
    (tmp_path / "burrow.toml").write_text(
        BURROW_CONFIG.format(dir=tmp_path, zk_port=zk_port, bootstrap=bs, http_port=http_port)
    )
    log = open(tmp_path / "burrow.log", "wb")  # noqa: SIM115 - closed below
    zk = subprocess.Popen(
        [str(ZK_SERVER), "start-foreground", str(tmp_path / "zoo.cfg")], stdout=log, stderr=subprocess.STDOUT
    )
    burrow = None
    try:
        wait_until(lambda: _zk_ok(zk_port), 30, "ZooKeeper")
        burrow = subprocess.Popen(["Burrow", "-config-dir", str(tmp_path)], stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{http_port}/v3/kafka/groupd/consumer/bg/lag"
        seen: list = []

        def lag_known() -> bool:
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - loopback
                    status = json.load(resp)["status"]
            except (OSError, ValueError, KeyError):
                return False
            seen.append(status)
            return status.get("totallag") == 30

        wait_until(lag_known, 60, f"Burrow's lag of group bg (last: {seen[-1:]})")
        parts = seen[-1]["partitions"]
        assert sorted((p["partition"], p["end"]["offset"], p["current_lag"]) for p in parts) == [
            (0, 50, 15),
            (1, 50, 15),
        ]
    finally:
        for proc in (burrow, zk):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        log.close()


def _zk_ok(port: int) -> bool:
    """ZooKeeper's ``srvr`` names its mode once it serves clients (before, it says it is not serving)."""
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"srvr")
            return b"Mode:" in s.recv(4096)
    except OSError:
        return False
