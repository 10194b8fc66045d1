"""groupd-groups (like kafka-consumer-groups.sh) against groupd."""

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from tests.clients.kp import ChildConsumer, wait_until
from tools.groups_cli import main

pytestmark = pytest.mark.client


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.scenario('groupd-groups', 9)
def test_list_describe_reset_delete(broker_process, capsys):
    bs = broker_process.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bs)
    admin.create_topics([NewTopic("cli", 2, 1)])
    producer = KafkaProducer(bootstrap_servers=bs)
    for i in range(10):
        producer.send("cli", value=b"x", partition=i % 2)
    producer.flush()
    member = ChildConsumer(bs, "cli", commit=True, group_id="cli-g", auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=300)
    wait_until(lambda: len(member.values()) == 10, 30, "the member to read all 10 records")
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--list")
    assert code == 0 and "cli-g" in out.split()
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", "cli-g", "--state")
    assert "Stable" in out and "range" in out
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", "cli-g", "--members")
    assert "#PARTITIONS" in out and " 2" in out
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--delete", "--group", "cli-g")
    assert code == 1, "a group with members cannot be deleted (NON_EMPTY_GROUP)"
    member.stop()
    producer.send("cli", value=b"y", partition=0).get(10)
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", "cli-g")
    lines = [line.split() for line in out.splitlines()[1:]]
    lag = {int(cols[2]): int(cols[5]) for cols in lines}
    assert lag == {0: 1, 1: 0}, out
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--reset-offsets", "--group", "cli-g", "--topic", "cli", "--to-earliest")
    assert "dry run" in out
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--reset-offsets", "--group", "cli-g", "--topic", "cli", "--to-offset", "2", "--execute")
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--describe", "--group", "cli-g", "--offsets")
    current = {int(c[2]): int(c[3]) for c in (line.split() for line in out.splitlines()[1:])}
    assert current == {0: 2, 1: 2}
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--delete", "--group", "cli-g")
    assert code == 0
    code, out, _ = run(capsys, "--bootstrap-server", bs, "--list")
    assert "cli-g" not in out.split()
    producer.close()
    admin.close()


@pytest.mark.scenario("groupd-groups", 13)
def test_command_config_reaches_a_sasl_listener(tmp_path, capsys):
    """--command-config takes Kafka's client properties, as Kafka's tools do: the group is listed
    through a SASL_PLAINTEXT listener with a PLAIN login from sasl.jaas.config."""
    from tests.clients.test_security_clients import JAAS, KP_SASL, broker_with
    from tools.groups_cli import client_settings

    proc = broker_with(tmp_path, {"SASL_PLAINTEXT": None}, **{"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS})
    try:
        sasl = proc.bootstraps["SASL_PLAINTEXT"]
        KafkaAdminClient(bootstrap_servers=sasl, **KP_SASL).create_topics([NewTopic("cc", 1, 1)])
        member = ChildConsumer(sasl, "cc", commit=True, group_id="cc-g", auto_offset_reset="earliest", enable_auto_commit=False,
                               session_timeout_ms=6000, heartbeat_interval_ms=300, **KP_SASL)
        try:
            config = tmp_path / "client.properties"
            config.write_text('security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n'
                              'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";\n')
            assert client_settings({"sasl.username": "u", "sasl.password": "p", "ssl.ca.location": "ca.pem", "ssl.keystore.location": "ks.pem"}) == {
                "sasl_plain_username": "u", "sasl_plain_password": "p", "ssl_cafile": "ca.pem", "ssl_certfile": "ks.pem", "ssl_keyfile": "ks.pem",
            }
            wait_until(lambda: run(capsys, "--bootstrap-server", sasl, "--command-config", str(config), "--list")[1].split() == ["cc-g"], 30, "cc-g listed over SASL")
        finally:
            member.stop()
    finally:
        proc.kill()
