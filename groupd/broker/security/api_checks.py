"""What each API of the API table needs from the authorizer: the decision groupd takes for it, recorded once.

Every API of ``protocol/api_table.py`` has a row, the way ``broker/routes.py`` names a handler for each:
``tests/unit/test_api_checks.py`` fails when an API is added without one, checks that the handler of each
API with a check asks ``broker.access`` when an authorizer is configured, and that docs/security.md shows
this table (``python scripts/readme_tables.py`` writes it). The checks are Apache Kafka 4.2's KafkaApis
(ControllerApis for DescribeQuorum, Kafka 3.9's for the versions Kafka 4 removed); the handlers cite them.
"""

from __future__ import annotations

from pathlib import Path

from groupd.protocol.api_table import API_TABLE, ApiKey

UNCHECKED = "nothing (answered before a principal is known, as Kafka does)"

API_CHECKS: dict[ApiKey, str] = {
    ApiKey.PRODUCE: "WRITE on each topic (TOPIC_AUTHORIZATION_FAILED per partition); WRITE on the transactional id",
    ApiKey.FETCH: "READ on each topic, per partition; a follower's (replica id >= 0): CLUSTER_ACTION, else every "
    "partition refused",
    ApiKey.LIST_OFFSETS: "DESCRIBE on each topic (the refused topics answered last)",
    ApiKey.METADATA: "DESCRIBE on a topic, else left out of all topics and refused when named; auto-creation: CREATE "
    "on the cluster or the topic; DESCRIBE on the cluster for its operations",
    ApiKey.OFFSET_COMMIT: "READ on the group; READ on each topic",
    ApiKey.OFFSET_FETCH: "DESCRIBE on each group; DESCRIBE on each topic (refused when named, left out of all topics)",
    ApiKey.FIND_COORDINATOR: "DESCRIBE on the group or transactional id; CLUSTER_ACTION for a share key",
    ApiKey.JOIN_GROUP: "READ on the group",
    ApiKey.HEARTBEAT: "READ on the group",
    ApiKey.LEAVE_GROUP: "READ on the group",
    ApiKey.SYNC_GROUP: "READ on the group",
    ApiKey.DESCRIBE_GROUPS: "DESCRIBE on each group",
    ApiKey.LIST_GROUPS: "DESCRIBE on the cluster lists every group, else those the principal may DESCRIBE",
    ApiKey.SASL_HANDSHAKE: UNCHECKED,
    ApiKey.API_VERSIONS: UNCHECKED,
    ApiKey.CREATE_TOPICS: "CREATE on the cluster or the topic; DESCRIBE_CONFIGS on it to see its configs",
    ApiKey.DELETE_TOPICS: "DELETE on each topic (DESCRIBE too when named by id)",
    ApiKey.DELETE_RECORDS: "DELETE on each topic",
    ApiKey.INIT_PRODUCER_ID: "WRITE on the transactional id; without one IDEMPOTENT_WRITE on the cluster or WRITE on "
    "some topic",
    ApiKey.OFFSET_FOR_LEADER_EPOCH: "CLUSTER_ACTION, else DESCRIBE on each topic",
    ApiKey.ADD_PARTITIONS_TO_TXN: "v0-3: WRITE on the transactional id and on each topic (never an internal one); "
    "v4+: CLUSTER_ACTION",
    ApiKey.ADD_OFFSETS_TO_TXN: "WRITE on the transactional id, READ on the group",
    ApiKey.END_TXN: "WRITE on the transactional id",
    ApiKey.WRITE_TXN_MARKERS: "CLUSTER_ACTION (another node's transaction coordinator)",
    ApiKey.TXN_OFFSET_COMMIT: "WRITE on the transactional id, READ on the group, READ on each topic",
    ApiKey.DESCRIBE_ACLS: "DESCRIBE on the cluster",
    ApiKey.CREATE_ACLS: "ALTER on the cluster",
    ApiKey.DELETE_ACLS: "ALTER on the cluster",
    ApiKey.DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS on the topic or group; on the cluster for broker and logger configs",
    ApiKey.ALTER_CONFIGS: "ALTER_CONFIGS on the topic; on the cluster for broker configs",
    ApiKey.ALTER_REPLICA_LOG_DIRS: "ALTER on the cluster",
    ApiKey.DESCRIBE_LOG_DIRS: "DESCRIBE on the cluster",
    ApiKey.SASL_AUTHENTICATE: UNCHECKED,
    ApiKey.CREATE_PARTITIONS: "ALTER on each topic",
    ApiKey.DELETE_GROUPS: "DELETE on each group",
    ApiKey.ELECT_LEADERS: "ALTER on the cluster",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "ALTER_CONFIGS on the topic or group; on the cluster for broker and logger "
    "configs",
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: "ALTER on the cluster",
    ApiKey.LIST_PARTITION_REASSIGNMENTS: "DESCRIBE on the cluster",
    ApiKey.OFFSET_DELETE: "DELETE on the group; READ on each topic",
    ApiKey.DESCRIBE_CLIENT_QUOTAS: "DESCRIBE_CONFIGS on the cluster",
    ApiKey.ALTER_CLIENT_QUOTAS: "ALTER_CONFIGS on the cluster",
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: "DESCRIBE on the cluster",
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: "ALTER on the cluster",
    ApiKey.DESCRIBE_QUORUM: "DESCRIBE on the cluster (ControllerApis)",
    ApiKey.DESCRIBE_CLUSTER: "nothing but its authorized operations (DESCRIBE on the cluster to see them)",
    ApiKey.DESCRIBE_PRODUCERS: "READ on each topic",
    ApiKey.DESCRIBE_TRANSACTIONS: "DESCRIBE on each transactional id; DESCRIBE on each topic of the transaction",
    ApiKey.LIST_TRANSACTIONS: "DESCRIBE on each transactional id (only those are listed)",
    ApiKey.CONSUMER_GROUP_HEARTBEAT: "READ on the group; DESCRIBE on each subscribed topic, else "
    "TOPIC_AUTHORIZATION_FAILED; a regex resolves to the matching topics the principal may DESCRIBE",
    ApiKey.CONSUMER_GROUP_DESCRIBE: "DESCRIBE on each group; a group whose assignments name a topic the principal "
    "may not DESCRIBE is refused (TOPIC_AUTHORIZATION_FAILED)",
    ApiKey.LIST_CONFIG_RESOURCES: "DESCRIBE_CONFIGS on the cluster",
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: "DESCRIBE on each topic (left out of all topics, refused when named)",
    ApiKey.SHARE_GROUP_HEARTBEAT: "READ on the group; DESCRIBE on each subscribed topic, else "
    "TOPIC_AUTHORIZATION_FAILED",
    ApiKey.SHARE_GROUP_DESCRIBE: "DESCRIBE on each group; a group whose assignments name a topic the principal may "
    "not DESCRIBE is refused (TOPIC_AUTHORIZATION_FAILED)",
    ApiKey.SHARE_FETCH: "READ on the group; READ on each topic, per partition (fetched and acknowledged)",
    ApiKey.SHARE_ACKNOWLEDGE: "READ on the group; READ on each topic, per partition",
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: "CLUSTER_ACTION",
    ApiKey.READ_SHARE_GROUP_STATE: "CLUSTER_ACTION",
    ApiKey.WRITE_SHARE_GROUP_STATE: "CLUSTER_ACTION",
    ApiKey.DELETE_SHARE_GROUP_STATE: "CLUSTER_ACTION",
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: "CLUSTER_ACTION",
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: "DESCRIBE on each group; DESCRIBE on each topic (named: refused; all "
    "topics: left out)",
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: "READ on the group; READ on each topic",
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: "DELETE on the group; READ on each topic",
}

BEGIN = "<!-- api-checks:begin (generated by python scripts/readme_tables.py) -->"
END = "<!-- api-checks:end -->"
DOC = Path("docs/security.md")


def checks_markdown() -> str:
    """The table docs/security.md shows, one row per API in the API table's order."""
    rows = [f"| {API_TABLE[key].name} | {API_CHECKS[ApiKey(key)]} |" for key in sorted(API_TABLE)]
    return "\n".join(["| API | needs |", "| --- | --- |", *rows])


def write_docs(doc: Path = DOC) -> None:
    """Rewrite the generated table between its markers in docs/security.md."""
    text = doc.read_text()
    head, rest = text.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    doc.write_text(f"{head}{BEGIN}\n{checks_markdown()}\n{END}{tail}")
