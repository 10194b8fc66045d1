"""groupd-acls' reading of kafka-acls.sh's flags (Kafka's AclCommand: what --producer and --consumer grant,
the default operation and host, the operation names it takes)."""

from __future__ import annotations

from groupd.broker.security.acl import Operation, PatternType, Permission, ResourceType
from groupd.cli.acls_cli import client_config, entries, parser


def parsed(*argv: str):
    return parser().parse_args(["--bootstrap-server", "h:1", *argv])


def ops(args) -> set[tuple[ResourceType, str, Operation]]:
    return {(e.resource_type, e.name, e.operation) for e in entries(args)}


def test_producer_grants_write_describe_create_on_topics_and_write_describe_on_transactional_ids():
    args = parsed(
        "--add", "--allow-principal", "User:a", "--producer", "--topic", "t", "--transactional-id", "x", "--idempotent"
    )
    assert ops(args) == {
        (ResourceType.TOPIC, "t", Operation.WRITE),
        (ResourceType.TOPIC, "t", Operation.DESCRIBE),
        (ResourceType.TOPIC, "t", Operation.CREATE),
        (ResourceType.TRANSACTIONAL_ID, "x", Operation.WRITE),
        (ResourceType.TRANSACTIONAL_ID, "x", Operation.DESCRIBE),
        (ResourceType.CLUSTER, "kafka-cluster", Operation.IDEMPOTENT_WRITE),
    }


def test_consumer_grants_read_describe_on_topics_and_read_on_groups():
    args = parsed("--add", "--allow-principal", "User:a", "--consumer", "--topic", "t", "--group", "g")
    assert ops(args) == {
        (ResourceType.TOPIC, "t", Operation.READ),
        (ResourceType.TOPIC, "t", Operation.DESCRIBE),
        (ResourceType.GROUP, "g", Operation.READ),
    }


def test_defaults_all_operations_every_host_literal_pattern():
    (e,) = entries(parsed("--add", "--deny-principal", "User:b", "--topic", "t"))
    assert (e.operation, e.host, e.pattern, e.permission) == (Operation.ALL, "*", PatternType.LITERAL, Permission.DENY)
    (e,) = entries(
        parsed(
            "--add",
            "--allow-principal",
            "User:b",
            "--allow-host",
            "10.0.0.1",
            "--topic",
            "t",
            "--operation",
            "DescribeConfigs",
            "--resource-pattern-type",
            "prefixed",
        )
    )
    assert (e.operation, e.host, e.pattern) == (Operation.DESCRIBE_CONFIGS, "10.0.0.1", PatternType.PREFIXED)


def test_remove_without_a_principal_matches_every_acl_of_the_resource():
    (e,) = entries(parsed("--remove", "--topic", "t"))
    assert (e.principal, e.host, e.operation, e.permission) == (None, None, Operation.ANY, Permission.ANY)


def test_command_config_reads_sasl_settings(tmp_path):
    props = tmp_path / "c.properties"
    props.write_text(
        "# admin\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common."
        'security.plain.PlainLoginModule required username="admin" password="s3cret";\n'
    )
    assert client_config(str(props)) == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "admin",
        "sasl_plain_password": "s3cret",
    }
