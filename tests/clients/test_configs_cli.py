"""groupd-configs (like kafka-configs.sh): client quotas and SCRAM credentials set and described, and
what it sets takes effect (a SCRAM login with the password it was given; a quota the broker enforces)."""

import pytest

from groupd.cli.configs_cli import main, parse_configs
from tests.clients.test_security_clients import broker_with

pytestmark = pytest.mark.client


def run(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_parse_configs_reads_kafka_configs_syntax():
    quotas, scram = parse_configs(
        "producer_byte_rate=1024,SCRAM-SHA-256=[iterations=8192,password=a-b],consumer_byte_rate=2048,SCRAM-SHA-512=[password=x]"
    )
    assert quotas == {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}
    assert scram == {"SCRAM-SHA-256": {"iterations": "8192", "password": "a-b"}, "SCRAM-SHA-512": {"password": "x"}}


def test_quotas_and_scram_users_through_the_cli(tmp_path, capsys):
    from confluent_kafka.admin import AdminClient

    proc = broker_with(tmp_path, {"SASL_PLAINTEXT": None}, **{"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"})
    try:
        bs, sasl = proc.bootstraps["PLAINTEXT"], proc.bootstraps["SASL_PLAINTEXT"]
        code, out, err = run(
            capsys,
            "--bootstrap-server",
            bs,
            "--entity-type",
            "clients",
            "--entity-name",
            "app",
            "--alter",
            "--add-config",
            "producer_byte_rate=1048576,consumer_byte_rate=2097152",
        )
        assert code == 0, err
        assert "Completed updating config for client-id app." in out
        code, out, _ = run(
            capsys,
            "--bootstrap-server",
            bs,
            "--entity-type",
            "users",
            "--entity-default",
            "--alter",
            "--add-config",
            "controller_mutation_rate=10",
        )
        assert code == 0
        code, out, _ = run(
            capsys, "--bootstrap-server", bs, "--entity-type", "clients", "--entity-name", "app", "--describe"
        )
        assert (
            out.strip() == "Quota configs for client-id=app are consumer_byte_rate=2097152,producer_byte_rate=1048576"
        )
        code, out, _ = run(capsys, "--bootstrap-server", bs, "--entity-type", "users", "--entity-default", "--describe")
        assert out.strip() == "Quota configs for user=<default> are controller_mutation_rate=10"
        code, out, err = run(
            capsys,
            "--bootstrap-server",
            bs,
            "--entity-type",
            "clients",
            "--entity-name",
            "app",
            "--alter",
            "--add-config",
            "request_percentage=50",
        )
        assert code == 1 and "INVALID_REQUEST" in err.upper()

        code, out, err = run(
            capsys,
            "--bootstrap-server",
            bs,
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--alter",
            "--add-config",
            "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]",
        )
        assert code == 0, err
        code, out, _ = run(
            capsys, "--bootstrap-server", bs, "--entity-type", "users", "--entity-name", "alice", "--describe"
        )
        assert (
            "SCRAM credential configs for user-principal 'alice' are "
            "SCRAM-SHA-256=iterations=8192,SCRAM-SHA-512=iterations=4096"
            in out
        )
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            admin = AdminClient(
                {
                    "bootstrap.servers": sasl,
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": mechanism,
                    "sasl.username": "alice",
                    "sasl.password": "alice-secret",
                }
            )
            assert admin.list_topics(timeout=10) is not None  # logged in with what the CLI set
        code, out, err = run(
            capsys,
            "--bootstrap-server",
            bs,
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
            "--alter",
            "--delete-config",
            "SCRAM-SHA-512",
        )
        assert code == 0, err
        code, out, _ = run(
            capsys, "--bootstrap-server", bs, "--entity-type", "users", "--entity-name", "alice", "--describe"
        )
        assert "SCRAM-SHA-512" not in out and "SCRAM-SHA-256=iterations=8192" in out
    finally:
        proc.kill()
